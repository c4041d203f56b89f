"""The chunked Kineto event reader gives what the reference reader (ijson over the whole file) gives: the same
records from real traces, cuts that fall inside strings, odd events, tails after the array, broken files."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
from trace_builders import DATA

from perfmodel.traces import TraceError, kineto, kineto_events, parse_trace
from perfmodel.traces.kineto_events import Event, iter_event_batches, reference_event_batches

REAL = [DATA / "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz",
        DATA / "negative_queue_length_values_check__rank0.json.gz",
        DATA / "host_cpu_linear_train.pt.trace.json.gz",
        DATA / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"]


def _reference(stream: BinaryIO, top_level_list: bool) -> Iterator[list[Event]]:
    return reference_event_batches(stream, top_level_list)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name[:40])
def test_real_traces_give_the_reference_readers_records(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_events, "CHUNK_BYTES", 64 * 1024)  # many cuts
    fast = parse_trace(path)
    monkeypatch.setattr(kineto, "iter_event_batches", _reference)
    reference = parse_trace(path)
    assert fast.kernels == reference.kernels and len(fast.kernels) > 0
    assert fast.warnings == reference.warnings


def _kernel(i: int, name: str = "k") -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": i * 3, "dur": 2,
            "args": {"correlation": i, "device": 0, "stream": 7, "grid": [i + 1, 1, 1]}}


def _events(data: bytes, top_level_list: bool = False) -> list[Event]:
    return [e for batch in iter_event_batches(io.BytesIO(data), top_level_list) for e in batch]


def test_cuts_inside_strings_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_events, "CHUNK_BYTES", 200)
    tricky = 'void f<{lambda()#1}, {x}>},{"ph":"X"},'  # looks like an event's end inside a name
    events = [_kernel(i, tricky * (i % 3)) for i in range(300)]
    read = _events(json.dumps({"traceEvents": events}).encode())
    assert [e.name for e in read] == [e["name"] for e in events]
    assert [e.args.correlation for e in read if e.args] == list(range(300))


def test_odd_events_and_args_are_skipped_as_before() -> None:
    events: list[object] = [_kernel(0), 5, "text", None, {**_kernel(1), "args": [1, 2]}, {"ph": "X"}, _kernel(2)]
    read = _events(json.dumps({"traceEvents": events}).encode())
    assert [e.args.correlation if e.args else None for e in read] == [0, None, None, 2]


def test_a_top_level_list_and_an_empty_array() -> None:
    assert [e.ts for e in _events(json.dumps([_kernel(0), _kernel(1)]).encode(), True)] == [0, 3]
    assert _events(b'{"traceEvents": [ ], "x": [{"a": 1}]}') == []


def test_the_tail_after_the_array_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_events, "CHUNK_BYTES", 128)
    events = [_kernel(i) for i in range(40)]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events, "deviceProperties": [{"name": "A"}, {"id": 1}]})
    assert len(_events(text.encode())) == 40
    with pytest.raises(TraceError, match=r"JSON|truncated"):
        _events(text.encode()[:-1])  # the closing brace missing
    with pytest.raises(TraceError, match=r"JSON|truncated"):
        _events(text.encode()[: len(text) // 2])  # cut mid-array


def test_broken_json_mid_array_is_the_reference_readers_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_events, "CHUNK_BYTES", 256)
    good = ",".join(json.dumps(_kernel(i)) for i in range(100))
    text = '{"traceEvents": [' + good + ', {"ph": "X", "cat": kernel}, ' + good + "]}"
    with pytest.raises(TraceError, match="not valid JSON"):
        _events(text.encode())


@pytest.mark.parametrize("separator", [",", " ,\n ", "\n,", ", "])
def test_cuts_with_spaces_before_the_comma_decode_in_place(separator: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto_events, "CHUNK_BYTES", 150)  # the piece's closing ] written over the byte after a cut
    events = [_kernel(i, "k},{" * (i % 2)) for i in range(200)]
    text = '{"traceEvents": [' + separator.join(json.dumps(e) for e in events) + "]}"
    read = _events(text.encode())
    assert [(e.name, e.ts, e.args.correlation if e.args else None) for e in read] == [
        (e["name"], e["ts"], i) for i, e in enumerate(events)]
    grids = [e.args.grid for e in read if e.args]  # raw JSON, or decoded where the reader fell back to ijson
    assert [g if isinstance(g, list) else json.loads(bytes(g)) for g in grids] == [[i + 1, 1, 1] for i in range(200)]
