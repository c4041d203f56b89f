"""Load a script of ``benchmarks/`` as a module for a test (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(script: str, module_name: str) -> ModuleType:
    """``benchmarks/<script>.py`` run once as ``module_name``; registered in ``sys.modules`` (dataclasses look
    their module up there) with ``benchmarks/`` on the path for the scripts' imports of each other."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
