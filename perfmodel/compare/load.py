"""Sides from what a user names: a trace file (parsed by ``perfmodel.traces``) or a stored trace upload
(its runs), with the device each side ran on."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from perfmodel.compare import cache
from perfmodel.compare.diff import CompareError
from perfmodel.compare.fast_side import fast_file_side
from perfmodel.compare.sides import Side, side_from_parsed, side_from_runs
from perfmodel.hardware import Hardware
from perfmodel.traces import TraceError, parse_trace

STORED_PREFIX = "trace:"
MAX_STORED_RUNS = 200_000  # runs read from one stored trace (bounded work)
PAGE = 5_000
PARALLEL_ENV = "PERFMODEL_COMPARE_PARALLEL"  # "1": read the two files side by side (``file_sides``); opt-in
PARALLEL_MIN_BYTES = 4 << 20  # file bytes (both files) from which the new side is read in a child process


def parse_threshold(text: str) -> float:
    """'5%', '5' or '0.5 %' -> percent; a clear error otherwise."""
    raw = text.strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise CompareError(f"threshold {text!r}: expected a percentage such as 5%") from None
    if not (value >= 0 and value < 1e6):
        raise CompareError(f"threshold {text!r}: expected a percentage >= 0")
    return value


def stored_side(store: Any, upload_id: int, label: str | None = None) -> tuple[Side, str]:
    """The runs of one stored trace upload as a side, and the hardware id it was stored for."""
    upload = store.get_trace_upload(upload_id)
    if upload is None:
        raise CompareError(f"no stored trace {upload_id} (GET /api/v1/traces lists them)")
    if upload.status == "failed":
        raise CompareError(f"stored trace {upload_id} failed to ingest: {(upload.error or '')[:200]}")
    runs: list[Any] = []
    while len(runs) < MAX_STORED_RUNS:
        page, total = store.list_runs(trace_upload_id=upload_id, limit=PAGE, offset=len(runs))
        runs += page
        if not page or len(runs) >= total:
            break
    kernels: dict[int, list[str]] = {}
    for run_id, name in store.trace_kernel_runs(upload_id):
        kernels.setdefault(run_id, []).append(name)
    side = side_from_runs(runs, label or f"trace:{upload_id} ({upload.filename})", upload.format, kernels)
    return side, upload.hardware_id


def file_side(path: Path) -> Side:
    """A trace file's side (from the cache where ``PERFMODEL_COMPARE_CACHE`` names one: ``cache``)."""
    if not path.is_file():
        raise CompareError(f"{path}: {'not a file' if path.exists() else 'no such file'}")
    folder = cache.cache_folder()
    content = path.read_bytes() if folder is not None else b""
    if folder is not None and (side := cache.load(folder, content, path.name)) is not None:
        return side
    side = fast_file_side(content or path, path.name)  # None: a file the columnar path leaves to the reference
    try:
        side = side or side_from_parsed(parse_trace(content or path, path.name), path.name)
    except TraceError as exc:
        raise CompareError(f"{path.name}: {exc}") from None
    if folder is not None:
        cache.store(folder, content, side)
    return side


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _in_parallel(base: Path, new: Path) -> bool:
    """Whether the new file is read by a forked child while this process reads the base: asked for
    (``PARALLEL_ENV``), two usable CPUs, this process single-threaded (a fork copies no other thread's locks), both
    regular files of ``PARALLEL_MIN_BYTES`` together (a fork and the side's trip back cost ~10-50 ms).

    Opt-in because it was not measured to pay: on the shared 2-core VM of the tenth pass (load 6-12, other users'
    sessions in their own scheduler groups) the two processes got no more CPU than one, took 10 % more CPU time
    (two memory-bound readers sharing caches) and no less wall time; it can only pay where a core is idle."""
    if os.environ.get(PARALLEL_ENV, "").strip() != "1":
        return False
    if "fork" not in multiprocessing.get_all_start_methods() or _usable_cpus() < 2:
        return False
    if threading.active_count() != 1 or not (base.is_file() and new.is_file()):
        return False
    return base.stat().st_size + new.stat().st_size >= PARALLEL_MIN_BYTES


def _child_side(path: Path, send: Connection) -> None:
    """In the child: the side (pickled to the parent), or the ``CompareError`` text; nothing for any other
    exception (the parent then reads the file itself and raises it there)."""
    try:
        send.send(("side", file_side(path)))
    except CompareError as exc:
        send.send(("error", str(exc)))
    finally:
        send.close()


class _SideInChild:
    """``file_side(path)`` in a forked child process."""

    def __init__(self, path: Path) -> None:
        context = multiprocessing.get_context("fork")
        self.path = path
        self.receive, send = context.Pipe(duplex=False)
        self.process = context.Process(target=_child_side, args=(path, send), daemon=True)
        self.process.start()
        send.close()

    def result(self) -> Side:
        try:
            kind, value = self.receive.recv()  # before join: a large side fills the pipe
        except (EOFError, OSError):  # the child died or sent nothing: read the file here
            kind, value = "lost", None
        finally:
            self.receive.close()
            self.process.join()
        if kind == "side":
            assert isinstance(value, Side)
            return value
        if kind == "error":
            raise CompareError(str(value))
        return file_side(self.path)

    def stop(self) -> None:
        self.process.terminate()
        self.process.join()
        self.receive.close()


def file_sides(base: Path, new: Path) -> tuple[Side, Side]:
    """``file_side`` of both files, the same sides; the new one read in a forked child process while this one
    reads the base where ``_in_parallel`` allows (the wall time of the slower side instead of the sum; the same
    CPU time). The base's error is raised first, as when they are read in turn."""
    child = _SideInChild(new) if _in_parallel(base, new) else None
    try:
        base_side = file_side(base)
    except BaseException:
        if child is not None:
            child.stop()
        raise
    return base_side, (child.result() if child is not None else file_side(new))


def load_sides(base: str, new: str, store: Callable[[], Any]) -> tuple[tuple[Side, str | None],
                                                                       tuple[Side, str | None]]:
    """``load_side`` of both references; two trace files read side by side (``file_sides``)."""
    if base.startswith(STORED_PREFIX) or new.startswith(STORED_PREFIX):
        return load_side(base, store), load_side(new, store)
    base_side, new_side = file_sides(Path(base), Path(new))
    return (base_side, None), (new_side, None)


def load_side(ref: str, store: Callable[[], Any]) -> tuple[Side, str | None]:
    """``trace:ID`` (a stored upload: its runs and hardware id) or a path (no hardware of its own)."""
    if ref.startswith(STORED_PREFIX):
        ident = ref[len(STORED_PREFIX):]
        if not ident.isdigit():
            raise CompareError(f"{ref!r}: expected trace:ID with a numeric id")
        return stored_side(store(), int(ident), None)
    return file_side(Path(ref)), None


def pick_hardware(given: str | None, stored: str | None, resolve: Callable[[str], Hardware]) -> Hardware | None:
    hardware_id = given or stored
    if hardware_id is None:
        return None
    try:
        return resolve(hardware_id)
    except KeyError:
        raise CompareError(f"unknown hardware {hardware_id!r} (perfmodel hardware list)") from None
