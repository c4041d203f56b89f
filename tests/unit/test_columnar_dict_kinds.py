"""Elementwise and attention read columns (``OpColumns``) from JSON dicts and from tables: on every bundled device
the answers, ops and notes are the row-by-row path's (``predict_many`` of ``make_op``'s ``Op`` objects), to the last
bit, and a bad row raises ``make_op``'s error, naming the row's kind and field."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.columnar import predict_columns, predict_dicts
from perfmodel.ops import OpError, make_op
from tests.unit.test_columnar import _same


def _rows(count: int, seed: int) -> list[dict[str, Any]]:
    """Elementwise and attention dicts with every optional field both set and unset, none repeated."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    values: list[Any]
    for i in range(count):
        if i % 2:
            d: dict[str, Any] = {"kind": "elementwise", "shape": [rng.choice([1, 7, 512]) + i, rng.choice([64, 4096])],
                                 "dtype": rng.choice(["bf16", "fp32", "fp16"])}
            for key, values in (("inputs", [0, 1, 3]), ("outputs", [1, 2]), ("flops_per_element", [0.0, 2.5]),
                                ("transcendentals_per_element", [1.0]), ("vector_width", [1, 8]),
                                ("threads_per_row", [None, 512, 1024]), ("dependent_loads", [0, 2])):
                if rng.random() < 0.5:
                    d[key] = rng.choice(values)
        else:
            heads = rng.choice([8, 32])
            d = {"kind": "attention", "batch": rng.choice([1, 4]) + i, "heads": heads, "seq_q": rng.choice([1, 512]),
                 "seq_kv": rng.choice([512, 4096]), "head_dim": rng.choice([64, 128]), "dtype": rng.choice(["bf16",
                                                                                                           "fp16"])}
            for key, values in (("kv_heads", [None, 1, heads]), ("head_dim_v", [None, 64]), ("causal", [True, False]),
                                ("implementation", ["flash", "materialized"]),
                                ("pass", ["forward", "backward", "forward_backward"])):
                if rng.random() < 0.5:
                    d[key] = rng.choice(values)
        out.append(d)
    return out


@pytest.mark.parametrize("device", perfmodel.list_hardware())
def test_dicts_give_the_row_by_row_answers_on_every_device(device: str) -> None:
    dicts = _rows(60, len(device))
    got = predict_dicts(device, dicts)
    expected = perfmodel.predict_many(device, [make_op(d) for d in dicts])
    _same(got, expected)
    assert list(got.ops) == list(expected.ops)
    assert got.to_dicts() == expected.to_dicts()


def test_a_table_gives_the_row_by_row_answers() -> None:
    n = 40
    rng = np.random.default_rng(3)
    kinds = rng.choice(["elementwise", "attention"], n)
    kv = rng.choice([np.nan, 4.0, 8.0], n)
    table = {"kind": kinds, "shape": np.stack([rng.integers(1, 900, n), rng.integers(1, 900, n)], axis=1),
             "dtype": rng.choice(["bf16", "fp32"], n), "threads_per_row": rng.choice([np.nan, 256.0], n),
             "batch": rng.integers(1, 9, n), "heads": np.full(n, 8), "kv_heads": kv, "seq_q": rng.integers(1, 999, n),
             "seq_kv": rng.integers(1, 999, n), "head_dim": np.full(n, 128), "causal": rng.random(n) < 0.5}
    got = predict_columns("nvidia-h100-sxm5-80gb", table)
    per_row = table["threads_per_row"]
    dicts = [{"kind": "elementwise", "shape": table["shape"][i].tolist(), "dtype": str(table["dtype"][i]),
              **({} if np.isnan(per_row[i]) else {"threads_per_row": 256})} if kinds[i] == "elementwise"
             else {"kind": "attention", "batch": int(table["batch"][i]), "heads": 8, "seq_q": int(table["seq_q"][i]),
                   "seq_kv": int(table["seq_kv"][i]), "head_dim": 128, "dtype": str(table["dtype"][i]),
                   "causal": bool(table["causal"][i]), **({} if np.isnan(kv[i]) else {"kv_heads": int(kv[i])})}
             for i in range(n)]
    expected = perfmodel.predict_many("nvidia-h100-sxm5-80gb", [make_op(d) for d in dicts])
    _same(got, expected)
    assert got.to_dicts() == expected.to_dicts()


