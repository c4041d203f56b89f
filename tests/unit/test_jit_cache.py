"""numba's cache keyed on a compiled module's dependencies (``search.jit_cache``): an edit to a module whose
jitted functions another one inlines deletes that one's cache files, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.search.jit_cache import drop_stale


def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    module, dep = tmp_path / "kernels.py", tmp_path / "floors.py"
    module.write_text("x = 1\n")
    dep.write_text("C = 1\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    for name in ("kernels.best-10.py311.nbi", "kernels.best-10.py311.1.nbc", "floors.f-3.py311.nbi"):
        (cache / name).write_bytes(b"compiled")
    return module, dep, cache


def test_a_changed_dependency_drops_the_module_cache_once(tmp_path: Path) -> None:
    module, dep, cache = _layout(tmp_path)
    assert drop_stale(str(module), (str(dep),))  # no stamp yet: whatever is cached may be stale
    assert sorted(p.name for p in cache.iterdir()) == ["floors.f-3.py311.nbi", "kernels.dependencies"]
    (cache / "kernels.best-10.py311.nbi").write_bytes(b"compiled again")
    assert not drop_stale(str(module), (str(dep),))  # same sources: numba's cache is kept
    assert (cache / "kernels.best-10.py311.nbi").exists()
    dep.write_text("C = 2\n")
    assert drop_stale(str(module), (str(dep),))
    assert not (cache / "kernels.best-10.py311.nbi").exists()
    assert (cache / "floors.f-3.py311.nbi").exists()  # another module's cache is its own business


def test_a_cache_it_cannot_write_is_left_to_numba(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only install (simulated: unlink refused, as chmod does not stop root): no error, no stamp written,
    and the next import tries again."""
    module, dep, cache = _layout(tmp_path)

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "read-only", str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    assert not drop_stale(str(module), (str(dep),))
    assert not (cache / "kernels.dependencies").exists()
    assert (cache / "kernels.best-10.py311.nbi").exists()
    monkeypatch.undo()
    assert drop_stale(str(module), (str(dep),))


def test_the_gemm_kernels_are_keyed_on_what_they_inline() -> None:
    from perfmodel.search import gemm_floor

    stamp = Path(gemm_floor.__file__).parent / "__pycache__" / "gemm_floor.dependencies"
    assert stamp.exists() and len(stamp.read_text(encoding="ascii")) == 64
