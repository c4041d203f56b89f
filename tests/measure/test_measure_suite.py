"""The quick host suite: a valid Kineto trace whose ops map onto modelled op kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from perfmodel.measure import run_suite, suite_cases
from perfmodel.measure.cases import spread_shapes
from perfmodel.ops import make_op
from perfmodel.traces.kineto import parse_kineto

MODELLED = {"matmul", "elementwise", "softmax", "layernorm", "transpose", "embedding", "gather", "reduce", "conv2d"}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_suite(tmp_path_factory.mktemp("suite"), quick=True)


def test_trace_is_kineto_json_with_shapes(trace: Path) -> None:
    assert trace.name == "host_suite.pt.trace.json"
    events = json.loads(trace.read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert ops and all("Input Dims" in e["args"] and "Input type" in e["args"] for e in ops)
    names = {e["name"] for e in ops}
    assert {c.aten for c in suite_cases(quick=True)} <= names
    assert not names & {"aten::randn", "aten::randint", "aten::normal_"}  # set-up ran with collection off


def test_trace_parses_as_cpu_records(trace: Path) -> None:
    with trace.open("rb") as stream:
        parsed = parse_kineto(stream)
    top = {r.name for r in parsed.kernels}
    assert {c.aten for c in suite_cases(quick=True)} <= top
    assert all(r.duration_s > 0 for r in parsed.kernels)


def test_every_case_is_a_modelled_op() -> None:
    cases = suite_cases()
    assert 300 <= len(cases) <= 700
    assert {c.op["kind"] for c in cases} == MODELLED
    for case in cases:
        make_op(case.op)
    quick = suite_cases(quick=True)
    assert {c.aten for c in quick} == {c.aten for c in cases} and len(quick) < 40


def test_row_classes_have_shapes_enough_for_the_ramp() -> None:
    """Each elementwise/row class spans cache-resident to DRAM-bound sizes with >= 24 distinct shapes, so
    the half the host loop fits on has the 12 the ramp and the local correction need."""
    from perfmodel.calibration import class_key
    from perfmodel.calibration.fit import MIN_RAMP_SHAPES

    shapes: dict[str, set[str]] = {}
    for case in suite_cases():
        if case.op["kind"] in ("elementwise", "softmax", "layernorm", "transpose", "reduce"):
            shapes.setdefault(class_key(make_op(case.op)), set()).add(repr(case.op))
    assert len(shapes) >= 12
    assert all(len(v) >= 2 * MIN_RAMP_SHAPES for v in shapes.values()), {k: len(v) for k, v in shapes.items()}
    sizes = [spread_shapes(26, 2**14, 12 * 2**20)[i] for i in (0, -1)]
    assert sizes[0][0] * sizes[0][1] <= 2**14 * 1.1 and sizes[1][0] * sizes[1][1] >= 12 * 2**20 * 0.9
