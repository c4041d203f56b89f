"""benchmarks/lodo.py --screen (issue 24): each fold's rows predicted under this checkout's model with the defaults
that fold fitted in a saved --save-heldout run, not refitted. An unchanged model reproduces the saved run; a model
change moves only the rows it touches; a run saved without its fitted defaults is refused."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark

lodo = load_benchmark("lodo", "lodo_screen_benchmark")
data = sys.modules["measured_data"]

A100, A40, MI210 = "nvidia-a100-sxm4-80gb", "nvidia-a40", "amd-mi210"
LAYER_NORM = {"kind": "layernorm", "shape": [32, 2560], "dtype": "fp16", "vector_width": 4, "threads_per_row": 128}
COMPILED_NORM = {"kind": "layernorm", "shape": [4096, 4096], "dtype": "fp16"}
GELU = {"kind": "elementwise", "shape": [4096, 4096], "dtype": "fp16", "flops_per_element": 8,
        "transcendentals_per_element": 1}
# what two folds of a leave-one-device-out run chose (a kernel floor, a vendor's stream share, a harness term)
FITTED = {A100: {"kernel_overhead_s": 1.5e-6, "stream_dram_efficiency@nvidia": 0.9, "compiled_call_s": 30e-6},
          A40: {"kernel_overhead_s": 2.5e-6, "dram_latency_scale": 1.75}}


def _rows() -> list[Any]:
    return [data.Row("vidur", A100, LAYER_NORM, 7e-6, "kernel", "phi-2", "layernorm"),
            data.Row("llmcompass", A100, COMPILED_NORM, 8e-5, "host", "layernorm", "layernorm"),
            data.Row("vidur", A100, GELU, 5e-5, "kernel", "phi-2", "elementwise"),
            data.Row("vidur", A40, LAYER_NORM, 5e-6, "kernel", "phi-2", "layernorm"),
            data.Row("vidur", A40, GELU, 1.1e-4, "kernel", "phi-2", "elementwise")]


def _saved_run(tmp_path: Path, fitted: dict[str, dict[str, float]] | None = FITTED) -> tuple[list[Any], Any, Path]:
    """A saved run whose held-out predictions are what run_folds predicts with ``fitted``."""
    rows = _rows()
    fold_of = np.array([r.hardware for r in rows])
    shipped_defaults = {hw: lodo.defaults_for(lodo.load_hardware(hw)) for hw in (A100, A40)}
    predicted = np.full(len(rows), np.nan)
    for fold, choice in (fitted or FITTED).items():
        held = np.nonzero(fold_of == fold)[0]
        model, harness = lodo._split(choice)
        predicted[held] = lodo._predict([rows[i] for i in held], lodo.with_model(shipped_defaults, model), harness)
    folds = lodo.Folds(predicted, lodo._predict(rows, shipped_defaults), fitted or {})
    path = tmp_path / "run.npz"
    lodo.save_heldout(path, rows, fold_of, folds)
    return rows, folds, path


def test_an_unchanged_model_screens_to_the_saved_run(tmp_path: Path) -> None:
    rows, saved, path = _saved_run(tmp_path)
    fold_of = np.array([r.hardware for r in rows])
    screened = lodo.screen_folds(rows, fold_of, path)
    assert np.array_equal(screened.predicted, saved.predicted)
    assert np.array_equal(screened.shipped, saved.shipped)
    assert screened.fitted == FITTED
    # the folds' values matter: the A100's layer norm with its 1.5 us floor, not the shipped 2 us
    shipped_only = lodo._predict(rows[:1], {A100: lodo.defaults_for(lodo.load_hardware(A100))})
    assert screened.predicted[0] == pytest.approx(shipped_only[0] - 0.5e-6, rel=1e-9)
    # the compiled call pays its fold's harness term
    assert screened.predicted[1] - screened.shipped[1] > 25e-6


def test_a_model_change_moves_only_the_rows_it_touches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows, saved, path = _saved_run(tmp_path)
    fold_of = np.array([r.hardware for r in rows])
    norm = sys.modules["perfmodel.ops.norm"]
    work = norm.LayerNorm.work.__func__

    def doubled_reads(cls: type, ops: Any, granularity_bytes: float = 1.0) -> Any:
        out = work(cls, ops, granularity_bytes)
        out.bytes_by_role["activations_in"] = 2.0 * out.bytes_by_role["activations_in"]
        return out

    monkeypatch.setattr(norm.LayerNorm, "work", classmethod(doubled_reads))
    screened = lodo.screen_folds(rows, fold_of, path)
    layer_norm = np.array([r.label == "layernorm" for r in rows])
    assert np.all(screened.predicted[layer_norm] > saved.predicted[layer_norm])
    assert np.array_equal(screened.predicted[~layer_norm], saved.predicted[~layer_norm])


def test_keep_predicts_only_the_kept_rows(tmp_path: Path) -> None:
    rows, saved, path = _saved_run(tmp_path)
    fold_of = np.array([r.hardware for r in rows])
    keep = np.array([r.label == "layernorm" for r in rows])
    screened = lodo.screen_folds(rows, fold_of, path, keep)
    assert np.array_equal(screened.predicted[keep], saved.predicted[keep])
    assert np.isnan(screened.predicted[~keep]).all() and np.isnan(screened.shipped[~keep]).all()


def test_a_run_saved_without_fitted_defaults_or_of_other_rows_is_refused(tmp_path: Path) -> None:
    rows, _, path = _saved_run(tmp_path)
    fold_of = np.array([r.hardware for r in rows])
    with pytest.raises(SystemExit, match="not a --save-heldout run"):
        lodo.screen_folds(rows[:-1], fold_of[:-1], path)
    old = tmp_path / "old.npz"
    stored = dict(np.load(path))
    stored.pop("fitted")
    np.savez_compressed(old, **stored)
    with pytest.raises(SystemExit, match="saved without the fitted defaults"):
        lodo.screen_folds(rows, fold_of, old)
    assert lodo.heldout_folds(rows, fold_of, old).predicted.size == len(rows)  # --from-heldout still reads it
