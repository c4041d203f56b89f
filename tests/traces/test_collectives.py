"""NCCL collectives in Kineto traces become measured collective runs: from the c10d ops' shapes (older
PyTorch, the real HTA trace) and from record_param_comms' arguments (PyTorch >= 2.1)."""

from __future__ import annotations

from typing import Any

import pytest
from trace_builders import DATA, KinetoTrace, load_events

from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.aten_args import Args, Unbuildable
from perfmodel.traces.aten_comms import reduce_scatter_base
from perfmodel.traces.records import OpCall

HTA = DATA / "negative_queue_length_values_check__rank0.json.gz"


def _kernel_time_inside(events: list[dict[str, Any]], op_name: str) -> tuple[int, float]:
    """(kernels, summed µs) of the NCCL kernels whose launch lies inside an ``op_name`` cpu_op."""
    spans = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "cpu_op" and e["name"] == op_name]
    launches = {e["args"]["correlation"]: (e["tid"], e["ts"]) for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    count, total = 0, 0.0
    for e in events:
        if e.get("cat") != "kernel" or "nccl" not in e["name"].lower():
            continue
        launch = launches.get(e["args"]["correlation"])
        if launch and any(tid == launch[0] and start <= launch[1] <= end for tid, start, end in spans):
            count, total = count + 1, total + float(e["dur"])
    return count, total


@pytest.mark.parametrize(("op_name", "kind", "shards"), [
    ("c10d::_reduce_scatter_base_", "reducescatter", (65536 * 384 * 4, 8192 * 64 * 4 * 8)),
    ("c10d::_allgather_base_", "allgather", (65536 * 64 * 4, 8192 * 384 * 4 * 8)),
])
def test_hta_reduce_scatter_and_all_gather_become_runs(op_name: str, kind: str, shards: tuple[int, int]) -> None:
    """The HTA trace (16 ranks, FSDP shards of 8): 10 of each, group size 8 from output / input elements."""
    events = load_events(HTA)
    expected_count, expected_us = _kernel_time_inside(events, op_name)
    runs = [r for r in match_runs(parse_trace(HTA)).runs if r.op_name == op_name]
    assert len(runs) == expected_count == 10
    assert sum(r.measured_time_s for r in runs) == pytest.approx(expected_us * 1e-6)
    assert {r.op["kind"] for r in runs} == {kind}
    assert {r.op["devices"] for r in runs} == {8}
    assert {r.op["dtype"] for r in runs} == {"fp32"}
    assert {r.op["bytes"] for r in runs} == {float(b) for b in shards}


def test_hta_all_reduce_and_all_to_all_take_the_world_size_from_distributed_info() -> None:
    """PyTorch 2.0 records no group size, but its ``nccl:all_reduce`` / ``nccl:all_to_all`` annotations hold the
    tensor and the file's ``distributedInfo`` the world size (16): the NCCL SendRecv kernels become runs."""
    parsed = parse_trace(HTA)
    assert parsed.world_size == 16
    result = match_runs(parsed)
    assert not [u for u in result.unmodelled if "c10d::" in u.reason or "nccl:" in u.reason]
    by_kind: dict[str, list[Any]] = {}
    for run in result.runs:
        if run.op_name.startswith("nccl:all"):
            by_kind.setdefault(run.op["kind"], []).append(run)
    assert {k: len(v) for k, v in by_kind.items()} == {"allreduce": 10, "alltoall": 45}
    for runs in by_kind.values():
        assert {r.op["devices"] for r in runs} == {16}
        assert {r.source for r in runs} == {"collective metadata"}
        assert all(any("distributedInfo.world_size" in n for n in r.notes) for r in runs)
    events = load_events(HTA)
    expected = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == "nccl:all_reduce"]
    first = expected[0]["args"]
    assert by_kind["allreduce"][0].op["bytes"] == first["Input Dims"][0][0] * 4.0  # fp32


def _comm(name: str, nelems: int, group: Any = 8, dtype: str = "BFloat16", out: int | None = None) -> dict[str, Any]:
    return {"Collective name": name, "In msg nelems": nelems, "Out msg nelems": nelems if out is None else out,
            "Group size": group, "dtype": dtype, "Process Group Name": "0", "Process Group Ranks": "[0, 1, 2]"}


def test_record_param_comms_arguments_give_the_collective() -> None:
    trace = KinetoTrace()
    # PyTorch >= 2.1: c10d op > record_param_comms (with the arguments) > the NCCL kernel launch
    trace.op("c10d::allreduce_", 0, 100, [[], [], [], []], ["TensorList", "", "", "Scalar"])
    trace.op("record_param_comms", 10, 50, extra=_comm("allreduce", 1 << 20))
    trace.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 20, 200, 300)
    # the arguments on the kernel event itself, no op recorded
    trace.kernel("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 500, 600, 80,
                 extra=_comm("_allgather_base", 4096, out=4096 * 4, group=4, dtype="Half"))
    trace.kernel("ncclDevKernel_Broadcast_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 700, 800, 10,
                 extra=_comm("broadcast", 4096))
    trace.kernel("ncclDevKernel_AllReduce_Sum_f32(ncclDevComm*)", 900, 1000, 10,
                 extra=_comm("allreduce", 4096, dtype="ComplexFloat"))
    trace.kernel("ncclDevKernel_AllReduce_Sum_f32(ncclDevComm*)", 1100, 1200, 10,
                 extra=_comm("allreduce", 4096, group="<script>8</script>"))
    result = match_runs(parse_trace(trace.to_bytes()))
    allreduce, allgather = result.runs
    assert allreduce.op == {"kind": "allreduce", "bytes": float(2 << 20), "devices": 8, "dtype": "bf16"}
    assert allreduce.op_name == "record_param_comms" and allreduce.measured_time_s == pytest.approx(300e-6)
    assert allgather.op == {"kind": "allgather", "bytes": float(4096 * 4 * 2), "devices": 4, "dtype": "fp16"}
    assert allgather.op_name == "nccl:_allgather_base" and allgather.measured_time_s == pytest.approx(80e-6)
    reasons = sorted(u.reason for u in result.unmodelled)
    assert reasons == [
        "collective 'allreduce': dtype 'ComplexFloat' has no perfmodel equivalent",
        "collective 'allreduce': no 'Group size' recorded",
        "collective 'broadcast': not a modelled collective (all-reduce, all-gather, reduce-scatter, all-to-all)",
    ]


def test_uneven_shards_are_unbuildable() -> None:
    call = OpCall(0, "c10d::_reduce_scatter_base_", 0.0, 1e-6, ((3, 5), (16, 5)), ("float", "float"))
    with pytest.raises(Unbuildable, match="not a whole number of 15-element shards"):
        reduce_scatter_base(Args(call))
