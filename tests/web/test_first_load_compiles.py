"""A served process's first ``/runs`` and ``/tiling`` load the compiled GEMM kernels, never compile new ones
(issue 27, pages14). numba compiles one machine-code signature per argument type, and ``gemm_kernel.warm`` (run
by the server's start-up) compiles one: the float64, C-contiguous, writeable arrays. cuDNN's SIMT convolution
space (``conv_space.simt_conv_space``: columns of a 2-D array, strided) and the tiling page's read-only op
columns each made numba compile another signature of ``best`` at the first request — ~7 s of CPU on the live
server after the real traces were uploaded. The count of signatures is the behaviour tested, not a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from perfmodel.search import gemm_kernel
from perfmodel.search.conv_space import simt_conv_space
from perfmodel.search.gemm_space import GemmCandidates, compact_space
from perfmodel.specs import load_hardware
from perfmodel.store import RunIn
from tests.web.conftest import A100, make_app

V100 = "nvidia-v100-sxm2-32gb"


def _conv(channels: int) -> dict[str, object]:
    """A ResNet-like fp32 forward convolution (cuDNN's SIMT path on an NVIDIA GPU); odd channel counts so no
    memo of an earlier test answers it."""
    return {"kind": "conv2d", "batch": 32, "in_channels": channels, "out_channels": 2 * channels + 1,
            "height": 56, "width": 56, "kernel_h": 3, "kernel_w": 3, "dtype": "fp32", "stride": 1, "padding": 1,
            "algorithm": "implicit_gemm"}


def _signatures() -> dict[str, int]:
    from perfmodel.search import gemm_jit

    return {name: len(getattr(gemm_jit, name).signatures) for name in ("grid", "best", "fill_candidates", "search")}


def test_kernel_array_is_the_one_compiled_type() -> None:
    good = np.arange(4, dtype=np.float64)
    assert gemm_kernel.kernel_array(good) is good  # no copy where none is needed
    strided = np.arange(12, dtype=np.float64).reshape(3, 4).T[0]
    frozen = np.arange(4, dtype=np.float64)
    frozen.flags.writeable = False
    for odd in (strided, frozen, np.arange(4)):  # strided, read-only, int64
        out = gemm_kernel.kernel_array(odd)
        assert out.dtype == np.float64 and out.flags.c_contiguous and out.flags.writeable
        np.testing.assert_array_equal(out, odd)


def test_simt_conv_space_answers_as_its_contiguous_copy() -> None:
    """The strided SIMT space gives the same choices as a contiguous copy of it (the copy is what the kernel sees)."""
    if not gemm_kernel.load():
        pytest.skip("JIT disabled")
    t = __import__("perfmodel.machine", fromlist=["tables"]).tables(load_hardware(A100))
    space = simt_conv_space(t, 1)
    assert not space.bm.flags.c_contiguous  # the case this guards; if it became contiguous the test still holds
    copy = GemmCandidates(*(np.array(getattr(space, f)) for f in ("bm", "bn", "bk_bytes", "stages", "split",
                                                                     "group")))
    one = np.ones(3)
    args = (one, one * np.array([3136.0, 784.0, 12544.0]), one * 129, one * 576, one * 4.0, one * 19.5e12, one * 1e6)
    v = gemm_kernel.device_vector(t)
    a, b = gemm_kernel.best_per_op(v, space, *args), gemm_kernel.best_per_op(v, copy, *args)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert compact_space(t).size > space.size


def test_first_runs_and_tiling_pages_compile_no_new_kernel(tmp_path: Path) -> None:
    if not gemm_kernel.load():  # what the server's start-up does (a background thread there)
        pytest.skip("JIT disabled")
    loaded = _signatures()
    assert loaded["best"] == 1 and loaded["grid"] == 1 and loaded["search"] == 1
    app = make_app(tmp_path)
    with TestClient(app) as client:
        store = app.state.perfmodel.store
        store.add_runs([RunIn(hardware_id=hw, op=_conv(c), measured_time_s=1e-4 * c, source="pages14",
                              dtype="fp32") for hw in (V100, A100) for c in (61, 67, 71)])
        runs = client.get("/runs")
        assert runs.status_code == 200 and "conv2d" in runs.text  # the conv runs were predicted and drawn
        tiling = client.get("/tiling", params={"m": 4093, "n": 3067, "k": 2039, "dtype": "bf16"})
        assert tiling.status_code == 200
        conv_tiling = client.get("/tiling", params={"hardware": A100, "op": str(_conv(73)).replace("'", '"')})
        assert conv_tiling.status_code == 200
    assert _signatures() == loaded, "a page made numba compile a new signature (seconds of CPU on a live server)"
