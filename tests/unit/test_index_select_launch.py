"""Embedding/gather run PyTorch's index_select launch: at most 8 blocks of 128 threads on an SM."""

from __future__ import annotations

import numpy as np

import perfmodel
from perfmodel.ops import make_op
from perfmodel.ops.indexing import INDEX_SELECT_THREADS_PER_UNIT
from perfmodel.specs import load_hardware

EMBEDDING = {"kind": "embedding", "num_embeddings": 32000, "embedding_dim": 4096, "num_indices": 4096,
             "dtype": "fp16"}
SCALAR_ADD = {"kind": "elementwise", "shape": [4096, 4096], "inputs": 2, "dtype": "fp16", "vector_width": 1}


def test_the_launch_caps_resident_threads_for_gathers_only() -> None:
    a100 = load_hardware("nvidia-a100-sxm4-80gb")
    assert (a100.max_resident_threads_per_unit or 2048) > INDEX_SELECT_THREADS_PER_UNIT
    fewer = a100.model_copy(update={"max_resident_threads_per_unit": int(INDEX_SELECT_THREADS_PER_UNIT)})
    ops = [EMBEDDING, SCALAR_ADD]
    full, capped = perfmodel.predict_many(a100, ops), perfmodel.predict_many(fewer, ops)
    # the embedding already ran 1024 threads per SM: resident capacity above that changes nothing
    np.testing.assert_allclose(full.time_s[0], capped.time_s[0])
    # a scalar add fills the SM: fewer resident threads keep fewer loads in flight (Little's law)
    assert capped.time_s[1] > full.time_s[1] * 1.2


def test_the_cap_survives_mixed_batches() -> None:
    ops = [make_op(EMBEDDING), make_op(SCALAR_ADD), make_op(EMBEDDING)]
    mixed = perfmodel.predict_many("nvidia-a100-sxm4-80gb", ops)
    alone = perfmodel.predict_many("nvidia-a100-sxm4-80gb", [make_op(EMBEDDING)])
    np.testing.assert_allclose(mixed.time_s[[0, 2]], alone.time_s[0])
