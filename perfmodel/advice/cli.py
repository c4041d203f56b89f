"""``perfmodel advise partition|precision MODEL -H DEVICE``: partition and precision advice in the terminal.

Only typer is imported at the top: the model code loads when a command runs (``perfmodel --help`` stays quick).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from perfmodel.cli_common import fail
from perfmodel.units import format_bytes, format_time_s

advise_app = typer.Typer(help="Compiler advice: which ops fall back to the host, where quantization pays.",
                         no_args_is_help=True)

ModelArg = Annotated[str, typer.Argument(help="bundled config name, config.json, .onnx file or graph JSON")]
HardwareOpt = Annotated[str, typer.Option("--hardware", "-H", help="hardware id")]
PhaseOpt = Annotated[str, typer.Option(help="LLM configs: prefill or decode")]
TokensOpt = Annotated[int, typer.Option(help="LLM configs: prompt tokens per sequence")]
BatchOpt = Annotated[int, typer.Option(help="LLM configs: sequences per step")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]
DimOpt = Annotated[list[str] | None, typer.Option("--dim", help="ONNX symbolic dim binding name=size (repeatable)")]
TripOpt = Annotated[list[str] | None, typer.Option(
    "--trip-count", help="iterations of an ONNX Loop / StableHLO while whose count the file does not hold: LOOP=N "
                         "(*=N for every other loop; default 1). Repeatable")]


def _graph(model: str, phase: str, batch: int, prompt_tokens: int, dims: list[str] | None = None,
           trip_counts: list[str] | None = None) -> Any:
    from perfmodel.advice.source import advice_graph
    from perfmodel.graph.loops import parse_trip_counts

    if phase not in ("prefill", "decode"):
        fail(f"--phase {phase!r}: expected prefill or decode")
    bindings: dict[str, int] = {}
    for pair in dims or []:
        key, sep, value = pair.partition("=")
        if not sep or not value.strip().isdigit():
            fail(f"--dim {pair!r}: expected name=size")
        bindings[key.strip()] = int(value)
    trips = parse_trip_counts(trip_counts or [], "--trip-count")
    return advice_graph(model, phase, batch, prompt_tokens, dims=bindings,  # type: ignore[arg-type]
                        trip_counts=trips)


@advise_app.command("partition")
def partition_command(model: ModelArg, hardware: HardwareOpt,
                      fallback: Annotated[str, typer.Option(help="host that runs what the device cannot")] =
                      "intel-xeon-platinum-8480",
                      supported_ops: Annotated[str | None, typer.Option(
                          help="comma-separated op kinds / importer op types the device runs (default: its spec)")]
                      = None,
                      phase: PhaseOpt = "prefill", batch: BatchOpt = 1, prompt_tokens: TokensOpt = 2048,
                      dim: DimOpt = None, trip_count: TripOpt = None, as_json: JsonOpt = False) -> None:
    """Which ops fall back to the host and what the partition boundaries cost."""
    from perfmodel.advice.partition import partition
    from perfmodel.advice.source import with_supported_ops

    try:
        declared = [s.strip() for s in supported_ops.split(",") if s.strip()] if supported_ops else None
        graph = _graph(model, phase, batch, prompt_tokens, dim, trip_count)
        report = partition(graph, with_supported_ops(hardware, declared), fallback)
    except (ValueError, KeyError) as exc:
        fail(str(exc))
        return
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
        return
    t = report.totals
    typer.echo(f"{report.device_id} with fallback {report.fallback_id}: {len(report.fallback_ops)} ops fall back, "
               f"{int(t['crossings'])} tensor copies ({format_bytes(t['transfer_bytes'])})")
    typer.echo(f"  step {format_time_s(t['step_s'])} = device {format_time_s(t['device_s'])} + fallback "
               f"{format_time_s(t['fallback_s'])} + copies {format_time_s(t['transfer_s'])} + launches "
               f"{format_time_s(t['launch_s'])}; all on the device: {format_time_s(t['all_on_device_s'])}")
    for op in report.fallback_ops[:20]:
        typer.echo(f"  {op['node']:<40} {format_time_s(op['fallback_time_s']):>10} on the host "
                   f"({format_time_s(op['device_time_s'])} on the device): {op['reason']}")
    for note in report.notes:
        typer.echo(f"  note: {note}")
    _unmodelled(graph)


def _unmodelled(graph: Any) -> None:
    """Say how many nodes run on their bytes fallback, and why the first does (an unbound --dim, typically)."""
    for loop in graph.meta.get("loops") or []:
        if not str(loop["trip_count"]).startswith("constant"):
            typer.echo(f"  note: {loop['note']}")
    missing = graph.unsupported()
    if missing:
        typer.echo(f"  note: {len(missing)} nodes are not modelled (bytes fallback, not advised); first: "
                   f"{missing[0].name}: {missing[0].unsupported}")


@advise_app.command("precision")
def precision_command(model: ModelArg, hardware: HardwareOpt, phase: PhaseOpt = "prefill", batch: BatchOpt = 1,
                      prompt_tokens: TokensOpt = 2048, dim: DimOpt = None, trip_count: TripOpt = None,
                      as_json: JsonOpt = False,
                      fp32_math: Annotated[str, typer.Option(
                          "--fp32-math", help="the baseline's fp32 convs/matmuls: framework, tf32 or ieee")
                      ] = "framework") -> None:
    """Where fp8 / int8 / int4 (weight-only and full) pay: per scheme, per layer and for the step."""
    from perfmodel.advice.precision import precision_advice

    try:
        graph = _graph(model, phase, batch, prompt_tokens, dim, trip_count)
        report = precision_advice(graph, hardware, fp32_math)
    except (ValueError, KeyError) as exc:
        fail(str(exc))
        return
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
        return
    math = report.fp32_math or {}
    typer.echo(f"{report.hardware_id}: step {format_time_s(report.graph_time_s)}, {len(report.ops)} quantizable ops"
               f" (fp32 math {math.get('mode')}: {math.get('tf32_nodes', 0)} nodes on TF32)")
    typer.echo(f"  {'scheme':<18} {'step':>10} {'speedup':>8} {'gain':>10} {'added Q ops':>12}")
    for scheme, total in report.totals.items():
        typer.echo(f"  {scheme:<18} {format_time_s(total['graph_time_s']):>10} {total['speedup']:>7.2f}x "
                   f"{format_time_s(total['gain_s']):>10} {format_time_s(total['quantize_time_s']):>12}")
    _unmodelled(graph)
