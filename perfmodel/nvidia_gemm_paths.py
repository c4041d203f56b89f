"""Which GEMMs run on an NVIDIA GPU's tensor cores and which on its CUDA cores (cuDNN's SIMT kernels), by matrix
dtype code: masks built once per device's tables (``machine.derived``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.machine import MachineTables, derived

BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


def _tensor_core_paths(t: MachineTables) -> BoolArray:
    """Per matrix dtype code: an NVIDIA GPU whose GEMMs in that dtype run on its tensor cores."""
    nvidia_gpu = t.hardware.kind == "gpu" and t.hardware.vendor == "nvidia"
    out: BoolArray = np.array([p.engine == "tensor" for p in t.matrix_paths]) & nvidia_gpu
    return out


def _simt_paths(t: MachineTables) -> BoolArray:
    """Per matrix dtype code: an NVIDIA GPU whose GEMMs in that dtype run off its tensor cores."""
    nvidia_gpu = t.hardware.kind == "gpu" and t.hardware.vendor == "nvidia"
    out: BoolArray = ~derived(t, "converts_to_nhwc", _tensor_core_paths) & nvidia_gpu
    return out


def converts_to_nhwc(t: MachineTables, matrix_dtype: np.ndarray[Any, np.dtype[np.int64]]) -> BoolArray:
    """Ops whose GEMMs run on an NVIDIA GPU's tensor cores, which read NHWC operands (by matrix dtype code)."""
    out: BoolArray = derived(t, "converts_to_nhwc", _tensor_core_paths)[matrix_dtype]
    return out


def simt_on_cudnn(t: MachineTables, matrix_dtype: np.ndarray[Any, np.dtype[np.int64]]) -> BoolArray:
    """GEMMs whose dtype runs off the tensor cores of an NVIDIA GPU (cuDNN's SIMT kernels), by matrix dtype code."""
    out: BoolArray = derived(t, "simt_on_cudnn", _simt_paths)[matrix_dtype]
    return out
