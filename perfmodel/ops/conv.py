"""2-D and 3-D convolution: implicit GEMM (M = N·P·Q, N = K/g, K = C/g·R·S per group), direct when depthwise.
A 3-D convolution sets ``depth``/``kernel_d`` (and ``stride_d``, ``padding_d``, ``dilation_d``): M gains the
output depth O and K the filter depth T (M = N·O·P·Q, K = C/g·T·R·S), x and y their depth; it runs as an
implicit GEMM only (no Winograd or FFT form in the libraries).

``algorithm='winograd'`` (3x3, stride 1) computes F(2x2, 3x3): 16 GEMMs of
(N·⌈P/2⌉·⌈Q/2⌉) x K x C, 2.25x fewer multiplies, plus input/output transforms on the vector
engine (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016).

``algorithm='winograd_nonfused'`` (3x3 or 5x5, stride 1) is cuDNN's WINOGRAD_NONFUSED: 6x6 transformed
tiles, F(4x4, 3x3) or F(2x2, 5x5), with the transforms as separate kernels through DRAM (the
``winogradForwardData4x4`` / ``Filter4x4`` / ``Output4x4`` kernels around one batched sgemm in nvprof
output): the input transform writes 36 values per tile and channel, the filter transform 36 per
(K, C) pair, the 36 GEMMs of tiles x K x C write 36 per tile and output channel, which the output
transform reads back. Those streams add to the GEMMs' time (``Work.serial_bytes``).

``algorithm='winograd_rxs'`` is MIOpen's binary RxS Winograd (``conv_rxs``): any R x S filter at stride 1 or 2,
zero-padded to 3x3 blocks, each block a fused F(2x2, 3x3) over the output (a 3x3 stride-1 filter: ``winograd``).

A backward op runs its data gradient with the same Winograd (on tiles of dx); its weight gradient
too where the algorithm is non-fused (F(3x3, 4x4): 36 GEMMs of K x C x tiles), and as an implicit GEMM
after the fused one, which has no weight-gradient form in cuDNN (its ``BWD_FILTER`` algorithms list
WINOGRAD_NONFUSED only).

The data gradient of a convolution with few input channels per group (C/g < ``THIN_DGRAD_CHANNELS``:
first layers, C = 1 or 3) runs as dy x W^T, N·P·Q x C/g·R·S x K/g, whose columns are scatter-added into dx
(col2im; cuDNN's BWD_DATA_ALGO_0 does it with atomics) instead of the implicit GEMM N·H·W x C/g x K/g·R·S,
whose C/g-wide tiles would run 1-3 useful columns of 32: DeepBench's P100 and MI25 fp32 first-layer
backwards took 0.5-5 ms where that implicit GEMM gave 2-90 ms (now 0.55-1.5x of measured).

A stride longer than the filter's reach (1x1 stride 2) never touches some of x: its compulsory reads are the
touched rows (NCHW) or rows and pixels (NHWC) only (``_touched_share``); dx is still written whole.

The forward implicit GEMM and fused Winograd mark their GEMM slot ``gemm_simt_conv``: off the tensor cores of an
NVIDIA GPU they run cuDNN's fixed SIMT tiles without split-K (``perfmodel.search.conv_space``): 128 output pixels
x 32/64/128 channels, and 128 Winograd tiles x 128 channels; on the tensor cores the forward runs cuDNN 7's
256x128 / 256x64 / 128x128 tiles and its one 128x128 split-K kernel (``conv_space.TENSOR_FORWARD``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    DTYPE_BYTES,
    DTYPE_INDEX,
    MAX_DIMENSION,
    FloatArray,
    Op,
    OpColumns,
    OpError,
    Pass,
    Work,
    check_pass,
    column,
    dtype_column,
    gemm_slots,
    pass_factors,
    pass_invalid,
    positive_invalid,
    register,
    require_non_negative,
    require_positive,
)
from perfmodel.ops.checks import one_of
from perfmodel.ops.conv_fft import COMPLEX_GEMM_REAL_GEMMS, FFT_ALGORITHMS, fft_error, fft_terms
from perfmodel.ops.conv_im2col import im2col_error, im2col_terms
from perfmodel.ops.conv_rxs import RXS, rxs_blocks, rxs_error
from perfmodel.search import conv_space
from perfmodel.search.conv_space import (
    DATA_GRADIENT,
    FORWARD,
    FUSED_WINOGRAD,
    MIOPEN_1X1,
    MIOPEN_1X1_IN_MAPS,
    WEIGHT_GRADIENT,
)

# MIOpen's direct solvers (ConvolutionFwdAlgoDirect): the implicit GEMM's FLOPs, bytes and tiles, but run by the
# library's hand-tiled direct kernels at their own sustained share (``ModelDefaults.conv_direct_matrix_efficiency``,
# docs/model.md section 4)
DIRECT = "direct"
CONV_LIBRARY_IM2COL = 1.0  # MIOpen 1.x calls its own GEMMs (GemmBackend_t::miopengemm), at the conv library share
THIN_DGRAD_CHANNELS = 16  # C/g below this: the data gradient runs as a GEMM onto columns and col2im

NONFUSED_TILE = 6  # transformed tile side of cuDNN's non-fused Winograd (alpha = outputs + taps - 1)
NONFUSED_TILE_OUTPUTS = {3: 4, 5: 2}  # filter side -> output tile side: F(4x4, 3x3), F(2x2, 5x5)
# A fused Winograd backward's weight gradient as cuDNN's only Winograd weight-gradient algorithm,
# BWD_FILTER_ALGO_WINOGRAD_NONFUSED (36 GEMMs of K x C x 4x4 tiles and its transforms), where cudnnFind picks the
# fastest weight-gradient kernel, instead of the implicit GEMM (docs/model.md section 1; off: docs/accuracy.md,
# fifteenth pass, convbwd18)
FUSED_WGRAD_NONFUSED = False


@register
@dataclass(frozen=True)
class Conv2d(Op):
    """y[N, K, P, Q] = conv(x[N, C, H, W], w[K, C/groups, R, S]); ``*_w`` fields default to ``*``. ``layout``
    is how x and w are stored (``nchw`` on NVIDIA tensor cores adds cuDNN's NHWC conversion of both);
    ``algorithm`` is the one the library runs: implicit GEMM, Winograd (fused or non-fused), FFT (whole-map
    or tiled, ``conv_fft``) or MIOpen's direct kernels (``direct``: the implicit GEMM's work at their own share)."""

    kind = "conv2d"

    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel_h: int
    kernel_w: int
    dtype: DType
    stride: int = 1
    padding: int = 0
    dilation: int = 1
    stride_w: int | None = None
    padding_w: int | None = None
    dilation_w: int | None = None
    groups: int = 1
    compute_dtype: DType | None = None
    layout: Literal["nchw", "nhwc"] = "nchw"
    algorithm: Literal["implicit_gemm", "winograd", "winograd_nonfused", "fft", "fft_tiling",
                       "im2col_gemm", "winograd_rxs", "direct"] = "implicit_gemm"
    bias: bool = False
    pass_: Pass = "forward"
    depth: int = 1
    kernel_d: int = 1
    stride_d: int = 1
    padding_d: int = 0
    dilation_d: int = 1

    columnar: ClassVar[bool] = True

    def __post_init__(self) -> None:
        for name, choices in (("layout", LAYOUTS), ("algorithm", ALGORITHMS)):  # a dict's converter names it first
            if getattr(self, name) not in choices:
                raise OpError(self.kind, name, f"expected one of {', '.join(choices)}, got {getattr(self, name)!r}")
        require_positive(self.kind, depth=self.depth, kernel_d=self.kernel_d, stride_d=self.stride_d,
                         dilation_d=self.dilation_d)
        require_non_negative(self.kind, padding_d=self.padding_d)
        if self.out_d <= 0:
            raise OpError(self.kind, "kernel_d", f"kernel deeper than the padded input: output depth {self.out_d}")
        if (self.kernel_d > 1 or self.depth > 1) and self.algorithm != "implicit_gemm":
            raise OpError(self.kind, "algorithm", "a 3-D convolution runs as an implicit GEMM only")
        require_positive(self.kind, batch=self.batch, in_channels=self.in_channels,
                         out_channels=self.out_channels, height=self.height, width=self.width,
                         kernel_h=self.kernel_h, kernel_w=self.kernel_w, stride=self.stride,
                         dilation=self.dilation, groups=self.groups)
        require_non_negative(self.kind, padding=self.padding)
        for name in ("stride_w", "dilation_w"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise OpError(self.kind, name, f"must be > 0, got {value}")
        if self.padding_w is not None and self.padding_w < 0:
            raise OpError(self.kind, "padding_w", f"must be >= 0, got {self.padding_w}")
        check_pass(self.kind, self.pass_)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise OpError(self.kind, "groups", f"{self.groups} must divide in_channels "
                          f"({self.in_channels}) and out_channels ({self.out_channels})")
        if self.algorithm == "winograd" and not (
                self.kernel_h == self.kernel_w == 3 and self.stride == self.along_w("stride") == 1
                and self.dilation == self.along_w("dilation") == 1):
            raise OpError(self.kind, "algorithm", "winograd needs a 3x3 kernel with stride 1 and no dilation")
        if self.algorithm == "winograd_nonfused" and not (
                self.kernel_h == self.kernel_w and self.kernel_h in NONFUSED_TILE_OUTPUTS
                and self.stride == self.along_w("stride") == 1 and self.dilation == self.along_w("dilation") == 1):
            raise OpError(self.kind, "algorithm", "winograd_nonfused needs a 3x3 or 5x5 kernel with stride 1 "
                          "and no dilation")
        reason = fft_error(self) or im2col_error(self) or rxs_error(self)
        if reason is not None:
            raise OpError(self.kind, "algorithm", reason)
        if self.out_h <= 0 or self.out_w <= 0:
            field = "kernel_h" if self.out_h <= 0 else "kernel_w"
            raise OpError(self.kind, field, f"kernel larger than the padded input: output "
                          f"would be {self.out_h}x{self.out_w}")

    @property
    def out_d(self) -> int:
        return (self.depth + 2 * self.padding_d - self.dilation_d * (self.kernel_d - 1) - 1) // self.stride_d + 1

    @property
    def out_h(self) -> int:
        return (self.height + 2 * self.padding - self.dilation * (self.kernel_h - 1) - 1) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.width + 2 * self.along_w("padding") - self.along_w("dilation") * (self.kernel_w - 1)
                - 1) // self.along_w("stride") + 1

    def along_w(self, name: Literal["stride", "padding", "dilation"]) -> int:
        """The width-wise stride, padding or dilation: its ``*_w`` field, which defaults to the height-wise one."""
        value: int | None = getattr(self, f"{name}_w")
        return int(getattr(self, name)) if value is None else value

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.in_channels == self.groups

    @classmethod
    def invalid_rows(cls, cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows ``__post_init__`` may reject, found at once: every row of an algorithm other than the implicit
        GEMM (its own checks run on the row's ``Op``), and the implicit GEMMs' bounds (NaN: an unset ``*_w``)."""
        v = cols.values
        bad: np.ndarray[Any, np.dtype[np.bool_]] = (
            positive_invalid(cols, "depth", "kernel_d", "stride_d", "dilation_d", "batch", "in_channels",
                             "out_channels", "height", "width", "kernel_h", "kernel_w", "stride", "dilation", "groups")
            | pass_invalid(cols) | (v["padding_d"] < 0) | (v["padding"] < 0) | (v["stride_w"] <= 0)
            | (v["dilation_w"] <= 0) | (v["padding_w"] < 0) | (v["stride_w"] > MAX_DIMENSION)
            | (v["dilation_w"] > MAX_DIMENSION) | (v["algorithm"] != "implicit_gemm") | ~one_of(v["layout"], LAYOUTS))
        groups = np.where(v["groups"] > 0, v["groups"], 1.0)
        bad |= (np.fmod(v["in_channels"], groups) != 0) | (np.fmod(v["out_channels"], groups) != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            bad |= ~(_out_size(cols, "d") > 0) | ~(_out_size(cols, "h") > 0) | ~(_out_size(cols, "w") > 0)
        return bad

    def loop_dims(self) -> dict[str, int]:
        dims = {"n": self.batch, "k": self.out_channels, "p": self.out_h, "q": self.out_w,
                "c": self.in_channels // self.groups, "r": self.kernel_h, "s": self.kernel_w,
                "g": self.groups}
        if self.depth > 1 or self.kernel_d > 1:
            dims.update(o=self.out_d, t=self.kernel_d)
        return dims

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        nb, c, k, h, w = (column(ops, f) for f in ("batch", "in_channels", "out_channels", "height", "width"))
        r, s, g = column(ops, "kernel_h"), column(ops, "kernel_w"), column(ops, "groups")
        # 3-D: the output depth multiplies the rows (M = N·O·P·Q), the filter depth the taps (T·R·S); x holds D
        # planes (so its bytes and the data gradient's rows are N·D·H·W), 2-D ops have O = T = D = 1
        depth_in = column(ops, "depth")
        out_d = _out_size(ops, "d")
        nb_x = nb * depth_in  # input planes
        nb = nb * out_d  # output planes: every 2-D formula below runs per output plane
        kernel_h = r
        r = r * column(ops, "kernel_d")
        p = _out_size(ops, "h")
        q = _out_size(ops, "w")
        dw = (g > 1) & (c == g)
        codes = dtype_column(ops, "dtype")
        elem = DTYPE_BYTES[codes]
        has_bias = column(ops, "bias")
        fwd, bwd = pass_factors(ops)
        flops = 2.0 * nb * k * p * q * (c / g) * r * s
        algorithm = _choices(ops, "algorithm")
        rxs = algorithm == RXS  # MIOpen's RxS Winograd: 3x3 blocks of the padded filter, each a fused F(2x2, 3x3)
        fused = (algorithm == "winograd") | rxs
        nonfused = algorithm == "winograd_nonfused"
        wino = fused | nonfused
        fft = one_of(algorithm, tuple(FFT_ALGORITHMS))
        special = _special_ops(ops, algorithm)
        spectra = fft_terms(special, nb, c, k, elem)
        passes = fwd + 2.0 * bwd  # GEMM passes: the forward, or the data and weight gradients
        fft_images = nb * spectra.tiles  # the complex GEMMs' rows: one per image (and tile)
        out_tile = np.where(nonfused, np.where(kernel_h == 3, float(NONFUSED_TILE_OUTPUTS[3]),
                                               float(NONFUSED_TILE_OUTPUTS[5])), 2.0)
        points = np.where(nonfused, float(NONFUSED_TILE**2), 16.0)  # transformed values per tile: GEMMs
        tiles = nb * np.ceil(p / out_tile) * np.ceil(q / out_tile)
        # FUSED_WGRAD_NONFUSED: a fused (3x3) Winograd's weight gradient as the non-fused F(4x4, 3x3) one
        wgrad_nf = (algorithm == "winograd") & (bwd > 0) if FUSED_WGRAD_NONFUSED else np.zeros(len(nb), dtype=bool)
        tiles_wgrad = nb * np.ceil(p / NONFUSED_TILE_OUTPUTS[3]) * np.ceil(q / NONFUSED_TILE_OUTPUTS[3])
        # the data gradient (dy -> dx, stride 1: a convolution onto the H x W input) runs the same algorithm
        tiles_dx = nb_x * np.ceil(h / out_tile) * np.ceil(w / out_tile)
        # the weight gradient (x and dy -> dw: F(3x3, 4x4) on the forward's tiles) only in the non-fused form:
        # cuDNN's fused Winograd has no weight-gradient kernel
        blocks = np.where(rxs, rxs_blocks(kernel_h, column(ops, "kernel_w"), column(ops, "stride")), 1.0)
        wino_flops = 2.0 * points * blocks * (tiles * (fwd + bwd * nonfused) + tiles_dx * bwd) * k * (c / g)
        # fused transforms: input tile 4x4 (B^T d B, ~32 adds each per channel), output 2x2 (A^T m A, ~24 adds)
        wino_vector = np.where(fused, blocks * (tiles * (32.0 * c + 24.0 * k) * fwd
                                                + tiles_dx * (32.0 * k + 24.0 * c) * bwd), 0.0)
        x_bytes, w_bytes, y_bytes = nb_x * c * h * w * elem, k * (c / g) * r * s * elem, nb * k * p * q * elem
        x_read = x_bytes * _touched_share(ops)
        # non-fused: data, filter and output transforms each read their source and write the other side
        transforms = (x_bytes + w_bytes + y_bytes) * passes + points * elem * (
            (tiles * (c + k) + k * c) * (fwd + bwd) + (tiles_dx * (c + k) + k * c) * bwd)  # non-fused only
        m_gemm = nb * p * q
        # a strided convolution's data gradient is s_h·s_w sub-convolutions, one per phase of dx (sub-pixel
        # decomposition of the transposed convolution): each dx pixel takes only the ⌈R/s_h⌉·⌈S/s_w⌉ taps that land
        # on it, so its implicit GEMM reduces over K·⌈R/s_h⌉·⌈S/s_w⌉, not K·R·S over zero-filled dy (1x1: 1 tap);
        # with a dilation d the taps' offsets repeat every s/gcd(s, d) phases
        dgrad_taps = (_phase_taps(column(ops, "kernel_h"), column(ops, "stride"), column(ops, "dilation"))
                      * _phase_taps(column(ops, "kernel_w"), along_w_column(ops, "stride"),
                                    along_w_column(ops, "dilation")) * column(ops, "kernel_d"))
        # thin C (first layers): a data gradient with C/g columns wastes most of every tile, so libraries run it
        # as dy x W^T (NPQ x C/g·R·S x K/g) and scatter-add the columns into dx (col2im / atomics)
        thin = ~wino & ~fft & ~dw & (c / g < THIN_DGRAD_CHANNELS)
        col_bytes = 2.0 * m_gemm * c * r * s * elem * bwd
        # MIOpen's GEMM path (conv_im2col): one image at a time, im2col into a workspace then a BLAS GEMM
        per_image = im2col_terms(special, nb, c / g, r * s, p * q, elem, passes)
        im2col = per_image.on
        thin = thin & ~im2col
        # the non-fused weight gradient's transforms: x and dy into 36 values per 4x4 tile and channel, its 36 GEMMs'
        # K x C outputs back into dw
        wgrad_transforms = np.where(wgrad_nf, x_bytes + y_bytes + w_bytes + NONFUSED_TILE**2 * elem * (
            tiles_wgrad * (c + k) + k * c), 0.0)
        serial = (np.where(nonfused, transforms, 0.0) + spectra.spectra_bytes * passes + np.where(thin, col_bytes, 0.0)
                  + per_image.col_bytes + wgrad_transforms)
        # backward: data-gradient and weight-gradient convolutions, each with the forward's FLOPs as implicit GEMMs
        wgrad_flops = np.where(wgrad_nf, 2.0 * NONFUSED_TILE**2 * tiles_wgrad * k * (c / g), flops)
        matrix = np.where(dw, 0.0, np.where(wino, wino_flops + wgrad_flops * bwd * ~nonfused, flops * passes))
        complex_flops = 2.0 * COMPLEX_GEMM_REAL_GEMMS * spectra.frequencies * fft_images * k * c
        matrix = np.where(fft, complex_flops * passes, matrix)
        vector = (np.where(dw, flops * passes, 0.0) + has_bias * nb * k * p * q * fwd + wino_vector
                  + spectra.transform_flops * passes)
        roles = {
            "weights": (w_bytes + has_bias * k * elem) * passes,
            "activations_in": x_read * fwd + bwd * (y_bytes + x_read),
            "activations_out": y_bytes * fwd + bwd * x_bytes,
        }
        # FFT: complex GEMMs in fp32
        dtypes = np.where(fft, DTYPE_INDEX[DType.FP32], dtype_column(ops, "compute_dtype", "dtype"))
        # implicit GEMMs per group: forward (NPQ x K x CRS; winograd: 16 or 36 of tiles x K x C),
        # data-gradient (NHW x C x KRS; winograd: of dx tiles x C x K), weight-gradient (K x CRS x NPQ;
        # non-fused: 36 of K x C x tiles)
        complex_gemms = COMPLEX_GEMM_REAL_GEMMS * spectra.frequencies  # fft: 4 real GEMMs per frequency
        # fwd and dgrad
        per_pass = np.where(dw, 0.0, np.where(wino, points * blocks * g, np.where(fft, complex_gemms, g)))
        # per-image GEMMs (im2col_gemm): rows P·Q of one image, the batch run serially (gemm_serial)
        m_gemm = np.where(im2col, p * q, m_gemm)
        thin_cols = thin | im2col  # the data gradient onto columns: P·Q x C/g·R·S x K/g, then col2im
        # MIOpen's direct 1x1 forward (conv_space.MIOPEN_DIRECT_1X1): C/g in groups of 128 input maps, one work-group
        # each, their partial outputs added atomically: a batch of that many GEMMs over C/g / groups each
        direct_1x1 = (algorithm == DIRECT) & (r * s == 1) & conv_space.MIOPEN_DIRECT_1X1
        in_groups = np.where(direct_1x1, np.ceil(c / g / MIOPEN_1X1_IN_MAPS), 1.0)
        gemms = gemm_slots(
            (per_pass * fwd * in_groups, np.where(wino, tiles, np.where(fft, fft_images, m_gemm)), k / g,
             np.where(wino | fft, c / g, (c / g) * r * s / in_groups)),
            (per_pass * bwd,
             np.where(wino, tiles_dx, np.where(thin_cols, m_gemm, np.where(fft, fft_images, nb_x * h * w))),
             np.where(thin_cols, (c / g) * r * s, c / g),
             np.where(wino | thin_cols | fft, k / g, (k / g) * dgrad_taps)),
            (np.where(dw, 0.0, np.where(wgrad_nf, NONFUSED_TILE**2 * g, np.where(
                nonfused, points * g, np.where(fft, complex_gemms, g))) * bwd), k / g,
             np.where(nonfused | fft | wgrad_nf, c / g, (c / g) * r * s),
             np.where(nonfused, tiles, np.where(wgrad_nf, tiles_wgrad, np.where(fft, fft_images, m_gemm)))),
        )
        return Work(
            n=len(ops), flops_matrix=matrix, flops_vector=vector, flops_special=np.zeros(len(ops)),
            bytes_by_role=roles, matrix_dtype=dtypes, vector_dtype=dtypes,
            parallel_items=np.where(fft, spectra.planes, g * np.ceil(m_gemm / 128) * np.ceil(k / g / 128)),
            # one launch floor per convolution, non-fused too: its transform kernels queue behind each other (a floor
            # per kernel, 4 per pass, left 8 + 6 of DeepBench's 30 held-out V100/T4 non-fused rows > 20 % off, one 4+7)
            kernels=passes,
            serial_bytes=serial,
            nhwc_bytes=np.where(_choices(ops, "layout") == "nchw", (x_bytes + w_bytes) * fwd
                                + (x_bytes + y_bytes + w_bytes) * bwd, 0.0),
            gemm_batch=gemms[0], gemm_m=gemms[1], gemm_n=gemms[2], gemm_k=gemms[3],
            # the forward implicit GEMM (family 1: 128 x 32/64/128) and fused Winograd (2: 128 x 128) run cuDNN's
            # fixed SIMT tiles off the tensor cores, no split-K (conv_space); the non-fused Winograd's batched GEMMs,
            # the FFT's complex ones and the gradients keep the free search
            gemm_simt_conv=np.stack([np.where(nonfused | fft | im2col, 0.0, np.where(
                                         fused, FUSED_WINOGRAD, np.where(direct_1x1, MIOPEN_1X1, FORWARD))),
                                     np.where(wino | fft | im2col | thin_cols, 0.0, DATA_GRADIENT),
                                     np.where(wino | fft | im2col, 0.0, WEIGHT_GRADIENT)], axis=1),
            gemm_serial=np.repeat(per_image.serial[:, None], 3, axis=1),
            # the implicit GEMMs' reductions, tap by tap over C/g (forward) or K/g (data gradient) channels: a
            # tensor-core kernel pads each tap's channels to whole intervals (conv_space.CHANNEL_INTERVAL_BYTES)
            gemm_channels=np.stack([np.where(wino | fft | im2col, 0.0, c / g),
                                    np.where(wino | fft | im2col | thin_cols, 0.0, k / g),
                                    np.zeros(len(ops))], axis=1),
            # cuDNN's / MIOpen's convolution kernels, not the BLAS GEMMs (which the per-image path calls)
            conv_library=np.where(im2col, CONV_LIBRARY_IM2COL, 1.0),
            # the gradient kernels' share of those GEMMs (two passes of the forward's FLOPs each): their own
            # sustained share (``ModelDefaults.conv_backward_matrix_efficiency``)
            conv_gradient_share=2.0 * bwd / passes,
            conv_direct=(algorithm == DIRECT).astype(np.float64),
            dgrad_stream_bytes=bwd * (y_bytes + w_bytes + x_bytes),
            wgrad_stream_bytes=bwd * (x_read + y_bytes + w_bytes),
        )


LAYOUTS: tuple[str, ...] = ("nchw", "nhwc")  # the Literal choices of ``layout`` and ``algorithm``
ALGORITHMS: tuple[str, ...] = ("implicit_gemm", "winograd", "winograd_nonfused", "fft", "fft_tiling", "im2col_gemm",
                               RXS, DIRECT)


def along_w_column(ops: Sequence[Conv2d] | OpColumns, name: Literal["stride", "padding", "dilation"]) -> FloatArray:
    """``Conv2d.along_w`` of many convolutions as a float array (an unset ``*_w``, NaN in columns, is the
    height-wise value)."""
    if isinstance(ops, OpColumns):
        own = ops.values[f"{name}_w"]
        out: FloatArray = np.where(np.isnan(own), ops.values[name], own)
        return out
    return np.fromiter((o.along_w(name) for o in ops), dtype=np.float64, count=len(ops))


def _out_size(ops: Sequence[Conv2d] | OpColumns, axis: Literal["d", "h", "w"]) -> FloatArray:
    """``out_d`` / ``out_h`` / ``out_w`` of many convolutions as floats (exact: integers below 2**53)."""
    if axis == "w":
        size, pad, dil = column(ops, "width"), along_w_column(ops, "padding"), along_w_column(ops, "dilation")
        taps, stride = column(ops, "kernel_w"), along_w_column(ops, "stride")
    else:
        names = ("depth", "padding_d", "dilation_d", "kernel_d", "stride_d") if axis == "d" else (
            "height", "padding", "dilation", "kernel_h", "stride")
        size, pad, dil, taps, stride = (column(ops, name) for name in names)
    out: FloatArray = np.floor_divide(size + 2 * pad - dil * (taps - 1) - 1, stride) + 1
    return out


def _choices(ops: Sequence[Conv2d] | OpColumns, name: str) -> np.ndarray[Any, Any]:
    """A choice field (``algorithm``, ``layout``) of many convolutions as a str array."""
    if isinstance(ops, OpColumns):
        return np.asarray(ops.values[name])
    return np.array([getattr(o, name) for o in ops])


class _Plain:
    """A convolution the FFT and per-image terms skip: only its algorithm is read."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm


def _special_ops(ops: Sequence[Conv2d] | OpColumns, algorithm: np.ndarray[Any, Any]) -> Sequence[Any]:
    """What ``fft_terms`` and ``im2col_terms`` read: the ops, or from columns the ``Op`` of each FFT or per-image
    row (built from its columns) and a stand-in naming the algorithm of every other row."""
    if not isinstance(ops, OpColumns):
        return ops
    from perfmodel.ops.columns import row_op  # columns imports the op base, not the op modules

    plain = _Plain("implicit_gemm")
    out: list[Any] = [plain] * ops.n
    for i in np.flatnonzero(algorithm != "implicit_gemm").tolist():
        out[i] = row_op(ops, i) if algorithm[i] in FFT_ALGORITHMS or algorithm[i] == "im2col_gemm" else _Plain(
            str(algorithm[i]))
    return out


def _phase_taps(taps: FloatArray, stride: FloatArray, dilation: FloatArray) -> FloatArray:
    """Filter taps along one axis that reach one dx pixel in a strided convolution's data gradient:
    ⌈taps / (s / gcd(s, d))⌉ (all of them without a stride)."""
    period = stride / np.gcd(stride.astype(np.int64), dilation.astype(np.int64))
    out: FloatArray = np.ceil(taps / period)
    return out


def _touched_share(ops: Sequence[Conv2d] | OpColumns) -> FloatArray:
    """Share of the input a strided convolution reads: a stride longer than the filter's reach (a 1x1
    stride-2 conv) skips whole rows of x, and in NHWC whole pixels (C contiguous values); in NCHW the
    skipped columns share sectors with the read ones, so only rows count."""
    stride_h, stride_w = column(ops, "stride"), along_w_column(ops, "stride")
    reach_h = column(ops, "dilation") * (column(ops, "kernel_h") - 1) + 1
    reach_w = along_w_column(ops, "dilation") * (column(ops, "kernel_w") - 1) + 1
    nhwc = _choices(ops, "layout") == "nhwc"
    rows = np.minimum(reach_h, stride_h) / stride_h
    out: FloatArray = rows * np.where(nhwc, np.minimum(reach_w, stride_w) / stride_w, 1.0)
    return out
