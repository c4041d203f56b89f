"""Loop trip counts the importers cannot see, supplied by the user, and each loop's share of the step.

An ONNX ``Loop`` whose ``M`` is a graph input, absent (a while-loop) or torch's ``INT64_MAX`` export, and a
StableHLO ``while`` whose bound is not a constant, have no trip count in the file. ``trip_counts`` maps a loop's
name (the ONNX node name or its path ``outer/body/inner``; a StableHLO while's first result, ``%0``) to its
iteration count; the key ``"*"`` sets the count for every other loop without one. A loop with neither is costed
``DEFAULT_TRIP_COUNT`` time(s): its body once, i.e. the time per iteration, said in the estimate's ``loops``
list (name, iterations used, where the count came from, time and share of the step) so it is never silent.
A count the user gives also replaces a constant one (a loop whose ``cond`` exits early).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping
from itertools import accumulate
from typing import Any

from perfmodel.graph.ir import GraphError

__all__ = ["ANY", "DEFAULT_TRIP_COUNT", "MAX_TRIP_COUNT", "LoopTrips", "hlo_template", "loop_shares",
           "parse_trip_counts"]

ANY = "*"
DEFAULT_TRIP_COUNT = 1
MAX_TRIP_COUNT = 10**9  # any larger is a typo; the importers' unrolled-node caps bound the work anyway
HINT = "pass its count: trip_counts={name: N} in Python, --trip-count NAME=N in the CLI, trip_counts in the API"


def parse_trip_counts(pairs: Iterable[str] | str, field: str = "trip_counts") -> dict[str, int]:
    """``["loop=8", "*=4"]``, ``"loop=8,*=4"`` or a JSON object text -> ``{"loop": 8, "*": 4}``; a bad pair is a
    ``GraphError`` naming ``field``. A name may hold '=' (the count is after the last one)."""
    if isinstance(pairs, str):
        text = pairs.strip()
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise GraphError(field, f"not a JSON object of name: count: {exc}") from exc
            if not isinstance(data, dict):
                raise GraphError(field, "expected a JSON object of name: count")
            return checked(data, field)
        pairs = [p for p in text.split(",") if p.strip()]
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.rpartition("=")
        if not sep or not key.strip() or not value.strip().isdigit():
            raise GraphError(field, f"expected loop_name=count (or *=count), got {pair!r}")
        if key.strip() in out:
            raise GraphError(field, f"loop {key.strip()!r} is given twice")
        out[key.strip()] = int(value)
    return checked(out, field)


def checked(trips: Mapping[str, Any] | None, field: str = "trip_counts") -> dict[str, int]:
    """The map with every count a whole number in [0, MAX_TRIP_COUNT], else a ``GraphError`` naming it."""
    out: dict[str, int] = {}
    for key, value in (trips or {}).items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TRIP_COUNT:
            raise GraphError(field, f"trip count of {key!r} must be a whole number 0..{MAX_TRIP_COUNT}, got {value!r}")
        out[str(key)] = value
    return out


class LoopTrips:
    """The user's counts and what the importer made of each loop (``records``, into ``graph.meta['loops']``)."""

    def __init__(self, trips: Mapping[str, Any] | None = None) -> None:
        self.given = checked(trips)
        self.used: set[str] = set()
        self.records: list[dict[str, Any]] = []

    def supplied(self, *names: str) -> tuple[int, str] | None:
        """The user's count for the first of ``names`` bound (exact name), as (count, the key used)."""
        for name in names:
            if name and name in self.given:
                self.used.add(name)
                return self.given[name], name
        return None

    def unseen(self, *names: str) -> tuple[int, str]:
        """The count for a loop whose trip count the file does not hold: the user's (by name, then ``"*"``),
        else ``DEFAULT_TRIP_COUNT``; with where it came from ("argument", "argument '*'", "default")."""
        found = self.supplied(*names)
        if found is not None:
            return found[0], "argument"
        if ANY in self.given:
            self.used.add(ANY)
            return self.given[ANY], f"argument {ANY!r}"
        return DEFAULT_TRIP_COUNT, "default"

    def record(self, name: str, op: str, iterations: int, source: str, prefix: str, body_nodes: int,
               cap: int = 0, **extra: Any) -> None:
        """List a loop. A loop met again under the same name and prefix (a StableHLO while nested in another,
        emitted once per outer iteration under its template name) is one entry: its iterations summed over the
        times it was entered (``entered``), so its share is that of all its copies. ``cap`` > 0: the loop was not
        unrolled (its iterations x body ops exceed that many nodes) and ``prefix`` is its fallback node's name."""
        for rec in self.records:
            if rec["loop"] == name and rec["prefix"] == prefix and rec["op"] == op:
                rec["iterations"] += iterations
                rec["entered"] = rec.get("entered", 1) + 1
                if source not in rec["trip_count"].split(" / "):
                    rec["trip_count"] += f" / {source}"
                rec["note"] = self._note(name, op, rec["iterations"], rec["trip_count"], rec["entered"], cap,
                                         body_nodes)
                return
        self.records.append({"loop": name, "op": op, "iterations": iterations, "trip_count": source,
                             "body_nodes": body_nodes, "prefix": prefix, **({"unrolled": False} if cap else {}),
                             **extra, "note": self._note(name, op, iterations, source, 1, cap, body_nodes)})

    @staticmethod
    def _note(name: str, op: str, iterations: int, source: str, entered: int, cap: int = 0,
              body_nodes: int = 0) -> str:
        inside = f" in all, over the {entered} times it is entered (an enclosing loop's iterations)" * (entered > 1)
        capped = (f"; not unrolled ({iterations} x {body_nodes} body ops exceed the {cap}-node cap): its time is "
                  "its inputs' and outputs' bytes over DRAM bandwidth once, which leaves out its iterations' "
                  "work") if cap else ""
        return (f"{op} {name!r}: {iterations} iteration(s){inside}, trip count from {source}{capped}"
                + (f" (not in the file: the time is per iteration; {HINT})" if "default" in source else ""))

    def unmatched(self) -> list[str]:
        """Names the user bound that no loop of the model has (a typo, or a loop that was not imported)."""
        return [k for k in self.given if k not in self.used and k != ANY]

    def into(self, meta: dict[str, Any]) -> None:
        if self.records:
            meta["loops"] = self.records
        if self.unmatched():
            meta["trip_counts_unmatched"] = self.unmatched()


