"""A ``python -c`` script that runs the fast CLI entry point on its argv (exit 0 expected), then ``tail``: what a
test wants to know about the finished process (which modules it loaded)."""

from __future__ import annotations

PROBE_HEAD = """import sys
from perfmodel.cli_fast import main
sys.argv = ["perfmodel", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
"""


def probe_script(tail: str) -> str:
    """The probe with ``tail`` (Python source, run after the command) appended."""
    return PROBE_HEAD + tail
