"""A calibration never fits trace runs sized from their kernel launch alone (lower bounds of their work) unless
they are asked for by their tag; on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from perfmodel.calibration.stored import fit_selected
from perfmodel.specs import load_hardware
from perfmodel.store import RunIn, Store

A100 = "nvidia-a100-sxm4-80gb"


def _gemms(tags: dict[str, str], slower: float) -> list[RunIn]:
    return [RunIn(hardware_id=A100, op={"kind": "matmul", "m": m, "n": n, "k": 1024, "dtype": "fp16"},
                  measured_time_s=1e-5 * slower * m * n / 2**20, source="trace", tags=tags, dtype="fp16")
            for m in (256, 512, 1024, 2048, 4096) for n in (256, 1024, 4096, 8192)]


def test_launch_geometry_runs_are_left_out_unless_asked_for(store: Store) -> None:
    hardware = load_hardware(A100)
    store.add_runs(_gemms({"match_source": "framework shapes"}, 1.0))
    store.add_runs(_gemms({"match_source": "launch geometry"}, 30.0))
    fitted = fit_selected(store, hardware, {}, min_runs=5)
    assert (fitted.report["runs_used"], fitted.report["runs_lower_bound_excluded"]) == (20, 20)
    asked = fit_selected(store, hardware, {"tags": {"match_source": "launch geometry"}}, min_runs=5)
    assert (asked.report["runs_used"], asked.report["runs_lower_bound_excluded"]) == (20, 0)


def test_only_lower_bound_runs_is_a_clear_error(store: Store) -> None:
    store.add_runs(_gemms({"match_source": "launch geometry"}, 30.0))
    with pytest.raises(ValueError, match="launch geometry"):
        fit_selected(store, load_hardware(A100), {}, min_runs=5)