_COPY = re.compile(r"/\d+/(?=body/)")  # an ONNX Loop copy's iteration segment (onnx_control names copies so)
_HLO_COPY = re.compile(r"(while\d+\.)\d+/")  # a StableHLO while copy's iteration: while12.3/ -> while12./


def hlo_template(name: str) -> str:
    """A name inside unrolled StableHLO whiles with each enclosing iteration index dropped (``while12.3/x`` ->
    ``while12./x``): every copy of a nested loop's nodes under one prefix."""
    return _HLO_COPY.sub(r"\1/", name)


def loop_shares(loops: list[dict[str, Any]] | None, names: list[str], times: list[float]) -> list[dict[str, Any]]:
    """Per loop of ``graph.meta['loops']``: its iterations, where the count came from, the time of its nodes
    (those named under its ``prefix``, unrolled copies and nested loops included: a loop inside an ONNX Loop's body
    is named by its template path, ``outer/body/inner``, and matches every copy ``outer/<i>/body/inner/...``) and
    their share of the sum of ``times``. One sort of the names, then two bisections per loop (a 1000-iteration
    loop has ~10^4 nodes)."""
    if not loops:
        return []
    keys = [_COPY.sub("/", n) if "/body/" in n else n for n in names]  # outer/3/body/inner/.. -> outer/body/inner/..
    if any(loop.get("op") == "stablehlo.while" for loop in loops):
        keys = [hlo_template(k) if "while" in k else k for k in keys]  # while4.2/while19.0/.. -> while4./while19./..
    order = sorted(range(len(keys)), key=keys.__getitem__)
    sorted_names = [keys[i] for i in order]
    cumulative = [0.0, *accumulate(times[i] for i in order)]
    total = sum(times) or 1.0
    out = []
    for loop in loops:
        prefix = str(loop.get("prefix") or loop.get("loop", ""))
        lo = bisect.bisect_left(sorted_names, prefix)
        hi = bisect.bisect_left(sorted_names, prefix + "\U0010ffff")
        time_s = cumulative[hi] - cumulative[lo]
        out.append({k: v for k, v in loop.items() if k != "prefix"} | {"nodes": hi - lo, "time_s": time_s,
                                                                         "share": time_s / total})
    return out
