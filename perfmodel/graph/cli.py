"""``perfmodel estimate`` and ``perfmodel sweep``: standalone typer command functions.

Register them on the main app with ``app.command("estimate")(estimate_command)`` and
``app.command("sweep")(sweep_command)``; ``graph_app`` holds both for a sub-app or for tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from perfmodel.cli_common import fail, refuse_if_read_only
from perfmodel.units import format_time_s


def _dims(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not value.strip().isdigit():
            fail(f"--dim expects name=size, got {pair!r}")
        out[key.strip()] = int(value)
    return out


def estimate_command(
    model: Annotated[str, typer.Argument(help="bundled config name, config.json, .onnx file or graph JSON")],
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="hardware id")],
    devices: Annotated[int, typer.Option(help="devices in all (tp x pp x dp)")] = 1,
    tp: Annotated[int | None, typer.Option(help="tensor parallel degree (default: devices / pp / dp)")] = None,
    pp: Annotated[int, typer.Option(help="pipeline stages")] = 1,
    dp: Annotated[int | None, typer.Option(help="data-parallel replicas")] = None,
    ep: Annotated[int, typer.Option(help="expert parallel degree (1, tp, or dividing dp with tp=1)")] = 1,
    microbatches: Annotated[int, typer.Option(help="pipeline microbatches")] = 1,
    batch: Annotated[int, typer.Option(help="sequences per step")] = 1,
    prompt_tokens: Annotated[int, typer.Option(help="prefill tokens per sequence")] = 2048,
    kv_len: Annotated[int | None, typer.Option(help="keys a decode step attends to (default prompt+1)")] = None,
    phase: Annotated[str, typer.Option(help="prefill, decode, both or train")] = "both",
    dtype: Annotated[str, typer.Option(help="activation/GEMM dtype (bf16, fp16, fp8...)")] = "bf16",
    weight_dtype: Annotated[str | None, typer.Option(help="weight-only quantization: int8, int4, fp8")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype (default: dtype)")] = None,
    attention: Annotated[str, typer.Option(help="flash or unfused")] = "flash",
    no_fusion: Annotated[bool, typer.Option("--no-fusion", help="cost the graph as imported")] = False,
    compact: Annotated[bool, typer.Option("--compact", help="fixed GEMM schedules instead of search")] = False,
    ignore_memory: Annotated[bool, typer.Option("--ignore-memory", help="report instead of failing")] = False,
    dim: Annotated[list[str] | None, typer.Option(help="ONNX symbolic dim binding name=size")] = None,
    trip_count: Annotated[list[str] | None, typer.Option(
        "--trip-count", help="iterations of an ONNX Loop / StableHLO while whose count the file does not hold: "
                             "LOOP=N (node name, or a while's first result such as %0; *=N for every other "
                             "loop; default 1, the time per iteration). Repeatable")] = None,
    fp32_math: Annotated[str, typer.Option(
        "--fp32-math", help="fp32 convs/matmuls: framework (TF32 convs on Ampere+, TF graphs' matmuls too), "
                            "tf32 or ieee")] = "framework",
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Estimate a whole model: per-op and per-layer time, TTFT/TPOT, bottlenecks, memory."""
    # imported here, not at the top: `perfmodel --help` and other commands start without the model code
    from perfmodel.graph.ir import GraphError
    from perfmodel.graph.llm_build import LlmWorkload
    from perfmodel.graph.loader import PhaseChoice, estimate_model
    from perfmodel.graph.loops import parse_trip_counts
    from perfmodel.graph.parallel import Parallelism
    from perfmodel.graph.report import text_report
    from perfmodel.ops import OpError
    from perfmodel.specs import SpecError

    if phase not in ("prefill", "decode", "both", "train"):
        fail(f"--phase {phase!r}: expected prefill, decode, both or train")
    if attention not in ("flash", "unfused"):
        fail(f"--attention {attention!r}: expected flash or unfused")
    if fp32_math not in ("framework", "tf32", "ieee"):
        fail(f"--fp32-math {fp32_math!r}: expected framework, tf32 or ieee")
    progress = _estimate_progress(model)
    try:
        trips = parse_trip_counts(trip_count or [], "--trip-count")
        par = Parallelism.for_devices(devices, tp=tp, pp=pp, dp=dp, ep=ep, microbatches=microbatches)
        workload = LlmWorkload(batch=batch, prompt_tokens=prompt_tokens, kv_len=kv_len or prompt_tokens + 1,
                               dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                               attention="flash" if attention == "flash" else "unfused")
        phase_choice: PhaseChoice = "both" if phase == "both" else (
            "prefill" if phase == "prefill" else "decode" if phase == "decode" else "train")
        result = estimate_model(model, hardware, workload, par, phase_choice, "compact" if compact else "full",
                                not no_fusion, not ignore_memory, _dims(dim or []), detail=as_json,
                                progress=progress, fp32_math=fp32_math, trip_counts=trips)
    except (GraphError, OpError, SpecError, KeyError) as exc:
        fail(str(exc.args[0]) if isinstance(exc, KeyError) else str(exc))
        return
    finally:
        if progress is not None:
            progress.end()
    if as_json:
        typer.echo(json.dumps(result, default=float))
        return
    parts = [result[p] for p in ("prefill", "decode", "train") if p in result] or [result]
    typer.echo("\n\n".join(text_report(part) for part in parts))


BIG_GRAPH_BYTES = 8 << 20  # model files from this size up (ONNX, TFLite, StableHLO, graph JSON) show progress


