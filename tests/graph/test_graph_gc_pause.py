"""Building and estimating a model graph pause the cyclic collector (its many acyclic nodes would set off
collections again and again) and resume it afterwards, also after an error; the answers do not change."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from perfmodel.graph import LlmWorkload, Parallelism, build_llm, bundled, estimate, llm_build
from perfmodel.graph.ir import GraphError


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:  # a test that turned it off leaves it as it found it
        gc.enable()
    else:
        gc.disable()


def test_build_and_estimate_run_without_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    layer = llm_build._layer

    def spy(*args: object) -> str:
        seen.append(gc.isenabled())
        return layer(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(llm_build, "_layer", spy)
    workload = LlmWorkload(phase="decode", batch=2, kv_len=256)
    graph = build_llm(bundled("llama-3-8b"), workload, Parallelism(tp=2))
    assert seen and not any(seen)
    assert gc.isenabled()
    first = estimate(graph, "nvidia-h100-sxm5-80gb").step_time_s
    assert gc.isenabled()
    gc.disable()  # the same answer with the collector off throughout
    again = estimate(build_llm(bundled("llama-3-8b"), workload, Parallelism(tp=2)), "nvidia-h100-sxm5-80gb")
    assert not gc.isenabled()
    assert again.step_time_s == first


def test_an_error_resumes_the_collector() -> None:
    with pytest.raises(GraphError):
        build_llm(bundled("llama-3-8b"), LlmWorkload(), Parallelism(pp=1000))
    assert gc.isenabled()
