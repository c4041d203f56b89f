"""Pre-validated bundled devices for ``perfmodel predict`` (issue 25, benchmarks/cli_start.py).

Validating a spec imports pydantic and builds the hardware model's validators (~0.15 s of CPU together, more
than the prediction itself). ``predict`` instead loads a bundled device from a pickle of the plain copy
(perfmodel.hardware_methods.plain_copy) of the object the validated path returned, written on first use under
``$PERFMODEL_CACHE_DIR`` (else ``$XDG_CACHE_HOME/perfmodel``, else ``~/.cache/perfmodel``) and read back only
while its key matches: the sha256 of the device's spec file (from the library's current index,
perfmodel.spec_index), the package version, pydantic's version.py and the model's source (perfmodel/hardware.py,
hardware_methods.py, dtypes.py). Anything else (an edited spec, a stale index, another version, a specs
directory of the user's, an unknown id, a cache that cannot be read or written) takes the validated path: same
values, same output, slower.

Only ``predict`` without a calibration uses it (perfmodel.cli_fast.predict_text); the API, the other commands
and ``perfmodel.specs`` validate as before. Imports neither pydantic nor the hardware model while the pickle is
current. A pickle runs code when loaded: the cache folder must be the user's own (as ~/.cache is).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle

from perfmodel import __version__, spec_index
from perfmodel.hardware_methods import PlainHardware, plain_copy

CACHE_DIR_ENV = "PERFMODEL_CACHE_DIR"
FORMAT = 2  # bump when what is pickled changes
_MODEL_SOURCES = ("hardware.py", "hardware_methods.py", "dtypes.py")


def cache_dir() -> str:
    """Where the pickles live: ``$PERFMODEL_CACHE_DIR``, ``$XDG_CACHE_HOME/perfmodel`` or ``~/.cache/perfmodel``."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "perfmodel")


def cache_key(file_sha256: str) -> str | None:
    """The key of a device whose spec file has ``file_sha256``: it changes with the file, the package version, the
    pydantic version (its version.py, read, not imported) and the model's source; None where a source cannot be
    read."""
    digest = hashlib.sha256(f"{FORMAT}\0{__version__}\0{file_sha256}".encode())
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        spec = importlib.util.find_spec("pydantic")
        origin = None if spec is None else spec.origin
        if origin is None:
            return None
        for path in (os.path.join(os.path.dirname(origin), "version.py"),
                     *(os.path.join(here, name) for name in _MODEL_SOURCES)):
            with open(path, "rb") as stream:
                digest.update(b"\0" + stream.read())
    except (OSError, ImportError, ValueError):
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


def bundled_plain(hardware_id: str) -> PlainHardware | None:
    """The plain copy of a bundled device from its pickle while the key matches, else of the validated device
    (and the pickle written for the next call); None where the cache does not apply (see the module's doc): the
    caller loads the device as usual."""
    file_hash = _bundled_file_hash(hardware_id)
    key = None if file_hash is None else cache_key(file_hash)
    if key is None:
        return None
    path = cache_path(hardware_id, key)
    cached = _read(path, hardware_id)
    if cached is not None:
        return cached
    from perfmodel.specs import load_hardware

    plain = plain_copy(load_hardware(hardware_id))
    _write(path, plain)
    return plain


def _read(path: str, hardware_id: str) -> PlainHardware | None:
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    try:
        loaded = pickle.loads(data)
    except Exception:  # a damaged or foreign file: validate instead, and rewrite it
        return None
    return loaded if isinstance(loaded, PlainHardware) and loaded.id == hardware_id else None


def _write(path: str, hardware: PlainHardware) -> None:
    """Pickle ``hardware`` to ``path`` atomically; older pickles of the device are removed. A cache that cannot be
    written is skipped."""
    import tempfile

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
