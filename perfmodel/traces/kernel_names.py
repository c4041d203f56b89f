"""What a kernel is, from its name alone (when the trace has no op for it): GEMM, attention, NCCL..."""

from __future__ import annotations

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
