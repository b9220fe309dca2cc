"""clang with Polly, LLVM's polyhedral loop optimizer: the ``polly`` column of ``polytri bench``.

:func:`find_polly` looks for a clang on ``PATH`` (:data:`CANDIDATES`, in that order) and keeps the first one
in which Polly is shown to run: a probe loop nest compiled with :data:`POLLY_FLAGS` and
``-Rpass-analysis=polly-scops`` must draw Polly's remark ``SCoP begins here`` (only Polly's passes emit it)
and its library must call ``GOMP_parallel_loop_runtime_start`` (the OpenMP code ``-polly-parallel``
generates).  Debian's clang has Polly built in; where it is a plugin, ``-fplugin=<llvm>/lib/LLVMPolly.so``
is tried as well, alone and with ``-fpass-plugin=`` (the new pass manager's way to load its passes).

:func:`ensure_polly` installs Debian's packages (:data:`INSTALL_COMMAND`) when asked to and none is found,
as root with ``apt-get`` only, and says what it does; ``make polly`` and ``python -m polytri.tools.polly
--install`` run it alone.

Polly's parallel loops call the GNU OpenMP API (``GOMP_*``, its default ``-polly-omp-backend=GNU``), and the
library is linked against gcc's libgomp (``-fopenmp=libgomp``), not clang's libomp: both runtimes load and
run side by side in one process, but each keeps its own worker threads, and libomp's spin for 200 ms after
every parallel region (``KMP_BLOCKTIME``), on the cores the next variant of an interleaved benchmark runs
on.  With libgomp every variant of ``polytri bench`` shares one runtime and one pool of threads.

Polly's matrix-multiplication optimization (LLVM 16) keeps its packed copies of the operands in the stack frame
of the kernel's function, about 3 MB per product (3mm's function: 8.4 MB, over Linux's default limit of 8 MB:
a segmentation fault whatever the sizes); :func:`raise_stack_limit` gives the process room.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cpu_codegen.build import compiler_identity

log = logging.getLogger("polytri.bench")

#: The clang commands looked for, in this order: the version ``make polly`` installs first.
CANDIDATES = ("clang-16", "clang-19", "clang-18", "clang-17", "clang-15", "clang-14", "clang")
#: Debian bookworm's packages: clang, Polly, and LLVM's OpenMP headers (``omp.h`` for clang's ``-fopenmp``).
PACKAGES = ("clang-16", "libpolly-16-dev", "libomp-16-dev")
INSTALL_COMMAND = ("apt-get", "install", "-y", "--no-install-recommends", *PACKAGES)
#: Polly and its OpenMP code on (``-O3 -march=native`` come with polytri's default flags), with gcc's OpenMP runtime.
POLLY_FLAGS = ("-mllvm", "-polly", "-mllvm", "-polly-parallel", "-fopenmp=libgomp")
#: The remark of Polly's SCoP detection under ``-Rpass-analysis=polly-scops``.
SCOP_REMARK = "SCoP begins here"
#: What ``-polly-parallel`` makes the probe call.
PARALLEL_CALL = b"GOMP_parallel_loop_runtime_start"

#: The stack limit the polly column needs (the main thread's stack grows on demand up to it).
STACK_BYTES = 64 << 20

PROBE_SOURCE = """\
void pt_polly_probe(long n, long m, double a[restrict n][m], const double b[restrict n][m]) {
  for (long i = 0; i < n; i++)
    for (long j = 0; j < m; j++)
      a[i][j] += 2.0 * b[i][j];
}
"""


@dataclass(frozen=True)
class Polly:
    """A clang in which Polly was shown to run."""

    cc: str
    """The clang command (as found on ``PATH``)."""
    flags: tuple[str, ...]
    """The flags that turn Polly and its OpenMP code on, the plugin's ``-fplugin=`` first where it needs one."""
    identity: str
    """The first line of ``clang --version``."""

    def options(self) -> dict[str, Any]:
        """``pt.compile`` options of the column: the input order's C, as the naive column's, built by this clang."""
        return {"schedule": "original", "openmp": False, "simd": False, "microkernel": False,
                "cc": self.cc, "cflags": self.flags}


def flag_sets(cc: str) -> list[tuple[str, ...]]:
    """The ways to turn Polly on in ``cc``, to try in order: built in, then as the plugin beside its LLVM
    (``-fplugin=`` makes its options known; ``-fpass-plugin=`` as well adds its passes to the new pass manager)."""
    sets: list[tuple[str, ...]] = [POLLY_FLAGS]
    path = shutil.which(cc)
    if path:
        plugin = Path(os.path.realpath(path)).parent.parent / "lib" / "LLVMPolly.so"
        if plugin.exists():
            sets.append((f"-fplugin={plugin}", *POLLY_FLAGS))
            sets.append((f"-fplugin={plugin}", f"-fpass-plugin={plugin}", *POLLY_FLAGS))
    return sets


