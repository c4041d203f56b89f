"""Residual trees: one boosted tree ensemble per device over all its fitted classes, averaged with the curve.

The curve and local correction (``curve``, ``local``) are fitted per op class and dtype, and see an op
only through its size and a few shape numbers. Libraries choose kernels on the raw dimensions (N = 16
against N = 32, a 1×1 stride-2 filter, fp16 against fp32) and those choices repeat across classes: a
shape's forward and backward, its two dtypes. The residual trees see every class of the device at once
and every raw field of each op (log2 of each integer, flags, names), plus the class, the size, the
shape numbers and the model's own log time, and learn log(t_measured / t_model) with least-absolute-
deviation boosting (``trees``). Predictions take the geometric mean of the two:

    t → t_curve^(1 − w) · (t_model · exp(trees(x)))^w,   w = ``WEIGHT``

Two different learners, averaged, miss less often than either (the scoreboard's DeepBench held-out rows
more than 20 % off: 337 without the trees, 284 with them; docs/accuracy.md). They are kept only where
cross-validation over distinct ops says so: the trees fitted on the other folds predict each fold, the
calibration without trees gives its own out-of-fold residuals (no refit: ``build._out_of_fold``), and the
average must not be worse than the calibration alone by ``MARGIN``. Only rows of a class fitted on this device
use them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.calibration import curve, shape
from perfmodel.calibration.fields import field_matrix, op_fields
from perfmodel.calibration.fit import abs_pct, cv_subset, fold_ids, held_out_loss
from perfmodel.calibration.trees import TreeEnsemble, fit_trees, held_out_predict
from perfmodel.ops.base import FloatArray, IntArray, Op

WEIGHT = 0.5  # share of the trees in the log-time average
MIN_OPS = 50  # distinct ops (over the device's fitted classes) before trees are tried
# the average's held-out loss must stay below MARGIN x the calibration's alone. 1.0 dropped the trees of the
# swapped Vidur A100, whose held-out model families they helped (embedding p90 18 -> 31 %): its folds hold out
# random ops of the fitted families, not new families, so trees near-neutral there still carry. Per-class
# shares chosen on the same folds were tried: noisier (default split GEMM-like p90 19.9 -> 20.4 %). Trees that
# only add noise (an exact curve) lose by far more than 5 %.
MARGIN = 1.05
# folds of the trees' cross-validation (each a boosting run on the other folds' ops). 3 folds (runs on 2/3 of the
# ops) kept the trees in the same 14 scoreboard fits (both splits) with the same held-out errors to 0.1 %; 2 folds
# train 2 x 1/2 of the rows instead of 3 x 2/3 (with the final fit on all: 3 boosting runs over 2x the rows, not 4
# over 3x).
# Their held-out view is more pessimistic (trees on half the ops): coverage DeepBench 0.81 -> 0.84 (default split).
FOLDS = 2
MAX_RUNS = 12000  # runs the trees are fitted on at most (whole distinct ops drawn at random beyond)


def _matrix(f: curve.Features, model_s: FloatArray, per_op: Sequence[dict[str, float]], keys: Sequence[str],
            classes: Sequence[str], fields: Sequence[str]) -> FloatArray:
    """One row per op: class code, log10 FLOPs, log10 bytes, compute share, log model time, shape numbers,
    then ``fields`` from each op's ``op_fields`` (nan where an op has none, or a class the trees never saw)."""
    column = {name: j for j, name in enumerate(fields)}
    raw = np.full((len(per_op), len(fields)), math.nan)
    for i, values in enumerate(per_op):
        for name, value in values.items():
            j = column.get(name)
            if j is not None:
                raw[i, j] = value
    return _with_head(f, model_s, keys, classes, raw)


def _with_head(f: curve.Features, model_s: FloatArray, keys: Sequence[str], classes: Sequence[str],
               raw: FloatArray, key_index: IntArray | None = None) -> FloatArray:
    """``_matrix``'s row: the class code, sizes, compute share, log model time and shape numbers, then ``raw``
    (``key_index``: each row's position in ``keys``, then the distinct keys; None: ``keys`` one per row)."""
    code = {k: float(i) for i, k in enumerate(classes)}
    with np.errstate(divide="ignore"):
        log_model = np.log(model_s)
    codes = np.array([code.get(k, math.nan) for k in keys], dtype=float).reshape(len(keys))
    head = np.column_stack([codes if key_index is None else codes[key_index], f.log10_flops, f.log10_bytes,
                            f.compute_share, log_model, f.shape])
    out: FloatArray = np.column_stack([head, raw])
    return out


