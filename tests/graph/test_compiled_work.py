"""``predict_compiled`` keeps the ops' work per DRAM granularity (a sweep costs one graph on many device
variants): the answers are ``predict_many``'s, bit for bit, on every variant and every repeat, and the kept
work cannot be changed by what costs it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel.cost import CostBatch
from perfmodel.graph import LlmWorkload, Parallelism, build_llm, bundled, fuse
from perfmodel.graph.estimate import compile_graph, predict_compiled
from perfmodel.roofline import predict_many
from perfmodel.specs import derive_variant, load_hardware

H100 = "nvidia-h100-sxm5-80gb"


def _fields(batch: CostBatch) -> dict[str, Any]:
    out: dict[str, Any] = {"time": batch.time_s.tolist(), "bound": list(batch.bound.tolist()),
                           "overhead": batch.overhead_s.tolist(), "notes": batch.notes,
                           "interval": np.asarray(batch.uncalibrated_interval_s).tolist()}
    for name in ("flops_by_engine", "bytes_by_level", "time_s_by_level", "time_s_by_engine", "schedule"):
        out[name] = {k: np.asarray(v).tolist() for k, v in getattr(batch, name).items()}
    return out


@pytest.mark.parametrize(("model", "phase"), [("llama-3-8b", "decode"), ("mixtral-8x7b", "train")])
@pytest.mark.parametrize("space", ["compact", "full"])
def test_kept_work_gives_predict_many_answers(model: str, phase: str, space: str) -> None:
    graph = build_llm(bundled(model), LlmWorkload(phase=phase, batch=4, prompt_tokens=256, kv_len=512),  # type: ignore[arg-type]
                      Parallelism(tp=2))
    fuse(graph)
    compiled = compile_graph(graph)
    base = load_hardware(H100)
    devices = [base, derive_variant(base, "v1", {"levels.dram.bandwidth_bytes_per_s": "x2"}),
               derive_variant(base, "v2", {"engines.*.peak_flops_per_s": "x0.5", "clock_hz": "x1.2"}), base]
    for hw in devices:
        kept = predict_compiled(compiled, hw, space)  # type: ignore[arg-type]
        fresh = predict_many(hw, compiled.ops, space=space)  # type: ignore[arg-type]
        assert _fields(kept) == _fields(fresh)
    assert len(compiled._work) == 1
    work = next(iter(compiled._work.values()))
    with pytest.raises(ValueError, match="read-only"):
        work.flops_matrix[0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        next(iter(work.bytes_by_role.values()))[0] = 0.0