def probe(cc: str, flags: Sequence[str]) -> str:
    """Empty when Polly runs in ``cc`` with ``flags`` (its remark, its OpenMP call), else why not."""
    with tempfile.TemporaryDirectory(prefix="polytri-polly-") as tmp:
        src, lib = Path(tmp) / "probe.c", Path(tmp) / "probe.so"
        src.write_text(PROBE_SOURCE)
        cmd = [cc, "-O3", "-fPIC", "-shared", *flags, "-Rpass-analysis=polly-scops", "-o", str(lib), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{cc} cannot be run: {exc}"
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            return f"{cc} fails with {' '.join(flags)}: {lines[0] if lines else proc.returncode}"
        if SCOP_REMARK not in proc.stderr:
            return f"{cc} does not run Polly with {' '.join(flags)} (no '{SCOP_REMARK}' remark)"
        if PARALLEL_CALL not in lib.read_bytes():
            return f"{cc} runs Polly but -polly-parallel made no OpenMP call"
    return ""


def _first_working(cc: str) -> tuple[Polly | None, str]:
    why = ""
    for flags in flag_sets(cc):
        why = probe(cc, flags)
        if not why:
            return Polly(cc, flags, compiler_identity(cc)), ""
    return None, why


@functools.cache
def find_polly() -> tuple[Polly | None, str]:
    """The first of :data:`CANDIDATES` on ``PATH`` in which Polly runs, or ``None`` and why none."""
    tried = []
    for cc in CANDIDATES:
        if shutil.which(cc) is None:
            continue
        found, why = _first_working(cc)
        if found is not None:
            log.info("Polly: %s %s (%s)", found.cc, " ".join(found.flags), found.identity)
            return found, ""
        tried.append(why)
    if not tried:
        return None, f"no clang on PATH (looked for {', '.join(CANDIDATES)})"
    return None, "; ".join(tried)


def install_refusal() -> str:
    """Empty when :data:`INSTALL_COMMAND` can run here (root, ``apt-get`` on ``PATH``), else why not."""
    if shutil.which("apt-get") is None:
        return "no apt-get to install clang and Polly with"
    if os.geteuid() != 0:
        return f"installing needs root: {' '.join(INSTALL_COMMAND)}"
    return ""


def install(say: Callable[[str], None]) -> str:
    """Run :data:`INSTALL_COMMAND` (apt-get's output goes to stderr); empty when it succeeded, else why not."""
    refusal = install_refusal()
    if refusal:
        return refusal
    say(f"installing clang and Polly from Debian's packages: {' '.join(INSTALL_COMMAND)}")
    try:
        proc = subprocess.run(INSTALL_COMMAND, stdout=2, timeout=1800,  # apt's progress on stderr, as it goes
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{' '.join(INSTALL_COMMAND)} failed: {exc}"
    if proc.returncode != 0:
        return f"{' '.join(INSTALL_COMMAND)} failed (exit {proc.returncode}; `apt-get update` first may help)"
    return ""


def ensure_polly(*, install_missing: bool, say: Callable[[str], None]) -> tuple[Polly | None, str]:
    """:func:`find_polly`, and when none is found and ``install_missing``, :func:`install` and look again;
    ``None`` and why when there is none."""
    found, why = find_polly()
    if found is not None or not install_missing:
        return found, why
    failed = install(say)
    if failed:
        return None, f"{why}; {failed}"
    find_polly.cache_clear()
    return find_polly()


def raise_stack_limit(nbytes: int = STACK_BYTES) -> str:
    """Raise this process's soft ``RLIMIT_STACK`` to ``nbytes`` if it is lower (never lower it); empty when the
    limit is at least ``nbytes`` now, else why not (the hard limit is lower)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if soft == resource.RLIM_INFINITY or soft >= nbytes:
        return ""
    if hard != resource.RLIM_INFINITY and hard < nbytes:
        return (f"the stack limit is {hard >> 20} MB and cannot be raised to the {nbytes >> 20} MB Polly's "
                f"packed arrays may need (`ulimit -Hs`)")
    resource.setrlimit(resource.RLIMIT_STACK, (nbytes, hard))
    log.info("stack limit raised from %d to %d MB for Polly's packed arrays", soft >> 20, nbytes >> 20)
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m polytri.tools.polly [--install]`` (``make polly``): which clang runs Polly, and how."""
    parser = argparse.ArgumentParser(prog="python -m polytri.tools.polly", description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help=f"if none is found: {' '.join(INSTALL_COMMAND)}")
    args = parser.parse_args(argv)
    found, why = ensure_polly(install_missing=args.install, say=lambda m: print(f"polytri: {m}", flush=True))
    if found is None:
        print(f"polytri: no clang with Polly: {why}")
        return 1
    print(f"polytri: Polly runs in {found.cc} ({found.identity}) with {' '.join(found.flags)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