def _estimate_progress(model: str) -> Any:
    """A stage bar on stderr (``StderrProgress``; stdout keeps the report or JSON alone) for a model file of
    ``BIG_GRAPH_BYTES`` or more, else None (bundled configs and small files finish in about a second)."""
    path = Path(model)
    if not path.is_file() or path.stat().st_size < BIG_GRAPH_BYTES:
        return None
    from perfmodel.measure.command import StderrProgress

    return StderrProgress()


def sweep_command(
    spec_file: Annotated[Path | None, typer.Argument(help="sweep spec JSON (see docs/graphs.md)")] = None,
    hardware: Annotated[str | None, typer.Option("--hardware", "-H", help="base hardware id")] = None,
    model: Annotated[list[str] | None, typer.Option(help="bundled model (repeatable)")] = None,
    vary: Annotated[list[str] | None, typer.Option(
        help="axis=v1,v2,... e.g. levels.dram.bandwidth_bytes_per_s=x0.5,x1,x2 or devices=1,2,4")] = None,
    phase: Annotated[str, typer.Option(help="prefill or decode")] = "decode",
    batch: Annotated[int, typer.Option()] = 1,
    prompt_tokens: Annotated[int, typer.Option()] = 2048,
    kv_len: Annotated[int, typer.Option()] = 2049,
    samples: Annotated[int | None, typer.Option(help="random sample of this many grid points")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    workers: Annotated[int, typer.Option(help="local processes")] = 1,
    scheduler: Annotated[str | None, typer.Option(help="Dask scheduler, tcp://host:port")] = None,
    name: Annotated[str, typer.Option(help="name stored with the sweep")] = "sweep",
    db: Annotated[str | None, typer.Option(help="database URL (default: the service's)")] = None,
    no_store: Annotated[bool, typer.Option("--no-store", help="do not store the results")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Sweep hardware variants x workloads: a table, the Pareto front, stored in the database."""
    from perfmodel.graph.ir import GraphError
    from perfmodel.graph.sweep import SweepSpec, run_sweep
    from perfmodel.ops import OpError
    from perfmodel.specs import SpecError

    if not no_store:
        refuse_if_read_only()  # it stored the sweep under PERFMODEL_READ_ONLY=1 (--no-store still runs)
    try:
        spec = _sweep_spec(spec_file, hardware, model, vary, phase, batch, prompt_tokens, kv_len, samples, seed)
        with _progress(as_json) as tick:
            results = run_sweep(spec, workers=workers, scheduler=scheduler, progress=tick)
    except (GraphError, OpError, SpecError, KeyError, OSError) as exc:
        fail(str(exc))
        return
    sweep_id = None
    if not no_store:
        sweep_id = _store(db).add_sweep(name, spec.to_json(), results)
    if as_json:
        typer.echo(json.dumps({"id": sweep_id, **results}, default=float))
        return
    typer.echo(_sweep_table(results, sweep_id))
    assert isinstance(spec, SweepSpec)


def _sweep_spec(spec_file: Path | None, hardware: str | None, model: list[str] | None, vary: list[str] | None,
                phase: str, batch: int, prompt_tokens: int, kv_len: int, samples: int | None, seed: int) -> Any:
    from perfmodel.cli import parse_value
    from perfmodel.graph.sweep import SweepSpec

    if spec_file is not None:
        return SweepSpec.from_json(json.loads(spec_file.read_text()))
    if not hardware or not model:
        fail("give a spec file, or --hardware and --model")
    axes: dict[str, list[Any]] = {}
    for item in vary or []:
        key, sep, values = item.partition("=")
        if not sep:
            fail(f"--vary expects axis=v1,v2, got {item!r}")
        axes[key.strip()] = [parse_value(v) for v in values.split(",") if v]
    workloads = [{"model": m, "phase": phase, "batch": batch, "prompt_tokens": prompt_tokens, "kv_len": kv_len}
                 for m in model or []]
    return SweepSpec.from_json({"base": hardware, "axes": axes, "workloads": workloads,
                                "mode": "random" if samples else "grid", "samples": samples, "seed": seed})


class _progress:
    """A rich progress bar over chunks (silent for --json)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> Any:
        if self.quiet:
            return None
        from rich.progress import Progress

        self.bar = Progress(transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task("sweep", total=None)

        def tick(done: int, total: int) -> None:
            self.bar.update(self.task, completed=done, total=total)
        return tick

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _store(db: str | None) -> Any:
    from api.settings import Settings
    from perfmodel.store import Store

    store = Store(db or Settings().resolved_database_url())
    store.migrate()
    return store


def _sweep_table(results: dict[str, Any], sweep_id: int | None) -> str:
    rows = results["rows"]
    lines = [f"{results['variants']} variants x {results['workloads']} workloads on {results['executor']}: "
             f"{len(rows)} estimates in {results['elapsed_s']:.2f} s ({results['evaluations_per_s']:.0f}/s)"
             + (f", stored as sweep {sweep_id}" if sweep_id is not None else "")]
    for label, front in results["pareto"].items():
        lines.append(f"\nPareto front for {label} (cost proxy = devices x bandwidth x peak, base = 1):")
        lines.append(f"{'cost':>8} {'time':>11} {'tokens/s':>10}  overrides")
        for i in front:
            r = rows[i]
            tps = f"{r['tokens_per_s']:,.0f}" if r["tokens_per_s"] else "-"
            lines.append(f"{r['cost_proxy']:>8.2f} {format_time_s(r['time_s']):>11} {tps:>10}  "
                         f"{json.dumps(r['overrides'])}")
    return "\n".join(lines)


graph_app = typer.Typer(help="Whole-model estimates and design-space sweeps.", no_args_is_help=True)
graph_app.command("estimate")(estimate_command)
graph_app.command("sweep")(sweep_command)
