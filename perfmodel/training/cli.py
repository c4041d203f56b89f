"""``perfmodel train-layouts``: rank the parallel layouts of a training run, or check one layout and
list the smallest changes that make it fit. Register with ``app.command("train-layouts")(train_layouts_command)``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from perfmodel.cli_common import fail


def _row_line(row: dict[str, Any]) -> str:
    from perfmodel.units import format_bytes

    lay = row["layout"]
    mfu = f"{row['mfu']:.1%}" if row.get("mfu") is not None else "-"
    return (f"tp={lay['tp']} cp={lay['cp']} pp={lay['pp']} dp={lay['dp']} ep={lay['ep']} ZeRO-{lay['zero']} "
            f"recompute={lay['recompute']} mb={lay['micro_batch']} v={lay['virtual_stages']} {lay['schedule']}: "
            f"step {row['step_s']:.3f} s, {row['tokens_per_s']:,.0f} tokens/s, MFU {mfu}, "
            f"memory {format_bytes(row['memory_bytes']['total'])}")


def train_layouts_command(
    model: Annotated[str, typer.Argument(help="bundled config name or a Hugging Face config.json")],
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="hardware id")],
    devices: Annotated[int, typer.Option(max=1 << 20, help="devices in all (tp x cp x pp x dp)")],
    global_batch: Annotated[int, typer.Option(max=1 << 24, help="sequences per optimizer step")] = 512,
    seq_len: Annotated[int, typer.Option(max=1 << 22, help="tokens per sequence")] = 4096,
    precision: Annotated[str, typer.Option(help="bf16 or fp8 GEMMs")] = "bf16",
    offload: Annotated[bool, typer.Option("--offload", help="optimizer state in host memory")] = False,
    dropout: Annotated[bool, typer.Option("--dropout", help="GPT-style dropout (masks stored and costed)")] = False,
    no_flash: Annotated[bool, typer.Option("--no-flash", help="attention scores stored (no flash attention)")] = False,
    no_sequence_parallel: Annotated[bool, typer.Option("--no-sequence-parallel",
                                                       help="norm/dropout activations replicated over tp")] = False,
    fp32_grads: Annotated[bool, typer.Option("--fp32-grads", help="4-byte gradients (fp32 accumulation)")] = False,
    ends_in_split: Annotated[bool, typer.Option("--ends-in-split", help="embedding and loss take a layer slot "
                                                "each in the pipeline split (Llama 3)")] = False,
    cp_allgather: Annotated[bool, typer.Option("--cp-allgather", help="context parallelism all-gathers K/V "
                                               "before the attention, exposed (Llama 3), not a ring")] = False,
    separate_grad_accumulation: Annotated[bool, typer.Option(
        "--separate-grad-accumulation", help="weight gradients accumulate in a kernel of their own (PyTorch / "
        "FSDP), not in the weight-gradient GEMM (Megatron's fusion)")] = False,
    pod_devices: Annotated[int | None, typer.Option(help="devices per full-bisection pod (Llama 3: 3072)")] = None,
    pod_oversubscription: Annotated[float, typer.Option(help="taper of the uplinks above the pods, k:1 "
                                                        "(Llama 3: 7)")] = 1.0,
    attention_kernel: Annotated[str, typer.Option(help="native (the device's own flash attention: FA3 on Hopper) "
                                                  "or fa2 (FlashAttention-2's mma.sync kernel)")] = "native",
    device_speed_spread: Annotated[float | None, typer.Option(help="range of sustained speeds among same-SKU devices; "
                                                              "the step computes at the slowest's pace (0: off; "
                                                              "default 0.08, Sinha et al. 2022)")] = None,
    tp: Annotated[int | None, typer.Option(help="fix tensor parallelism")] = None,
    pp: Annotated[int | None, typer.Option(help="fix pipeline stages")] = None,
    cp: Annotated[int | None, typer.Option(help="fix context parallelism")] = None,
    dp: Annotated[int | None, typer.Option(help="with --tp and --pp: check this one layout")] = None,
    ep: Annotated[int | None, typer.Option(help="fix expert parallelism (1, tp, or dividing dp with tp=1)")] = None,
    zero: Annotated[int | None, typer.Option(help="fix the ZeRO stage (3 = FSDP)")] = None,
    recompute: Annotated[str | None, typer.Option(help="fix recomputation: none, selective, full")] = None,
    micro_batch: Annotated[int | None, typer.Option(help="fix sequences per micro-batch")] = None,
    virtual_stages: Annotated[int | None, typer.Option(help="fix model chunks per pipeline stage")] = None,
    schedule: Annotated[str | None, typer.Option(help="fix the pipeline schedule: 1f1b or zb-h1")] = None,
    top: Annotated[int, typer.Option(help="layouts to list")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Training layouts (tp, cp, pp, dp, ZeRO, recompute, micro-batch) ranked by step time among those that fit."""
    from perfmodel.graph.ir import GraphError
    from perfmodel.graph.llm_config import LlmConfig
    from perfmodel.graph.loader import resolve_model
    from perfmodel.roofline import resolve_hardware
    from perfmodel.training.fit import make_it_fit
    from perfmodel.training.layout import RECOMPUTE_MODES, SCHEDULES, Layout, TrainingSetup
    from perfmodel.training.no_fit import does_not_fit
    from perfmodel.training.search import (
        DEFAULT_MICRO_BATCHES,
        SearchSpace,
        fastest,
        search_layouts,
    )
    from perfmodel.training.variability import DEVICE_SPEED_SPREAD

    try:
        cfg = resolve_model(model)
        if not isinstance(cfg, LlmConfig):
            fail(f"{model}: train-layouts needs an LLM config (bundled name or config.json)")
        assert isinstance(cfg, LlmConfig)
        hw = resolve_hardware(hardware)
        setup = TrainingSetup(seq_len=seq_len, global_batch=global_batch, precision=precision,  # type: ignore[arg-type]
                              offload="optimizer" if offload else "none", dropout=dropout,
                              flash_attention=not no_flash, sequence_parallel=not no_sequence_parallel,
                              grad_bytes=4.0 if fp32_grads else 2.0, ends_in_pipeline_split=ends_in_split,
                              cp_attention="allgather" if cp_allgather else "ring",
                              grad_accumulation="separate" if separate_grad_accumulation else "fused",
                              pod_devices=pod_devices, pod_oversubscription=pod_oversubscription,
                              attention_kernel=attention_kernel,  # type: ignore[arg-type]
                              device_speed_spread=DEVICE_SPEED_SPREAD if device_speed_spread is None
                              else device_speed_spread)
        if dp is not None:
            layout = Layout(tp=tp or 1, pp=pp or 1, dp=dp, cp=cp or 1, ep=ep or 1, zero=zero or 0,
                            recompute=recompute or "none", micro_batch=micro_batch or 1,  # type: ignore[arg-type]
                            virtual_stages=virtual_stages or 1, schedule=schedule or "1f1b")  # type: ignore[arg-type]
            if layout.devices != devices:
                fail(f"tp x cp x pp x dp = {layout.devices}, not --devices {devices}")
            out = make_it_fit(cfg, hw, layout, setup)
            if as_json:
                typer.echo(json.dumps(out, indent=2))
                return
            row = out["layout"]
            typer.echo(_row_line(row) + ("" if row["fits"] else f"\n  {row['reason']}"))
            for fix in out["fixes"]:
                typer.echo(f"  fits with {fix['change']}: {_row_line(fix)}")
            if not row["fits"] and not out["fixes"]:
                typer.echo("  no single change makes it fit")
                if out.get("best_layout"):
                    typer.echo(f"  another layout of {devices} devices fits: {_row_line(out['best_layout'])}")
                if out.get("does_not_fit"):
                    typer.echo(f"  no layout fits: {out['does_not_fit']['reason']}")
                    for fix in out["does_not_fit"]["fits_with"]:
                        typer.echo(f"  fits with {fix['change']}: {_row_line(fix)}")
                raise typer.Exit(1)
            return
        space = SearchSpace(tp=(tp,) if tp else None, pp=(pp,) if pp else None, cp=(cp,) if cp else None,
                            ep=(ep,) if ep else None,
                            zero=(zero,) if zero is not None else (0, 1, 2, 3),
                            recompute=(recompute,) if recompute else RECOMPUTE_MODES,
                            micro_batch=(micro_batch,) if micro_batch else DEFAULT_MICRO_BATCHES,
                            virtual_stages=(virtual_stages,) if virtual_stages else None,
                            schedules=(schedule,) if schedule else SCHEDULES)
        result = search_layouts(cfg, hw, devices, setup, space)
        rows = fastest(result, top)
        none_fits = None if rows else does_not_fit(cfg, hw, result, space)
    except (GraphError, KeyError, ValueError) as exc:
        fail(str(exc).strip("'\""))
        return
    if as_json:
        out = {"layouts_costed": result.count, "fit": len(result.ranked()), "ruled_out": result.reason_counts(),
               "fastest": rows}
        typer.echo(json.dumps(out if none_fits is None else {**out, "does_not_fit": none_fits}, indent=2))
        return
    typer.echo(f"{result.count} layouts, {len(result.ranked())} fit; ruled out: "
               + (", ".join(f"{k} {v}" for k, v in result.reason_counts().items()) or "none"))
    for row in rows:
        typer.echo(_row_line(row))
    if none_fits is not None:
        typer.echo(f"no layout fits: {none_fits['reason']}")
        for fix in none_fits["fits_with"]:
            typer.echo(f"  fits with {fix['change']}: {_row_line(fix)}")
        if not none_fits["fits_with"]:
            typer.echo("  no change tried fits (more devices, a smaller global batch, a shorter sequence, offload)")
        raise typer.Exit(1)
