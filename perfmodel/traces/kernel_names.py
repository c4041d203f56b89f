"""What a kernel is, from its name alone (when the trace has no op for it): GEMM, attention, NCCL..."""

from __future__ import annotations

import functools
import re

# (family, pattern), first match wins; patterns are searched case-insensitively in the name
_PATTERNS = (
    ("collective", r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall"),
    ("attention", r"flash_?fwd|flash_?bwd|fmha|flash_attn|attention|sdpa"),
    ("convolution", r"fprop|dgrad|wgrad|implicit_?gemm|conv|fft2d|winograd|miopen|scudnn|cudnn_"),
    ("gemm", r"(?<!fb)gemm|cublas|cutlass|xmma|wgmma|nvjet|Cijk_|matmul|_mm_|hgemm|sgemm"),
    ("layer norm", r"layer_?norm|rms_?norm|batch_?norm|group_?norm"),
    ("softmax", r"softmax"),
    ("reduction", r"reduce_kernel|triton_red|triton_per|reduction|cub::.*reduce"),
    ("copy", r"copy_kernel|direct_copy|memcpy|cat_array|transpose|permute"),
    ("indexing", r"index|gather|scatter|embedding"),
    ("elementwise", r"elementwise_kernel|vectorized_elementwise|unrolled_elementwise|triton_poi|pointwise"),
)
_FAMILIES = tuple((family, re.compile(pattern, re.IGNORECASE)) for family, pattern in _PATTERNS)


def kernel_family(name: str) -> str | None:
    """The family a kernel name belongs to ('gemm', 'attention', 'collective', ...), None if unknown."""
    head = name[:512]
    for family, pattern in _FAMILIES:
        if pattern.search(head):
            return family
    return None


# fp32 GEMMs/convolutions on tensor cores: TF32 math. CUTLASS names ``<accumulator><MMA shape>gemm_<input>``:
# ``tensorop_s1688gemm_256x64_...`` (fp32 accumulator, the m16n8k8 instruction, no 16-bit input named) is TF32;
# ``s16816gemm_bf16`` is bf16 input. cuDNN / cuBLASLt / xmma names say ``tf32``.
_TF32 = re.compile(r"tf32|_s1688(?:gemm|fprop|dgrad|wgrad)_(?!f16|bf16|e4m3|e5m2)", re.IGNORECASE)
_FP8 = re.compile(r"e4m3|e5m2|_f8_|fp8", re.IGNORECASE)
_SPLIT_K = re.compile(r"split_?k", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # a trace repeats a few hundred kernel names over millions of launches
def math_dtype(name: str) -> str | None:
    """The math a library kernel's name says it runs: 'tf32' (fp32 data on tensor cores), 'fp8', else None."""
    head = name[:512]
    if _TF32.search(head):
        return "tf32"
    if _FP8.search(head):
        return "fp8"
    return None


@functools.lru_cache(maxsize=4096)
def split_k(name: str) -> bool:
    """Whether a GEMM kernel's name says it splits K across blocks (a reduction kernel follows)."""
    return _SPLIT_K.search(name[:512]) is not None


# a GEMM kernel's block tile: ``sgemm_128x64_nn``, ``s1688gemm_256x64_16x4_tn``, CUTLASS 3 ``..._64x256x128_...``
# (M x N x K), xmma ``tilesize128x128x16``: the first MxN after the word gemm / tilesize
_TILE = re.compile(r"(?:gemm|tilesize).*?(?<![\dx])(\d{2,3})x(\d{2,3})(?:x\d+)?(?=_|$|>)", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def gemm_tile(name: str) -> tuple[int, int] | None:
    """(tile M, tile N) a GEMM kernel's name gives, None where it names none."""
    match = _TILE.search(name[:512])
    return (int(match.group(1)), int(match.group(2))) if match else None


# C++ element types in a kernel's template arguments -> perfmodel dtypes (first found wins)
CPP_DTYPES = (("c10::BFloat16", "bf16"), ("c10::Half", "fp16"), ("__half", "fp16"), ("double", "fp64"),
              ("float", "fp32"), ("c10::Float8_e4m3fn", "fp8_e4m3"), ("long", "int64"), ("int", "int32"),
              ("bool", "int8"), ("unsigned char", "int8"), ("signed char", "int8"))
_CPP_TYPES = tuple((re.compile(rf"(?<![\w:]){re.escape(token)}(?!\w)"), dtype) for token, dtype in CPP_DTYPES)
_LAMBDA = re.compile(r"\{lambda\(([^()]*)\)#\d+\}")
# cuBLAS / cuDNN kernels named ``<arch>_<precision letter>[mma shape]gemm|cudnn``: ``volta_sgemm_128x64_nt``,
# ``volta_scudnn_128x64_relu_interior_nn_v1``, ``volta_h884gemm_...``, ``volta_gcgemm_32x32_nt`` (complex single:
# an FFT convolution's products), ``turing_fp16_s1688gemm_fp16_...``
_BLAS_PRECISION = re.compile(r"(?:maxwell|pascal|volta|turing|ampere|hopper|sm\d+)_(?:b?fp?16_)?(gc|c|z|s|d|h)\d*"
                             r"(?:gemm|cudnn)", re.IGNORECASE)
_BLAS_DTYPES = {"s": "fp32", "c": "fp32", "gc": "fp32", "d": "fp64", "z": "fp64", "h": "fp16"}


@functools.lru_cache(maxsize=4096)
def cpp_dtype(name: str) -> str | None:
    """The element type a kernel's template arguments name (``<float, ...>``; in ``CPP_DTYPES`` order); where the
    functor is a lambda taking elements (``...::_float_to_hfp8_gpu(at::Tensor const&, long, long, double)::
    {lambda(float)#1}``), the innermost such lambda's parameter types first: the enclosing function's scalar
    arguments are not the elements."""
    head = name[:1024]
    for params in reversed(_LAMBDA.findall(head)):
        found = next((dtype for pattern, dtype in _CPP_TYPES if pattern.search(params)), None)
        if found is not None:
            return found
    return next((dtype for pattern, dtype in _CPP_TYPES if pattern.search(head)), None)


@functools.lru_cache(maxsize=4096)
def data_dtype(name: str) -> str | None:
    """The data type a library or template kernel's name says it reads: the precision letter of a cuBLAS /
    cuDNN name (``volta_sgemm``: fp32; ``bf16`` / ``f16`` in it win), else the first C++ element type of its
    template arguments; None where it names none."""
    head = name[:1024]
    blas = _BLAS_PRECISION.search(head)
    if blas is not None:
        lowered = head.lower()
        if "bf16" in lowered:
            return "bf16"
        if "fp16" in lowered or "f16_" in lowered:
            return "fp16"
        return _BLAS_DTYPES[blas.group(1).lower()]
    return cpp_dtype(head) if "<" in head else None


# compiler-generated offload regions: the kernel is a loop of the user's source, and its name gives where, not what.
# LLVM (AMD/ROCm, AOMP, clang, flang): ``__omp_offloading_<device id>_<file id>_<function>_l<line>`` (C++ functions
# Itanium-mangled, Fortran ones flang-mangled ``_QM<module>P<procedure>``); NVHPC: ``nvkernel_<function>_F1L<line>_<n>``
_OMP_OFFLOAD = re.compile(r"^__omp_offloading_[0-9a-f]+_[0-9a-f]+_(\w+?)_l(\d+)(?:_[0-9a-z]+)?$", re.IGNORECASE)
_NVHPC = re.compile(r"^nvkernel_(\w+?)_F\d+L(\d+)_\d+$")
_FLANG = re.compile(r"^_Q(?:M(\w+?)P)?P?(\w+)$")


@functools.lru_cache(maxsize=4096)
def offload_region(name: str) -> tuple[str, int] | None:
    """(function, source line) of a compiler-generated OpenMP / OpenACC offload kernel, None for any other name.
    A flang-mangled Fortran procedure reads ``module::procedure`` (``_QMnorm_modPnorm`` -> ``norm_mod::norm``)."""
    match = _OMP_OFFLOAD.match(name) or _NVHPC.match(name)
    if match is None:
        return None
    function = match.group(1)
    flang = _FLANG.match(function)
    if flang is not None:
        function = f"{flang.group(1)}::{flang.group(2)}" if flang.group(1) else flang.group(2)
    return function, int(match.group(2))
