"""A published run's layer GEMMs: the model's rate on them beside the device's published best GEMM (a diagnostic).

The model's rate is FLOP-weighted over one layer's weight GEMMs on one device of the run's layout (the probe
graph's ``matmul`` nodes outside the core attention: each projection's forward, input-gradient and weight-gradient
GEMM). Over the device's best
GEMM as measured (the Maximum Achievable Matmul FLOPS table, ``benchmarks/data/best_gemm_mamf.csv``: the best
shape of a brute-force grid), it says how close to what the device is seen to reach the model puts the run's
GEMMs. Real training shapes cannot beat the measured best, so a share near 1 leaves the model no room to be
pessimistic on them.

Not a model term: the measured best is the device's own measurement, and the uncalibrated model takes no constant
from a device's own measurements. ``with_sustained_share`` builds a device variant whose matrix engine sustains a
given share of its clock, for experiments only (``published.predict(run, hardware)``).
"""

from __future__ import annotations

from perfmodel.hardware import Hardware
from perfmodel.roofline import predict_many, resolve_hardware
from perfmodel.training.costs import ProbeKey, _is_attention, _probe_graph
from perfmodel.training.published import PublishedRun

FORWARD_BACKWARD_GEMMS = 3.0  # forward, input gradient, weight gradient: each 2·m·n·k


def layer_gemm_ops(run: PublishedRun, tp: int, cp: int, micro_batch: int) -> list[dict[str, object]]:
    """The weight GEMMs of the run's layers on one device of a (tp, cp, micro-batch) layout, as the step costs
    them; an unfused attention's score and value matmuls are the core attention's, not counted."""
    graph = _probe_graph(run.config(), ProbeKey(tp, cp, micro_batch), run.seq_len, "bf16", run.flash_attention)
    return [dict(op) for node in graph.nodes
            if node.layer.startswith("layers.") and not _is_attention(node) and (op := node.cost_op) is not None
            and op.get("kind") == "matmul"]


def gemm_flops(op: dict[str, object]) -> float:
    """FLOPs of one matmul op: 2·b·m·n·k per GEMM, three GEMMs when it is costed forward and backward."""
    dims = 1.0
    for key in ("m", "n", "k"):
        dims *= float(op[key])  # type: ignore[arg-type]
    batch = float(op.get("batch", 1))  # type: ignore[arg-type]
    return 2.0 * batch * dims * (FORWARD_BACKWARD_GEMMS if op.get("pass") == "forward_backward" else 1.0)


def layer_gemm_tflops(run: PublishedRun, tp: int, cp: int, micro_batch: int, hardware: Hardware | None = None) -> float:
    """The model's FLOP-weighted TFLOP/s over the run's layer GEMMs (``layer_gemm_ops``) on ``hardware`` (default:
    the run's device)."""
    ops = layer_gemm_ops(run, tp, cp, micro_batch)
    if not ops:
        raise ValueError(f"{run.name}: no layer GEMMs in the probe graph")
    batch = predict_many(hardware or resolve_hardware(run.hardware), ops)
    return sum(gemm_flops(op) for op in ops) / float(sum(batch.time_s)) / 1e12


def with_sustained_share(hardware: Hardware, share: float) -> Hardware:
    """A variant of ``hardware`` whose matrix engines sustain ``share`` of the chip's clock under load (every
    dtype), for experiments: the model's ``sustained_clock_hz`` mechanism, set by hand."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")
    if hardware.clock_hz is None:
        raise ValueError(f"{hardware.id} has no clock_hz to take a share of")
    clock = hardware.clock_hz * share
    engines = tuple(e.model_copy(update={"sustained_clock_hz": dict.fromkeys(e.peak_flops_per_s, clock)})
                    if e.engine_class == "matrix" else e for e in hardware.engines)
    return hardware.model_copy(update={"engines": engines})
