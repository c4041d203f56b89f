"""The kernels' op chains built lazily (``_LazyCalls``, only the ops a chain holds) equal the chains of every op's
call built up front (``_calls``): same call ids, names, times, shapes and parents."""

from __future__ import annotations

from pathlib import Path

from perfmodel.traces import kineto
from perfmodel.traces.kineto_collect import Collector
from perfmodel.traces.kineto_events import iter_event_batches
from perfmodel.traces.source import byte_stream, open_source

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / \
    "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz"


def _collected() -> Collector:
    collected = Collector(1_000_000)
    with byte_stream(open_source(TRACE)) as stream:
        for batch in iter_event_batches(stream, False):
            collected.add_batch(batch)
    return collected


def test_lazy_chains_equal_eager_calls() -> None:
    lazy = _collected()
    records = kineto._records(lazy)
    eager = _collected()
    order = kineto._time_order(eager.ops)
    kineto._nest(eager.ops, kineto._by_thread(eager.ops, order))
    kineto._link_backward(eager.ops)
    kineto._calls(eager.ops, order)
    by_id = {op.call.call_id: op.call for op in eager.ops if op.call is not None}
    built = [op for op in lazy.ops if op.call is not None]
    assert 0 < len(built) < len(lazy.ops)  # only the ops the kernels' chains hold
    chained = [r for r in records if r.ops]
    assert len(chained) > 0.9 * len(records)
    for record in chained:
        for call in record.ops:
            assert call == by_id[call.call_id]  # frozen dataclass equality: every field and the parents'
    for op, reference in zip(lazy.ops, eager.ops, strict=True):
        if op.call is not None:
            assert op.call == reference.call
