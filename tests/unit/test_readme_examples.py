"""The README's examples run as written: its shell blocks in order against a live service (uvicorn in a
subprocess on a free port, SQLite in a tmp dir; ``localhost:8000`` becomes that port), its Python blocks in a
fresh interpreter, and the outputs it quotes are what they print.

Conventions in README.md: a shell line is one command (``\\`` continues it); curl runs with ``fail-with-body``
(a ~/.curlrc here), so an HTTP error fails the test; in a Python block, a ``print(...)`` line followed by a
``# text`` comment line quotes the printed output."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.live_server import live_server

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# commands of the README not run here (matched by their start), and why
SKIPPED = {
    "make run": "the test starts the service itself",
    "make test": "it is this test suite",
    ".venv/bin/perfmodel measure": "measures this host for minutes",
    ".venv/bin/perfmodel predict host": "needs the host calibration that `perfmodel measure` makes",
}
TIMEOUT_S = 900  # all of it, on two busy cores


def blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language`` (sh or python), in order."""
    return [m.group(1) for m in re.finditer(rf"^```{language}\n(.*?)^```", README.read_text(), re.M | re.S)]


def shell_commands() -> list[str]:
    """Every command of the sh blocks (continuations joined, comment lines dropped), in order."""
    commands: list[str] = []
    for block in blocks("sh"):
        joined = re.sub(r"\\\n", " ", block)
        commands += [line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]
    return commands


def test_the_readme_names_only_files_and_ids_that_exist() -> None:
    commands = shell_commands()
    for prefix in SKIPPED:  # the skip list cannot outlive the README's commands
        assert any(c.startswith(prefix) for c in commands), f"{prefix!r} is no longer in the README"
    for path in re.findall(r"\b(tests/data/\S+?|hardware_specs/\S+?)(?=[\s`'\"]|$)", README.read_text()):
        assert (ROOT / path).exists() or path == "hardware_specs/schema.json", path
    assert "$TOKEN" not in "\n".join(blocks("sh")) or "export TOKEN=$(" in "\n".join(blocks("sh"))


def test_shell_examples_run_against_a_live_service(tmp_path: Path) -> None:
    work = tmp_path / "repo"  # the README's relative paths, with hardware_specs/ written here, not in the repo
    work.mkdir()
    for name in (".venv", "tests"):
        (work / name).symlink_to(ROOT / name)
    (work / "hardware_specs").mkdir()
    (tmp_path / ".curlrc").write_text("fail-with-body\nmax-time = 300\n")
    database_url = f"sqlite:///{tmp_path / 'readme.sqlite3'}"
    commands = [c for c in shell_commands() if not c.startswith(tuple(SKIPPED))]
    assert len(commands) >= 15
    with live_server(database_url, token=os.urandom(16).hex(), workers=1) as base:
        script = "set -euo pipefail\n" + "\n".join(c.replace("localhost:8000", base.removeprefix("http://"))
                                                   for c in commands)
        env = {**os.environ, "HOME": str(tmp_path), "PERFMODEL_DATABASE_URL": database_url,
               "PERFMODEL_DATA_DIR": str(tmp_path / "var")}
        run = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                             timeout=TIMEOUT_S)
    assert run.returncode == 0, f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"
    # `perfmodel hardware schema > hardware_specs/schema.json` reproduces the committed schema
    schema = "hardware_specs/schema.json"
    assert (work / schema).read_text() == (ROOT / schema).read_text()


def test_python_examples_run_and_print_what_they_say() -> None:
    code = blocks("python")
    assert code
    for block in code:
        lines = block.splitlines()
        quoted = [after.removeprefix("# ") for line, after in itertools.pairwise(lines)
                  if line.startswith("print(") and after.startswith("# ")]
        run = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True,
                             timeout=TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert run.returncode == 0, run.stderr[-4000:]
        printed = run.stdout.splitlines()
        for text in quoted:
            assert text in printed, f"the README says {text!r}; it prints {printed}"


@pytest.mark.parametrize("identifier", re.findall(r'derive_variant\([^,]+, "([^"]+)"', README.read_text()))
def test_variant_ids_in_the_readme_are_valid(identifier: str) -> None:
    assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*", identifier)
