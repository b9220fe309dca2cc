"""The instruction sets the generated C may use: this CPU's, or fewer (``POLYTRI_MAX_ISA``).

Kernels are built with ``-march=native`` and the code generator picks its vector width, register blocks
and dot-product instructions from the CPU's flags (``/proc/cpuinfo``).  ``POLYTRI_MAX_ISA`` caps both,
the way ``ONEDNN_MAX_CPU_ISA`` and ``ATEN_CPU_CAPABILITY`` cap oneDNN's and PyTorch's kernels:

- ``native`` (the default): everything this CPU has;
- ``avx512``: no AMX tiles;
- ``avx2``: no AVX-512 and no AMX (nor the VEX-encoded AVX-VNNI), 32-byte vectors: the choices an
  AVX2-only machine gets, built and run on a wider one (``-march=native`` keeps the CPU's other
  extensions, which an older AVX2 machine may lack).

The cap removes the flags from :func:`cpu_flags` (so every choice made from them follows) and adds the
compiler flags that keep ``-march=native`` from emitting them (:func:`cap_cflags`).  It cannot add what the
CPU lacks.  :func:`planned_for` sets the flags for a block (loading an artifact plans its graph as the
exporting machine did).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Iterator

from ..errors import OptionError

#: Environment variable that caps the instruction sets.
VARIABLE = "POLYTRI_MAX_ISA"

#: Per cap: prefixes of the ``/proc/cpuinfo`` flags it removes, and the compiler flags that forbid them.
CAPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "native": ((), ()),
    "avx512": (("amx",), ("-mno-amx-tile",)),
    "avx2": (("avx512", "amx", "avx_vnni"), ("-mno-avx512f", "-mno-amx-tile", "-mno-avxvnni")),
}


@functools.cache
def max_isa() -> str:
    """The cap asked for by ``POLYTRI_MAX_ISA`` (``native`` when unset or empty), read once per process:
    the choices made from the flags are cached too."""
    value = os.environ.get(VARIABLE, "").strip().lower() or "native"
    if value not in CAPS:
        raise OptionError(f"{VARIABLE}={os.environ[VARIABLE]!r}: expected one of {', '.join(CAPS)}")
    return value


def _proc_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return frozenset(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        return frozenset()


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The feature flags of this machine's CPU (``/proc/cpuinfo``; empty where it cannot be read), less
    those that ``POLYTRI_MAX_ISA`` removes; within :func:`planned_for`, the flags it names."""
    if _planning_flags is not None:
        return _planning_flags
    removed, _ = CAPS[max_isa()]
    flags = _proc_flags()
    return frozenset(f for f in flags if not f.startswith(removed)) if removed else flags


_planning_flags: frozenset[str] | None = None
#: Caches of choices made from :func:`cpu_flags` (the vector width...), cleared when the flags change.
_dependents: list[Callable[[], None]] = []


def depends_on_flags(cache_clear: Callable[[], None]) -> None:
    """Registers the ``cache_clear`` of a cached choice made from :func:`cpu_flags`."""
    _dependents.append(cache_clear)


@contextlib.contextmanager
def planned_for(flags: Iterable[str]) -> Iterator[None]:
    """Within the block, :func:`cpu_flags` is ``flags`` (a subset of this CPU's): loading an artifact
    plans its graph again as the exporting machine did (its vector width decides the lanes of a
    reduction, its dot-product instructions the form of a quantized product), whose libraries it then
    takes as built there.  The setting is the process's: a compile in another thread meanwhile plans for
    the same flags, a subset of the CPU's, so its code is slower at worst, never wrong."""
    global _planning_flags
    saved = _planning_flags
    _planning_flags = frozenset(flags)
    _clear()
    try:
        yield
    finally:
        _planning_flags = saved
        _clear()


def _clear() -> None:
    cpu_flags.cache_clear()
    for clear in _dependents:
        clear()


def cap_cflags() -> tuple[str, ...]:
    """Compiler flags that keep ``-march=native`` within ``POLYTRI_MAX_ISA`` (gcc's and clang's spelling)."""
    return CAPS[max_isa()][1]


#: CPU flags that decide which instructions ``-march=native`` may emit (prefixes of ``/proc/cpuinfo``'s).
ISA_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "bmi", "amx", "popcnt", "movbe", "adx", "sha", "vaes",
                "vpclmulqdq", "gfni", "lzcnt", "abm")


def isa_flags() -> list[str]:
    """The instruction-set flags of :func:`cpu_flags` (this CPU's within the cap), sorted: part of the key
    of every library built with ``-march=native``, so that a cache shared by two machines (a network home,
    a copied folder) never hands one the other's instructions."""
    return sorted(f for f in cpu_flags() if f.startswith(ISA_PREFIXES))
