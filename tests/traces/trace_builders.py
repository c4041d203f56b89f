"""Builders for synthetic traces in the real layouts (Kineto events, CSV text)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


class KinetoTrace:
    """A Kineto Chrome trace: cpu_ops, their launches (cuda_runtime) and kernels, joined as PyTorch does."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._next = 1

    def op(self, name: str, ts: float, dur: float, dims: list[Any] | None = None, types: list[str] | None = None,
           concrete: list[str] | None = None, tid: int = 1, extra: dict[str, Any] | None = None) -> int:
        external = self._next
        self._next += 1
        args: dict[str, Any] = {"External id": external, **(extra or {})}
        if dims is not None:
            args["Input Dims"] = dims
        if types is not None:
            args["Input type"] = types
        if concrete is not None:
            args["Concrete Inputs"] = concrete
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": tid, "ts": ts,
                            "dur": dur, "args": args})
        return external

    def kernel(self, name: str, launch_ts: float, ts: float, dur: float, cat: str = "kernel", tid: int = 1,
               external: int = 0, extra: dict[str, Any] | None = None) -> None:
        correlation = self._next
        self._next += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": tid,
                            "ts": launch_ts, "dur": 1, "args": {"External id": external,
                                                                "correlation": correlation}})
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                            "args": {"External id": external, "device": 0, "stream": 7,
                                     "correlation": correlation, "grid": [4, 1, 1], "block": [128, 1, 1],
                                     **(extra or {})}})

    def to_bytes(self, gz: bool = False) -> bytes:
        text = json.dumps({"schemaVersion": 1, "record_shapes": 1, "traceEvents": self.events}).encode()
        return gzip.compress(text) if gz else text


def csv_text(header: list[str], rows: list[list[Any]], preamble: str = "") -> bytes:
    out = io.StringIO()
    out.write(preamble)
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def load_events(path: Path) -> list[dict[str, Any]]:
    """All trace events, read with the standard library (the independent check of the parser)."""
    with gzip.open(path, "rt") as handle:
        events: list[dict[str, Any]] = json.load(handle)["traceEvents"]
    return events
