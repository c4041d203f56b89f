"""Parse work is bounded by ``parse_limits``: decompressed bytes, the gzip ratio, and time; unbounded outside."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

import pytest

from perfmodel.traces.parse import parse_trace
from perfmodel.traces.source import ParseLimits, TraceLimitExceeded, parse_limits

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "host_cpu_linear_train.pt.trace.json.gz"


def _spaces_gzip(mib: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    return packer.compress(b'{"traceEvents":[') + b"".join(packer.compress(block) for _ in range(mib)) + packer.flush()


def test_no_limits_by_default_and_outside_the_block() -> None:
    content = TRACE.read_bytes()
    with parse_limits(ParseLimits(max_bytes=1000)), pytest.raises(TraceLimitExceeded):
        parse_trace(content)
    assert parse_trace(content).kernels  # the limit ended with its block


@pytest.mark.parametrize("kind", ["bytes", "stream", "path"])
def test_decompressed_bytes_are_bounded_for_every_source(kind: str) -> None:
    content = TRACE.read_bytes()
    size = len(gzip.decompress(content))
    source: object = {"bytes": content, "stream": io.BytesIO(content), "path": TRACE}[kind]
    with parse_limits(ParseLimits(max_bytes=size // 2)), pytest.raises(TraceLimitExceeded) as caught:
        parse_trace(source)  # type: ignore[arg-type]
    assert caught.value.limit == "max_bytes" and f"{size // 2} bytes" in str(caught.value)
    with parse_limits(ParseLimits(max_bytes=size)):
        assert parse_trace(TRACE).kernels  # exactly its size is allowed


def test_plain_text_is_bounded_too() -> None:
    text = gzip.decompress(TRACE.read_bytes())
    with parse_limits(ParseLimits(max_bytes=len(text) - 1)), pytest.raises(TraceLimitExceeded):
        parse_trace(text)


def test_a_gzip_bomb_stops_at_its_ratio() -> None:
    bomb = _spaces_gzip(64)  # ~66 kB that inflate to 64 MiB
    limits = ParseLimits(max_gzip_ratio=100, ratio_floor_bytes=1 << 20)
    with parse_limits(limits), pytest.raises(TraceLimitExceeded) as caught:
        parse_trace(bomb)
    assert caught.value.limit == "max_gzip_ratio"
    assert f"100 times its {len(bomb)} gzip bytes" in str(caught.value)
    with parse_limits(limits):  # a real trace inflates ~12x: well within
        assert parse_trace(TRACE.read_bytes()).kernels


def test_time_is_bounded() -> None:
    with parse_limits(ParseLimits(max_s=1e-9)), pytest.raises(TraceLimitExceeded) as caught:
        parse_trace(TRACE.read_bytes())
    assert caught.value.limit == "max_s" and "longer than" in str(caught.value)
