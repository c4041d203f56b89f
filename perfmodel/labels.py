"""A column of short text labels (``CostBatch.bound``) held as small integer codes into a table of names.

A numpy unicode column costs 4 bytes per character of its longest label on every row (48 B for ``<U12``);
``Labels`` costs 1 byte per row (``uint8`` codes while there are at most 256 names) plus the table. It reads
like the array it replaces: ``labels[i]`` is a ``str``, ``labels[rows]`` a ``Labels``, ``labels == "L2"`` a bool
array, ``tolist()`` the strings, and ``np.asarray(labels)`` the unicode array.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

Codes = np.ndarray[Any, np.dtype[np.unsignedinteger[Any]]]


class Labels:
    """Per row, ``names[codes[row]]``; ``names`` holds each label once (so equal codes mean equal labels)."""

    __slots__ = ("codes", "names")

    def __init__(self, codes: np.ndarray[Any, Any], names: Sequence[str]) -> None:
        self.codes: Codes = codes
        self.names: tuple[str, ...] = tuple(names)

    @classmethod
    def from_codes(cls, codes: np.ndarray[Any, Any], names: Sequence[str]) -> Labels:
        """``names[codes]`` with repeated names merged into one code and codes in the narrowest unsigned type."""
        distinct, remap = cls.coder(names)
        return cls(remap[codes], distinct)

    @staticmethod
    def coder(names: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray[Any, Any]]:
        """What ``from_codes`` maps ``names`` to: the distinct names, and each name's code among them (narrowest
        unsigned type)."""
        distinct = tuple(dict.fromkeys(names))
        remap = np.array([distinct.index(name) for name in names], dtype=np.min_scalar_type(max(len(distinct) - 1, 0)))
        return distinct, remap

    @classmethod
    def from_strings(cls, values: Sequence[str] | np.ndarray[Any, Any]) -> Labels:
        """The labels of a list or unicode array of strings."""
        names, codes = np.unique(np.asarray(values, dtype=str), return_inverse=True)
        return cls.from_codes(codes.reshape(-1), names.tolist())

    @property
    def dtype(self) -> np.dtype[Any]:
        """The unicode dtype ``np.asarray(self)`` has."""
        return np.array(self.names or ("",)).dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.codes.size),)

    @property
    def size(self) -> int:
        return int(self.codes.size)

    def __len__(self) -> int:
        return int(self.codes.size)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        out = np.array(self.names or ("",))[self.codes]
        return out if dtype is None else out.astype(dtype)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (int, np.integer)):
            return self.names[int(self.codes[i])]
        return Labels(self.codes[i], self.names)

    def __setitem__(self, where: Any, value: str) -> None:
        if value not in self.names:
            self.names = (*self.names, value)
            if len(self.names) - 1 > np.iinfo(self.codes.dtype).max:
                self.codes = self.codes.astype(np.min_scalar_type(len(self.names) - 1))
        self.codes[where] = self.names.index(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def __eq__(self, other: object) -> Any:
        if isinstance(other, str):
            return np.array([name == other for name in self.names] or [False])[self.codes]
        return np.asarray(self) == np.asarray(other)

    def __ne__(self, other: object) -> Any:
        return ~(self == other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared row by row like an array

    def tolist(self) -> list[str]:
        """The labels as Python strings, one per row."""
        return list(map(self.names.__getitem__, self.codes.tolist()))

    def copy(self) -> Labels:
        return Labels(self.codes.copy(), self.names)

    def astype(self, dtype: Any) -> np.ndarray[Any, Any]:
        return np.asarray(self).astype(dtype)

    def __repr__(self) -> str:
        return f"Labels({self.tolist()!r})"

    def tobytes(self) -> bytes:
        """``np.asarray(self).tobytes()``: the bytes of the unicode array the labels read as."""
        return np.asarray(self).tobytes()
