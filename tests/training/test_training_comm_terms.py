"""Issue 29's communication terms: sequence parallelism's tp collectives as a reduce-scatter and an all-gather
(not an all-reduce, which NVLS accelerates), and Llama 3's all-gather context parallelism (exposed)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel.collectives import ALLGATHER, ALLREDUCE, AUTO, REDUCESCATTER, collective_time
from perfmodel.graph.ir import GraphError, Node
from perfmodel.graph.llm_config import bundled
from perfmodel.machine import tables
from perfmodel.roofline import resolve_hardware
from perfmodel.training.costs import ProbeKey, cost_table, sequence_parallel_comm, sequence_parallel_rows
from perfmodel.training.fit import evaluate
from perfmodel.training.layout import Layout, TrainingSetup
from perfmodel.training.step import all_gather_cp_exposed

H100 = "nvidia-h100-sxm5-80gb"
A100 = "nvidia-a100-sxm4-80gb"
AR_BYTES = 268435456.0  # Llama 3 405B, 8192 tokens x 16384 x bf16
AR_OP: dict[str, Any] = {"kind": "allreduce", "bytes": AR_BYTES, "devices": 8, "dtype": "bf16"}


def _coll(hw: str, kind: int, size: float) -> float:
    t = tables(resolve_hardware(hw))
    return float(collective_time(t, np.array([kind]), np.array([size]), np.array([8.0]), np.array([8.0]),
                                 np.array([AUTO]))[0])


def test_a_layer_all_reduce_becomes_a_reduce_scatter_and_an_all_gather() -> None:
    node = Node(name="layers.0.mlp_allreduce_backward", op=dict(AR_OP), layer="layers.0", stream="comm")
    split = sequence_parallel_comm(node)
    assert [n.op["kind"] for n in split if n.op] == ["reducescatter", "allgather"]
    assert all(n.name == node.name and n.op and n.op["bytes"] == AR_BYTES for n in split)
    head = Node(name="head.logits_allreduce", op=dict(AR_OP), layer="head", stream="comm")
    gemm = Node(name="layers.0.mlp_up", op={"kind": "gemm"}, layer="layers.0")
    assert sequence_parallel_comm(head) == [head] and sequence_parallel_comm(gemm) == [gemm]


def test_the_pair_costs_more_than_an_nvls_all_reduce_on_h100_and_the_same_on_a100() -> None:
    """A ring all-reduce is a reduce-scatter then an all-gather; NVSwitch's in-switch reduction (H100) moves
    each byte once each way, which the pair cannot."""
    size = AR_BYTES
    for hw, low, high in ((H100, 1.3, 1.7), (A100, 0.99, 1.02)):
        pair = _coll(hw, REDUCESCATTER, size) + _coll(hw, ALLGATHER, size)
        assert low < pair / _coll(hw, ALLREDUCE, size) < high, hw


def test_the_cost_table_charges_sequence_parallel_tp_comm_as_the_pair() -> None:
    cfg, hw = bundled("llama-3.1-405b"), resolve_hardware(H100)
    key = ProbeKey(tp=8, cp=1, micro_batch=1)
    sp, plain = (cost_table(cfg, hw, [key], 8192, sequence_parallel=flag).probes[key] for flag in (True, False))
    assert not isinstance(sp, str) and not isinstance(plain, str)
    pair = _coll(H100, REDUCESCATTER, AR_BYTES) + _coll(H100, ALLGATHER, AR_BYTES)
    ratio = pair / _coll(H100, ALLREDUCE, AR_BYTES)
    assert sp.tp_comm_s == pytest.approx(ratio * plain.tp_comm_s, rel=0.02)
    assert sp.layer_s < plain.layer_s  # the norms and residual adds on s/tp tokens (below)
    assert sp.layer_s - sp.attention_s > 0.9 * (plain.layer_s - plain.attention_s)  # the GEMMs are the same


def test_sequence_parallelism_runs_norms_and_residual_adds_on_a_tp_share_of_the_tokens() -> None:
    """Korthikanti et al. 2022 §4.2.2: LayerNorm, dropout and the residual add sit in the sequence-parallel region."""
    norm = Node(name="layers.3.input_norm", op={"kind": "rmsnorm", "shape": [8192, 16384], "dtype": "bf16"},
                layer="layers.3")
    add = Node(name="layers.3.mlp_residual_add", op={"kind": "elementwise", "shape": [8192, 16384]},
               layer="layers.3")
    q_norm = Node(name="layers.3.q_norm", op={"kind": "rmsnorm", "shape": [8192, 2048]}, layer="layers.3")
    for node in (norm, add):
        out = sequence_parallel_rows(node, 8, 16384)
        assert out.op and out.op["shape"] == [1024, 16384] and out.name == node.name
    assert sequence_parallel_rows(norm, 1, 16384) is norm
    assert sequence_parallel_rows(q_norm, 8, 16384) is q_norm  # on the tp-sharded heads already
    assert sequence_parallel_rows(Node(name="layers.3.input_norm", op={"kind": "rmsnorm", "shape": [10, 16384]},
                                       layer="layers.3"), 8, 16384).op == {"kind": "rmsnorm", "shape": [2, 16384]}


def test_all_gather_context_parallelism_exposes_two_gathers_and_a_scatter() -> None:
    calls: list[tuple[int, float, float]] = []

    def coll(kind: int, size: Any, devices: Any, q: Any) -> Any:
        calls.append((kind, float(size), float(devices)))
        return np.asarray(1.0 if kind == ALLGATHER else 10.0)

    out = all_gather_cp_exposed(coll, 4.0, 16.0, 1.0, np.array([False, True]))
    assert out.tolist() == [12.0, 13.0]  # 2 gathers + scatter; full recomputation gathers once more
    assert {(k, s, d) for k, s, d in calls} == {(ALLGATHER, 64.0, 16.0), (REDUCESCATTER, 64.0, 16.0)}


def test_llama3_all_gather_cp_is_exposed_where_the_ring_hides() -> None:
    """Llama 3 405B, 131K tokens, tp8 cp16: the ring's send/recv hides behind the long attention; the all-gather
    (§3.3.2) runs before it and shows, per layer and micro-batch, as 2 gathers + 1 scatter of 16 K/V blocks."""
    cfg, hw = bundled("llama-3.1-405b"), resolve_hardware(H100)
    layout = Layout(tp=8, pp=16, cp=16, dp=1, recompute="none", virtual_stages=8)
    rows = {style: evaluate(cfg, hw, layout, TrainingSetup(seq_len=131072, global_batch=4, cp_attention=style))
            .row(0) for style in ("ring", "allgather")}
    assert rows["ring"]["time_s"]["cp_exposed_s"] == 0.0
    kv_block = 131072 / 16 * 2 * 8 * 128 / 8 * 2.0  # tokens x (K, V) x kv heads x head dim / tp x bf16
    per_layer = 2 * _coll_cp(ALLGATHER, 16 * kv_block) + _coll_cp(REDUCESCATTER, 16 * kv_block)
    exposed = rows["allgather"]["time_s"]["cp_exposed_s"]
    assert exposed == pytest.approx(4 * 8 * per_layer, rel=1e-6)  # 4 micro-batches x 8 layers per stage
    # the two run different attention kernels (each rank's ring steps or its all-gathered prefixes,
    # training/cp_attention.py): what is not compute or bubble differs by at least the exposure
    rest = {k: r["step_s"] - r["time_s"]["compute_s"] - r["time_s"]["bubble_s"] for k, r in rows.items()}
    assert rest["allgather"] > rest["ring"] + exposed


def _coll_cp(kind: int, size: float) -> float:
    """One collective over 16 ranks one per node (tp = 8 fills a node), plus the launch the step charges."""
    t = tables(resolve_hardware(H100))
    return float(collective_time(t, np.array([kind]), np.array([size]), np.array([16.0]), np.array([1.0]),
                                 np.array([AUTO]))[0]) + t.kernel_overhead_s


def test_an_unknown_cp_attention_is_refused() -> None:
    with pytest.raises(GraphError, match="cp_attention"):
        TrainingSetup(cp_attention="ulysses")  # type: ignore[arg-type]
