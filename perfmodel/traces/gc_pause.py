"""Moved to ``perfmodel.gc_pause`` (graphs pause the collector too); kept for the trace modules' imports."""

from perfmodel.gc_pause import gc_paused, without_gc

__all__ = ["gc_paused", "without_gc"]
