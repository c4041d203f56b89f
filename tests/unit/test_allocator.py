"""``perfmodel.allocator``: glibc's thresholds set once on import of the model, off where asked, never raising."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfmodel import allocator

ROOT = Path(__file__).resolve().parents[2]
GLIBC = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION") is not None

# a 24 MiB block: a fresh mapping under glibc's defaults (dynamic threshold from 128 KiB), from the heap when set
PROBE = """
import ctypes, sys
import perfmodel.roofline
from perfmodel import allocator
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
before = libc.mallinfo2().hblkhd
block = libc.malloc(24 << 20)
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
print(allocator.outcome(), "|", mapped >= 24 << 20)
"""


def _probe(**env: str) -> tuple[str, bool]:
    clean = {k: v for k, v in os.environ.items() if k not in (allocator.DISABLE, *allocator.GLIBC_SETTINGS)}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, "PYTHONPATH": str(ROOT), **env}, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    outcome, mapped = out.split(" | ")
    return outcome, mapped == "True"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune`` not yet run in this process (its state is per process)."""
    monkeypatch.setattr(allocator, "_STATE", {})
    for name in (allocator.DISABLE, *allocator.GLIBC_SETTINGS, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_import_sets_thresholds_so_a_24_mib_block_comes_from_the_heap() -> None:
    assert _probe() == ("set", False)
    assert _probe(**{allocator.DISABLE: "0"}) == (f"off ({allocator.DISABLE})", True)


@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_the_environments_glibc_settings_win() -> None:
    outcome, mapped = _probe(MALLOC_MMAP_THRESHOLD_="1048576")
    assert outcome == "off (glibc settings from the environment)" and mapped


@pytest.mark.usefixtures("fresh")
@pytest.mark.skipif(not GLIBC, reason="glibc only")
def test_tune_once_and_idempotent() -> None:
    assert allocator.outcome() is None
    assert allocator.tune() == "set"
    assert allocator.tune() == "set" and allocator.hold("late") == "set"


@pytest.mark.usefixtures("fresh")
@pytest.mark.parametrize("value", ["0", "off", "False", " no "])
def test_disabled_by_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(allocator.DISABLE, value)
    assert allocator.tune() == f"off ({allocator.DISABLE})"


@pytest.mark.usefixtures("fresh")
def test_glibc_tunables_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1")
    assert allocator.tune() == "off (glibc settings from the environment)"


@pytest.mark.usefixtures("fresh")
def test_hold_keeps_the_defaults() -> None:
    assert allocator.hold("host measurement") == "off (host measurement)"
    assert allocator.tune() == "off (host measurement)"


@pytest.mark.usefixtures("fresh")
def test_not_linux_sets_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert allocator.tune() == "off (not glibc)"


@pytest.mark.usefixtures("fresh")
def test_a_libc_without_glibcs_names_or_that_fails_to_load_sets_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    class Musl:
        mallopt = staticmethod(lambda *_: 1)

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", lambda *_: Musl())
    assert allocator.tune() == "off (not glibc)"
    monkeypatch.setattr(allocator, "_STATE", {})

    def fail(*_: object) -> None:
        raise OSError("no libc")

    monkeypatch.setattr(ctypes, "CDLL", fail)
    assert allocator.tune() == "off (OSError)"


@pytest.mark.usefixtures("fresh")
def test_mallopt_refusing_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    def mallopt(*_: object) -> int:
        return 0  # glibc's answer to a value it refuses

    refuses = SimpleNamespace(gnu_get_libc_version=lambda: b"2.36", mallopt=mallopt)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", lambda *_: refuses)
    assert allocator.tune() == "off (mallopt refused)"


def test_the_cli_and_measure_modules_import_without_setting_it() -> None:
    """``perfmodel measure`` holds glibc's defaults before its loop imports the model: nothing it imports first (the
    CLI, the measure command) may have set them already."""
    code = ("import perfmodel.cli, perfmodel.measure.command\nfrom perfmodel import allocator\n"
            "print(allocator.outcome())\nprint(allocator.hold('host measurement'))\nimport perfmodel.roofline\n"
            "print(allocator.outcome())")
    clean = {k: v for k, v in os.environ.items() if k not in (allocator.DISABLE, *allocator.GLIBC_SETTINGS)}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, "PYTHONPATH": str(ROOT)}, check=True,
                         capture_output=True, text=True).stdout.split("\n")
    assert out[:3] == ["None", "off (host measurement)", "off (host measurement)"]
