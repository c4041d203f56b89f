"""Trace upload tags (commit, versions, clocks, environment): stored with the upload and on its runs, checked."""

from __future__ import annotations

import io

import pytest

from perfmodel.specs import load_hardware
from perfmodel.store import Store, StoreError
from perfmodel.store.tags import check_tags, parse_tags, tag_line
from perfmodel.traces.ingest import ingest_trace

TRACE = (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 9,'
         b' "args": {"External id": 1, "Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"]}},'
         b' {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 2, "dur": 5,'
         b' "args": {"External id": 1, "device": 0, "stream": 7}}]}')


def test_tags_round_trip_on_the_upload_and_its_runs(store: Store) -> None:
    tags = {"commit": "3f2a9c1", "environment": "Silicon", "cuda": "12.4"}
    done = ingest_trace(store, load_hardware("nvidia-a100-sxm4-80gb"), io.BytesIO(TRACE), "mm.json", tags=tags)
    upload = store.get_trace_upload(done.upload_id)
    assert upload is not None and upload.tags == {"commit": "3f2a9c1", "environment": "silicon", "cuda": "12.4"}
    assert store.list_trace_uploads()[0].tags == upload.tags
    runs, _ = store.list_runs(hardware_id="nvidia-a100-sxm4-80gb", tags={"commit": "3f2a9c1"})
    assert runs and all(r.tags["commit"] == "3f2a9c1" and r.tags["environment"] == "silicon" for r in runs)
    plain = store.add_trace_upload("nvidia-a100-sxm4-80gb", "x.json", "unknown", 1, "0" * 64, status="failed")
    assert store.get_trace_upload(plain).tags == {}  # type: ignore[union-attr]


@pytest.mark.parametrize(("tags", "message"), [
    ({"environment": "cloud"}, "expected one of silicon, emulator, simulator, fpga"),
    ({"9lives": "x"}, "starting with a letter"), ({"commit": ""}, "non-empty"), ({"commit": "x" * 401}, "at most 400"),
    ({f"k{i}": "v" for i in range(33)}, "at most 32"),
])
def test_bad_tags_are_clear_errors(tags: dict[str, str], message: str) -> None:
    with pytest.raises(StoreError, match=message):
        check_tags(tags)


def test_tags_from_key_value_texts() -> None:
    assert parse_tags(["commit=abc", "environment=FPGA, cuda=12.4\nclocks=locked 1410 MHz"]) == {
        "commit": "abc", "environment": "fpga", "cuda": "12.4", "clocks": "locked 1410 MHz"}
    assert tag_line({"cuda": "12.4", "environment": "fpga", "commit": "abc"}) == "commit=abc environment=fpga cuda=12.4"
    with pytest.raises(StoreError, match="expected key=value"):
        parse_tags(["commit"])
