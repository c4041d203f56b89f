"""Coverage of the uncalibrated interval rules on held-out devices, from one saved ``lodo.py`` run (no refit).

``lodo.py --save-heldout FILE.npz`` stores every dev-set row's class, device, fold, measured and held-out predicted
time; ``lodo.py --vendor --save-heldout`` the same with one vendor out. This prints, per rule in
``perfmodel.uncalibrated_interval.RULES`` and per class, the band built from every row and the share of each fold's
rows inside the band rebuilt without that fold (everything the rule estimates, its conformal levels and family
spreads too, taken from the other folds only: the rule chosen on N - 1 devices, checked on the Nth): of rows, the
mean over the held-out devices, and each device's own share.

    python benchmarks/uncalibrated_bands.py DEVICE_OUT.npz [VENDOR_OUT.npz] [--per-device] [--rules RULE ...]
        [--grouping class|family|pooled] [--size-bands] [--urn NAME=VALUE ...]

``--grouping``: whose nested shares choose a class's rule under rule "selected" (``uncalibrated_select.GROUPING``);
``--size-bands``: all-reduce's rows banded by message size (< 1 MiB, 1-64 MiB, > 64 MiB, ``lodo_report.BANDS``),
each band a class of its own (Mondrian), its coverage printed over the three bands together; ``--urn``: the
switches of rules "urn" and "jackknife" (``perfmodel.uncalibrated_urn``, the fifteenth pass).

Not nested for the defaults' fit: the other folds' residuals come from fits that saw the scored fold
(``lodo.py``'s docstring; a fully nested check refits the defaults N x (N - 1) times).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perfmodel.uncalibrated_select as select
import perfmodel.uncalibrated_urn as urn
from perfmodel.uncalibrated_interval import POOLED, RULES, class_band, conformal_bands
from perfmodel.uncalibrated_select import selected_bands, selected_rules

Coverage = dict[str, tuple[float, float, dict[str, float]]]


def coverage(ratio: np.ndarray[Any, Any], classes: np.ndarray[Any, Any], devices: np.ndarray[Any, Any],
             folds: np.ndarray[Any, Any], rule: str) -> Coverage:
    """Class -> (share of rows inside, mean of the held-out devices' shares, device -> share), each fold's rows
    against the band built without the fold; a size band's class (``allreduce <1M``) counted with its kind's."""
    ok = np.isfinite(ratio) & (ratio > 0)
    inside = np.full(ratio.size, np.nan)
    for fold in sorted(set(folds.tolist())):
        left_out = folds == fold
        if rule == "conformal":
            table = conformal_bands(ratio, classes.tolist(), devices.tolist(), left_out)
        elif rule == "selected":
            table = selected_bands(ratio, classes.tolist(), devices.tolist(), left_out)
        else:
            table = {}
            for name in set(classes[left_out & ok].tolist()):
                band = class_band(ratio, classes.tolist(), devices.tolist(), name, left_out, rule)
                if band is not None:
                    table[name] = band
        for name, (low, high, _) in table.items():
            mine = left_out & ok & (classes == name)
            inside[mine] = (ratio[mine] >= low) & (ratio[mine] <= high)
    shown = np.array([name.split(" ")[0] for name in classes.tolist()])
    out: Coverage = {}
    for name in sorted(set(shown.tolist())):
        mine = (shown == name) & np.isfinite(inside)
        if not mine.any():
            continue
        per_device = {d: float(np.mean(inside[mine & (devices == d)])) for d in sorted(set(devices[mine].tolist()))}
        out[name] = (float(np.mean(inside[mine])), float(np.mean(list(per_device.values()))), per_device)
    return out


Arrays = np.ndarray[Any, Any]


def load(path: Path) -> tuple[Arrays, Arrays, Arrays, Arrays]:
    data = np.load(path)
    return data["measured"] / data["predicted"], data["classes"], data["devices"], data["folds"]


def size_banded(classes: Arrays, count: int) -> Arrays:
    """``classes`` with each all-reduce row keyed by its message size's band (``lodo_report.BANDS``); the message
    sizes from ``lodo.py``'s rows (the saved run's order, checked by count)."""
    import lodo  # the dev set's rows, in the order --save-heldout stored them
    from lodo_report import BANDS
    from measured_data import all_rows

    import perfmodel

    known = set(perfmodel.list_hardware())
    rows = [r for r in [*all_rows(), *lodo.extra_collectives()] if r.hardware in known and lodo._buildable(r)]
    if len(rows) != count:
        raise SystemExit(f"the saved run has {count} rows, lodo.py's rows are {len(rows)}: not the same checkout")
    size = np.array([float(r.op.get("bytes", np.nan)) for r in rows])
    out = classes.astype(object)
    for band, low, high in BANDS:
        mine = (classes == "allreduce") & (size >= low) & (size < high)
        out[mine] = f"allreduce {band.replace(' ', '')}"
    return out.astype(str)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("device_out", type=Path, help="lodo.py --save-heldout FILE.npz (one device out)")
    parser.add_argument("vendor_out", type=Path, nargs="?", help="lodo.py --vendor --save-heldout FILE.npz")
    parser.add_argument("--per-device", action="store_true", help="print each held-out device's share")
    parser.add_argument("--rules", nargs="*", default=RULES, choices=RULES, help="the rules to score")
    parser.add_argument("--grouping", choices=("class", "family", "pooled"), default=select.GROUPING,
                        help="rule 'selected': whose nested shares choose a class's rule")
    parser.add_argument("--size-bands", action="store_true", help="all-reduce banded by message size (Mondrian)")
    parser.add_argument("--urn", nargs="*", default=[], metavar="NAME=VALUE",
                        help="rules 'urn' and 'jackknife': set perfmodel.uncalibrated_urn's switches (ALPHA=2, "
                             "MIRROR=True, MIRROR=centre, OTHERS_ONLY=False, URN_BELOW=99, JACKKNIFE_ONE_DEVICE=urn)")
    args = parser.parse_args()
    select.GROUPING = args.grouping
    for setting in args.urn:
        name, _, value = setting.partition("=")
        if not hasattr(urn, name):
            parser.error(f"--urn {setting}: perfmodel.uncalibrated_urn has no {name}")
        setattr(urn, name, {"True": True, "False": False}.get(value, value) if not value[:1].isdigit()
                else float(value))
    ratio, classes, devices, folds = load(args.device_out)
    vendor = load(args.vendor_out) if args.vendor_out else None
    if args.size_bands:
        classes = size_banded(classes, classes.size)
        vendor = None if vendor is None else (vendor[0], size_banded(vendor[1], vendor[1].size), *vendor[2:])
    for rule in args.rules:
        start = time.process_time()
        if rule == "selected":
            built: dict[str, Any] = dict(selected_bands(ratio, classes.tolist(), devices.tolist()))
            rules = selected_rules(ratio, classes.tolist(), devices.tolist(), np.zeros(ratio.size, dtype=bool))
            print("\nselected rules (every device): " + ", ".join(f"{c} {r}" for c, r in rules.items()))
        else:
            built = {name: class_band(ratio, classes.tolist(), devices.tolist(), name, rule=rule)
                     for name in [*sorted(set(classes.tolist())), POOLED]}
        held = coverage(ratio, classes, devices, folds, rule)
        by_vendor = coverage(*vendor, rule=rule) if vendor else {}
        print(f"\nrule {rule} ({time.process_time() - start:.1f} s CPU)")
        print(f"{'class':<12} {'devices':>7} {'band':>16} {'rows in %':>9} {'per dev %':>9} {'vendor out %':>12}")
        inside_range = [0, 0, 0, 0]
        for name in sorted({n.split(" ")[0] for n, b in built.items() if b is not None and n != POOLED}):
            parts = [b for n, b in built.items() if b is not None and n.split(" ")[0] == name]
            band = built.get(name) or (min(b[0] for b in parts), max(b[1] for b in parts), max(b[2] for b in parts))
            rows, mean, per_device = held.get(name, (float("nan"), float("nan"), {}))
            v = by_vendor.get(name)
            inside_range[0] += 0.75 <= rows <= 0.85
            inside_range[1] += 0.75 <= mean <= 0.85
            inside_range[2] += v is not None and 0.75 <= v[0] <= 0.85
            inside_range[3] += v is not None and 0.75 <= v[1] <= 0.85
            print(f"{name:<12} {band[2]:>7} {f'x{band[0]:.2f} .. x{band[1]:.2f}':>16} {rows * 100:>9.1f} "
                  f"{mean * 100:>9.1f} {'-' if v is None else f'{v[0] * 100:.1f} ({v[1] * 100:.1f})':>12}")
            if args.per_device and per_device:
                print(" " * 14 + ", ".join(f"{d} {s * 100:.0f}" for d, s in per_device.items()))
        cells = [share for _, _, per_device in held.values() for share in per_device.values()]
        print(f"mean over the {len(cells)} held-out (class, device) cells {np.mean(cells) * 100:.1f} %")
        print(f"classes with coverage in 75-85 %: of rows {inside_range[0]}, per device {inside_range[1]} "
              f"(of {len(held)}); one vendor out {inside_range[2]}, {inside_range[3]} (of {len(by_vendor)})")


if __name__ == "__main__":
    main()
