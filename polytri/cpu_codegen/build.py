"""Building generated C into a shared library, cached on disk.

The cache lives in ``$POLYTRI_CACHE_DIR`` (default ``~/.cache/polytri``); the key is a hash of the
source, the compiler's identity and the flags (sanitizer flags included).  Its entries survive damage
and concurrency:

* every file is written under a temporary name and renamed into place (atomic on POSIX);
* each library has a ``.sha256`` beside it, written last; an entry whose library is missing, truncated
  or altered does not match it and is rebuilt;
* a build holds an exclusive ``flock`` on ``<key>.lock``, so processes compiling the same kernel at the
  same time build it once, the others wait and then load it;
* a cache directory that cannot be created or written (read-only, a file in the way) is no failure:
  the library is built in a private temporary directory of the process instead (with a warning once).

``POLYTRI_SANITIZE=1`` builds with AddressSanitizer and UndefinedBehaviorSanitizer (see
docs/reliability.md: the Python process needs ``LD_PRELOAD`` of libasan).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import fcntl
import functools
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..errors import CompilationError
from ..runtime.cpu_share import usable_cores
from .isa import cap_cflags, isa_flags

log = logging.getLogger("polytri.cpu")

#: -fno-trapping-math: no program reads the floating-point exception flags, so gcc may evaluate both arms of
#: a conditional on floats (a comparison, a division) and select per lane: without it, a loop whose
#: statement holds a nested ``?:`` on floats (``pt__erff``, ``where``) stays scalar on AVX2, where there
#: are no masked instructions (BERT's GELU epilogue); values are unchanged.
#: -ffp-contract=off: no fused multiply-add unless the code asks for one, so results round after every
#: operation exactly as the reference does.  max-completely-peel-times=8 (gcc's default: 16): loops of up
#: to 8 iterations are still unrolled whole (register blocks, 3x3 windows), but gcc no longer unrolls
#: nests of 16 x 4 vectorized iterations into one block whose register allocation took seconds (a linear
#: layer's dot products in vector lanes: 4.2 s to compile, 0.3 s with the limit).  The machine code of
#: every PolyBench kernel of the suite, in every benchmark variant, is the same with and without it.
DEFAULT_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-fno-trapping-math",
                 "-ffp-contract=off",
                 "--param=max-completely-peel-times=8", "-std=gnu11")

#: Per compiler family, the flags of :data:`DEFAULT_FLAGS` it does not take: clang warns about gcc's ``--param``
#: and ignores it.
UNSUPPORTED_FLAGS: dict[str, frozenset[str]] = {
    "gcc": frozenset(),
    "clang": frozenset({"--param=max-completely-peel-times=8"}),
}

#: Added by ``POLYTRI_SANITIZE=1``; the first report aborts the process.
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g")


def sanitize_flags() -> tuple[str, ...]:
    """The sanitizer flags when ``POLYTRI_SANITIZE`` is set to a true value, else ``()``."""
    return SANITIZE_FLAGS if os.environ.get("POLYTRI_SANITIZE", "") not in ("", "0") else ()


def cache_dir() -> Path:
    """Root of polytri's on-disk cache."""
    root = os.environ.get("POLYTRI_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "polytri")
    return Path(root)


@functools.cache
def _private_dir() -> Path:
    """A temporary directory of this process, removed at exit: where libraries go when the cache is
    unusable."""
    path = Path(tempfile.mkdtemp(prefix="polytri-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@functools.cache
def compiler_identity(cc: str) -> str:
    """First line of ``cc --version`` (part of the cache key)."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompilationError(f"C compiler {cc!r} cannot be run: {exc}") from None
    return out.stdout.splitlines()[0] if out.stdout else cc


def compiler_family(cc: str) -> str:
    """``'clang'`` when ``cc --version`` names clang, else ``'gcc'`` (gcc, or a compiler taken to accept its
    flags, as every compiler was before clang had flags of its own; also one that cannot be run, whose build
    then reports why)."""
    try:
        identity = compiler_identity(cc)
    except CompilationError:
        return "gcc"
    return "clang" if "clang" in identity.lower() else "gcc"


def default_flags(cc: str) -> tuple[str, ...]:
    """:data:`DEFAULT_FLAGS` as ``cc``'s family takes them (clang's leave out :data:`UNSUPPORTED_FLAGS`
    ``['clang']``), then the flags that keep ``-march=native`` within ``POLYTRI_MAX_ISA`` (:mod:`.isa`)."""
    drop = UNSUPPORTED_FLAGS[compiler_family(cc)]
    return tuple(f for f in DEFAULT_FLAGS if f not in drop) + cap_cflags()


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def atomic_write(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def valid_entry(lib: Path) -> bool:
    """The library exists and its bytes match the hash written beside it."""
    digest = lib.with_suffix(".sha256")
    try:
        return digest.read_text().strip() == file_digest(lib)
    except OSError:
        return False


@functools.cache
def vector_math_flags(cc: str) -> tuple[str, ...]:
    """``-DPT_LIBMVEC -lmvec`` when ``cc`` links glibc's vector math library (x86-64 glibc >= 2.22), else
    nothing.  With them the prelude declares SIMD versions of ``exp``, ``log``, ``tanh`` and ``erf``, so
    vectorized loops call 8 or 16 at once instead of one at a time (measured: a sigmoid-tanh chain over
    4M float32, 52 ms -> 3.1 ms on 2 threads)."""
    try:
        out = subprocess.run([cc, "-print-file-name=libmvec.so"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    path = out.stdout.strip()
    return ("-DPT_LIBMVEC", "-lmvec") if os.path.isabs(path) and os.path.exists(path) else ()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed) for the duration of the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _compile(source_path: Path, out: Path, *, cc: str, flags: tuple[str, ...]) -> None:
    """Run the compiler; the library appears at ``out`` only when it succeeded (through a rename)."""
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    libs = [f for f in flags if f.startswith("-l")]  # after the source, or the linker may drop them
    cmd = [cc, *(f for f in flags if not f.startswith("-l")), "-o", tmp, str(source_path), *libs, "-lm"]
    log.info("building %s", shlex.join(cmd))
    try:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CompilationError(f"building generated C failed ({shlex.join(cmd)}): {exc}") from None
        if proc.returncode != 0:
            raise CompilationError(f"building generated C failed ({shlex.join(cmd)}):\n{proc.stderr.strip()}\n"
                                   f"source kept at {source_path}")
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _build_into(folder: Path, key: str, source: str, *, cc: str, flags: tuple[str, ...]) -> Path:
    """Find or build library ``key`` in ``folder`` under the entry's lock (``OSError`` if ``folder`` is
    unusable)."""
    folder.mkdir(parents=True, exist_ok=True)
    lib = folder / f"{key}.so"
    with _locked(folder / f"{key}.lock"):
        if valid_entry(lib):  # another process built it while this one waited
            return lib
        if lib.exists():
            log.warning("polytri cache: %s does not match its hash; rebuilding it", lib)
        src = folder / f"{key}.c"
        atomic_write(src, source)
        _compile(src, lib, cc=cc, flags=flags)
        atomic_write(lib.with_suffix(".sha256"), file_digest(lib) + "\n")
    return lib


_warned_unusable: set[str] = set()


def build_library(source: str, *, cc: str, flags: tuple[str, ...]) -> Path:
    """Compile ``source`` into a shared library (or find it in the cache) and return its path."""
    flags = tuple(flags) + tuple(f for f in sanitize_flags() if f not in flags)
    machine = isa_flags() if "-march=native" in flags else []
    key = hashlib.sha256("\0".join([source, compiler_identity(cc), *flags, *machine]).encode()).hexdigest()
    folder = cache_dir() / "cpu" / key[:2]
    lib = folder / f"{key}.so"
    if valid_entry(lib):
        log.debug("cache hit %s", lib)
        return lib
    try:
        return _build_into(folder, key, source, cc=cc, flags=flags)
    except OSError as exc:
        if str(folder) not in _warned_unusable:
            _warned_unusable.add(str(folder))
            log.warning("polytri cache %s is not usable (%s); building in a temporary directory", folder, exc)
    return _build_into(_private_dir(), key, source, cc=cc, flags=flags)


# -- builds in the background ---------------------------------------------------------------------------
_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar("polytri_background_builds", default=False)
_POOL: ThreadPoolExecutor | None = None


@contextlib.contextmanager
def builds_in_background() -> Iterator[None]:
    """Within the block, kernels compiled in this thread start their C compiler and go on: the next
    kernel is scheduled while the last one builds (a graph of many kernels), and the kernels wait for
    their libraries when they are first needed (:meth:`.CpuKernel.wait_built`)."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def building_in_background() -> bool:
    """Whether :func:`builds_in_background` is in effect in this thread."""
    return _BACKGROUND.get()


def build_library_later(source: str, *, cc: str, flags: tuple[str, ...]) -> Future[Path]:
    """:func:`build_library` in a worker thread (one per core; the C compiler runs as a process of its own,
    so the threads only wait for it)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=usable_cores(), thread_name_prefix="polytri-cc")
    return _POOL.submit(build_library, source, cc=cc, flags=flags)