@pytest.mark.parametrize("bad", [
    {"kind": "elementwise", "shape": [4, 0], "dtype": "bf16"},
    {"kind": "elementwise", "shape": [4, 4], "dtype": "bf16", "inputs": 0, "outputs": 0},
    {"kind": "elementwise", "shape": [4, 4], "dtype": "bf16", "threads_per_row": 0},
    {"kind": "elementwise", "shape": [4, 4], "dtype": "bf16", "threads_per_row": 2.5},
    {"kind": "elementwise", "shape": [4, 4], "dtype": "bf16", "dependent_loads": -1},
    {"kind": "elementwise", "shape": [], "dtype": "bf16"},
    {"kind": "attention", "batch": 1, "heads": 32, "kv_heads": 5, "seq_q": 1, "seq_kv": 8, "head_dim": 64,
     "dtype": "bf16"},
    {"kind": "attention", "batch": 1, "heads": 32, "kv_heads": 0, "seq_q": 1, "seq_kv": 8, "head_dim": 64,
     "dtype": "bf16"},
    {"kind": "attention", "batch": 1, "heads": 32, "seq_q": 1, "seq_kv": 8, "head_dim": 64, "head_dim_v": 0,
     "dtype": "bf16"},
    {"kind": "attention", "batch": 1, "heads": 32, "seq_q": 1, "seq_kv": 8, "head_dim": 64, "dtype": "bf16",
     "implementation": "paged"},
    {"kind": "attention", "batch": 1, "heads": 32, "seq_q": 1, "seq_kv": 8, "dtype": "bf16"},
])
def test_a_bad_row_raises_make_ops_error(bad: dict[str, Any]) -> None:
    with pytest.raises(OpError) as expected:
        make_op(bad)
    with pytest.raises(OpError) as got:
        predict_dicts("nvidia-h100-sxm5-80gb", [*_rows(20, 1), bad, *_rows(5, 2)])
    assert str(got.value) == str(expected.value)


def test_a_bad_column_cell_names_the_field() -> None:
    base = {"kind": np.array(["attention"] * 3), "batch": np.array([1, 1, 1]), "heads": np.array([32, 32, 32]),
            "kv_heads": np.array([8.0, 5.0, np.nan]), "seq_q": np.array([1, 1, 1]), "seq_kv": np.array([8, 8, 8]),
            "head_dim": np.array([64, 64, 64]), "dtype": np.array(["bf16"] * 3)}
    with pytest.raises(OpError, match=r"field 'kv_heads': 5 must divide heads \(32\)"):
        predict_columns("nvidia-h100-sxm5-80gb", base)
    with pytest.raises(OpError, match="field 'implementation': expected one of flash, materialized, got 'paged'"):
        predict_columns("nvidia-h100-sxm5-80gb", {**base, "kv_heads": np.array([8.0, 4.0, np.nan]),
                                                  "implementation": np.array(["flash", "paged", "flash"])})


