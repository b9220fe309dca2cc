"""The on-disk cache of built kernels (issue 8, item 4): atomic writes, a content hash checked on load
(damaged entries are rebuilt), a lock against concurrent builds, and an unusable cache directory that
falls back to a private temporary one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

import polytri as pt
from polytri.cpu_codegen import build

pytestmark = pytest.mark.cc


def _program(tag: str) -> pt.Program:
    """A small program whose generated source (hence cache key) is unique to ``tag``."""
    p = pt.Program(f"cache_{tag}", params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = A[i] * 2.0 + 1.0")
    return p


def _works(k) -> None:  # type: ignore[no-untyped-def]
    a = np.arange(4.0)
    k(A=a)
    np.testing.assert_array_equal(a, [1.0, 3.0, 5.0, 7.0])


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(root))
    return root


def _entries(root: Path) -> list[Path]:
    """The kernels' libraries (not the probe that measures a parallel region's cost, built at first use)."""
    return sorted(p for p in root.rglob("*.so") if "pt_probe(" not in p.with_suffix(".c").read_text())


def test_a_build_leaves_library_hash_and_source_and_no_temporary_files(cache: Path) -> None:
    k = pt.compile(_program(uuid.uuid4().hex[:8]))
    _works(k)
    (lib,) = _entries(cache)
    assert k.library == lib
    assert lib.with_suffix(".sha256").read_text().strip() == build.file_digest(lib)
    assert lib.with_suffix(".c").read_text() == k.source
    assert not [p for p in cache.rglob("*") if p.name.endswith(".tmp")]
    # a second compile is a hit: nothing is rebuilt
    mtime = lib.stat().st_mtime_ns
    assert pt.compile(_program(k.program.name[6:])).library == lib
    assert lib.stat().st_mtime_ns == mtime


def _replace(path: Path, data: bytes) -> None:
    """Damage through a new file: the library this process has mapped keeps its old inode."""
    tmp = path.with_name(path.name + ".damage")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete-hash", "garbage-hash", "empty"])
def test_a_damaged_entry_is_rebuilt(cache: Path, damage: str) -> None:
    tag = uuid.uuid4().hex[:8]
    lib = pt.compile(_program(tag)).library
    data = lib.read_bytes()
    if damage == "truncate":
        _replace(lib, data[: len(data) // 2])
    elif damage == "flip":
        _replace(lib, data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "delete-hash":
        lib.with_suffix(".sha256").unlink()
    elif damage == "garbage-hash":
        lib.with_suffix(".sha256").write_text("0" * 64)
    else:
        _replace(lib, b"")
    assert not build.valid_entry(lib)
    assert pt.compile(_program(tag)).library == lib
    assert build.valid_entry(lib) and lib.read_bytes() == data


def test_a_fresh_process_loads_the_rebuilt_entry(cache: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    lib = pt.compile(_program(tag)).library
    _replace(lib, lib.read_bytes()[:1000])
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_cache import _program, _works
        import polytri as pt
        k = pt.compile(_program({tag!r}))
        _works(k)
        print(k.library)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "POLYTRI_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(lib) and build.valid_entry(lib)


def test_a_failed_build_leaves_no_entry(cache: Path) -> None:
    src = "this is not C;\n"
    with pytest.raises(pt.CompilationError, match="source kept at"):
        build.build_library(src, cc="cc", flags=build.DEFAULT_FLAGS)
    assert _entries(cache) == [] and not list(cache.rglob("*.sha256"))
    assert not [p for p in cache.rglob("*") if p.name.endswith(".tmp")]


def test_a_leftover_temporary_file_is_harmless(cache: Path) -> None:
    """A process killed mid-build leaves a temporary file, never a half-written entry."""
    k = pt.compile(_program(uuid.uuid4().hex[:8]))
    stale = k.library.parent / f".{k.library.name}.dead.tmp"
    stale.write_bytes(b"\x7fELF half")
    k.library.unlink()
    k2 = pt.compile(_program(k.program.name[6:]))
    _works(k2)
    assert build.valid_entry(k2.library)


_WRAPPER = """#!/bin/sh
case " $* " in *" -o "*) echo build >> "{log}"; sleep 1;; esac
exec cc "$@"
"""

_RACE = """
import sys
import polytri as pt
sys.path.insert(0, {tests!r})
from test_cache import _program, _works
k = pt.compile(_program({tag!r}), options={{"cc": {cc!r}, "min_parallel_work": 0}})  # no probe build
_works(k)
print(k.library)
"""


def test_concurrent_processes_build_a_kernel_once(cache: Path, tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    cc = tmp_path / "cc-wrapper"
    cc.write_text(_WRAPPER.format(log=log))
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    script = _RACE.format(tests=str(Path(__file__).parent), tag=uuid.uuid4().hex[:8], cc=str(cc))
    env = {**os.environ, "POLYTRI_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    assert len({out.strip() for out, _ in outs}) == 1
    assert log.read_text().splitlines() == ["build"], "the kernel was built more than once"


@pytest.mark.parametrize("where", ["file-in-the-way", "unwritable"])
def test_an_unusable_cache_directory_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 where: str) -> None:
    if where == "file-in-the-way":
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("x")
        root = blocker / "cache"
    else:
        root = Path("/sys/polytri-cache-test")   # sysfs: no directory can be made there, even by root
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(root))
    k = pt.compile(_program(uuid.uuid4().hex[:8]))
    _works(k)
    assert not str(k.library).startswith(str(root)) and "polytri-" in str(k.library)
    assert build.valid_entry(k.library)


def test_a_valid_entry_is_loaded_without_writing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a read-only cache needs: a hit writes nothing (no lock file, no rebuild)."""
    tag = uuid.uuid4().hex[:8]
    lib = pt.compile(_program(tag)).library

    def no_write(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cache hit tried to build or write")

    monkeypatch.setattr(build, "_build_into", no_write)
    assert pt.compile(_program(tag)).library == lib


def test_sanitizer_flags_are_part_of_the_key(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "compiler_identity", lambda cc: "cc 1.0")
    monkeypatch.setattr(build, "_build_into", lambda folder, key, source, **kw: folder / f"{key}|{kw['flags']}")
    monkeypatch.delenv("POLYTRI_SANITIZE", raising=False)
    plain = build.build_library("int x;", cc="cc", flags=("-O2",))
    monkeypatch.setenv("POLYTRI_SANITIZE", "1")
    sanitized = build.build_library("int x;", cc="cc", flags=("-O2",))
    assert plain.name.split("|")[0] != sanitized.name.split("|")[0]
    assert "-fsanitize=address,undefined" in sanitized.name and "-fsanitize" not in plain.name
