"""JSON nested past ``MAX_JSON_DEPTH`` is refused before ijson reads it: ijson's memory grows with the square of
the depth, and a 400 kB upload of nested brackets had the service killed by the OOM killer without an answer.
The guard's depth matches a byte-by-byte reference over strings with brackets, escapes and chunk cuts."""

from __future__ import annotations

import gzip
import io
import json
import random

import pytest

from perfmodel.traces import TraceError, parse_trace
from perfmodel.traces.json_depth import MAX_JSON_DEPTH, DepthLimited


def _reference_max_depth(data: bytes) -> int:
    depth = best = 0
    inside = escaped = False
    for byte in data:
        if inside:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                inside = False
        elif byte == 0x22:
            inside = True
        elif byte in b"[{":
            depth += 1
            best = max(best, depth)
        elif byte in b"]}":
            depth -= 1
    return best


def _nested(rng: random.Random, depth: int) -> object:
    if depth == 0:
        return rng.choice(["a[b{c", 'q"\\[', "\\\\", "}]", 1.5, None, "ok"])
    inner = [_nested(rng, depth - 1) for _ in range(rng.randint(1, 2))]
    return {rng.choice(["x[", "y\\\"{", "z"]): inner} if rng.random() < 0.5 else inner


def _read_all(data: bytes, chunk: int, limit: int) -> None:
    guarded = DepthLimited(io.BytesIO(data), limit)
    while guarded.read(chunk):
        pass


@pytest.mark.parametrize("seed", range(6))
def test_depth_matches_a_byte_by_byte_reference_at_every_chunk_size(seed: int) -> None:
    rng = random.Random(seed)
    data = json.dumps(_nested(rng, rng.randint(3, 9))).encode()
    depth = _reference_max_depth(data)
    for chunk in (1, 2, 3, 7, 64, 1 << 16):
        _read_all(data, chunk, depth)  # exactly at the limit: accepted
        with pytest.raises(TraceError, match=f"deeper than {depth - 1} levels"):
            _read_all(data, chunk, depth - 1)


@pytest.mark.parametrize("document", [
    b'{"traceEvents":%s}',
    b'{"traceEvents":[%s]}',
    b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":0,"dur":1},%s]}',
    b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":0,"dur":1,"args":{"a":%s}}]}',
])
def test_deeply_nested_traces_are_refused_with_the_reason(document: bytes) -> None:
    """Before, these reached ijson: 3,000 levels parsed in ~1 s to "no events" or a kernel; 20,000 took 1 GB."""
    nested = b"[" * 3000 + b"]" * 3000
    content = gzip.compress(document % nested)
    with pytest.raises(TraceError, match=f"nests deeper than {MAX_JSON_DEPTH} levels"):
        parse_trace(content, "deep.json.gz")
