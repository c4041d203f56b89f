"""Generated docs stay fresh, and the README keeps its two-command promise."""

from __future__ import annotations

from pathlib import Path

from perfmodel.ops import op_kinds
from perfmodel.ops.reference import reference_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_ops_reference_is_fresh() -> None:
    """docs/ops.md is `python -m perfmodel.ops.reference` output: regenerate it when ops change."""
    assert (ROOT / "docs" / "ops.md").read_text() == reference_markdown()


def test_every_op_kind_is_documented() -> None:
    text = (ROOT / "docs" / "ops.md").read_text()
    for kind in op_kinds():
        assert f"## `{kind}`" in text


def test_readme_first_screen_has_the_two_commands() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:30])
    assert "make run" in first_screen
    assert "make test" in first_screen


def test_makefile_test_target_runs_lint_types_and_tests() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "ruff check" in makefile and "mypy" in makefile and "pytest" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()