def _convs(count: int, seed: int) -> list[dict[str, Any]]:
    """Conv2d dicts of every algorithm, 2-D and 3-D, the ``*_w`` fields set and unset, none repeated."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    values: list[Any]
    for i in range(count):
        d: dict[str, Any] = {"kind": "conv2d", "batch": rng.choice([1, 8]) + i, "in_channels": rng.choice([3, 64]),
                             "out_channels": rng.choice([64, 128]), "height": rng.choice([14, 56]),
                             "width": rng.choice([14, 56]), "kernel_h": 3, "kernel_w": 3,
                             "dtype": rng.choice(["fp16", "fp32", "bf16"])}
        algorithm = rng.choice(["implicit_gemm"] * 4 + ["winograd", "winograd_nonfused", "fft", "fft_tiling",
                                                         "im2col_gemm"])
        if algorithm != "implicit_gemm":
            d["algorithm"] = algorithm
        elif rng.random() < 0.3:
            d.update(depth=rng.choice([4, 8]), kernel_d=rng.choice([1, 3]), padding_d=1)
        else:
            for key, values in (("stride", [1, 2]), ("padding", [0, 1]), ("dilation", [1, 2]), ("stride_w", [1, 2]),
                                ("padding_w", [0, 2]), ("dilation_w", [1, 3]), ("kernel_w", [1, 3])):
                if rng.random() < 0.4:
                    d[key] = rng.choice(values)
            if rng.random() < 0.2:
                d.update(groups=d["in_channels"], out_channels=d["in_channels"])  # depthwise
        for key, values in (("layout", ["nchw", "nhwc"]), ("bias", [True, False]), ("compute_dtype", ["fp32"]),
                            ("pass", ["forward", "backward", "forward_backward"])):
            if rng.random() < 0.4:
                d[key] = rng.choice(values)
        out.append(d)
    return out


@pytest.mark.parametrize("device", perfmodel.list_hardware())
def test_convolutions_give_the_row_by_row_answers_on_every_device(device: str) -> None:
    dicts = _convs(50, len(device))
    got = predict_dicts(device, dicts)
    expected = perfmodel.predict_many(device, [make_op(d) for d in dicts])
    _same(got, expected)
    assert list(got.ops) == list(expected.ops)
    assert got.to_dicts() == expected.to_dicts()


_CONV = {"kind": "conv2d", "batch": 2, "in_channels": 64, "out_channels": 64, "height": 8, "width": 8,
         "kernel_h": 3, "kernel_w": 3, "dtype": "fp16"}


@pytest.mark.parametrize("change", [
    {"groups": 3}, {"kernel_h": 11}, {"kernel_w": 9, "padding_w": 0}, {"stride_w": 0}, {"dilation_w": -1},
    {"padding_w": -2}, {"padding": -1}, {"depth": 2, "kernel_d": 4}, {"depth": 2, "algorithm": "winograd"},
    {"stride": 2, "algorithm": "winograd"}, {"kernel_h": 7, "kernel_w": 7, "algorithm": "winograd_nonfused"},
    {"stride": 2, "algorithm": "fft"}, {"groups": 64, "algorithm": "im2col_gemm"}, {"layout": "nwhc"},
    {"algorithm": "systolic"}, {"pass": "sideways"}, {"batch": 0}, {"height": 2**41},
])
def test_a_bad_convolution_raises_make_ops_error(change: dict[str, Any]) -> None:
    bad = {**_CONV, **change}
    with pytest.raises(OpError) as expected:
        make_op(bad)
    with pytest.raises(OpError) as got:
        predict_dicts("nvidia-h100-sxm5-80gb", [*_convs(20, 1), bad, *_convs(5, 2)])
    assert str(got.value) == str(expected.value)


def test_a_bad_convolution_column_names_the_field() -> None:
    table = {"kind": np.array(["conv2d"] * 3), **{k: np.array([v] * 3) for k, v in _CONV.items() if k != "kind"},
             "layout": np.array(["nchw", "nwhc", "nhwc"])}
    with pytest.raises(OpError, match="field 'layout': expected one of nchw, nhwc, got 'nwhc'"):
        predict_columns("nvidia-h100-sxm5-80gb", table)
    table["layout"] = np.array(["nchw"] * 3)
    table["stride_w"] = np.array([np.nan, 1.0, 2.0])
    got = predict_columns("nvidia-h100-sxm5-80gb", table)
    expected = perfmodel.predict_many("nvidia-h100-sxm5-80gb", [
        make_op({**_CONV, **({} if i == 0 else {"stride_w": i})}) for i in range(3)])
    _same(got, expected)


def _embeddings(count: int, seed: int) -> list[dict[str, Any]]:
    """Embedding dicts naming the table by ``num_embeddings`` / ``embedding_dim`` (either or both) or by
    ``table_shape`` (rank 1 to 3), none repeated."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(count):
        d: dict[str, Any] = {"kind": "embedding", "num_indices": rng.choice([1, 16, 4096]) + i,
                             "dtype": rng.choice(["bf16", "fp32", "int8"])}
        form = rng.choice(["both", "rows", "dim", "shape"])
        if form in ("both", "rows"):
            d["num_embeddings"] = rng.choice([1000, 128256])
        if form in ("both", "dim"):
            d["embedding_dim"] = rng.choice([64, 4096])
        if form == "shape":
            d["table_shape"] = rng.choice([[50], [1000, 96], [8, 100, 32]])
        if rng.random() < 0.3:
            d["index_dtype"] = "int32"
        out.append(d)
    return out


@pytest.mark.parametrize("device", perfmodel.list_hardware())
def test_embeddings_give_the_row_by_row_answers_on_every_device(device: str) -> None:
    dicts = _embeddings(40, len(device)) + _rows(10, 3) + _convs(10, 4)
    got = predict_dicts(device, dicts)
    expected = perfmodel.predict_many(device, [make_op(d) for d in dicts])
    _same(got, expected)
    assert list(got.ops) == list(expected.ops)
    assert got.to_dicts() == expected.to_dicts()


@pytest.mark.parametrize("bad", [
    {"kind": "embedding", "num_embeddings": 10, "embedding_dim": 0, "num_indices": 4, "dtype": "bf16"},
    {"kind": "embedding", "num_embeddings": 2.5, "num_indices": 4, "dtype": "bf16"},
    {"kind": "embedding", "num_embeddings": 10, "num_indices": 0, "dtype": "bf16"},
    {"kind": "embedding", "table_shape": [], "num_indices": 4, "dtype": "bf16"},
    {"kind": "embedding", "num_indices": 4, "dtype": "bf16"},
    {"kind": "embedding", "num_embeddings": 10, "num_indices": 4, "dtype": "bf16", "index_dtype": "int3"},
    {"kind": "embedding", "num_embeddings": 10, "num_indices": 4, "dtype": "bf16", "rows": 4},
])
def test_a_bad_embedding_raises_make_ops_error(bad: dict[str, Any]) -> None:
    with pytest.raises(OpError) as expected:
        make_op(bad)
    with pytest.raises(OpError) as got:
        predict_dicts("nvidia-h100-sxm5-80gb", [*_embeddings(20, 1), bad, *_embeddings(5, 2)])
    assert str(got.value) == str(expected.value)


