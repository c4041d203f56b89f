"""Calibration: fit per-device, per-op-class efficiency curves and launch floors to measured runs.

    t_cal = o · t_overhead + t_body · exp(w_c · g_c(log10 FLOPs) + (1 − w_c) · g_m(log10 bytes))

See ``curve`` for the form, ``fit`` for the robust fit and cross-validation, ``build`` for the
fallbacks and transfer, ``model`` for ``Calibration`` and applying it; ``docs/calibration.md``.
"""

from perfmodel.calibration.build import MIN_RUNS, fit_calibration
from perfmodel.calibration.classes import class_key, op_class_name, related
from perfmodel.calibration.model import Calibration, ClassParams, apply_calibration, predict_calibrated

__all__ = ["MIN_RUNS", "Calibration", "ClassParams", "apply_calibration", "class_key", "fit_calibration",
           "op_class_name", "predict_calibrated", "related"]
