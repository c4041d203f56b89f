"""What estimates keep across calls (GEMM choices, fused windows, the ops' work and roles, built ops) changes no
answer: a repeat estimate's report equals a cold one's, and equals the layer-by-layer build's."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from perfmodel.graph import LlmWorkload, Parallelism, build_llm, bundled, estimate
from perfmodel.search import gemm_kernel

H100 = "nvidia-h100-sxm5-80gb"
estimate_module = importlib.import_module("perfmodel.graph.estimate")  # the package exports the function


def _report(name: str, workload: LlmWorkload, par: Parallelism, copy_layers: bool = True) -> str:
    est = estimate(build_llm(bundled(name), workload, par, copy_layers=copy_layers), H100, space="full",
                   check_memory=False)
    return json.dumps(est.to_json(), sort_keys=True)


@pytest.mark.parametrize(("name", "phase"), [("llama-3.1-405b", "decode"), ("mixtral-8x7b", "prefill"),
                                             ("gpt2", "train")])
def test_a_repeat_estimate_equals_a_cold_one(name: str, phase: str, monkeypatch: pytest.MonkeyPatch) -> None:
    gemm_kernel.load()
    workload = LlmWorkload(phase=phase, batch=8, prompt_tokens=512, kv_len=2048)  # type: ignore[arg-type]
    par = Parallelism(tp=4, pp=2, devices_per_node=8)
    estimate_module.clear_kept()
    cold = _report(name, workload, par)
    calls: list[int] = []
    real = estimate_module.work_of

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(estimate_module, "work_of", counting)
    warm = _report(name, workload, par)
    assert calls == []  # the ops' work and roles came from the first estimate
    monkeypatch.undo()
    assert warm == cold
    estimate_module.clear_kept()
    assert _report(name, workload, par, copy_layers=False) == cold


def test_kept_work_is_read_only() -> None:
    estimate_module.clear_kept()
    graph = build_llm(bundled("llama-3-8b"), LlmWorkload(), Parallelism(tp=2))
    est = estimate(graph, H100, space="compact")
    compiled = estimate_module.compile_graph(graph)
    work = compiled.work(float(est.hardware.dram.access_granularity_bytes or 1))
    assert work is compiled.work(float(est.hardware.dram.access_granularity_bytes or 1))
    with pytest.raises(ValueError):
        work.gemm_m[0] = 0.0


def test_a_graph_with_more_distinct_ops_than_kept_keeps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    estimate_module.clear_kept()
    monkeypatch.setattr(estimate_module, "KEPT_OPS", 2)
    graph = build_llm(bundled("llama-3-8b"), LlmWorkload(), Parallelism(tp=2))
    estimate(graph, H100, space="compact")
    assert not estimate_module._WORK and not estimate_module._ROLES
