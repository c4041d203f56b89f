"""``call_memo``: a small pure call answered again from what it gave, by holder identity and array bits."""

from __future__ import annotations

import numpy as np

import perfmodel
from perfmodel.collectives import _collective_time, collective_time
from perfmodel.machine import tables
from perfmodel.search import call_memo


def test_kept_answers_equal_the_call_and_copies_do_not_alias() -> None:
    call_memo.clear()
    made: list[int] = []

    def make() -> np.ndarray:
        made.append(1)
        return np.arange(3.0)

    holder, other = object(), object()
    a = call_memo.kept("f", (holder,), [np.ones(2)], make, np.array)
    a[:] = -1  # the caller's copy
    b = call_memo.kept("f", (holder,), [np.ones(2)], make, np.array)
    np.testing.assert_array_equal(b, np.arange(3.0))
    call_memo.kept("f", (other,), [np.ones(2)], make, np.array)  # another holder
    call_memo.kept("f", (holder,), [np.ones(2, dtype=np.float32)], make, np.array)  # other bits
    call_memo.kept("f", (holder,), [np.zeros(100_000)], make, np.array)  # too large: not kept
    call_memo.kept("f", (holder,), [np.zeros(100_000)], make, np.array)
    assert len(made) == 5
    call_memo.clear()


def test_collective_times_kept_equal_the_computed_ones() -> None:
    call_memo.clear()
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    rng = np.random.default_rng(0)
    n = 40
    args = (rng.integers(0, 4, n), rng.random(n) * 1e9, rng.choice([2.0, 8.0, 64.0], n), np.zeros(n),
            np.zeros(n, dtype=np.int64))
    first, second = collective_time(t, *args), collective_time(t, *args)
    np.testing.assert_array_equal(first, _collective_time(t, *args))
    np.testing.assert_array_equal(second, first)
    assert second is not first
    call_memo.clear()


def test_an_attention_choice_is_kept_across_spaces_built_per_call() -> None:
    from perfmodel.search.attention_cost import _best_attention, attention_space, best_attention

    call_memo.clear()
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    one = np.ones(2)
    arrays = {"bh": one * 64, "group": one * 4, "sq": np.array([1.0, 4096.0]), "skv": one * 4096, "d": one * 128,
              "dv": one * 128, "causal": one, "elem": one * 2, "peak": one * float(t.matrix_peak[4]),
              "vector_peak": one * float(t.vector_peak[4]), "compulsory": one * 1e8, "kv_bytes": one * 1e7,
              "fwd": one, "bwd": one * 0}
    first = best_attention(t, attention_space(t), **arrays)
    assert len(call_memo._MEMO) == 1
    second = best_attention(t, attention_space(t), **arrays)
    assert len(call_memo._MEMO) == 1  # the second space (another object, the same candidates) hit
    reference = _best_attention(t, attention_space(t), **arrays)
    for name in reference.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(first, name), getattr(reference, name), err_msg=name)
        np.testing.assert_array_equal(getattr(second, name), getattr(reference, name), err_msg=name)
    call_memo.clear()
