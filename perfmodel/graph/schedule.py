"""Timeline: a compute stream and a communication stream per pipeline stage.

- ``compute`` nodes and blocking ``comm`` nodes (tensor-parallel all-reduces, all-to-alls,
  pipeline sends: the next op needs their result) run one after the other.
- ``comm_overlap`` nodes (data-parallel gradient all-reduce, bucketed) run on their own stream
  from when their producer is done, hidden behind the compute that follows; only what outlasts
  the stage's compute is exposed.

One microbatch crosses the stages in order, so stage s starts when stage s−1 ends. With m
microbatches the step takes Σ stage times + (m − 1) · max stage time; the pipeline bubble is
the idle share of device time, 1 − m·Σt / (pp · step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.graph.ir import Graph, Stream
from perfmodel.graph.lazy_graph import node_column
from perfmodel.ops.base import FloatArray


@dataclass
class Timeline:
    """Start and end of every node (s), per-stage times, and the step time of all microbatches."""

    start_s: FloatArray
    end_s: FloatArray
    stage_times_s: list[float]
    exposed_comm_s: float
    hidden_comm_s: float
    microbatches: int

    @property
    def latency_s(self) -> float:
        """One microbatch through every stage."""
        return float(sum(self.stage_times_s))

    @property
    def step_s(self) -> float:
        if not self.stage_times_s:
            return 0.0
        return self.latency_s + (self.microbatches - 1) * max(self.stage_times_s)

    @property
    def bubble_fraction(self) -> float:
        pp = len(self.stage_times_s)
        if pp <= 1 or self.step_s <= 0:
            return 0.0
        return max(0.0, 1.0 - self.microbatches * self.latency_s / (pp * self.step_s))


def schedule(graph: Graph, time_s: FloatArray, microbatches: int = 1) -> Timeline:
    """Place every node on its stage's streams (``time_s`` per node, in graph order)."""
    streams = node_column(graph, "stream")  # no nodes built for a graph holding copied layers by reference
    if "comm_overlap" not in streams:
        return _serial(graph, time_s, microbatches, streams)
    n = len(graph.nodes)
    start, end = np.zeros(n), np.zeros(n)
    producer = graph.producers()
    times = time_s.tolist()
    stage_times: dict[int, float] = {}
    offset = compute = comm = 0.0
    current: int | None = None
    exposed = overlapped = tail = 0.0
    for i, node in enumerate(graph.nodes):
        if node.stage != current:
            if current is not None:
                stage_times[current] = max(compute, comm) - offset
                tail += max(comm - compute, 0.0)
                offset = max(compute, comm)
            current, compute, comm = node.stage, offset, offset
        ready = max((end[producer[x]] for x in node.inputs if x in producer and producer[x] < i), default=offset)
        t = times[i]
        if node.stream == "comm_overlap":
            s = max(comm, ready if node.inputs else compute)
            comm = s + t
            overlapped += t
        else:
            s = max(compute, ready)
            compute = s + t
            if node.stream == "comm":
                exposed += t
        start[i], end[i] = s, s + t
    if current is not None:
        stage_times[current] = max(compute, comm) - offset
        tail += max(comm - compute, 0.0)
    return Timeline(start_s=start, end_s=end, stage_times_s=[stage_times[k] for k in sorted(stage_times)],
                    exposed_comm_s=exposed + tail, hidden_comm_s=max(overlapped - tail, 0.0),
                    microbatches=microbatches)


def _serial(graph: Graph, time_s: FloatArray, microbatches: int, streams: list[Stream]) -> Timeline:
    """No overlapped streams: every node waits for the one before it (a running sum)."""
    end = np.cumsum(time_s)
    stages = np.fromiter(node_column(graph, "stage"), dtype=np.int64, count=len(streams))
    comm = np.fromiter(map("comm".__eq__, streams), dtype=bool, count=len(streams))
    per_stage = np.bincount(stages, weights=time_s) if len(stages) else np.zeros(0)
    present = np.unique(stages)
    return Timeline(start_s=end - time_s, end_s=end, stage_times_s=per_stage[present].tolist(),
                    exposed_comm_s=float(time_s[comm].sum()), hidden_comm_s=0.0, microbatches=microbatches)
