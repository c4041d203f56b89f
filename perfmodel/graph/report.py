"""Summaries of an ``Estimate``: per-op and per-layer tables, bottlenecks, diagnostics, LLM metrics, JSON.

The JSON carries what a dashboard draws: ``hierarchy`` (model → layer → op, ``value`` = seconds,
for a sunburst or treemap) and ``ops`` with ``start_s``/``end_s``/``stream``/``stage`` (a timeline).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.graph.lazy_graph import node_column
from perfmodel.graph.loops import loop_shares
from perfmodel.units import format_time_s

if TYPE_CHECKING:
    from perfmodel.graph.estimate import Estimate

ROLE_WORDS = {"weights": "weight reads", "kv_cache": "KV-cache reads", "activations_in": "activation traffic",
              "activations_out": "activation traffic", "workspace": "attention workspace traffic",
              "scales": "quantization-scale reads", "indices": "index reads"}


def short_name(layer: str, name: str) -> str:
    return name[len(layer) + 1:] if name.startswith(layer + ".") else name


def _node_rows(est: Estimate) -> list[dict[str, Any]]:
    """One row per node, in graph order (SI units)."""
    b, idx = est.batch, est.index
    times = b.time_s[idx].tolist()
    bounds = b.bound[idx].tolist()
    flops = b.flops[idx].tolist()
    dram = b.bytes_by_level[est.hardware.dram.name][idx].tolist()
    starts, ends = est.timeline.start_s.tolist(), est.timeline.end_s.tolist()
    roles = [est.roles[k] for k in idx.tolist()]
    # by column: a graph holding copied layers by reference builds no node for its report
    columns = [node_column(est.graph, f) for f in ("name", "layer", "cost_op", "source_op", "stream", "stage", "op",
                                                    "bytes_saved")]
    rows = []
    for i, (name, layer, op, source, stream, stage, own, saved) in enumerate(zip(*columns, strict=True)):
        rows.append({"name": name, "layer": layer, "op": short_name(layer, name),
                     "kind": (op or {}).get("kind"), "source_op": source, "stream": stream,
                     "stage": stage, "time_s": times[i], "start_s": starts[i], "end_s": ends[i],
                     "bound": bounds[i], "flops": flops[i], "dram_bytes": dram[i],
                     "role": roles[i], "fallback": own is None, "bytes_saved": saved})
    return rows


def category(row: dict[str, Any], dram_name: str) -> str:
    """What a node is bound by, in words ('HBM3-bound weight reads', 'interconnect (allreduce)')."""
    bound = row["bound"]
    if bound == dram_name:
        return f"{bound}-bound {ROLE_WORDS.get(row['role'], 'memory traffic')}"
    if bound == "interconnect":
        return f"interconnect ({row['kind']})"
    if bound == "latency":
        return "launch/latency-bound"
    if bound in ("none", ""):
        return "free (views)"
    if row["kind"] in ("matmul", "attention", "conv2d") or row["flops"] > 0:
        return f"{bound}-bound compute"
    return f"{bound}-bound"


def bottlenecks(rows: list[dict[str, Any]], dram_name: str, phase: str) -> dict[str, Any]:
    """Share of exposed time per category (overlapped communication excluded), largest first."""
    shares: dict[str, float] = defaultdict(float)
    for row in rows:
        if row["stream"] != "comm_overlap":
            shares[category(row, dram_name)] += row["time_s"]
    total = sum(shares.values()) or 1.0
    ordered = sorted(shares.items(), key=lambda kv: -kv[1])
    items: list[dict[str, Any]] = [{"category": k, "time_s": v, "share": v / total} for k, v in ordered]
    words = "; ".join(f"{100 * it['share']:.0f} % {it['category']}" for it in items[:3])
    summary = f"{100 * items[0]['share']:.0f} % of {phase} time is {items[0]['category']}" if items else ""
    if len(items) > 1:
        summary += "; then " + "; ".join(f"{100 * it['share']:.0f} % {it['category']}" for it in items[1:3])
    return {"summary": summary or words, "shares": items}


def group_rows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Sum time, FLOPs and bytes by ``key`` ('layer' or 'op'); the bound that took most time."""
    groups: dict[str, dict[str, Any]] = {}
    bound_time: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    total = sum(r["time_s"] for r in rows if r["stream"] != "comm_overlap") or 1.0
    for r in rows:
        fresh = {key: r[key], "count": 0, "time_s": 0.0, "flops": 0.0, "dram_bytes": 0.0, "kind": r["kind"]}
        g = groups.setdefault(r[key], fresh)
        g["count"] += 1
        g["time_s"] += r["time_s"]
        g["flops"] += r["flops"]
        g["dram_bytes"] += r["dram_bytes"]
        bound_time[r[key]][r["bound"]] += r["time_s"]
    for name, g in groups.items():
        g["bound"] = max(bound_time[name].items(), key=lambda kv: kv[1])[0]
        g["share"] = g["time_s"] / total
    return list(groups.values())


