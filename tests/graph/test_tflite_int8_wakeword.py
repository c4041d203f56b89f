"""A real fully int8-quantized, streaming TFLite model: microWakeWord's "okay nabu" detector from the
pymicro-wakeword 1.0.0 wheel (tests/data/tflite/README.md). Its state lives in resource variables (CALL_ONCE of
an init subgraph, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, STRIDED_SLICE ring buffers): the import must not
abort on them, every int8 conv / FC runs the int8 path with its file's scales and zero points, and parameters and
conv / FC FLOPs equal a count taken here from the flatbuffer's own tensors with the ``tflite`` schema reader
(issue 26)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from perfmodel.graph import estimate
from perfmodel.graph.tflite_import import import_tflite

tflite = pytest.importorskip("tflite")

FILE = Path(__file__).resolve().parents[1] / "data" / "tflite" / "okay_nabu.tflite"
A100 = "nvidia-a100-sxm4-80gb"
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _flatbuffer() -> tuple[Any, Any, list[str]]:
    model = tflite.Model.GetRootAsModel(FILE.read_bytes(), 0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if k.isupper()}
    sub = model.Subgraphs(0)
    kinds = []
    for k in range(sub.OperatorsLength()):
        code = model.OperatorCodes(sub.Operators(k).OpcodeIndex())
        kinds.append(names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), ""))
    return model, sub, kinds


def _golden() -> tuple[int, list[int], dict[str, tuple[int, list[int]]]]:
    """(elements of every distinct stored buffer a conv / FC reads (weights and biases: the converter stores the
    first conv's and the first depthwise conv's identical 32-element biases once); 2·MACs of each conv / FC in
    order: output elements × window × input channels per group, FC output elements × K; each weight tensor's
    (scale count, zero points))."""
    _, sub, kinds = _flatbuffer()

    def shape(index: int) -> list[int]:
        return [int(d) for d in sub.Tensors(index).ShapeAsNumpy()]

    weights, flops, quant, buffers = 0, [], {}, set()
    for k, kind in enumerate(kinds):
        if kind not in WEIGHTED:
            continue
        op = sub.Operators(k)
        ins = [int(i) for i in op.InputsAsNumpy() if i >= 0]
        for i in ins[1:]:
            if sub.Tensors(i).Buffer() not in buffers:
                buffers.add(sub.Tensors(i).Buffer())
                weights += math.prod(shape(i))
        x, w, y = shape(ins[0]), shape(ins[1]), shape(int(op.Outputs(0)))
        if kind == "FULLY_CONNECTED":
            flops.append(2 * math.prod(y) * w[1])
        else:
            flops.append(2 * math.prod(y) * w[1] * w[2] * (1 if kind == "DEPTHWISE_CONV_2D" else x[3]))
        t = sub.Tensors(ins[1])
        q = t.Quantization()
        quant[t.Name().decode()] = (q.ScaleLength(), [int(z) for z in q.ZeroPointAsNumpy()][:4])
    return weights, flops, quant


def test_streaming_int8_model_imports_whole_with_its_weights_and_flops() -> None:
    graph = import_tflite(FILE)
    _, _, kinds = _flatbuffer()
    assert [n.source_op for n in graph.nodes] == kinds and len(kinds) == 55
    assert not graph.unsupported()  # before: GraphError on the RESOURCE tensor type of the state variables
    weights, flops, _ = _golden()
    assert graph.params == weights == 24_577
    result = estimate(graph, A100, fusion=False, check_memory=False)
    costed = result.batch.flops[result.index]
    index = [i for i, n in enumerate(graph.nodes) if n.source_op in WEIGHTED]
    assert [float(costed[i]) for i in index] == [float(f) for f in flops]
    assert sum(flops) == 48_192
    assert not [d for d in result.diagnostics() if d.get("fallback")]


def test_int8_ops_take_the_int8_path_with_the_files_scales_and_zero_points() -> None:
    graph = import_tflite(FILE)
    weighted = [n for n in graph.nodes if n.source_op in WEIGHTED]
    assert len(weighted) == 12 and all(n.op is not None and n.op["dtype"] == "int8" for n in weighted)
    _, _, quant = _golden()
    meta = graph.meta["quantization"]
    for name, (scales, zero_points) in quant.items():
        assert (meta[name]["scales"], meta[name]["zero_points"]) == (scales, zero_points)
        assert meta[name]["dtype"] == "int8"
    # per-channel weights: CONV_2D along its output channels (axis 0), depthwise along its channels (axis 3)
    first_conv = graph.nodes[[n.source_op for n in graph.nodes].index("CONV_2D")]
    assert meta[first_conv.inputs[1]]["scales"] == 32 and meta[first_conv.inputs[1]]["quantized_dimension"] == 0
    depthwise = graph.nodes[[n.source_op for n in graph.nodes].index("DEPTHWISE_CONV_2D")]
    assert meta[depthwise.inputs[1]]["quantized_dimension"] == 3
    # weight bytes: int8 weights, int32 biases and one fp32 scale per channel
    assert first_conv.weight_bytes == 32 * 5 * 40 * 1 + 32 * 4 + 4 * (32 + 32)
    quantize = graph.nodes[-1]
    assert quantize.op is not None and quantize.op["kind"] == "quantize" and quantize.op["to_dtype"] == "int8"


def test_resource_variables_copy_their_state_and_the_init_call_costs_nothing() -> None:
    """READ_VARIABLE / ASSIGN_VARIABLE memcpy the variable (kernels/read_variable.cc, assign_variable.cc): one
    read and one write of the state tensor's bytes; VAR_HANDLE and CALL_ONCE (a no-op after the first run,
    kernels/call_once.cc) cost nothing per step."""
    graph = import_tflite(FILE)
    result = estimate(graph, A100, fusion=False, check_memory=False)
    moved = result.batch.compulsory_bytes[result.index]
    times = result.batch.time_s[result.index]
    states: dict[str, list[int]] = {n.source_op: [] for n in graph.nodes}
    for i, n in enumerate(graph.nodes):
        states[n.source_op].append(i)
    assert len(states["READ_VARIABLE"]) == len(states["ASSIGN_VARIABLE"]) == len(states["VAR_HANDLE"]) == 6
    for i in states["READ_VARIABLE"]:  # int8: one byte read and one written per element
        assert float(moved[i]) == 2 * math.prod(graph.tensors[graph.nodes[i].outputs[0]].shape)
    for i in states["ASSIGN_VARIABLE"]:
        assert float(moved[i]) == 2 * math.prod(graph.tensors[graph.nodes[i].inputs[1]].shape)
    for i in states["VAR_HANDLE"] + states["CALL_ONCE"]:
        assert float(moved[i]) == 0.0 and float(times[i]) <= 1e-9
