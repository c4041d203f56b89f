"""A module-level switch of ``perfmodel.machine`` (``SIMT_SUSTAINED_CLOCK``, ``SIMT_INTEGER_OVERLAP``) set for a test,
with the machine tables and the call memo rebuilt each way and the shipped value restored after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import perfmodel.machine as machine
from perfmodel.search import call_memo


def set_switch(name: str, on: bool) -> None:
    """Set ``machine.<name>`` and drop every table and memo built under the other value."""
    setattr(machine, name, on)
    machine._CACHE.clear()
    call_memo.clear()


@contextmanager
def switched(name: str, on: bool | None = None) -> Iterator[None]:
    """``machine.<name>`` at ``on`` (None: as shipped) inside the block, the shipped value after."""
    shipped = bool(getattr(machine, name))
    if on is not None:
        set_switch(name, on)
    try:
        yield
    finally:
        set_switch(name, shipped)
