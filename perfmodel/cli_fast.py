"""The ``perfmodel`` command's entry point, and the bodies of its most used commands without typer.

``perfmodel hardware list`` and ``perfmodel predict`` in their plain forms (the options each command defines,
given as separate words) run here, straight from ``sys.argv``: importing typer (~0.07 s CPU) and, through the
parameter coercion of typer >= 0.20, pydantic (~0.1 s) would cost more than the command (issue 25,
benchmarks/cli_start.py). Anything else (``--help``, another command, an ``--opt=value`` form, ``--``, an unknown
option, a missing argument) goes to the typer app in ``perfmodel.cli``, whose ``hardware list`` and ``predict``
call the same functions below: the output is the same either way (tests/unit/test_cli_fast.py).

Imports only the standard library and ``perfmodel.units`` at start; the model where a command needs it.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from perfmodel.units import format_bytes, format_rate, format_time_s

if TYPE_CHECKING:
    from perfmodel.calibration import Calibration
    from perfmodel.cost import Cost
    from perfmodel.hardware import Hardware


class CliError(Exception):
    """A user error: printed as ``error: <message>`` on stderr, exit status 2 (``cli_common.fail``)."""


def parse_value(text: str) -> Any:
    """A CLI value: JSON when it parses (numbers, true/false, lists), '8,4096' as a list, else text."""
    with contextlib.suppress(json.JSONDecodeError):
        return json.loads(text)
    if "," in text:
        return [parse_value(part) for part in text.split(",") if part]
    return text


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"expected key=value, got {pair!r}")
        out[key.strip()] = parse_value(value.strip())
    return out


# --- hardware list ---------------------------------------------------------------------------

def hardware_list_text(vendor: str | None, kind: str | None, as_json: bool) -> str:
    """``perfmodel hardware list``: from the library's index (perfmodel.spec_index) while it is current."""
    rows = [r for r in device_rows()
            if (vendor is None or r["vendor"] == vendor) and (kind is None or r["kind"] == kind)]
    if as_json:
        return json.dumps([{k: v for k, v in r.items() if k != "best_sixteen_bit_flops_per_s"} for r in rows],
                          indent=2)
    lines = [f"{'id':<28} {'kind':<4} {'units':>5} {'DRAM BW':>11} {'best 16-bit matrix':>19}"]
    for r in rows:
        bw, peak = r["dram_bandwidth_bytes_per_s"], r["best_sixteen_bit_flops_per_s"]
        lines.append(f"{r['id']:<28} {r['kind']:<4} {r['units']:>5} {format_rate(bw, 'B/s') if bw else '?':>11} "
                     f"{format_rate(peak, 'FLOP/s') if peak else '-':>19}")
    return "\n".join(lines)


def device_rows() -> list[dict[str, Any]]:
    """``spec_index.list_row`` of every device of the library in use, sorted by id: from the index when it is
    current, else from the full load."""
    from perfmodel import spec_index

    index = spec_index.current_index()
    if index is not None:
        return spec_index.list_rows(index)
    from perfmodel.specs import library

    return [spec_index.list_row(h) for h in sorted(library().values(), key=lambda h: h.id)]


# --- predict ---------------------------------------------------------------------------------

def render_cost(cost: Cost) -> str:
    lines = [f"{cost.op_kind} on {cost.hardware_id}: {format_time_s(cost.time_s)}, bound by {cost.bound}"]
    lines.append(f"  FLOPs {cost.flops:.4g}  intensity {cost.intensity_flops_per_byte:.3g} FLOP/B  "
                 f"attained {format_rate(cost.attained_flops_per_s, 'FLOP/s')}  "
                 f"utilization {cost.utilization * 100:.1f} %")
    for level, n_bytes in cost.bytes_by_level.items():
        lines.append(f"  {level:<10} {format_bytes(n_bytes):>10}  {format_time_s(cost.time_s_by_level[level]):>10}")
    for engine, seconds in cost.time_s_by_engine.items():
        lines.append(f"  {engine:<10} {'':>10}  {format_time_s(seconds):>10}")
    lines.append(f"  overhead   {'':>10}  {format_time_s(cost.overhead_s):>10}")
    if cost.schedule:
        lines.append("  schedule   " + ", ".join(f"{k}={v:g}" for k, v in cost.schedule.items()))
    if cost.interval_s is not None:
        inside = "inside" if cost.in_calibrated_range else "outside"
        lines.append(f"  calibrated {format_time_s(cost.interval_s[0])} to {format_time_s(cost.interval_s[1])} "
                     f"(10-90 %), {inside} the calibrated range")
    elif cost.uncalibrated_interval_s is not None:
        low, high = cost.uncalibrated_interval_s
        lines.append(f"  interval   {format_time_s(low)} to {format_time_s(high)} (10-90 %, uncalibrated: "
                     "its op class on devices the model was not fitted on)")
    lines.extend(f"  note: {note}" for note in cost.notes)
    return "\n".join(lines)


def resolve_hardware(hardware_id: str) -> Hardware:
    """A bundled device, else a custom one stored in the service's database (e.g. ``host``)."""
    from perfmodel.specs import load_hardware, parse_spec

    try:
        return load_hardware(hardware_id)
    except KeyError:
        from perfmodel.cli_common import open_store

        row = open_store().get_hardware(hardware_id)
        if row is None:
            raise
        return parse_spec(row.spec, f"stored hardware {hardware_id!r}")


