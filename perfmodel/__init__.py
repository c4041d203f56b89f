"""perfmodel: a roofline performance model for deep-learning operators on accelerators."""

__version__ = "0.1.0"

from perfmodel.cost import Cost, CostBatch
from perfmodel.dtypes import DType, parse_dtype
from perfmodel.hardware import Hardware
from perfmodel.ops import Op, OpError, make_op
from perfmodel.roofline import predict, predict_many
from perfmodel.search.engine import SearchResult, search  # the function shadows the subpackage name
from perfmodel.specs import SpecError, derive_variant, list_hardware, load_hardware

__all__ = [
    "Cost", "CostBatch", "DType", "Hardware", "Op", "OpError", "SearchResult", "SpecError", "__version__",
    "derive_variant", "list_hardware", "load_hardware", "make_op", "parse_dtype", "predict",
    "predict_many", "search",
]
