"""The Triton autotuner hooks with the real ``triton`` package's Config and Autotuner (no GPU needed)."""

from __future__ import annotations

from typing import Any

import pytest

from perfmodel.tuners.candidates import ScheduleError
from perfmodel.tuners.triton_hook import TritonMatmulModel, dtype_name, schedule_of

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

H100 = "nvidia-h100-sxm5-80gb"
A100 = "nvidia-a100-sxm4-80gb"


def config(m: int, n: int, k: int, warps: int, stages: int, group: int = 8) -> Any:
    return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": group},
                         num_warps=warps, num_stages=stages)


def autotuned(model: TritonMatmulModel, configs: list[Any], top_k: int) -> Any:
    prune = model.prune_configs_by(top_k=top_k)

    @triton.autotune(configs=configs, key=["M", "N", "K"], prune_configs_by=prune)  # type: ignore[untyped-decorator]
    @triton.jit  # type: ignore[untyped-decorator]
    def matmul(a_ptr, b_ptr, c_ptr, M, N, K,  # type: ignore[no-untyped-def]
               BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,  # type: ignore[name-defined]
               BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):  # type: ignore[name-defined]
        pass

    return matmul


def test_the_autotuner_keeps_the_predicted_fastest_configs_that_fit() -> None:
    model = TritonMatmulModel(H100, dtype="fp16")
    configs = [config(128, 256, 64, 8, 3), config(64, 256, 32, 4, 4), config(128, 128, 32, 4, 4),
               config(256, 256, 128, 4, 5), config(32, 32, 32, 2, 5)]
    tuner = autotuned(model, configs, top_k=2)
    tuner.nargs = {"a_ptr": None, "b_ptr": None, "c_ptr": None, "M": 4096, "N": 4096, "K": 4096}
    kept = tuner.prune_configs({})  # Triton's own pruning: early_config_prune, then perf_model's top_k
    times = {id(c): model.perf_model(**tuner.nargs, **c.all_kwargs()) for c in configs}
    assert times[id(configs[3])] == float("inf")  # 256x256x128, 5 stages: 655 kB of SMEM
    ranked = sorted((c for c in configs if times[id(c)] != float("inf")), key=lambda c: times[id(c)])
    assert [id(c) for c in kept] == [id(c) for c in ranked[:2]]
    assert times[id(configs[4])] > times[id(configs[0])]  # 32x32 tiles: 16x the tiles, each starved


def test_the_a100_shared_memory_limit_triton_reports() -> None:
    # triton-lang/triton PR #1561: on A100, BLOCK 128x256x64 with 4 stages needs 196,608 B of shared
    # memory (hardware limit 166,912) and fails; 3 stages fit. fp16: (128 + 256) x 64 x 2 B x stages.
    model = TritonMatmulModel(A100, dtype="fp16")
    configs = [config(128, 256, 64, 4, 4), config(128, 256, 64, 8, 3)]
    kept = model.early_config_prune(configs, {"M": 4096, "N": 4096, "K": 4096})
    assert kept == [configs[1]]
    reasons = model._rank(model._problem({"M": 4096, "N": 4096, "K": 4096}),
                          [schedule_of(c.kwargs, c.num_warps, c.num_stages) for c in configs])[1]
    assert "197 kB exceeds" in reasons[0]


def test_sizes_and_dtype_come_from_the_kernel_arguments() -> None:
    class Tensor:
        dtype = "torch.bfloat16"

    model = TritonMatmulModel(H100, m="rows", n="cols", k="depth", dtype="a")
    c = config(128, 128, 64, 4, 3)
    args = {"a": Tensor(), "rows": 8192, "cols": 1024, "depth": 4096}
    by_args = model.perf_model(**args, **c.all_kwargs())
    fixed = TritonMatmulModel(H100, m=8192, n=1024, k=4096, dtype="bf16").perf_model(**c.all_kwargs())
    assert by_args == fixed > 0
    assert dtype_name("torch.float32") == "tf32" and dtype_name("float8_e4m3fn") == "fp8_e4m3"


def test_bad_hooks_input_names_the_field() -> None:
    model = TritonMatmulModel(H100, dtype="fp16")
    with pytest.raises(ScheduleError) as missing:
        model.perf_model(M=64, N=64, K=64, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, num_warps=4, num_stages=2)
    assert missing.value.field_name == "config.BLOCK_K"
    with pytest.raises(ScheduleError) as no_arg:
        model.early_config_prune([config(64, 64, 32, 4, 2)], {"M": 64, "N": 64})
    assert no_arg.value.field_name == "k"
    with pytest.raises(ScheduleError, match="no config runs"):
        model.early_config_prune([config(256, 256, 256, 4, 5)], {"M": 4096, "N": 4096, "K": 4096})
    with pytest.raises(ScheduleError) as bad_dtype:
        dtype_name("complex64")
    assert bad_dtype.value.field_name == "dtype"
