"""``perfmodel compare BASE NEW``: the CI gate. Exit 0: no regression; 1: significant regressions beyond the
threshold; 2: bad input (unreadable file, different formats or devices, nothing in common)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from perfmodel.compare.diff import DEFAULT_ALPHA, CompareError, diff_sides
from perfmodel.compare.load import load_sides, parse_threshold, pick_hardware
from perfmodel.compare.report import diff_json, format_diff, format_markdown, junit_xml


def compare_command(
    base: Annotated[str, typer.Argument(help="the baseline: a trace file, or a stored trace as trace:ID")],
    new: Annotated[str, typer.Argument(help="the run to check: a trace file, or trace:ID")],
    hardware_id: Annotated[str | None, typer.Option(
        "--hardware", help="the device both ran on (a stored trace's own by default): roofs, expected change")] = None,
    new_hardware_id: Annotated[str | None, typer.Option(
        "--new-hardware", help="the new side's device where it differs")] = None,
    fail_on_regression: Annotated[str, typer.Option(
        "--fail-on-regression", help="exit 1 on significant slowdowns beyond this, e.g. 5%")] = "5%",
    alpha: Annotated[float, typer.Option(help="family-wise significance level (Holm over the groups)")]
    = DEFAULT_ALPHA,
    top: Annotated[int, typer.Option(help="rows in the table and the Markdown summary")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole comparison as JSON")] = False,
    junit: Annotated[Path | None, typer.Option(
        "--junit", help="write JUnit XML here (one testcase per compared group)")] = None,
    markdown: Annotated[Path | None, typer.Option("--markdown", help="write a Markdown summary here")] = None,
) -> None:
    """Compare two profiles of a workload: per kernel / op (name, op, shape) the change, its significance
    (Mann-Whitney U, paired Wilcoxon, bootstrap CI), the roofs and what the model expected; exits 1 on a
    regression: `perfmodel compare base.json new.json --hardware nvidia-a100-sxm4-80gb --fail-on-regression 5%`."""
    from perfmodel.cli import resolve_hardware
    from perfmodel.cli_common import open_store

    try:
        threshold = parse_threshold(fail_on_regression)
        (base_side, base_stored_hw), (new_side, new_stored_hw) = load_sides(base, new, open_store)
        base_hw = pick_hardware(hardware_id, base_stored_hw, resolve_hardware)
        new_hw = pick_hardware(new_hardware_id or (None if new_stored_hw else hardware_id),
                               new_stored_hw, resolve_hardware) or base_hw
        result = diff_sides(base_side, new_side, base_hw, new_hw, threshold, alpha)
    except CompareError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    data: dict[str, Any] | None = None
    if as_json:
        data = diff_json(result)
        typer.echo(json.dumps(data, indent=1, allow_nan=False))
    else:
        typer.echo(format_diff(result, max(top, 1)))
    if junit is not None:
        junit.write_bytes(junit_xml(result))
    if markdown is not None:
        markdown.write_text(format_markdown(result, max(top, 1)), encoding="utf-8")
    if result.regressions:
        raise typer.Exit(1)


def run(args: list[str]) -> None:
    """Run ``compare_command`` on command-line arguments (``perfmodel compare`` forwards here, so the
    compare modules load only when used)."""
    command = typer.main.get_command(_app)
    command.main(args=args, prog_name="perfmodel compare", standalone_mode=True)


_app = typer.Typer(add_completion=False)
_app.command()(compare_command)
