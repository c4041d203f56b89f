"""Pre-validated bundled devices for the ``perfmodel`` command (issue 25, benchmarks/cli_start.py).

Validating a spec builds the pydantic validators of the hardware model (``defer_build``: ~0.04-0.06 s of CPU on
first use in a process, more than the prediction itself). The command instead loads a bundled device from a
pickle of the object the validated path returned, written on first use under ``$PERFMODEL_CACHE_DIR`` (else
``$XDG_CACHE_HOME/perfmodel``, else ``~/.cache/perfmodel``) and read back only while its key matches: the key is
the sha256 of the device's spec file (from the library's current index, perfmodel.spec_index), the package
version, the pydantic version and the source of the model (perfmodel/hardware.py, perfmodel/dtypes.py). Anything
else (an edited spec, a stale index, another version, a specs directory of the user's, an unknown id, a cache
that cannot be read or written) takes the validated path: same object, same output, slower.

Only the command uses it (perfmodel.cli_fast.resolve_hardware); the API and ``perfmodel.specs`` validate as
before. Imports nothing heavy of its own: the pickle imports the hardware model.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from typing import TYPE_CHECKING

from perfmodel import __version__, spec_index

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware

CACHE_DIR_ENV = "PERFMODEL_CACHE_DIR"
FORMAT = 1  # bump when what is pickled changes
_MODEL_SOURCES = ("hardware.py", "dtypes.py")


def cache_dir() -> str:
    """Where the pickles live: ``$PERFMODEL_CACHE_DIR``, ``$XDG_CACHE_HOME/perfmodel`` or ``~/.cache/perfmodel``."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "perfmodel")


def cache_key(file_sha256: str) -> str | None:
    """The key of a device whose spec file has ``file_sha256``: it changes with the file, the package version, the
    pydantic version and the model's source; None where that source cannot be read."""
    import pydantic  # loaded already by the pickle's classes; its version is part of the pickled state's meaning

    digest = hashlib.sha256(f"{FORMAT}\0{__version__}\0{pydantic.VERSION}\0{file_sha256}".encode())
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        for name in _MODEL_SOURCES:
            with open(os.path.join(here, name), "rb") as stream:
                digest.update(b"\0" + stream.read())
    except OSError:
        return None
    return digest.hexdigest()[:32]


def _bundled_file_hash(hardware_id: str) -> str | None:
    """The sha256 of ``hardware_id``'s spec file from the bundled library's current index, else None (a library
    of the user's, no current index, an unknown id)."""
    if spec_index.specs_dir_name() != spec_index.bundled_dir_name():
        return None
    index = spec_index.current_index()
    name = spec_index.device_file(hardware_id)
    if index is None or name is None:
        return None
    digest = index["files"].get(name)
    return digest if isinstance(digest, str) else None


def cache_path(hardware_id: str, key: str) -> str:
    return os.path.join(cache_dir(), f"hardware-{hardware_id}-{key}.pickle")


def bundled_hardware(hardware_id: str) -> Hardware | None:
    """A bundled device from its pre-validated pickle while the key matches, else validated (and the pickle
    written for the next call); None where the cache does not apply (see the module's doc): the caller loads it
    as usual."""
    file_hash = _bundled_file_hash(hardware_id)
    key = None if file_hash is None else cache_key(file_hash)
    if key is None:
        return None
    path = cache_path(hardware_id, key)
    cached = _read(path, hardware_id)
    if cached is not None:
        return cached
    from perfmodel.specs import load_hardware

    hardware = load_hardware(hardware_id)
    _write(path, hardware)
    return hardware


def _read(path: str, hardware_id: str) -> Hardware | None:
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    try:
        loaded = pickle.loads(data)
    except Exception:  # a damaged or foreign file: validate instead, and rewrite it
        return None
    from perfmodel.hardware import Hardware

    return loaded if isinstance(loaded, Hardware) and loaded.id == hardware_id else None


def _write(path: str, hardware: Hardware) -> None:
    """Pickle ``hardware`` (its content hash computed, so ``predict --json`` needs no serializer either) to
    ``path`` atomically; older pickles of the device are removed. A cache that cannot be written is skipped."""
    import tempfile

    _ = hardware.content_hash
    folder, name = os.path.split(path)
    stem = name.rsplit("-", 1)[0]  # hardware-<id>: the key has no '-'
    try:
        os.makedirs(folder, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".pickle")
        try:
            with os.fdopen(fd, "wb") as stream:
                pickle.dump(hardware, stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
        for other in os.listdir(folder):
            if other.endswith(".pickle") and other.rsplit("-", 1)[0] == stem and other != name:
                os.unlink(os.path.join(folder, other))
    except OSError:
        return
