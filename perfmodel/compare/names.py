"""Kernel names normalised so the same kernel matches across two traces (addresses, spacing, signatures)."""

from __future__ import annotations

import re

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_SPACES = re.compile(r"\s*([<>,()*&])\s*")
_RUNS = re.compile(r"\s+")
_LAMBDA = re.compile(r"lambda\s*(?:#\d+|\[\d+\])")
MAX_KEY_CHARS = 512


def _drop_parameters(name: str) -> str:
    """``kernel<T>(int, float*)`` -> ``kernel<T>``: the parameter list after the last top-level template."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        char = name[i]
        if char == ")":
            depth += 1
        elif char == "(":
            depth -= 1
            if depth == 0:
                head = name[:i].rstrip()
                return head if head else name
    return name


def normalise_kernel_name(name: str) -> str:
    """A stable key for a kernel name: hex addresses become ``0x?``, lambda numbers ``lambda#?``, the
    parameter list and a leading ``void`` go, spacing around ``<>,()*&`` is dropped; cut to 512 characters."""
    text = _ADDRESS.sub("0x?", name.strip())
    text = _LAMBDA.sub("lambda#?", text)
    text = _RUNS.sub(" ", _SPACES.sub(r"\1", text))
    text = _drop_parameters(text)
    if text.startswith("void "):
        text = text[5:]
    return text[:MAX_KEY_CHARS]
