"""Both sides of a comparison read side by side (``load.file_sides``: the new one in a forked child process):
the same sides, the same errors in the same order as reading them in turn, and a child that dies costs only time."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfmodel.compare import load
from perfmodel.compare.diff import CompareError
from tests.compare.conftest import HTA_0, RESNET_0, trace_path

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or load._usable_cpus() < 2, reason="needs fork and 2 CPUs")


@pytest.fixture
def in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(load.PARALLEL_ENV, "1")
    monkeypatch.setattr(load, "PARALLEL_MIN_BYTES", 0)  # small real traces go through the child too
    _as_single_threaded(monkeypatch)


def _as_single_threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's other tests leave threads running (servers, job workers, xdist's); the child here only reads a
    file and sends its side back, so the one-thread rule (which guards users' processes) is waived for the test."""
    monkeypatch.setattr(load, "threading", SimpleNamespace(active_count=lambda: 1))


def test_sides_read_side_by_side_are_the_sides_read_in_turn(in_parallel: None) -> None:
    base, new = trace_path(RESNET_0), trace_path(HTA_0)
    assert load._in_parallel(base, new)
    together = load.file_sides(base, new)
    assert repr(together) == repr((load.file_side(base), load.file_side(new)))
    assert together[1].groups  # the child's side came back whole


def test_small_files_are_read_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    base, new = trace_path(RESNET_0), trace_path(HTA_0)
    monkeypatch.setenv(load.PARALLEL_ENV, "1")
    _as_single_threaded(monkeypatch)
    assert not load._in_parallel(base, new)  # 1.2 MB together: a fork would not pay
    monkeypatch.setattr(load, "PARALLEL_MIN_BYTES", 0)
    assert load._in_parallel(base, new)
    monkeypatch.delenv(load.PARALLEL_ENV)  # not asked for: in turn, whatever the size
    assert not load._in_parallel(base, new)
    monkeypatch.setattr(load, "_SideInChild", None)  # any use of a child would fail
    assert repr(load.file_sides(base, new)) == repr((load.file_side(base), load.file_side(new)))


def test_errors_as_when_read_in_turn(in_parallel: None, tmp_path: Path) -> None:
    good = trace_path(RESNET_0)
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel"')
    other = tmp_path / "other.json"
    other.write_text("not a trace")
    with pytest.raises(CompareError) as in_turn:
        load.file_side(broken)
    with pytest.raises(CompareError) as from_child:  # the new side's error, raised by the child
        load.file_sides(good, broken)
    assert str(from_child.value) == str(in_turn.value)
    with pytest.raises(CompareError, match=r"broken\.json"):  # the base's error first; the child is stopped
        load.file_sides(broken, other)
    assert multiprocessing.active_children() == []


def _dies(path: Path, send: object) -> None:
    os._exit(3)


def test_a_child_that_dies_is_read_here(in_parallel: None, monkeypatch: pytest.MonkeyPatch) -> None:
    base, new = trace_path(HTA_0), trace_path(RESNET_0)
    monkeypatch.setattr(load, "_child_side", _dies)
    assert repr(load.file_sides(base, new)) == repr((load.file_side(base), load.file_side(new)))


def test_a_process_with_other_threads_reads_in_turn(in_parallel: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork copies no other thread's locks: with a second thread alive the new side is read here."""
    monkeypatch.setattr(load, "threading", SimpleNamespace(active_count=lambda: 2))
    assert not load._in_parallel(trace_path(RESNET_0), trace_path(HTA_0))