def diagnostics(est: Estimate) -> list[dict[str, Any]]:
    """Every node the model does not cover: the reason and its fallback estimate."""
    out = []
    times = est.node_time_s
    ops = node_column(est.graph, "op")  # no node built for copied layers (their ops are never None here)
    for i in (i for i, op in enumerate(ops) if op is None):
        node = est.graph.nodes[i]
        if node.op is None:
            out.append({"node": node.name, "source_op": node.source_op, "reason": node.unsupported,
                        "fallback": node.fallback, "fallback_time_s": float(times[i])})
    return out


def llm_metrics(est: Estimate) -> dict[str, Any] | None:
    meta = est.graph.meta
    if meta.get("kind") != "llm":
        return None
    step = est.step_time_s
    dp = int((meta.get("parallelism") or {}).get("dp", 1))
    tokens = int(meta["tokens_per_step"])
    out: dict[str, Any] = {"phase": meta["phase"], "step_time_s": step, "tokens_per_step": tokens}
    if meta["phase"] == "prefill":
        out["time_to_first_token_s"] = step
    elif meta["phase"] == "decode":
        out["time_per_output_token_s"] = step
    out["tokens_per_s"] = tokens * dp / step if step > 0 else 0.0
    devices = int((meta.get("parallelism") or {}).get("devices", 1))
    out["tokens_per_s_per_device"] = out["tokens_per_s"] / max(devices, 1)
    return out


