"""Triton autotuner hooks: ``perf_model`` and ``early_config_prune`` from the roofline's schedule costing.

    model = TritonMatmulModel("nvidia-h100-sxm5-80gb")            # kernel args named M, N, K
    @triton.autotune(configs=[...], key=["M", "N", "K"], prune_configs_by=model.prune_configs_by(top_k=4))

``early_config_prune(configs, named_args)`` drops the configs that cannot run on the device (SMEM or
register overflow, more than 1024 threads, accumulators spilling, a split-K slice shorter than BLOCK_K)
and costs the rest in one vectorised call; ``perf_model(**named_args, **config kwargs)`` returns the
predicted time in ms (Triton sorts by it and keeps ``top_k``). A config's ``kwargs`` give BLOCK_M/N/K
(or BLOCK_SIZE_M/N/K), GROUP_M (GROUP_SIZE_M) and SPLIT_K; ``num_warps`` and ``num_stages`` are its own.
M, N, K (and an optional batch) are read from the kernel's arguments by name, or given as numbers; the
dtype from a tensor argument's ``dtype`` (torch.float16 -> fp16, ...) or given. Only ``triton.Config``'s
public attributes are read, so the hooks need no GPU and no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfmodel.roofline import HardwareLike
from perfmodel.tuners.candidates import ScheduleError
from perfmodel.tuners.ranking import rank_schedules

CONFIG_NAMES = {"tile_m": ("BLOCK_M", "BLOCK_SIZE_M"), "tile_n": ("BLOCK_N", "BLOCK_SIZE_N"),
                "tile_k": ("BLOCK_K", "BLOCK_SIZE_K"), "group_m": ("GROUP_M", "GROUP_SIZE_M"),
                "split_k": ("SPLIT_K",)}
# tl.dot takes fp32 inputs through TF32 by default (input_precision="tf32")
TORCH_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "tf32", "float": "tf32",
                "float8_e4m3fn": "fp8_e4m3", "float8_e4m3fnuz": "fp8_e4m3", "float8_e5m2": "fp8_e5m2",
                "float8_e5m2fnuz": "fp8_e5m2", "int8": "int8", "fp16": "fp16", "bf16": "bf16", "fp32": "tf32",
                "fp8e4nv": "fp8_e4m3", "fp8e5": "fp8_e5m2"}


def schedule_of(kwargs: Mapping[str, Any], num_warps: Any, num_stages: Any) -> dict[str, float]:
    """One triton config (its kwargs, warps, stages) as a schedule row; a missing BLOCK_* is named."""
    row: dict[str, float] = {}
    for field_name, names in CONFIG_NAMES.items():
        value = next((kwargs[n] for n in names if n in kwargs), None)
        if value is None and field_name.startswith("tile"):
            raise ScheduleError(f"config.{names[0]}", f"missing: the config needs one of {', '.join(names)}")
        if value is not None:
            row[field_name] = float(value)
    row["warps"] = float(num_warps) if num_warps is not None else 4.0  # Triton's default num_warps
    row["stages"] = float(num_stages) if num_stages is not None else 3.0  # and num_stages
    return row


def dtype_name(value: Any) -> str:
    """'fp16', 'bf16', ... from a dtype string or an object with ``.dtype`` (torch or triton tensors)."""
    raw = str(getattr(value, "dtype", value)).split(".")[-1]
    if raw not in TORCH_DTYPES:
        raise ScheduleError("dtype", f"{raw!r} is not a GEMM input dtype the model knows ({', '.join(TORCH_DTYPES)})")
    return TORCH_DTYPES[raw]


@dataclass
class TritonMatmulModel:
    """Hooks for ``triton.autotune`` of a GEMM kernel on one device.

    ``m``, ``n``, ``k``, ``batch``: the kernel argument names holding the sizes (or the sizes);
    ``dtype``: a dtype name, or the name of a tensor argument to read it from."""

    hardware: HardwareLike
    m: str | int = "M"
    n: str | int = "N"
    k: str | int = "K"
    batch: str | int = 1
    dtype: str = "a_ptr"
    _times_ms: dict[tuple[Any, ...], float] = field(default_factory=dict, repr=False)

    def _problem(self, args: Mapping[str, Any]) -> dict[str, Any]:
        def size(spec: str | int, what: str) -> int:
            if isinstance(spec, int):
                return spec
            if spec not in args:
                raise ScheduleError(what, f"kernel argument {spec!r} not among {sorted(args)}")
            return int(args[spec])

        source = args.get(self.dtype, self.dtype)
        batch = size(self.batch, "batch")
        op: dict[str, Any] = {"kind": "bmm" if batch > 1 else "matmul", "m": size(self.m, "m"),
                              "n": size(self.n, "n"), "k": size(self.k, "k"), "dtype": dtype_name(source)}
        if batch > 1:
            op["batch"] = batch
        return op

    def _rank(self, op: dict[str, Any], rows: Sequence[dict[str, float]]) -> tuple[list[float], list[str]]:
        columns = {name: [row.get(name, float("nan")) for row in rows] for name in
                   ("tile_m", "tile_n", "tile_k", "group_m", "split_k", "warps", "stages")}
        ranking = rank_schedules(self.hardware, op, columns)
        times = [float(t) * 1e3 for t in ranking.time_s]
        for row, time_ms in zip(rows, times, strict=True):
            self._times_ms[_key(op, row)] = time_ms
        return times, ranking.reasons

    def early_config_prune(self, configs: Sequence[Any], named_args: Mapping[str, Any], **kwargs: Any) -> list[Any]:
        """The configs that can run on the device (all costed at once, their times kept for ``perf_model``)."""
        op = self._problem({**named_args, **kwargs})
        rows = [schedule_of(c.kwargs, c.num_warps, c.num_stages) for c in configs]
        times, reasons = self._rank(op, rows)
        keep = [c for c, t in zip(configs, times, strict=True) if t != float("inf")]
        if not keep:
            why = "; ".join(f"{_describe(c)}: {r}" for c, r in list(zip(configs, reasons, strict=True))[:3])
            raise ScheduleError("configs", f"no config runs on the device for {op}: {why}")
        return keep

    def perf_model(self, **kwargs: Any) -> float:
        """Predicted time in ms of one config (kernel args and config kwargs by name, as Triton passes them)."""
        op = self._problem(kwargs)
        config = {k: v for k, v in kwargs.items() if k not in ("num_warps", "num_stages")}
        row = schedule_of(config, kwargs.get("num_warps"), kwargs.get("num_stages"))
        cached = self._times_ms.get(_key(op, row))
        return cached if cached is not None else self._rank(op, [row])[0][0]

    def prune_configs_by(self, top_k: int | float = 4) -> dict[str, Any]:
        """The dict ``triton.autotune(prune_configs_by=...)`` takes."""
        return {"perf_model": self.perf_model, "early_config_prune": self.early_config_prune, "top_k": top_k}


def _key(op: Mapping[str, Any], row: Mapping[str, float]) -> tuple[Any, ...]:
    return (*sorted(op.items()), *sorted(row.items()))


def _describe(config: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in {**config.kwargs, "num_warps": config.num_warps,
                                             "num_stages": config.num_stages}.items())
