"""A ready ``perfmodel measure`` typer command; storing and uploading are callbacks the CLI passes in.

Wire it up in ``perfmodel/cli.py`` with
``app.command("measure")(measure_command(on_spec=..., on_trace=...))``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn

from perfmodel import allocator
from perfmodel.measure.host import measure_host
from perfmodel.measure.report import format_measurement
from perfmodel.measure.spec import host_spec
from perfmodel.measure.suite import run_suite
from perfmodel.specs import parse_spec

SpecCallback = Callable[[dict[str, Any]], None]
TraceCallback = Callable[[Path], None]


class StderrProgress:
    """``progress(stage, fraction)`` on stderr: a rich progress bar with the stage on a terminal; elsewhere (a
    log, CI) a line per ``step`` of the fraction and per new stage, so a redirected run is not one long line."""

    def __init__(self, terminal: bool | None = None, step: float = 0.1) -> None:
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.step = step
        self.last: tuple[str, int] | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __call__(self, stage: str, fraction: float) -> None:
        if self.terminal:
            if self._bar is None:
                self._bar = Progress(TextColumn("{task.description:<14}"), BarColumn(), TaskProgressColumn(),
                                     TimeElapsedColumn(), console=Console(file=sys.stderr, force_terminal=True))
                self._task = self._bar.add_task(stage, total=1.0)
                self._bar.start()
            assert self._task is not None
            self._bar.update(self._task, description=stage, completed=min(max(fraction, 0.0), 1.0))
            return
        mark = (stage, int(fraction / self.step + 1e-9))
        if mark != self.last:
            self.last = mark
            typer.echo(f"{stage}: {fraction:4.0%}", err=True)

    def end(self) -> None:
        """Draw the bar a last time and leave it on screen (nothing to close in a log)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar, self._task = None, None
        self.last = None


def measure_command(on_spec: SpecCallback | None = None,
                    on_trace: TraceCallback | None = None) -> Callable[..., None]:
    """The command function: measure, write ``<out>/<id>.yaml`` and the suite trace, then call back."""

    def measure(
        out: Annotated[Path, typer.Option(help="folder for the spec YAML and the suite trace")] = Path("var/measure"),
        host_id: Annotated[str, typer.Option("--id", help="hardware id of this host's spec")] = "host",
        quick: Annotated[bool, typer.Option(help="a few seconds, for tests: fewer sizes and repeats")] = False,
        suite: Annotated[bool, typer.Option(help="also time the op suite under the PyTorch profiler")] = True,
    ) -> None:
        """Measure this machine (ERT-style sweep, matmul peaks), write its spec, time the op suite."""
        allocator.hold("host measurement")  # torch timed under glibc's defaults (perfmodel/allocator.py)
        progress = StderrProgress()
        measurement = measure_host(progress, quick=quick)
        progress.end()
        spec = host_spec(measurement, host_id)
        parse_spec(spec, "measured host")
        out.mkdir(parents=True, exist_ok=True)
        spec_path = out / f"{host_id}.yaml"
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
        typer.echo(format_measurement(measurement, sweep=False))
        typer.echo(f"spec: {spec_path}")
        if on_spec:
            on_spec(spec)
        if suite:
            trace = run_suite(out, progress, quick=quick)
            progress.end()
            typer.echo(f"suite trace: {trace}")
            if on_trace:
                on_trace(trace)

    return measure
