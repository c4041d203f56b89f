"""A ``TraceDiff`` as JSON, a text table, a Markdown summary and JUnit XML (one testcase per group)."""

from __future__ import annotations

import math
from typing import Any
from xml.etree import ElementTree as ET

from perfmodel.compare.diff import GroupDiff, TraceDiff
from perfmodel.compare.sides import Group
from perfmodel.units import format_time_s


def _num(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def group_json(g: GroupDiff) -> dict[str, Any]:
    c = g.change
    return {
        "kind": g.kind, "name": g.name, "op": g.op, "kernel_names": g.kernel_names,
        "new_kernel_names": g.new_kernel_names, "verdict": g.verdict,
        "base_calls": g.base_calls, "new_calls": g.new_calls, "base_launches": g.base_launches,
        "new_launches": g.new_launches, "base_total_s": g.base_total_s, "new_total_s": g.new_total_s,
        "base_median_s": g.base_median_s, "new_median_s": g.new_median_s, "ratio": _num(g.ratio),
        "change_pct": _num(g.change_pct), "ci_low": _num(c.ci_low) if c else None,
        "ci_high": _num(c.ci_high) if c else None, "p_mann_whitney": c.p_mann_whitney if c else None,
        "p_paired": c.p_paired if c else None,
        "base_bound": g.base_prediction.bound if g.base_prediction else None,
        "new_bound": g.new_prediction.bound if g.new_prediction else None,
        "base_predicted_s": g.base_prediction.time_s if g.base_prediction else None,
        "new_predicted_s": g.new_prediction.time_s if g.new_prediction else None,
        "base_headroom": _num(g.headroom("base")), "new_headroom": _num(g.headroom("new")),
        "expected_ratio": _num(g.expected_ratio), "unexpected_pct": _num(g.unexpected_pct),
        "timing_suspect": g.timing_suspect, "work_suspect": g.work_suspect,
    }


def suspects(d: TraceDiff) -> list[GroupDiff]:
    """The groups whose timings no device can produce: not tested, never a regression."""
    return [g for g in d.groups if g.timing_suspect is not None]


def _suspect_lines(d: TraceDiff, top: int, bullet: str) -> list[str]:
    found = suspects(d)
    doubted = [g for g in d.groups if g.work_suspect is not None]
    lines = [f"{len(doubted)} group(s) faster than the device on both sides: the matched op's shapes are in doubt, "
             f"not the timings (verdict kept): " + ", ".join(f"{g.name} [{_clip(shape_label(g), 60)}]"
                                                              for g in doubted[:top])] if doubted else []
    if not found:
        return lines
    lines += [f"{len(found)} group(s) timing suspect: faster than the device can go on a side, so a recording "
             "artefact; not tested, excluded from the regressions and the exit code:"]
    lines += [f"{bullet}{g.name} [{_clip(shape_label(g), 70)}] {_pct(g.change_pct)}: {g.timing_suspect}"
              for g in found[:top]]
    if len(found) > top:
        lines.append(f"{bullet}... and {len(found) - top} more")
    return lines


def _only_json(g: Group) -> dict[str, Any]:
    return {"kind": g.kind, "name": g.key[1], "op": g.op, "calls": len(g.times_s), "total_s": g.total_s}


def diff_json(d: TraceDiff, top: int | None = None) -> dict[str, Any]:
    """Everything as JSON (``top`` limits the group and unmatched lists)."""
    counts: dict[str, int] = {}
    for g in d.groups:
        counts[g.verdict] = counts.get(g.verdict, 0) + 1
    return {
        "base": d.base, "new": d.new, "format": d.format, "base_device": d.base_device, "new_device": d.new_device,
        "base_hardware": d.base_hardware, "new_hardware": d.new_hardware, "threshold_pct": d.threshold_pct,
        "alpha": d.alpha, "base_total_s": d.base_total_s, "new_total_s": d.new_total_s,
        "verdicts": counts, "regressions": len(d.regressions), "timing_suspect": len(suspects(d)),
        "groups": [group_json(g) for g in d.groups[:top]], "only_base": [_only_json(g) for g in d.only_base[:top]],
        "only_new": [_only_json(g) for g in d.only_new[:top]], "kinds": d.kinds, "layers": d.layers[:top],
        "warnings": d.warnings,
    }


def shape_label(g: GroupDiff) -> str:
    """What tells a group from the others of its name: the op's parameters (``batch=32 in_channels=256 ...``), or an
    unmodelled kernel's category, grid and block."""
    return g.key[2] if g.op is None else op_params(g.op)


def op_params(op: dict[str, Any]) -> str:
    """``batch=32 in_channels=256 ...``: an op's parameters but its kind, lists as ``AxB``."""
    return " ".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in op.items()
                    if k != "kind" and v is not None)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _pct(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.1f}%"


def _row(g: GroupDiff) -> list[str]:
    ci = f"{(g.change.ci_low - 1) * 100:+.1f}..{(g.change.ci_high - 1) * 100:+.1f}%" if g.change else "-"
    p = f"{g.change.p_value:.2g}" if g.change else "-"
    head = g.headroom("new")
    return [_clip(g.kind, 18), _clip(g.name, 34), f"{g.base_calls}/{g.new_calls}", format_time_s(g.base_median_s),
            format_time_s(g.new_median_s), _pct(g.change_pct), ci, p,
            _pct(None if g.expected_ratio is None else (g.expected_ratio - 1) * 100),
            "-" if head is None else f"{head:.2f}", g.new_prediction.bound if g.new_prediction else "-", g.verdict,
            _clip(shape_label(g), 70)]


