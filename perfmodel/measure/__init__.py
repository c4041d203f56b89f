"""Host self-measurement: ERT-style bandwidth sweep and matmul peaks -> a hardware spec; an op suite
timed under the PyTorch profiler -> a Kineto trace for calibration. Needs torch (CPU)."""

from perfmodel.measure.cases import SuiteCase, suite_cases
from perfmodel.measure.host import HostMeasurement, LevelMeasurement, Measured, measure_host
from perfmodel.measure.report import format_measurement
from perfmodel.measure.spec import host_spec
from perfmodel.measure.suite import TRACE_NAME, run_suite

__all__ = [
    "TRACE_NAME", "HostMeasurement", "LevelMeasurement", "Measured", "SuiteCase", "format_measurement", "host_spec",
    "measure_host", "run_suite", "suite_cases",
]