def _collectives(count: int, seed: int) -> list[dict[str, Any]]:
    """Collective dicts of every kind, the optional fields set and unset, none repeated."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    values: list[Any]
    for i in range(count):
        kind = rng.choice(["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"])
        d: dict[str, Any] = {"kind": kind, "bytes": rng.choice([1e4, 1e6, 3e8]) + i}
        if kind != "sendrecv" or rng.random() < 0.5:
            d["devices"] = rng.choice([2, 8, 16])
        for key, values in (("dtype", ["fp32", "bf16"]), ("devices_per_node", [None, 1, 8]),
                            ("algorithm", ["auto", "ring", "tree"])):
            if rng.random() < 0.5:
                d[key] = rng.choice(values)
        out.append(d)
    return out


@pytest.mark.parametrize("device", perfmodel.list_hardware())
def test_collectives_give_the_row_by_row_answers_on_every_device(device: str) -> None:
    dicts = _collectives(40, len(device)) + _embeddings(10, 5)
    got = predict_dicts(device, dicts)
    expected = perfmodel.predict_many(device, [make_op(d) for d in dicts])
    _same(got, expected)
    assert list(got.ops) == list(expected.ops)
    assert got.to_dicts() == expected.to_dicts()


@pytest.mark.parametrize("bad", [
    {"kind": "allreduce", "bytes": 0, "devices": 8},
    {"kind": "allreduce", "bytes": 1e6, "devices": 0},
    {"kind": "allgather", "bytes": 1e6, "devices": 8, "devices_per_node": 0},
    {"kind": "allgather", "bytes": 1e6, "devices": 8, "algorithm": "butterfly"},
    {"kind": "alltoall", "devices": 8},
    {"kind": "sendrecv", "bytes": "lots"},
])
def test_a_bad_collective_raises_make_ops_error(bad: dict[str, Any]) -> None:
    with pytest.raises(OpError) as expected:
        make_op(bad)
    with pytest.raises(OpError) as got:
        predict_dicts("nvidia-h100-sxm5-80gb", [*_collectives(20, 1), bad, *_collectives(5, 2)])
    assert str(got.value) == str(expected.value)


def test_a_bad_collective_column_names_the_field() -> None:
    table = {"kind": np.array(["allreduce"] * 3), "bytes": np.array([1e6, 2e6, 3e6]), "devices": np.array([8, 8, 8]),
             "algorithm": np.array(["ring", "tree", "butterfly"])}
    with pytest.raises(OpError, match="field 'algorithm': expected one of auto, ring, tree, got 'butterfly'"):
        predict_columns("nvidia-h100-sxm5-80gb", table)
    table["algorithm"] = np.array(["ring", "tree", "auto"])
    table["devices_per_node"] = np.array([np.nan, 4.0, 8.0])
    got = predict_columns("nvidia-h100-sxm5-80gb", table)
    expected = perfmodel.predict_many("nvidia-h100-sxm5-80gb", [
        make_op({"kind": "allreduce", "bytes": 1e6 * (i + 1), "devices": 8, "algorithm": str(table["algorithm"][i]),
                 **({} if i == 0 else {"devices_per_node": 4 * i})}) for i in range(3)])
    _same(got, expected)


def test_kind_groups_keep_batch_order_and_name_a_bad_kind() -> None:
    from collections import OrderedDict

    from perfmodel import columnar

    dicts = _collectives(7, 1) + _rows(9, 2) + _collectives(3, 3) + _embeddings(4, 4)
    random.Random(5).shuffle(dicts)
    fast = columnar._kind_rows(dicts)
    slow = columnar._kind_rows_one_by_one(dicts)
    assert list(fast) == list(slow) == list(dict.fromkeys(d["kind"] for d in dicts))  # first appearance
    assert all(fast[k].tolist() == slow[k].tolist() for k in fast)
    mixed = [OrderedDict(d) if i % 3 == 0 else d for i, d in enumerate(dicts)]  # mappings that are not dicts
    _same(predict_dicts("nvidia-h100-sxm5-80gb", mixed), predict_dicts("nvidia-h100-sxm5-80gb", dicts))
    bads: list[dict[str, Any]] = [{"kind": 3, "bytes": 1.0, "devices": 2}, {"bytes": 1.0, "devices": 2}]
    for bad in bads:
        with pytest.raises(OpError) as expected:
            make_op(bad)
        with pytest.raises(OpError) as got:
            predict_dicts("nvidia-h100-sxm5-80gb", [*dicts, bad])
        assert str(got.value) == str(expected.value)