HEADER = ["kind", "name", "calls", "base med", "new med", "change", "95% CI", "p", "model", "headroom", "bound",
          "verdict", "shape"]


def format_diff(d: TraceDiff, top: int = 20) -> str:
    """The text table: the groups whose total time changed most first, then totals and unmatched groups."""
    devices = d.base_device or d.base_hardware or "?"
    if (d.new_device or d.new_hardware) != (d.base_device or d.base_hardware):
        devices += f" -> {d.new_device or d.new_hardware or '?'}"
    lines = [f"compare {d.base} -> {d.new} ({d.format}, {devices})",
             f"device time {format_time_s(d.base_total_s)} -> {format_time_s(d.new_total_s)} "
             f"({_pct((d.new_total_s / d.base_total_s - 1) * 100 if d.base_total_s > 0 else None)}); "
             f"{len(d.groups)} groups matched, {len(d.only_base)} only in base, {len(d.only_new)} only in new; "
             f"threshold {d.threshold_pct:g}%, alpha {d.alpha:g} (Holm)",
             *(f"warning: {w}" for w in d.warnings), ""]
    rows = [HEADER, *(_row(g) for g in d.groups[:top])]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += ["", "by op kind (base -> new):"]
    lines += [f"  {_clip(k['name'], 30):<30} {format_time_s(k['base_s']):>10} -> {format_time_s(k['new_s']):>10}"
              for k in d.kinds[:top]]
    for title, only in (("only in base", d.only_base), ("only in new", d.only_new)):
        if only:
            lines += ["", f"{title} ({len(only)}):"]
            lines += [f"  {_clip(g.kind, 18):<18} {_clip(g.key[1], 50):<50} {len(g.times_s):>5} calls "
                      f"{format_time_s(g.total_s):>10}" for g in only[:top]]
    suspect = _suspect_lines(d, top, "  ")
    lines += ["", *suspect] if suspect else []
    regressions = d.regressions
    lines += ["", f"{len(regressions)} regression{'s' if len(regressions) != 1 else ''} beyond "
              f"{d.threshold_pct:g}% (significant, not expected by the model)"
              + (f"; {len(suspects(d))} timing suspect, not counted" if suspects(d) else "")]
    return "\n".join(lines)


def format_markdown(d: TraceDiff, top: int = 20) -> str:
    """A Markdown summary for a CI system's job page."""
    regressions = d.regressions
    status = "❌" if regressions else "✅"
    lines = [f"## {status} perfmodel compare: {len(regressions)} regression(s) beyond {d.threshold_pct:g}%", "",
             f"`{d.base}` → `{d.new}` ({d.format}); device time {format_time_s(d.base_total_s)} → "
             f"{format_time_s(d.new_total_s)}; {len(d.groups)} groups matched, {len(d.only_base)} only in base, "
             f"{len(d.only_new)} only in new.", "", *(f"> ⚠️ {w}\n" for w in d.warnings),
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    shown = regressions + [g for g in d.groups if g.verdict != "regression"][: max(top - len(regressions), 0)]
    for g in shown:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _row(g)) + " |")
    suspect = _suspect_lines(d, top, "- ")
    if suspect:
        lines += ["", "### ⚠️ Timings no device can produce", "", *suspect]
    return "\n".join(lines) + "\n"


def junit_xml(d: TraceDiff) -> bytes:
    """JUnit XML: one testcase per compared group, a failure for a regression, skipped for too few repeats and for
    timings no device can produce (with the reason)."""
    suite = ET.Element("testsuite", name="perfmodel compare", tests=str(len(d.groups)),
                       failures=str(len(d.regressions)),
                       skipped=str(sum(g.verdict in ("too few repeats", "timing suspect") for g in d.groups)))
    for g in d.groups:
        case = ET.SubElement(suite, "testcase", classname=f"compare.{g.kind}",  # a name per group, not per op name
                             name=_clip(f"{g.name} [{shape_label(g)}]", 400),
                             time=f"{g.new_total_s:.6f}")
        detail = (f"{g.base_calls}/{g.new_calls} calls, median {format_time_s(g.base_median_s)} -> "
                  f"{format_time_s(g.new_median_s)} ({_pct(g.change_pct)}), verdict {g.verdict}")
        if g.verdict == "regression":
            failure = ET.SubElement(case, "failure", message=f"{_pct(g.change_pct)} slower", type="regression")
            failure.text = detail
        elif g.verdict == "too few repeats":
            ET.SubElement(case, "skipped", message="too few repeats for a verdict")
        elif g.timing_suspect is not None:  # impossible timings: skipped with the reason, never a failure
            ET.SubElement(case, "skipped", message=_clip(f"timing suspect: {g.timing_suspect}", 1000)).text = detail
        else:
            ET.SubElement(case, "system-out").text = detail
    return bytes(ET.tostring(suite, encoding="utf-8", xml_declaration=True))
