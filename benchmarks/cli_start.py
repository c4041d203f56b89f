"""How fast the ``perfmodel`` command starts: CPU time (user + system) and wall time of ``--help``, ``hardware
list`` and ``predict`` (median of N runs, each a fresh interpreter running the checkout's console-script entry
point), each as a ratio to ``python -c pass`` timed in the same run (the machine is shared: a busy one inflates
the wall times, much less the CPU times), and the slowest top-level imports of each (``python -X importtime``).
The last row is predict's floor: the library a prediction cannot do without (numpy: a bundled device is read as a
pre-validated plain copy, perfmodel.spec_cache, without pydantic; before that the floor was numpy, pydantic and
the hardware model's classes), imported and nothing else.

    .venv/bin/python benchmarks/cli_start.py [--runs 5] [--root /tmp/pm-base] [--no-bytecode-cache]

``--root`` times another checkout (e.g. the starting commit) with the same interpreter. Bytecode is cached as on
a user's machine (in a temporary PYTHONPYCACHEPREFIX, filled by one untimed run of each command first), even
where PYTHONDONTWRITEBYTECODE is set; ``--no-bytecode-cache`` times it as such an environment runs it (every
perfmodel module compiled from source each time: ~+0.1 s for predict). The target (issue 25) is ≤ 0.3 s on a
quiet machine.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "--help": ["--help"],
    "hardware list": ["hardware", "list"],
    "predict": ["predict", "nvidia-h100-sxm5-80gb", "matmul", "m=4096", "n=4096", "k=4096", "dtype=bf16"],
}
FLOOR = "import numpy"  # predict's floor
HEAVY = ("numpy", "scipy", "pydantic", "yaml", "sqlalchemy", "fastapi", "plotly", "torch", "dask", "rich")


def entry(root: Path) -> str:
    """``python -c`` code running the checkout's ``perfmodel`` console script (``[project.scripts]``)."""
    match = re.search(r'^perfmodel\s*=\s*"([\w.]+):(\w+)"', (root / "pyproject.toml").read_text(), re.M)
    module, function = match.groups() if match else ("perfmodel.cli", "main")
    return f"import sys; from {module} import {function}; sys.argv[0] = 'perfmodel'; {function}()"


def wall_s(argv: list[str], env: dict[str, str], cwd: Path, runs: int) -> tuple[float, float]:
    """Median (wall time [s], CPU time [s], user + system) of ``argv`` over ``runs`` fresh processes; the CPU
    time is what a quiet machine's wall time would be near (a busy one makes the process wait, not work more)."""
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times), statistics.median(cpu)


def imports(code: str, args: list[str], env: dict[str, str],
            cwd: Path) -> tuple[float, list[tuple[float, str]], list[str]]:
    """(all imports [s], the 5 slowest top-level modules [(s, name)], the heavy libraries loaded)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args], env=env, cwd=cwd,
                         capture_output=True, text=True, check=True).stderr
    top: list[tuple[float, str]] = []
    loaded: set[str] = set()
    for line in out.splitlines():
        if not line.startswith("import time:") or "|" not in line or "cumulative" in line:
            continue
        _, cumulative_us, name = line.split("|")
        module = name.strip()
        loaded.add(module.split(".")[0])
        if not name.startswith("  "):  # imported by the program itself, not by another module
            top.append((int(cumulative_us) / 1e6, module))
    return sum(s for s, _ in top), sorted(top, reverse=True)[:5], [m for m in HEAVY if m in loaded]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="processes per command (median)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout to time")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="compile every module from source each run (PYTHONDONTWRITEBYTECODE=1)")
    args = parser.parse_args()
    root = args.root.resolve()
    env = {**os.environ, "PYTHONPATH": str(root), "PERFMODEL_DATA_DIR": str(root / "var")}
    with tempfile.TemporaryDirectory(prefix="cli-start-pyc-") as pyc:
        if args.no_bytecode_cache:
            env.update(PYTHONDONTWRITEBYTECODE="1")
            env.pop("PYTHONPYCACHEPREFIX", None)
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env.update(PYTHONPYCACHEPREFIX=pyc)
        table(root, env, args.runs, "no bytecode cache" if args.no_bytecode_cache else "bytecode cached")


def table(root: Path, env: dict[str, str], runs: int, bytecode: str) -> None:
    code = entry(root)
    rows: list[tuple[str, list[str], list[str] | None]] = [
        (label, [sys.executable, "-c", code, *argv], argv) for label, argv in COMMANDS.items()]
    rows.append(("predict floor", [sys.executable, "-c", FLOOR], None))
    for _, command, _ in rows:  # untimed: fills the bytecode cache
        subprocess.run(command, env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    base_s, base_cpu_s = wall_s([sys.executable, "-c", "pass"], env, root, runs)
    print(f"checkout {root} ({code.split(';')[1].strip()}; {bytecode}); python -c pass: {base_cpu_s * 1e3:.0f} ms "
          f"CPU, {base_s * 1e3:.0f} ms wall (median of {runs}); load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"{'command':<15} {'CPU':>9} {'x pass':>7} {'wall':>9} {'x pass':>7} {'imports':>9}  "
          "heavy libraries; slowest imports")
    for label, command, argv in rows:
        t_s, cpu_s = wall_s(command, env, root, runs)
        import_s, top, heavy = imports(code if argv is not None else FLOOR, argv or [], env, root)
        slowest = ", ".join(f"{name} {s * 1e3:.0f} ms" for s, name in top[:3])
        print(f"{label:<15} {cpu_s * 1e3:>6.0f} ms {cpu_s / base_cpu_s:>6.1f}x {t_s * 1e3:>6.0f} ms "
              f"{t_s / base_s:>6.1f}x {import_s * 1e3:>6.0f} ms  {' '.join(heavy) or '-'}; {slowest}")


if __name__ == "__main__":
    main()