def _head_into(x: FloatArray, f: curve.Features, model_s: FloatArray, keys: Sequence[str], classes: Sequence[str],
               key_index: IntArray | None) -> None:
    """``_with_head``'s head columns written into the first columns of ``x`` (the same numbers)."""
    code = {k: float(i) for i, k in enumerate(classes)}
    codes = np.array([code.get(k, math.nan) for k in keys], dtype=float).reshape(len(keys))
    x[:, 0] = codes if key_index is None else codes[key_index]
    x[:, 1], x[:, 2], x[:, 3] = f.log10_flops, f.log10_bytes, f.compute_share
    with np.errstate(divide="ignore"):
        np.log(model_s, out=x[:, 4])
    x[:, 5:5 + shape.N_SHAPE] = f.shape


@dataclass(frozen=True)
class ResidualTrees:
    """The device's trees, the class codes and raw field names their columns mean, and their weight."""

    trees: TreeEnsemble
    classes: list[str]
    fields: list[str]
    weight: float = WEIGHT

    def log_factor(self, f: curve.Features, model_s: FloatArray, ops: Sequence[Op], keys: Sequence[str],
                   curve_s: FloatArray, per_op: Sequence[dict[str, float]] | None = None,
                   key_index: IntArray | None = None) -> FloatArray:
        """log(t_new / t_curve) per op (its features ``f``, model and curve seconds, class key; ``key_index``: each
        op's position in ``keys``, then the distinct keys; ``per_op``: each op's ``op_fields`` when already known;
        else the ops' fields are read a field and op class at a time, ``field_matrix``: the same numbers, those of
        the fields no tree splits on left nan: never read, ``_split_fields``)."""
        if not len(ops):
            return np.zeros(0)
        if per_op is None:  # the fields written into the matrix's own columns: no second copy of it
            x = np.empty((len(ops), 5 + shape.N_SHAPE + len(self.fields)))
            field_matrix(ops, self._split_fields, out=x[:, 5 + shape.N_SHAPE:])
            _head_into(x, f, model_s, keys, self.classes, key_index)
        else:
            if key_index is not None:
                keys = [keys[int(i)] for i in key_index]
            x = _matrix(f, model_s, per_op, keys, self.classes, self.fields)
        out: FloatArray = self.weight * (np.log(model_s) + self.trees.predict(x) - np.log(curve_s))
        return out

    @functools.cached_property
    def _split_fields(self) -> list[str]:
        """``fields`` with each one no tree splits on as "" (a name no op's field has: its column stays nan)."""
        head = 5 + shape.N_SHAPE  # the columns before the fields (``_with_head``)
        used = set((self.trees.feature[self.trees.feature >= head] - head).tolist())
        return [name if j in used else "" for j, name in enumerate(self.fields)]

    def to_json(self) -> dict[str, Any]:
        return {"weight": self.weight, "classes": self.classes, "fields": self.fields, **self.trees.to_json()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ResidualTrees:
        classes, fields, weight = data.get("classes"), data.get("fields"), data.get("weight")
        if not isinstance(classes, list) or not isinstance(fields, list) or not all(
                isinstance(v, str) for v in [*classes, *fields]):
            raise ValueError("calibration residual trees: classes and fields must be lists of names")
        if not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
            raise ValueError(f"calibration residual trees: weight {weight!r}: expected a number from 0 to 1")
        trees = TreeEnsemble.from_json(data)
        if trees.features > 5 + shape.N_SHAPE + len(fields):
            raise ValueError("calibration residual trees: a split on a column beyond the stored fields")
        return ResidualTrees(trees, list(classes), list(fields), float(weight))


def fit_residual_trees(f: curve.Features, model_s: FloatArray, ops: Sequence[Op], keys: Sequence[str],
                       measured_s: FloatArray, groups: IntArray, without_cv: FloatArray, seed: int = 0,
                       fold: IntArray | None = None,
                       progress: Callable[[float], None] | None = None) -> tuple[ResidualTrees | None, dict[str, Any],
                                                                                 FloatArray]:
    """Trees on these runs (those of classes fitted on this device: features ``f``, model seconds, ops, class
    keys, measured seconds, distinct-op ids), kept if they earn it.

    ``without_cv``: each run's out-of-fold log residual log(t_measured / t_cal) of the calibration without
    trees (its class's curve refitted without the run's fold, its local correction smoothed over the other
    folds' ops; nan: none). The trees' own held-out residuals come from ``FOLDS`` folds over distinct ops
    (``fold``: the same folds as the local correction's; default ``fold_ids``); no calibration is refitted.
    ``progress``: called with the fraction done (0..1) every few boosting rounds of each fold.
    Returns the trees (or None), what the report says of them, and each run's out-of-fold log residual of the
    calibration with the trees averaged in (``without_cv`` when they are not kept; nan for runs left out of the
    trees' fit): the band of the predictions made (``build._rebanded``).
    """
    held_out = np.array(without_cv, dtype=float)
    keep = np.arange(held_out.size)
    groups = np.unique(groups, return_inverse=True)[1]
    distinct = int(groups.max()) + 1 if groups.size else 0
    report: dict[str, Any] = {"runs": int(measured_s.size), "distinct_ops": distinct, "kept": False,
                              "weight": WEIGHT, "folds": FOLDS}
    if distinct < MIN_OPS:
        report["reason"] = f"fewer than {MIN_OPS} distinct ops"
        return None, report, held_out
    if groups.size > MAX_RUNS:  # bounded work: whole distinct ops drawn at random
        keep = np.flatnonzero(cv_subset(groups, MAX_RUNS, seed))
        f, model_s, measured_s, groups, without_cv = (f.take(keep), model_s[keep], measured_s[keep], groups[keep],
                                                      without_cv[keep])
        ops, keys = [ops[int(i)] for i in keep], [keys[int(i)] for i in keep]
        fold = None if fold is None else fold[keep]
        report["fitted_runs"] = int(keep.size)
    classes = sorted(set(keys))
    first = np.unique(groups, return_index=True)[1]  # one op_fields per distinct op (Op.to_dict is slow)
    fields_of = {int(groups[i]): op_fields(ops[int(i)]) for i in first}
    per_op = [fields_of[int(g)] for g in groups]
    fields = sorted({name for values in per_op for name in values})
    x = _matrix(f, model_s, per_op, keys, classes, fields)
    target = np.log(measured_s / model_s)
    if fold is None:
        fold = fold_ids(groups, FOLDS, seed)
    trees_cv = np.full(measured_s.size, math.nan)
    def step(j: int) -> Callable[[float], None]:
        return lambda done: progress((j + done) / (FOLDS + 1)) if progress is not None else None

    for j in range(FOLDS):
        test = fold == j
        if test.all() or not test.any():
            continue
        trees_cv[test] = target[test] - held_out_predict(x[~test], target[~test], x[test], seed=seed,
                                                         progress=step(j))
    scored = np.isfinite(without_cv)
    both = (1.0 - WEIGHT) * without_cv + WEIGHT * trees_cv
    without_loss, both_loss = held_out_loss(without_cv[scored]), held_out_loss(both[scored])
    report["cv"] = {"without_trees": abs_pct(without_cv[scored]), "with_trees": abs_pct(both[scored]),
                    "trees_alone": abs_pct(trees_cv), "scored_runs": int(scored.sum())}
    if not scored.any() or both_loss >= MARGIN * without_loss:
        report["reason"] = (f"the average's held-out error was {100 * (MARGIN - 1):.0f} % or more above the "
                            "calibration's without them")
        return None, report, held_out
    report["kept"] = True
    held_out[:] = math.nan
    held_out[keep] = np.where(np.isfinite(trees_cv), both, without_cv)
    return ResidualTrees(fit_trees(x, target, seed=seed, progress=step(FOLDS)), classes, fields), report, held_out


__all__ = ["MIN_OPS", "WEIGHT", "ResidualTrees", "fit_residual_trees", "op_fields"]
