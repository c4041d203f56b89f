"""Profiler traces -> ``KernelRecord`` (one parser per format) -> measured runs of perfmodel ops.

``parse_trace`` reads PyTorch profiler/Kineto, Nsight Compute CSV, Nsight Systems CSV/SQLite and
rocprof files (format detected from content); ``match_runs`` turns kernels into measured runs;
``roof_alarms`` flags measured points above their roof.
"""

from perfmodel.traces.matching import MatchedRun, MatchResult, UnmodelledKernel, match_runs
from perfmodel.traces.parse import parse_trace
from perfmodel.traces.records import KernelRecord, OpCall, ParsedTrace, TraceError
from perfmodel.traces.roof import RoofAlarm, kernel_alarms, roof_alarms, run_alarms

__all__ = [
    "KernelRecord", "MatchResult", "MatchedRun", "OpCall", "ParsedTrace", "RoofAlarm", "TraceError",
    "UnmodelledKernel", "kernel_alarms", "match_runs", "parse_trace", "roof_alarms", "run_alarms",
]
