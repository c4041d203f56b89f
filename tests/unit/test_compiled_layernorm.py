"""torch.compile's layer norm (Inductor): rows of more than 1,024 elements run a looped reduction that reads x once
for the statistics and again to normalise (torch/_inductor/choices.py, should_use_persistent_reduction: 1024 for an
inner reduction); shorter rows stay in registers and read x once (docs/model.md, "Compiled layer norm")."""

from __future__ import annotations

import perfmodel
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.ops.columns import from_dicts
from perfmodel.ops.norm import INDUCTOR_PERSISTENT_MAX_COLS, INDUCTOR_REDUCTION_THREADS, LayerNorm
from perfmodel.roofline import reread_hit_share
from perfmodel.specs import load_hardware

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


def test_the_second_read_is_served_by_l2_while_the_rows_in_flight_fit_its_share() -> None:
    """A100: 108 SMs x 2,048 threads / 256 per row = 864 rows in flight; at 8 kB (4,096 fp16) they hold 7 MB, within
    half its 40 MB L2 (the re-read costs no DRAM time), at 64 kB (32,768) 57 MB, past it (a share of f·C / W hits)."""

    assert INDUCTOR_REDUCTION_THREADS == 256
    hw = load_hardware(A100)
    t = tables(hw)
    work = LayerNorm.work([make_op(_ln(c, True)) for c in (4096, 32768)])  # type: ignore[misc]
    share = reread_hit_share(work, t, 40 * 2**20, 0.5)
    reread = work.reread_bytes / work.dram_bytes  # x's second read: about a third of x, x, y
    assert 0.3 < reread[0] < 0.34
    assert share[0] == reread[0]  # all of it from L2
    window = 864 * 32768 * 2.0
    assert abs(share[1] - reread[1] * 0.5 * 40 * 2**20 / window) < 1e-9
    eager4k, compiled4k = perfmodel.predict_many(A100, [_ln(4096, False), _ln(4096, True)]).time_s
    assert compiled4k < 1.05 * eager4k


def test_the_mi210s_8_mb_l2_holds_less_of_the_re_read_than_the_a100s() -> None:
    ops = [_ln(4096, True), _ln(4096, False)]
    a100 = perfmodel.predict_many(A100, ops).time_s
    mi210 = perfmodel.predict_many("amd-mi210", ops).time_s
    assert mi210[0] / mi210[1] > a100[0] / a100[1] + 0.1
