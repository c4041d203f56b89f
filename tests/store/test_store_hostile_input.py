"""Input the drivers cannot take (ids beyond INTEGER, NUL, lone surrogates): a StoreError on writes, "nothing
found" on reads, never a driver error (which the service would turn into a 500)."""

from __future__ import annotations

import pytest

from perfmodel.store import NotFound, RunIn, Store, StoreError

HUGE = [0, -1, 2**31, 2**64, 10**30]
BAD_TEXT = ["a\x00b", "\ud800"]


@pytest.mark.parametrize("run_id", HUGE)
def test_ids_out_of_range_find_nothing(store: Store, run_id: int) -> None:
    store.add_run(RunIn("h100", {"kind": "matmul"}, 1e-3, "s"))
    assert store.get_run(run_id) is None
    assert store.delete_run(run_id) is False
    assert store.get_trace_upload(run_id) is None
    assert store.get_calibration(run_id) is None
    assert store.list_runs(trace_upload_id=run_id) == ([], 0)
    with pytest.raises(NotFound):
        store.update_trace_upload(run_id, "parsed")
    with pytest.raises(StoreError):
        store.add_run(RunIn("h100", {"kind": "matmul"}, 1e-3, "s", trace_upload_id=run_id))
    with pytest.raises(StoreError):
        store.list_runs(offset=2**64)
    assert store.list_runs()[1] == 1


@pytest.mark.parametrize("text", BAD_TEXT)
def test_unstorable_text(store: Store, text: str) -> None:
    runs = [RunIn(text, {"kind": "matmul"}, 1e-3, "s"), RunIn("h", {"kind": text}, 1e-3, "s"),
            RunIn("h", {"kind": "matmul"}, 1e-3, text), RunIn("h", {"kind": "matmul"}, 1e-3, "s", {"k": text}),
            RunIn("h", {"kind": "matmul"}, 1e-3, "s", {text: "v"}), RunIn("h", {"kind": "m"}, 1e-3, "s", {}, text)]
    if text == "\ud800":  # not even JSON can carry a lone surrogate to the database
        runs.append(RunIn("h", {"kind": "matmul", "name": text}, 1e-3, "s"))
    for run in runs:
        with pytest.raises(StoreError):
            store.add_run(run)
    with pytest.raises(StoreError):
        store.add_hardware(text, {}, None, "h")
    with pytest.raises(StoreError):
        store.create_token(text)
    assert store.get_hardware(text) is None and store.delete_hardware(text) is False
    assert store.revoke_token(text) is False and store.verify_token(text) is None
    assert store.latest_calibration(text) is None and store.list_calibrations(text) == []
    assert store.list_trace_uploads(text) == []
    for filters in ({"hardware_id": text}, {"op_kind": text}, {"source": text}, {"tags": {text: "v"}},
                    {"tags": {"k": text}}):
        assert store.list_runs(**filters) == ([], 0)
    assert store.list_runs()[1] == 0


@pytest.mark.parametrize("text", BAD_TEXT)
def test_nul_inside_json_is_refused_naming_its_path(store: Store, text: str) -> None:
    """The json column type would keep NUL (escaped \\u0000) on both backends, but a NUL in stored text is
    refused everywhere, JSON included, as in a text column (qa16: a custom device's name was stored with one)."""
    with pytest.raises(StoreError, match=r"^op\.name: NUL"):
        store.add_run(RunIn("h", {"kind": "matmul", "name": text}, 1e-3, "s"))
    with pytest.raises(StoreError, match=r"^spec\.engines\.0\.name: NUL"):
        store.add_hardware("x", {"name": "x", "engines": [{"name": text}]}, None, "0" * 64)
    assert store.list_runs()[1] == 0 and store.get_hardware("x") is None
