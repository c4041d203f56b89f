"""Precision advice: per op and per layer, the predicted gain of fp8 / int8 / int4, weight-only and full.

For every node holding weights whose op is a matmul or a convolution in a 16/32-bit dtype:

- **weight-only** (matmul): the weights stored at the narrow width (``Matmul.weight_dtype``: the B operand
  moves at its width plus one scale per ``group_size`` weights and is dequantized on the vector engine
  in the GEMM), compute stays in the original dtype; no extra op (the weights are converted offline).
- **full** (weights and activations): the GEMM runs in the narrow dtype on the matrix engine (where the
  device lacks it the model's path falls back, e.g. int4 -> int8, and the notes say so); the activation
  input is quantized first by a ``quantize`` op (per-row scales), which is counted; a matmul writes its
  output in the original dtype (dequantized in the epilogue), a convolution keeps the narrow dtype for the
  next layer (as int8 inference engines chain them), so its Q op is an upper bound when convs chain.

Gains are device time: base − (quantized op + its quantize op); a negative gain says the scheme loses.
The baseline's fp32 convolutions / matmuls run in the estimate's ``fp32_math`` mode (``perfmodel.graph.math_mode``:
by default TF32 convolutions on NVIDIA Ampere and later), and so do the weight-only variants' GEMMs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.estimate import compile_graph, predict_compiled
from perfmodel.graph.ir import Graph, Node
from perfmodel.graph.math_mode import check, retyped, summary, tf32_kinds
from perfmodel.machine import tables
from perfmodel.ops import OpError, make_op
from perfmodel.ops.base import DTYPES, Op
from perfmodel.roofline import HardwareLike, predict_many, resolve_hardware

FORMATS = {"fp8": "fp8_e4m3", "int8": "int8", "int4": "int4"}
MODES = ("weight-only", "full")
SCHEMES = tuple(f"{name} {mode}" for name in FORMATS for mode in MODES)
QUANTIZABLE = ("matmul", "conv2d")


def candidate(node: Node) -> bool:
    """A weight-holding matmul or convolution in a dtype wider than one byte."""
    op = node.op or {}
    if op.get("kind") not in QUANTIZABLE or (node.weight_bytes <= 0 and node.params <= 0):
        return False
    try:
        return parse_dtype(op.get("dtype", "fp32")).bytes > 1 and op.get("weight_dtype") is None
    except ValueError:
        return False


def variant(op: dict[str, Any], scheme: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
    """(the quantized op, the quantize op it adds, '' or why the scheme does not apply)."""
    name, mode = scheme.split(" ")
    target = FORMATS[name]
    kind = op["kind"]
    if mode == "weight-only":
        if kind != "matmul":
            return None, None, "weight-only quantization is modelled for matmul (the GEMM dequantizes B)"
        return {**op, "weight_dtype": target}, None, ""
    op = {k: v for k, v in op.items() if k != "compute_dtype"}  # the narrow dtype's own math, not TF32
    if kind == "matmul":
        rows = int(op.get("batch", 1)) * int(op["m"])
        act = [rows, int(op["k"])]
        quantized = {**op, "dtype": target, "out_dtype": op.get("out_dtype") or op["dtype"]}
    else:
        act = [int(op["batch"]), int(op["in_channels"]), int(op.get("depth", 1)) * int(op["height"]),
               int(op["width"])]
        quantized = {**op, "dtype": target}
    granularity = "channel" if kind == "matmul" else "tensor"
    quantize = {"kind": "quantize", "shape": act, "from_dtype": op["dtype"], "to_dtype": target,
                "granularity": granularity}
    return quantized, quantize, ""


@dataclass
class PrecisionReport:
    """Per candidate op and per layer: base time and, per scheme, time, added quantize time, gain (s)."""

    hardware_id: str
    graph_time_s: float
    ops: list[dict[str, Any]]
    layers: list[dict[str, Any]]
    totals: dict[str, dict[str, float]]
    fp32_math: dict[str, Any] | None = None  # the baseline's math mode (math_mode.summary)

    def to_json(self) -> dict[str, Any]:
        return {"hardware": self.hardware_id, "schemes": list(SCHEMES), "graph_time_s": self.graph_time_s,
                "fp32_math": self.fp32_math, "totals": self.totals, "layers": self.layers, "ops": self.ops}


def precision_advice(graph: Graph, hardware: HardwareLike, fp32_math: str = "framework") -> PrecisionReport:
    """The gain of each quantization scheme on each weight-holding GEMM/conv of ``graph`` on ``hardware``, against
    the graph costed with its fp32 ops in ``fp32_math`` (framework, tf32 or ieee) as ``estimate`` does."""
    hw = resolve_hardware(hardware)
    mode = check(fp32_math)
    kinds = tf32_kinds(graph, hw, mode)
    compiled = compile_graph(graph, kinds)
    base = predict_compiled(compiled, hw).time_s[compiled.index]
    distinct: dict[str, dict[str, Any]] = {}  # op key -> scheme -> (quantized index, quantize index, reason)
    ops: list[Op] = []

    def add(raw: dict[str, Any] | None) -> int | str | None:
        if raw is None:
            return None
        try:
            ops.append(make_op(raw))
        except (OpError, ValueError) as exc:
            return str(exc)
        return len(ops) - 1

    keys: list[str | None] = []
    for node in graph.nodes:
        if not candidate(node):
            keys.append(None)
            continue
        op = retyped(dict(node.op or {}), kinds)
        key = json.dumps(op, sort_keys=True, default=str)
        keys.append(key)
        if key not in distinct:
            distinct[key] = {}
            for scheme in SCHEMES:
                quantized, quantize, why = variant(op, scheme)
                distinct[key][scheme] = (add(quantized), add(quantize), why)
    batch = predict_many(hw, ops, space="full") if ops else None
    paths = tables(hw).matrix_paths
    path_notes = {s: paths[DTYPES.index(parse_dtype(FORMATS[s.split(" ")[0]]))].note for s in SCHEMES
                  if s.endswith("full")}
    rows = [_op_row(node, float(base[i]), distinct[key], batch, path_notes)
            for i, (node, key) in enumerate(zip(graph.nodes, keys, strict=True)) if key is not None]
    return PrecisionReport(hw.id, float(base.sum()), rows, _layers(rows), _totals(rows, float(base.sum())),
                           summary(mode, kinds, compiled.tf32_nodes))


def _op_row(node: Node, base_s: float, schemes: dict[str, Any], batch: Any,
            path_notes: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"node": node.name, "layer": node.layer, "kind": (node.op or {}).get("kind"),
                           "dtype": (node.op or {}).get("dtype"), "base_time_s": base_s, "schemes": {}}
    for scheme, (q, dq, why) in schemes.items():
        if why or isinstance(q, str) or isinstance(dq, str) or q is None or batch is None:
            reason = why or (q if isinstance(q, str) else dq)
            out["schemes"][scheme] = {"applies": False, "reason": reason}
            continue
        cost = batch[q]
        quant_s = float(batch.time_s[dq]) if isinstance(dq, int) else 0.0
        time_s = float(cost.time_s) + quant_s
        out["schemes"][scheme] = {"applies": True, "time_s": time_s, "gemm_time_s": float(cost.time_s),
                                  "quantize_time_s": quant_s, "gain_s": base_s - time_s,
                                  "speedup": base_s / time_s if time_s > 0 else None, "bound": cost.bound,
                                  "notes": [n for n in (path_notes.get(scheme), *cost.notes) if n]}
    applicable = {s: v["gain_s"] for s, v in out["schemes"].items() if v["applies"]}
    out["best"] = max(applicable, key=lambda s: applicable[s]) if applicable else None
    return out


def _layers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    layers: dict[str, dict[str, Any]] = {}
    for row in rows:
        layer = layers.setdefault(row["layer"], {"layer": row["layer"], "ops": 0, "base_time_s": 0.0,
                                                 "gain_s": dict.fromkeys(SCHEMES, 0.0)})
        layer["ops"] += 1
        layer["base_time_s"] += row["base_time_s"]
        for scheme, value in row["schemes"].items():
            if value["applies"]:
                layer["gain_s"][scheme] += value["gain_s"]
    return list(layers.values())


def _totals(rows: list[dict[str, Any]], graph_s: float) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for scheme in SCHEMES:
        applied = [r["schemes"][scheme] for r in rows if r["schemes"][scheme]["applies"]]
        gain = sum(v["gain_s"] for v in applied)
        quantize = sum(v["quantize_time_s"] for v in applied)
        out[scheme] = {"ops": float(len(applied)), "gain_s": gain, "quantize_time_s": quantize,
                       "graph_time_s": graph_s - gain, "speedup": graph_s / (graph_s - gain) if graph_s > gain else 0.0}
    return out
