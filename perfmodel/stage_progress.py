"""Progress of a long command that runs as named stages (parse, match, report, store): on stderr, a bar with
the stage on a terminal, a line per stage in a log (``StderrProgress``); nothing for quick inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class StageProgress:
    """``stage(name)`` marks the start of one of ``stages`` (the bar moves to its share of the stages done);
    ``end()`` fills the bar. With ``quiet`` every call does nothing (and rich is never imported)."""

    def __init__(self, stages: Sequence[str], quiet: bool = False) -> None:
        self.stages = list(stages)
        self._bar: Any = None
        if not quiet:
            from perfmodel.measure.command import StderrProgress

            self._bar = StderrProgress()

    def stage(self, name: str) -> None:
        if self._bar is None:
            return
        if name not in self.stages:
            raise ValueError(f"stage {name!r} is not one of {self.stages}")
        self._bar(name, self.stages.index(name) / len(self.stages))

    def end(self) -> None:
        """All stages done: the bar full, then closed."""
        if self._bar is not None:
            self._bar("done", 1.0)
        self.close()

    def close(self) -> None:
        """Stop drawing (also after a failure: the terminal gets its cursor back); safe to call twice."""
        if self._bar is not None:
            self._bar.end()
            self._bar = None
