"""The calibrated time of an op from its roofline breakdown: the functional form, vectorised.

    t_cal = o · t_overhead + t_body · exp(w_c · g_c(x_F) + (1 − w_c) · g_m(x_B) + Σ β_j z_j)
    g(x)  = a + b · σ((x0 − x) / w)                      (σ the logistic function)

- ``t_overhead`` is the model's fixed per-op cost (kernels × launch floor), ``t_body`` the rest
  of its time (``time_s − overhead_s``); ``o`` scales the floor (``log_o`` is fitted).
- ``x_F = log10 FLOPs``, ``x_B = log10 compulsory bytes``: the size the efficiency depends on.
- ``g = −log η`` is the log of the time factor: η = exp(−g) is the efficiency the model misses.
  Large ops (x ≫ x0): η → η_∞ = e^(−a); small ops (x ≪ x0): η → η_0 = e^(−(a+b)); the change
  happens around size 10^x0 over about ±2w decades. Bounded at both ends: it never extrapolates
  a trend beyond the data, and b may take either sign (the model may be too slow or too fast
  for small ops).
- ``w_c = T_c⁴ / (T_c⁴ + T_m⁴)`` is how compute-bound the op is in the model (T_c the largest
  engine time, T_m the largest memory-level or interconnect time): compute-bound work takes
  the compute curve g_c(FLOPs), memory-bound work the memory curve g_m(bytes), and ops near the
  ridge a smooth blend of both (in log time).
- ``z_j`` are the op's shape numbers (``shape``: how narrow, deep, unaligned, ... it is; 0 for the
  shape the model assumes) and ``β_j`` their log-time coefficients.

Nine curve parameters and ``shape.N_SHAPE`` coefficients per (hardware, op class, dtype);
``IDENTITY`` (o = 1, a = b = 0, β = 0) is the model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.calibration import shape
from perfmodel.cost import CostBatch
from perfmodel.ops.base import FloatArray

CURVE_NAMES = ("log_overhead_scale", "compute_a", "compute_b", "compute_x0_log10", "compute_log_width",
               "memory_a", "memory_b", "memory_x0_log10", "memory_log_width")
NAMES = CURVE_NAMES + shape.NAMES
N_CURVE = len(CURVE_NAMES)
N_PARAMS = len(NAMES)
BLEND_POWER = 4.0  # sharpness of the compute/memory blend: 16x the time ratio -> 1 / (1 + 65536)
WIDTH_DECADES = 0.5  # prior width of the efficiency ramp (decades of size)
IDENTITY: FloatArray = np.array([0.0, 0.0, 0.0, 9.0, np.log(WIDTH_DECADES), 0.0, 0.0, 6.0, np.log(WIDTH_DECADES),
                                 *([0.0] * shape.N_SHAPE)])


@dataclass(frozen=True)
class Features:
    """What the form needs of each row of a ``CostBatch`` (SI units, log10 sizes)."""

    overhead_s: FloatArray
    body_s: FloatArray
    compute_share: FloatArray  # w_c in 0..1
    log10_flops: FloatArray  # log10 of FLOPs (= log10 bytes where an op has none)
    log10_bytes: FloatArray
    has_flops: np.ndarray[Any, np.dtype[np.bool_]]
    shape: FloatArray  # n x shape.N_SHAPE

    def take(self, index: np.ndarray[Any, np.dtype[np.intp]]) -> Features:
        return Features(*(getattr(self, name)[index] for name in self.__dataclass_fields__))


def features(batch: CostBatch, shape_rows: FloatArray | None = None) -> Features:
    """The form's inputs from a batch's breakdown (``shape_rows``: its ops' ``shape.shape_matrix`` when already
    known, e.g. computed once per distinct op)."""
    engines = [v for k, v in batch.time_s_by_engine.items() if k != "interconnect"]
    memory = [*batch.time_s_by_level.values(), batch.time_s_by_engine.get("interconnect", np.zeros(len(batch)))]
    t_c = np.max(np.vstack(engines), axis=0) if engines else np.zeros(len(batch))
    t_m = np.max(np.vstack(memory), axis=0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        share = 1.0 / (1.0 + (t_m / t_c) ** BLEND_POWER)
    share = np.where(t_c > 0, np.where(t_m > 0, share, 1.0), 0.0)
    log_bytes = np.log10(np.maximum(batch.compulsory_bytes, 1.0))
    flops = batch.flops
    has_flops = flops > 0
    log_flops = np.where(has_flops, np.log10(np.maximum(flops, 1.0)), log_bytes)
    body = np.maximum(batch.time_s - batch.overhead_s, 0.0)
    return Features(batch.overhead_s.astype(float), body, share, log_flops, log_bytes, has_flops,
                    shape.shape_matrix(batch.ops) if shape_rows is None else shape_rows)


def range_values(f: Features) -> FloatArray:
    """n x (2 + N_SHAPE): log10 FLOPs, log10 bytes and each shape number: what a calibrated range bounds."""
    out: FloatArray = np.column_stack([f.log10_flops, f.log10_bytes, f.shape])
    return out


def beyond(f: Features, low: FloatArray, high: FloatArray) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """n x (2 + N_SHAPE): which of log10 FLOPs, log10 bytes and each shape number lies outside [low, high]
    (rows of bounds in that order, or one row for all; a nan bound: nothing fitted, outside; an infinite
    one: no limit). FLOPs count only for ops that have FLOPs."""
    values = range_values(f)
    with np.errstate(invalid="ignore"):
        out: np.ndarray[Any, np.dtype[np.bool_]] = ~((values >= low - 1e-9) & (values <= high + 1e-9))
    out[:, 0] &= f.has_flops
    return out


def clip_shape(f: Features, low: FloatArray, high: FloatArray) -> Features:
    """``f`` with each shape number held inside [low, high] (per column, or n x N_SHAPE): a fitted
    shape coefficient is not extrapolated past the shapes it was fitted on, as the ramp is not."""
    return dataclasses.replace(f, shape=np.clip(f.shape, low, high))


def shape_range(f: Features) -> tuple[list[float], list[float]]:
    """Per shape number, the lowest and highest value in ``f`` (the fitted runs)."""
    if not f.shape.size:
        return [0.0] * shape.N_SHAPE, [0.0] * shape.N_SHAPE
    return f.shape.min(axis=0).tolist(), f.shape.max(axis=0).tolist()


def _sigmoid(z: FloatArray) -> FloatArray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def log_factor(theta: FloatArray, f: Features) -> FloatArray:
    """log(t_body_cal / t_body) per row; ``theta`` is one parameter vector or one per row (n x N_PARAMS)."""
    p = np.atleast_2d(theta)
    g_c = p[:, 1] + p[:, 2] * _sigmoid((p[:, 3] - f.log10_flops) / np.exp(p[:, 4]))
    g_m = p[:, 5] + p[:, 6] * _sigmoid((p[:, 7] - f.log10_bytes) / np.exp(p[:, 8]))
    beta = p[:, N_CURVE:]
    out: FloatArray = f.compute_share * g_c + (1.0 - f.compute_share) * g_m + np.sum(f.shape * beta, axis=1)
    return out


def time_s(theta: FloatArray, f: Features) -> FloatArray:
    """Calibrated seconds per row."""
    p = np.atleast_2d(theta)
    return np.exp(p[:, 0]) * f.overhead_s + f.body_s * np.exp(log_factor(p, f))


@dataclass(frozen=True)
class Evaluation:
    """The form at one parameter vector, with what its gradient reuses: per part (compute, memory) the ramp's
    argument z, its sigmoid and width (decades), and the calibrated floor, body and total seconds per row."""

    theta: FloatArray
    ramps: tuple[tuple[FloatArray, FloatArray, float], tuple[FloatArray, FloatArray, float]]
    floor_s: FloatArray
    body_s: FloatArray
    total_s: FloatArray


def evaluate(theta: FloatArray, f: Features) -> Evaluation:
    """``time_s`` for one parameter vector, keeping the parts ``log_time_gradient`` needs."""
    p = np.asarray(theta, dtype=float)
    ramps = []
    for first, size in ((1, f.log10_flops), (5, f.log10_bytes)):
        width = math.exp(p[first + 3])
        z = (p[first + 2] - size) / width
        ramps.append((z, _sigmoid(z), width))
    (_, sig_c, _), (_, sig_m, _) = ramps
    log_body = f.compute_share * (p[1] + p[2] * sig_c) + (1.0 - f.compute_share) * (p[5] + p[6] * sig_m)
    if f.shape.size:
        log_body = log_body + f.shape @ p[N_CURVE:]
    floor_s = math.exp(p[0]) * f.overhead_s
    body_s = f.body_s * np.exp(log_body)
    return Evaluation(p, (ramps[0], ramps[1]), floor_s, body_s, floor_s + body_s)


def log_time_gradient(theta: FloatArray, f: Features, columns: Sequence[int] | None = None,
                      at: Evaluation | None = None) -> FloatArray:
    """d log(t_cal) / d theta per row (n x N_PARAMS, or n x len(``columns``): those parameters only), ``theta`` one
    parameter vector: the Jacobian the fit uses. ``at``: ``evaluate(theta, f)`` when the caller has it."""
    e = evaluate(theta, f) if at is None else at
    p = e.theta
    wanted = range(N_PARAMS) if columns is None else columns
    total_s = np.maximum(e.total_s, 1e-300)
    body_share = e.body_s / total_s
    out: FloatArray = np.empty((len(total_s), len(wanted)))
    parts: dict[int, FloatArray] = {}  # body share x each part's blend weight, computed once
    betas = [column for column, i in enumerate(wanted) if i >= N_CURVE]
    if betas:  # d / d beta, every shape column at once
        out[:, betas] = body_share[:, None] * f.shape[:, [wanted[column] - N_CURVE for column in betas]]
    for column, i in enumerate(wanted):
        if i == 0:
            out[:, column] = e.floor_s / total_s  # d / d log o
        elif i >= N_CURVE:
            continue
        else:
            first = 1 if i < 5 else 5
            z, sig, width = e.ramps[0 if first == 1 else 1]
            if first not in parts:
                parts[first] = body_share * (f.compute_share if first == 1 else 1.0 - f.compute_share)
            part, offset = parts[first], i - first
            if offset == 0:
                out[:, column] = part  # d / d a
            elif offset == 1:
                out[:, column] = part * sig  # d / d b
            else:
                slope = part * (p[first + 1] * sig * (1.0 - sig))  # part x d g / d z
                out[:, column] = slope / width if offset == 2 else -slope * z  # d / d x0, d / d log width
    return out


def overhead_s(theta: FloatArray, f: Features) -> FloatArray:
    """Calibrated fixed overhead per row (seconds)."""
    return np.exp(np.atleast_2d(theta)[:, 0]) * f.overhead_s


# the parameters log time is linear in: floor scale, efficiencies and shape coefficients (not ramp centres, widths)
_SCALES = np.array([NAMES.index(name) for name in ("log_overhead_scale", "compute_a", "compute_b", "memory_a",
                                                   "memory_b", *shape.NAMES)])


def share(theta: FloatArray, weight: float) -> FloatArray:
    """``theta`` with ``weight`` of its correction: log overhead scale, a, b and the shape coefficients
    scaled by ``weight`` (ramp centres and widths kept), so log(t_body_cal / t_body) scales by ``weight``
    (0: the model, 1: ``theta``)."""
    out = np.array(theta, dtype=float)
    out[..., _SCALES] *= weight
    return out


def to_named(theta: FloatArray) -> dict[str, float]:
    return {name: float(v) for name, v in zip(NAMES, theta, strict=True)}


def from_named(named: dict[str, float]) -> FloatArray:
    """The parameter vector; shape coefficients absent (calibrations stored before them) are 0."""
    named = {**dict.fromkeys(shape.NAMES, 0.0), **named}
    missing = [n for n in NAMES if n not in named]
    if missing:
        raise ValueError(f"calibration parameters miss {', '.join(missing)}")
    return np.array([float(named[n]) for n in NAMES])
