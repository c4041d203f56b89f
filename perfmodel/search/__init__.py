"""Tiling and scheduling search: schedule spaces per op family, costed as numpy arrays.

The entry point is ``perfmodel.search`` (``perfmodel.search.engine.search``).
"""
