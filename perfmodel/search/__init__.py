"""Tiling and scheduling search: schedule spaces per op family, costed as numpy arrays."""