def bundled_or_resolved(hardware_id: str) -> Hardware:
    """A bundled device as its pre-validated plain copy (perfmodel.spec_cache: no pydantic to import, no validator
    to build), else ``resolve_hardware``. The copy has the fields and lookups of a ``Hardware``, not its pydantic
    API: only for the prediction's own code."""
    from perfmodel.spec_cache import bundled_plain

    plain = bundled_plain(hardware_id)
    return resolve_hardware(hardware_id) if plain is None else cast("Hardware", plain)


def stored_calibration(hardware_id: str, ref: str) -> tuple[Calibration, int]:
    """A stored calibration of ``hardware_id`` by id or 'latest', and its id."""
    from perfmodel.calibration import Calibration
    from perfmodel.cli_common import open_store

    store = open_store()
    row = store.latest_calibration(hardware_id) if ref == "latest" else (
        store.get_calibration(int(ref)) if ref.isdigit() else None)
    if row is None or row.hardware_id != hardware_id:
        raise KeyError(f"no calibration {ref!r} of {hardware_id!r} (perfmodel measure, or POST /api/v1/calibrations)")
    return Calibration.from_params(row.params), row.id


def predict_text(hardware_id: str, kind: str, fields: list[str] | None, timing: str = "kernel",
                 warm_cache: bool = False, as_json: bool = False, calibration: str | None = None) -> str:
    """``perfmodel predict``: one op on one device, as text or JSON."""
    from perfmodel.ops import OpError, make_op
    from perfmodel.roofline import predict_many
    from perfmodel.spec_error import SpecError

    op = {"kind": kind, **parse_assignments(fields or [])}
    if timing not in ("kernel", "host"):
        raise CliError("--timing is kernel or host")
    try:
        hardware = bundled_or_resolved(hardware_id) if calibration is None else resolve_hardware(hardware_id)
        fitted = stored_calibration(hardware.id, calibration)[0] if calibration else None
        # a calibration corrects the model in the GEMM space it was fitted on
        batch = predict_many(hardware, [make_op(op)], timing=timing, warm_cache=warm_cache,  # type: ignore[arg-type]
                             space=fitted.space if fitted is not None else "full")
        if fitted is not None:
            from perfmodel.calibration import apply_calibration

            batch = apply_calibration(fitted, batch)
        cost = batch[0]
    except (OpError, SpecError) as exc:
        raise CliError(str(exc)) from exc
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from exc
    return json.dumps(cost.to_dict(), indent=2) if as_json else render_cost(cost)


# --- the fast path ---------------------------------------------------------------------------

def _parse(args: list[str], values: dict[str, str],
           flags: dict[str, tuple[str, bool]]) -> tuple[list[str], dict[str, Any]] | None:
    """Positional words and options as click reads them (options anywhere, the last of a repeated one wins),
    or None for anything this parser does not handle exactly: any other word starting with '-' (``--help``,
    ``--opt=value``, ``--``, a typo), an option without its value, or a value starting with '-'."""
    positional: list[str] = []
    options: dict[str, Any] = {}
    i = 0
    while i < len(args):
        word = args[i]
        if not word.startswith("-"):
            positional.append(word)
            i += 1
        elif word in flags:
            name, value = flags[word]
            options[name] = value
            i += 1
        elif word in values and i + 1 < len(args) and not args[i + 1].startswith("-"):
            options[values[word]] = args[i + 1]
            i += 2
        else:
            return None
    return positional, options


def _hardware_list(args: list[str]) -> str | None:
    parsed = _parse(args, {"--vendor": "vendor", "--kind": "kind"}, {"--json": ("as_json", True)})
    if parsed is None or parsed[0]:
        return None
    options = parsed[1]
    return hardware_list_text(options.get("vendor"), options.get("kind"), options.get("as_json", False))


def _predict(args: list[str]) -> str | None:
    parsed = _parse(args, {"--timing": "timing", "--calibration": "calibration"},
                    {"--json": ("as_json", True), "--warm-cache": ("warm_cache", True),
                     "--no-warm-cache": ("warm_cache", False)})
    if parsed is None or len(parsed[0]) < 2:
        return None
    (hardware_id, kind, *fields), options = parsed
    return predict_text(hardware_id, kind, fields, **options)


FAST: dict[tuple[str, ...], Callable[[list[str]], str | None]] = {
    ("hardware", "list"): _hardware_list,
    ("predict",): _predict,
}


def run(argv: list[str]) -> int | None:
    """Run ``perfmodel <argv>`` here if it is a plain ``hardware list`` or ``predict``: its exit status (output
    on stdout, an error on stderr); None for anything else (the typer app's job)."""
    for words, command in FAST.items():
        if tuple(argv[: len(words)]) == words:
            try:
                text = command(argv[len(words):])
            except CliError as exc:
                sys.stderr.write(f"error: {exc}\n")
                sys.stderr.flush()
                return 2
            if text is None:
                return None
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
            return 0
    return None


def main() -> None:
    """The ``perfmodel`` console script: the fast path, else the typer app."""
    try:
        status = run(sys.argv[1:])
    except BrokenPipeError:
        sys.exit(0)
    if status is None:
        from perfmodel.cli import main as typer_main

        typer_main()
        return
    sys.exit(status)
