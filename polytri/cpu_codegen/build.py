"""Building generated C into a shared library, cached on disk.

The cache lives in ``$POLYTRI_CACHE_DIR`` (default ``~/.cache/polytri``); the key is a hash of the
source, the compiler's identity and the flags.  A library is written under a temporary name and
renamed into place, so concurrent builds of the same kernel (pytest-xdist, several processes) never see
a half-written file.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from ..errors import CompilationError

log = logging.getLogger("polytri.cpu")

#: -ffp-contract=off: no fused multiply-add unless the code asks for one, so results round after every
#: operation exactly as the reference does.
DEFAULT_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fwrapv", "-fno-math-errno", "-ffp-contract=off",
                 "-std=gnu11")


def cache_dir() -> Path:
    """Root of polytri's on-disk cache."""
    root = os.environ.get("POLYTRI_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "polytri")
    return Path(root)


@functools.cache
def compiler_identity(cc: str) -> str:
    """First line of ``cc --version`` (part of the cache key)."""
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompilationError(f"C compiler {cc!r} cannot be run: {exc}") from None
    return out.stdout.splitlines()[0] if out.stdout else cc


def build_library(source: str, *, cc: str, flags: tuple[str, ...]) -> Path:
    """Compile ``source`` into a shared library (or find it in the cache) and return its path."""
    key = hashlib.sha256("\0".join([source, compiler_identity(cc), *flags]).encode()).hexdigest()
    folder = cache_dir() / "cpu" / key[:2]
    lib = folder / f"{key}.so"
    if lib.exists():
        log.debug("cache hit %s", lib)
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{key}.c"
    if not src.exists():
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".c", delete=False) as f:
            f.write(source)
        os.replace(f.name, src)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so.tmp")
    os.close(fd)
    cmd = [cc, *flags, "-o", tmp, str(src), "-lm"]
    log.info("building %s", shlex.join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise CompilationError(f"building generated C failed ({shlex.join(cmd)}):\n{proc.stderr.strip()}\n"
                                   f"source kept at {src}")
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib
