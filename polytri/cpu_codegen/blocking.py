"""The machine model of the packed contraction (:mod:`.contraction`): vector width and block sizes."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..dtypes import DType


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The feature flags of this machine's CPU (``/proc/cpuinfo``; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return frozenset(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        return frozenset()


@functools.cache
def vector_bytes() -> int:
    """Width of the widest vector registers of this machine (the code is built with -march=native)."""
    flags = cpu_flags()
    if "avx512f" in flags:
        return 64
    return 32 if "avx2" in flags or "avx" in flags else 16


@dataclass(frozen=True)
class Blocking:
    """Block sizes of the packed contraction, in elements."""

    mr: int
    """Rows of the register block."""
    nr: int
    """Columns of the register block (whole vectors)."""
    kc: int
    """Values of ``k`` per packed block (a ``KC x NR`` panel of ``R`` stays in L1)."""
    nc: int
    """Columns per packed block of ``R`` (``KC x NC`` elements: half of a 1 MiB L2)."""


#: Largest packed copy of a whole ``L`` that a nest with batch loops keeps (half of the 1 MiB L2).
WHOLE_L_BYTES = 512 << 10


def blocking(d: DType) -> Blocking:
    """The register block fills the vector registers: with AVX-512's 32 registers, 4 rows of 4 vectors
    (16 accumulators; a hand-written float32 gemm 1024³ ran at 155 GFLOP/s with it against 138 with 8 x 2,
    one quiet run here); with 16 registers, 6 rows of 2 vectors (12 accumulators, the shape BLIS uses on
    Haswell; no such machine was measured)."""
    lanes = vector_bytes() // d.itemsize
    mr, nr = (4, 4 * lanes) if vector_bytes() == 64 else (6, 2 * lanes)
    kc = 256
    return Blocking(mr, nr, kc, (512 << 10) // (kc * d.itemsize))


__all__ = ["WHOLE_L_BYTES", "Blocking", "blocking", "cpu_flags", "vector_bytes"]