def hierarchy(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """model → layer → op, leaves carry ``value`` (seconds): sunburst/treemap input."""
    layers: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        layers.setdefault(r["layer"], []).append({"name": r["op"], "value": r["time_s"], "bound": r["bound"]})
    return {"name": name, "children": [{"name": k, "children": v} for k, v in layers.items()]}


def estimate_json(est: Estimate, detail: bool = True) -> dict[str, Any]:
    rows = _node_rows(est)
    tl = est.timeline
    phase = str(est.graph.meta.get("phase", "model"))
    compute_rows = [r for r in rows if r["stream"] != "comm_overlap"]
    out: dict[str, Any] = {
        "model": est.graph.name, "hardware": est.hardware.id, "hardware_hash": est.hardware.content_hash,
        "meta": est.graph.meta, "step_time_s": tl.step_s, "latency_s": tl.latency_s,
        "stage_times_s": tl.stage_times_s, "bubble_fraction": tl.bubble_fraction,
        "exposed_comm_s": tl.exposed_comm_s, "hidden_comm_s": tl.hidden_comm_s,
        "totals": {"nodes": len(rows), "distinct_ops": len(est.batch),
                   "flops": float(np.sum([r["flops"] for r in rows])),
                   "dram_bytes": float(np.sum([r["dram_bytes"] for r in rows])),
                   "params_per_device": est.graph.params, "weight_bytes_per_device": est.graph.weight_bytes},
        "fp32_math": est.fp32_math, "llm": est.llm_metrics(), "memory": est.memory.to_json(),
        "fusion": est.fusion.to_json(),
        "bottleneck": bottlenecks(compute_rows, est.hardware.dram.name, phase),
        "diagnostics": diagnostics(est),
        "op_types": sorted(group_rows(rows, "op" if est.graph.meta.get("kind") == "llm" else "source_op"),
                           key=lambda g: -g["time_s"]),
        "layers": group_rows(rows, "layer"),
    }
    if est.graph.meta.get("loops"):  # each loop: iterations used, where from, its time and share of the step
        out["loops"] = loop_shares(est.graph.meta["loops"], [r["name"] for r in compute_rows],
                                   [r["time_s"] for r in compute_rows])
    if detail:
        out["ops"] = rows
        out["hierarchy"] = hierarchy(rows, est.graph.name)
    return out


def text_report(data: dict[str, Any], top: int = 15) -> str:
    """A terminal summary of ``estimate_json``'s output."""
    lines = [f"{data['model']} on {data['hardware']}: step {format_time_s(data['step_time_s'])}"
             + (f" ({len(data['stage_times_s'])} stages, bubble {100 * data['bubble_fraction']:.0f} %)"
                if len(data["stage_times_s"]) > 1 else "")]
    llm = data.get("llm")
    if llm:
        if "time_to_first_token_s" in llm:
            lines.append(f"time to first token {format_time_s(llm['time_to_first_token_s'])}")
        if "time_per_output_token_s" in llm:
            lines.append(f"time per output token {format_time_s(llm['time_per_output_token_s'])}")
        lines.append(f"{llm['tokens_per_s']:,.0f} tokens/s ({llm['tokens_per_s_per_device']:,.0f} per device)")
    lines.append(data["bottleneck"]["summary"])
    math = data.get("fp32_math") or {}
    if math.get("tf32_nodes"):
        lines.append(f"fp32 math {math['mode']}: {math['tf32_nodes']} fp32 {' / '.join(math['tf32_kinds'])} nodes "
                     "on TF32 tensor cores (--fp32-math ieee: IEEE fp32)")
    elif math.get("mode", "framework") != "framework":  # asked for: say what it did
        lines.append(f"fp32 math {math['mode']}: no fp32 op on TF32 tensor cores")
    mem = data["memory"]
    cap = mem["capacity_bytes"]
    lines.append(f"memory per device {mem['total_bytes'] / 1e9:.2f} GB of {cap / 1e9 if cap else float('nan'):.1f} GB "
                 f"(weights {mem['weights_bytes'] / 1e9:.2f}, KV {mem['kv_cache_bytes'] / 1e9:.2f}, "
                 f"activations {mem['activations_bytes'] / 1e9:.2f})")
    fusion = data["fusion"]
    if fusion["count"]:
        lines.append(f"fusion: {fusion['count']} merges saved {fusion['bytes_saved'] / 1e9:.3f} GB of DRAM traffic")
    key = "op" if data["meta"].get("kind") == "llm" else "source_op"
    lines.append(f"\n{key:<32} {'count':>6} {'time':>11} {'share':>6}  bound")
    for g in data["op_types"][:top]:
        lines.append(f"{str(g[key])[:32]:<32} {g['count']:>6} {format_time_s(g['time_s']):>11} "
                     f"{100 * g['share']:>5.1f}%  {g['bound']}")
    for d in data["diagnostics"]:
        lines.append(f"not modelled: {d['node']} ({d['source_op']}): {d['reason']}; fallback "
                     f"{d['fallback']['kind']} {format_time_s(d['fallback_time_s'])}")
    for loop in data.get("loops") or []:
        if loop.get("taken") is False:  # inside an If branch the estimate does not cost
            lines.append(f"loop {loop['loop']} ({loop['op']}): in an If branch not taken, not costed")
            continue
        lines.append(f"loop {loop['loop']} ({loop['op']}): {loop['iterations']} iteration(s) from "
                     f"{loop['trip_count']}, {format_time_s(loop['time_s'])} ({100 * loop['share']:.1f} % of the "
                     "step)" + ("; not in the file: the time of one iteration, pass --trip-count "
                                f"{loop['loop']}=N" if loop["trip_count"] == "default" else ""))
    for name in data["meta"].get("trip_counts_unmatched") or []:
        lines.append(f"--trip-count {name}: no loop of this name (the loops are listed above)")
    lines.extend(f"config: {note}" for note in data["meta"].get("config_notes") or [])
    return "\n".join(lines)
