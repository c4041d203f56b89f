"""Nsight Compute metric values: unit scaling to SI base units and the normalised counter keys."""

from __future__ import annotations

import re

from perfmodel.traces.csvrows import TIME_UNITS_S

_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4}
_SCALED = re.compile(r"^(Ki|Mi|Gi|Ti|K|k|M|G|T|P)?(byte|inst|cycle|hz|Hz|warp|thread|block|sector|request|"
                     r"wavefront|transaction|register)s?$")

# Section labels that ncu prints instead of metric names (--print-metric-name label)
LABELS = {
    "duration": "gpu__time_duration.sum",
    "dram bytes": "dram__bytes.sum",
    "achieved occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers per thread": "launch__registers_per_thread",
    "sm frequency": "gpc__cycles_elapsed.avg.per_second",
    "elapsed cycles": "gpc__cycles_elapsed.max",
    "dram throughput": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "compute (sm) throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory throughput": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1/tex cache throughput": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "l2 cache throughput": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1/tex hit rate": "l1tex__t_sector_hit_rate.pct",
    "l2 hit rate": "lts__t_sector_hit_rate.pct",
    "sm active cycles": "sm__cycles_active.avg",
    "dram frequency": "dram__cycles_elapsed.avg.per_second",
    # the Speed-of-Light labels of Nsight Compute 2019-2020
    "sm [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "compute (sm) [%]": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory [%]": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sol fb": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sol dram": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sol l2": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "sol tex": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "sol l1/tex": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "memory frequency": "dram__cycles_elapsed.avg.per_second",
}
# the Roofline Chart sections' achieved values: thread instructions per elapsed cycle, by op
LABELS.update({f"predicated-on {op} thread instructions executed per cycle":
               f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"
               for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")})
# 'Memory Throughput' in byte/s (the Memory Workload Analysis section) is the DRAM rate, not the SOL percentage
RATE_LABELS = {"memory throughput": "dram__bytes.sum.per_second", "dram bandwidth": "dram__bytes.sum.per_second"}

_DIRECT = {
    "dram__bytes.sum": "dram_bytes",
    "lts__t_bytes.sum": "l2_bytes",
    "l1tex__t_bytes.sum": "l1_bytes",
    "sm__inst_executed_pipe_tensor.sum": "tensor_inst",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": "tensor_active_pct",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor_active_pct",
    "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active": "tensor_active_pct",
    "sm__cycles_elapsed.avg": "sm_cycles",
    "sm__cycles_elapsed.avg.per_second": "sm_clock_hz",
    "gpc__cycles_elapsed.avg.per_second": "sm_clock_hz",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "l1tex__throughput.avg.pct_of_peak_sustained_active": "l1_throughput_pct",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2_throughput_pct",
    "l1tex__t_sector_hit_rate.pct": "l1_hit_rate_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "sm__cycles_active.avg": "sm_active_cycles",
    "gpc__cycles_elapsed.max": "elapsed_cycles",
    "dram__cycles_elapsed.avg.per_second": "dram_clock_hz",
}
# Speed-of-Light shares of peak per level: a roofline point when the level's byte counter is missing
SOL_SHARES = {"dram_bytes": "dram_throughput_pct", "l2_bytes": "l2_throughput_pct", "l1_bytes": "l1_throughput_pct"}
FULL_POINT_METRICS = ("dram__bytes.sum", "lts__t_bytes.sum", "l1tex__t_bytes.sum",
                      "sm__sass_thread_inst_executed_op_{fadd,fmul,ffma,dadd,dmul,dfma,hadd,hmul,hfma}_pred_on.sum")
_FLOP_OPS = {"fp32": ("fadd", "fmul", "ffma"), "fp64": ("dadd", "dmul", "dfma"), "fp16": ("hadd", "hmul", "hfma")}
DURATION_METRICS = ("gpu__time_duration.sum", "gpu__time_duration.avg")
WANTED = set(_DIRECT) | set(DURATION_METRICS) | {"dram__bytes_read.sum", "dram__bytes_write.sum",
                                                  "dram__bytes.sum.per_second"} | {
    f"{unit}__sass_thread_inst_executed_op_{op}_pred_on.sum"
    for unit in ("sm", "smsp") for ops in _FLOP_OPS.values() for op in ops} | {
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed"
    for ops in _FLOP_OPS.values() for op in ops}


def metric_name(label: str, unit: str = "") -> str:
    """The metric name of a column or row label ('Duration', 'Duration (gpu__time_duration.sum)', a name);
    ``unit`` tells a section's rate ('Memory Throughput' in Gbyte/second) from its percentage."""
    text = label.strip()
    if text.endswith(")") and "(" in text:
        inner = text[text.rindex("(") + 1 : -1]
        if "__" in inner:
            return inner
    key = text.lower()
    if key in RATE_LABELS and "byte/" in unit:
        return RATE_LABELS[key]
    return LABELS.get(key, text)


def unit_scale(unit: str) -> float | None:
    """Multiplier to SI base units for an ncu unit ('usecond' 1e-6, 'Kbyte' 1e3, 'cycle/nsecond' 1e9)."""
    text = unit.strip()
    if text in ("", "%", "inst", "cycle", "byte"):
        return 1.0
    if "/" in text:
        top, bottom = text.split("/", 1)
        top_scale = unit_scale(top)
        if bottom in TIME_UNITS_S and top_scale is not None:
            return top_scale / TIME_UNITS_S[bottom]
        return top_scale  # e.g. register/thread, byte/block: a count per thing
    if text in TIME_UNITS_S:
        return TIME_UNITS_S[text]
    found = _SCALED.match(text)
    if found:
        return _PREFIX[found.group(1) or ""]
    return None


def counters(metrics: dict[str, float]) -> tuple[float | None, dict[str, float]]:
    """(duration in s or None, normalised counters) from metric values already in SI base units."""
    out: dict[str, float] = {}
    for name, key in _DIRECT.items():
        if name in metrics:
            out[key] = metrics[name]
    if "dram_bytes" not in out and "dram__bytes_read.sum" in metrics:
        out["dram_bytes"] = metrics["dram__bytes_read.sum"] + metrics.get("dram__bytes_write.sum", 0.0)
    duration = next((metrics[n] for n in DURATION_METRICS if n in metrics), None)
    if duration is None and out.get("sm_cycles") and out.get("sm_clock_hz"):
        duration = out["sm_cycles"] / out["sm_clock_hz"]
    # per elapsed cycle (the Roofline Chart sections) x the SM clock x the duration = the instructions
    cycles = duration * out["sm_clock_hz"] if duration and out.get("sm_clock_hz") else None
    for precision, (add, mul, fma) in _FLOP_OPS.items():
        values = [_sass(metrics, op, cycles) for op in (add, mul, fma)]
        if any(v is not None for v in values):
            a, m, f = (v or 0.0 for v in values)
            out[f"flops_{precision}"] = a + m + 2.0 * f
    if "dram_bytes" not in out and duration and metrics.get("dram__bytes.sum.per_second"):
        out["dram_bytes"] = metrics["dram__bytes.sum.per_second"] * duration  # measured rate x measured time
    return duration, out


def sol_only(counters: dict[str, float]) -> bool:
    """Speed-of-Light percentages but no byte or FLOP counter: a point from shares of peak, not a full one."""
    measured = ("dram_bytes", "l2_bytes", "l1_bytes", "flops_fp32", "flops_fp64", "flops_fp16")
    return any(k in counters for k in SOL_SHARES.values()) and not any(k in counters for k in measured)


def _sass(metrics: dict[str, float], op: str, cycles: float | None) -> float | None:
    """Thread instructions of one op: counted, or the rate per elapsed cycle x the kernel's cycles."""
    for unit in ("sm", "smsp"):
        value = metrics.get(f"{unit}__sass_thread_inst_executed_op_{op}_pred_on.sum")
        if value is not None:
            return value
    rate = metrics.get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")
    return rate * cycles if rate is not None and cycles else None
