"""The lazy op registry (issue 25): ``perfmodel.ops.base.OP_MODULES`` names the module of every kind, and
building or predicting one op imports only its family's module."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from importlib import import_module

import pytest

import perfmodel.ops
from perfmodel.ops import Op, OpError, make_op, op_class, op_kinds
from perfmodel.ops.base import _REGISTRY, OP_MODULES

OP_FAMILIES = {"attention", "collective", "conv", "elementwise", "embedding_bag", "indexing", "matmul", "norm", "quant"}


def test_op_modules_is_the_registry() -> None:
    for info in pkgutil.iter_modules(perfmodel.ops.__path__):
        import_module(f"perfmodel.ops.{info.name}")
    assert {kind: cls.__module__ for kind, cls in _REGISTRY.items()} == OP_MODULES
    assert op_kinds() == sorted(OP_MODULES)
    assert {m.rsplit(".", 1)[1] for m in OP_MODULES.values()} == OP_FAMILIES


def test_lazy_names_are_the_classes() -> None:
    for name in perfmodel.ops.__all__:
        value = getattr(perfmodel.ops, name)
        if isinstance(value, type) and issubclass(value, Op) and value.kind != "op" and "kind" in vars(value):
            assert op_class(value.kind) is value
    assert "Matmul" in dir(perfmodel.ops)
    with pytest.raises(AttributeError):
        perfmodel.ops.NoSuchOp  # noqa: B018


def test_unknown_kind_lists_every_kind() -> None:
    with pytest.raises(OpError, match="unknown op kind; known: allgather, allreduce, alltoall, attention"):
        make_op({"kind": "nosuchop"})


PROBE = """import sys
{code}
print("FAMILIES", sorted(m.rsplit(".", 1)[1] for m in sys.modules
                         if m.startswith("perfmodel.ops.") and m.rsplit(".", 1)[1] in {families!r}))
print("MODULES", sorted(m for m in ("perfmodel.collectives", "perfmodel.search.attention_cost") if m in sys.modules))
"""


@pytest.mark.parametrize(("code", "families", "modules"), [
    ("from perfmodel.ops import make_op; make_op({'kind': 'rmsnorm', 'shape': [8, 8], 'dtype': 'bf16'})",
     ["norm"], []),
    ("from perfmodel.roofline import predict_many\n"
     "predict_many('nvidia-h100-sxm5-80gb', [{'kind': 'matmul', 'm': 64, 'n': 64, 'k': 64, 'dtype': 'bf16'}])",
     ["matmul"], []),
    ("from perfmodel.roofline import predict_many\n"
     "predict_many('nvidia-h100-sxm5-80gb', [{'kind': 'allreduce', 'bytes': 1e6, 'devices': 8}])",
     ["collective"], ["perfmodel.collectives"]),
    ("from perfmodel.ops import Attention; Attention", ["attention"], []),
])
def test_one_op_imports_its_family_only(code: str, families: list[str], modules: list[str]) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE.format(code=code, families=OP_FAMILIES)], capture_output=True,
                         text=True, check=True).stdout
    assert f"FAMILIES {families}" in out and f"MODULES {modules}" in out, out
