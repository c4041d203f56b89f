"""torch.compile's layer norm (Inductor): rows of more than 1,024 elements run a looped reduction that reads x once
for the statistics and again to normalise (torch/_inductor/choices.py, should_use_persistent_reduction: 1024 for an
inner reduction); shorter rows stay in registers and read x once (docs/model.md, "Compiled layer norm")."""

from __future__ import annotations

import perfmodel
from perfmodel.ops import make_op
from perfmodel.ops.columns import from_dicts
from perfmodel.ops.norm import INDUCTOR_PERSISTENT_MAX_COLS, LayerNorm

A100 = "nvidia-a100-sxm4-80gb"


def _ln(cols: int, compiled: bool, pass_: str = "forward") -> dict[str, object]:
    return {"kind": "layernorm", "shape": [4096, cols], "dtype": "fp16", "compiled": compiled, "pass": pass_}


def test_a_compiled_row_past_the_persistent_limit_reads_x_twice() -> None:
    assert INDUCTOR_PERSISTENT_MAX_COLS == 1024
    ops = [make_op(_ln(c, flag)) for c in (1024, 2048) for flag in (False, True)]
    x_in = LayerNorm.work(ops).bytes_by_role["activations_in"]  # type: ignore[arg-type]
    tensor = 4096 * 2.0
    assert x_in.tolist() == [tensor * 1024, tensor * 1024, tensor * 2048, 2 * tensor * 2048]


def test_the_second_read_is_forward_only_and_the_columnar_path_agrees() -> None:
    ops = [make_op(_ln(4096, True, "backward")), make_op(_ln(4096, False, "backward")), make_op(_ln(8192, True))]
    rows = LayerNorm.work(ops).bytes_by_role["activations_in"]  # type: ignore[arg-type]
    assert rows[0] == rows[1]
    cols = LayerNorm.work(from_dicts(LayerNorm, [_ln(4096, True, "backward"), _ln(4096, False, "backward"),
                                                 _ln(8192, True)])).bytes_by_role["activations_in"]
    assert cols.tolist() == rows.tolist()


def test_a_long_compiled_row_is_slower_than_the_eager_kernel() -> None:
    eager, compiled = perfmodel.predict_many(A100, [_ln(32768, False), _ln(32768, True)]).time_s
    assert compiled > 1.3 * eager
    short = perfmodel.predict_many(A100, [_ln(1024, False), _ln(1024, True)]).time_s
    assert short[0] == short[1]
