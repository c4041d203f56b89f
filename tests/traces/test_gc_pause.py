"""``gc_pause``: the cyclic collector is off inside a pause, back on after the last of nested ones (and after an
error), left off where it was off; parsing pauses it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from trace_builders import DATA

from perfmodel.traces import parse_trace
from perfmodel.traces.gc_pause import gc_paused, without_gc


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_nested_pauses_resume_after_the_last() -> None:
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_resumes_the_collector() -> None:
    gc.enable()

    @without_gc
    def fails() -> None:
        assert not gc.isenabled()
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        fails()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_parsing_pauses_and_resumes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from perfmodel.traces import kineto

    seen: list[bool] = []
    original = kineto.parse_kineto

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kineto, "parse_kineto", spy)
    gc.enable()
    parsed = parse_trace(DATA / "triton_example__triton_example.json.gz")
    assert parsed.kernels and seen == [False] and gc.isenabled()


def test_matching_pauses_and_resumes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from perfmodel.traces import match_runs, matching

    parsed = parse_trace(DATA / "triton_example__triton_example.json.gz")
    seen: list[bool] = []
    original = matching._kernel_op

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(matching, "_kernel_op", spy)
    gc.enable()
    match_runs(parsed)
    assert seen and not any(seen) and gc.isenabled()
