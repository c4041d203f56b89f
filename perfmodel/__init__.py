"""perfmodel: a roofline performance model for deep-learning operators on accelerators.

The public names below are imported on first use (PEP 562 ``__getattr__``), so ``import perfmodel`` (and the
``perfmodel`` command's start) does not pay for numpy, pydantic and the model code until they are needed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfmodel.lazy import keep_names_over_submodules, lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from perfmodel.cost import Cost, CostBatch
    from perfmodel.dtypes import DType, parse_dtype
    from perfmodel.hardware import Hardware
    from perfmodel.ops import Op, OpError, make_op
    from perfmodel.roofline import predict, predict_many
    from perfmodel.search.engine import SearchResult, search
    from perfmodel.specs import SpecError, derive_variant, list_hardware, load_hardware

_LAZY = {
    "Cost": "perfmodel.cost", "CostBatch": "perfmodel.cost", "DType": "perfmodel.dtypes",
    "parse_dtype": "perfmodel.dtypes", "Hardware": "perfmodel.hardware", "Op": "perfmodel.ops",
    "OpError": "perfmodel.ops", "make_op": "perfmodel.ops", "predict": "perfmodel.roofline",
    "predict_many": "perfmodel.roofline", "SearchResult": "perfmodel.search.engine",
    "search": "perfmodel.search.engine", "SpecError": "perfmodel.specs", "derive_variant": "perfmodel.specs",
    "list_hardware": "perfmodel.specs", "load_hardware": "perfmodel.specs",
}

__all__ = [
    "Cost", "CostBatch", "DType", "Hardware", "Op", "OpError", "SearchResult", "SpecError", "__version__",
    "derive_variant", "list_hardware", "load_hardware", "make_op", "parse_dtype", "predict",
    "predict_many", "search",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
keep_names_over_submodules(__name__, {"search"})  # the function, as always, not the subpackage
