"""Lazy package exports (PEP 562): a package names its public objects without importing their modules until
first use, so ``import perfmodel`` and the ``perfmodel`` command start without numpy, pydantic or model code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from types import ModuleType
from typing import Any


def lazy_exports(namespace: dict[str, Any], exports: dict[str, str]) -> tuple[Callable[[str], Any],
                                                                              Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose globals are ``namespace``: ``exports`` maps a public name
    to the module defining it; the first access imports that module and caches the name in ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def keep_names_over_submodules(package: str, names: set[str]) -> None:
    """In ``package``, each of ``names`` stays the exported object (``perfmodel.search`` the function,
    ``perfmodel.graph.estimate`` the function) after the submodule of the same name is imported: the import
    system's ``setattr(package, name, submodule)`` is ignored (the submodule stays in ``sys.modules``)."""
    module = sys.modules[package]

    class _Package(ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if name in names and isinstance(value, ModuleType) and value.__name__ == f"{package}.{name}":
                return
            super().__setattr__(name, value)

    module.__class__ = _Package
