"""NCCL/RCCL collectives in PyTorch traces -> perfmodel collective op dicts.

Two sources, the exact one first:

- ``record_param_comms`` arguments (PyTorch >= 2.1 writes them on the ``record_param_comms`` op and on
  the NCCL kernel event): ``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``Group size``,
  ``dtype`` (a c10 scalar type name such as ``BFloat16``).
- Older traces only record the ``c10d::`` op's tensor shapes. The group size then follows from the
  shapes where the collective changes the buffer size: ``c10d::_reduce_scatter_base_`` (output,
  input) has input / output ranks, ``c10d::_allgather_base_`` (output, input) output / input.
  ``c10d::allreduce_`` and ``c10d::alltoall_base_`` keep their size, so without ``Group size`` they
  cannot be built, and say so.

``bytes`` follows perfmodel's collectives: the input of all-reduce, reduce-scatter and all-to-all,
the output of all-gather, per device.
"""

from __future__ import annotations

from typing import Any

from perfmodel.dtypes import parse_dtype
from perfmodel.traces.aten_args import Args, Unbuildable, numel
from perfmodel.traces.records import CommArgs

OpDict = dict[str, Any]

# ProcessGroupNCCL's collective names (``Collective name``) -> perfmodel kinds
KIND_OF_COLLECTIVE = {
    "allreduce": "allreduce", "allreduce_coalesced": "allreduce", "all_reduce": "allreduce",
    "allgather": "allgather", "_allgather_base": "allgather", "allgather_into_tensor_coalesced": "allgather",
    "allgather_coalesced": "allgather", "all_gather": "allgather", "all_gather_into_tensor": "allgather",
    "_all_gather_base": "allgather",
    "reduce_scatter": "reducescatter", "_reduce_scatter_base": "reducescatter",
    "reduce_scatter_tensor_coalesced": "reducescatter", "reduce_scatter_tensor": "reducescatter",
    "all_to_all": "alltoall", "alltoall": "alltoall", "alltoall_base": "alltoall", "all_to_all_single": "alltoall",
}
# c10 scalar type names (``dtype`` of record_param_comms) -> perfmodel dtypes
COMM_DTYPES = {
    "Float": "fp32", "Double": "fp64", "Half": "fp16", "BFloat16": "bf16", "Float8_e4m3fn": "fp8_e4m3",
    "Float8_e4m3fnuz": "fp8_e4m3", "Float8_e5m2": "fp8_e5m2", "Float8_e5m2fnuz": "fp8_e5m2", "Char": "int8",
    "Byte": "int8", "Bool": "int8", "Int": "int32", "Long": "int64",
}


def comm_args(args: dict[str, Any]) -> CommArgs | None:
    """``CommArgs`` from an event's ``args``, None where it records no collective."""
    name = args.get("Collective name")
    if not isinstance(name, str) or not name:
        return None

    def count(key: str) -> int:
        value = args.get(key)
        return value if type(value) is int and value >= 0 else 0

    group = args.get("Group size")
    dtype = args.get("dtype")
    return CommArgs(name[:64], count("In msg nelems"), count("Out msg nelems"),
                    group if type(group) is int and group > 0 else None, dtype[:32] if isinstance(dtype, str) else "")


def from_comm_args(comm: CommArgs) -> OpDict:
    """The perfmodel op of one recorded collective; ``Unbuildable`` with the reason where there is none."""
    where = f"collective {comm.collective!r}"
    kind = KIND_OF_COLLECTIVE.get(comm.collective)
    if kind is None:
        raise Unbuildable(f"{where}: not a modelled collective (all-reduce, all-gather, reduce-scatter, "
                          "all-to-all)")
    if comm.group_size is None:
        raise Unbuildable(f"{where}: no 'Group size' recorded")
    dtype = COMM_DTYPES.get(comm.dtype)
    if dtype is None:
        raise Unbuildable(f"{where}: dtype {comm.dtype!r} has no perfmodel equivalent")
    elements = comm.out_elements if kind == "allgather" else comm.in_elements
    if elements <= 0:
        raise Unbuildable(f"{where}: no message size recorded")
    return _collective(kind, elements, dtype, comm.group_size)


def _collective(kind: str, elements: int, dtype: str, devices: int) -> OpDict:
    if devices < 2:
        raise Unbuildable(f"{kind} on {devices} rank: nothing crosses a link")
    return {"kind": kind, "bytes": float(elements) * parse_dtype(dtype).bytes, "devices": devices, "dtype": dtype}


def _ratio(a: Args, larger: int, smaller: int) -> int:
    big, small = numel(a.shape(larger)), numel(a.shape(smaller))
    if big % small:
        raise Unbuildable(f"{a.name}: {big} elements are not a whole number of {small}-element shards")
    return big // small


def reduce_scatter_base(a: Args) -> OpDict:
    """``c10d::_reduce_scatter_base_(output, input, ...)``: ranks = input / output elements."""
    return _collective("reducescatter", numel(a.shape(1)), a.dtype(1), _ratio(a, 1, 0))


def allgather_base(a: Args) -> OpDict:
    """``c10d::_allgather_base_(output, input, ...)``: ranks = output / input elements."""
    return _collective("allgather", numel(a.shape(0)), a.dtype(0), _ratio(a, 0, 1))


def size_preserving(a: Args) -> OpDict:
    """``c10d::allreduce_``, ``c10d::alltoall_base_``: the group size is not in the shapes."""
    raise Unbuildable(f"{a.name}: the group size is not recorded (PyTorch >= 2.1 records it as 'Group size' "
                      "in record_param_comms)")


BUILDERS = {
    "c10d::_reduce_scatter_base_": reduce_scatter_base, "c10d::_allgather_base_": allgather_base,
    "c10d::allreduce_": size_preserving, "c10d::alltoall_base_": size_preserving,
}


# ProcessGroupNCCL's ``nccl:<collective>`` user annotation -> the ``Collective name`` it stands for
ANNOTATION_PREFIX = "nccl:"


def annotation_op(a: Args, world_size: int | None) -> tuple[OpDict, list[str]]:
    """A ``nccl:all_reduce`` / ``nccl:all_to_all`` / ... annotation (PyTorch 1.13-2.0): its tensor's shape and
    dtype, and the group size from the file's ``distributedInfo.world_size`` (the default process group: a
    collective on a smaller group is then over-counted, so it is noted). All-to-all runs as NCCL send/recv
    pairs: modelled as perfmodel's all-to-all of the input bytes (each rank sends (n-1)/n of it)."""
    collective = a.name.removeprefix(ANNOTATION_PREFIX)
    kind = KIND_OF_COLLECTIVE.get(collective)
    if kind is None:
        raise Unbuildable(f"{a.name}: not a modelled collective")
    if world_size is None:
        raise Unbuildable(f"{a.name}: the group size is not recorded (no 'Group size', no distributedInfo)")
    shape = a.shape(0)
    op = _collective(kind, numel(shape), a.dtype(0), world_size)
    if kind == "allgather":
        op["bytes"] *= world_size  # the annotation records one rank's input; perfmodel counts the output
    return op, [f"group size {world_size} from distributedInfo.world_size (the default process group)"]


def group_from_world(comm: CommArgs, world_size: int | None) -> CommArgs:
    """``comm`` with the file's world size where record_param_comms did not record a group size."""
    if comm.group_size is not None or world_size is None:
        return comm
    return CommArgs(comm.collective, comm.in_elements, comm.out_elements, world_size, comm.dtype)
