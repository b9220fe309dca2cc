"""The machine model of the packed contraction (:mod:`.contraction`): vector width and block sizes."""

from __future__ import annotations

import ctypes
import functools
import platform
from dataclasses import dataclass

from ..dtypes import DType
from .isa import cpu_flags, depends_on_flags


@functools.cache
def vector_bytes() -> int:
    """Width of the widest vector registers of this machine (the code is built with -march=native)."""
    flags = cpu_flags()
    if "avx512f" in flags:
        return 64
    return 32 if "avx2" in flags or "avx" in flags else 16


def vector_registers() -> int:
    """Vector registers of this machine: 32 with AVX-512, else 16 (AVX, AVX2, SSE on x86-64)."""
    return 32 if vector_bytes() == 64 else 16


#: Linux's ``arch_prctl`` request for an extended state component, and AMX's tile data (x86-64).
ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA, SYS_ARCH_PRCTL = 0x1023, 18, 158


@functools.cache
def tiles_permitted() -> bool:
    """Whether this process may use AMX tiles: Linux (5.16 on) hands their 8 KiB of register state only to
    the processes that ask for it, once, with ``arch_prctl``; an instruction that touches the tiles before
    raises ``SIGILL``.  Asked here for the building process; each kernel asks again for the process it
    runs in (:mod:`.tiles`)."""
    if "amx_tile" not in cpu_flags() or platform.machine() != "x86_64":
        return False
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
        syscall.restype = ctypes.c_long
        return int(syscall(*map(ctypes.c_long, (SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)))) == 0
    except (OSError, AttributeError):
        return False


for _cached in (vector_bytes, tiles_permitted):
    depends_on_flags(_cached.cache_clear)


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


def blocking(d: DType, block: tuple[int, int] | None = None) -> Blocking:
    """The register block fills the vector registers: with AVX-512's 32 registers, 4 rows of 4 vectors
    (16 accumulators; a hand-written float32 gemm 1024³ ran at 155 GFLOP/s with it against 138 with 8 x 2,
    one quiet run here); with 16 registers, 6 rows of 2 vectors (12 accumulators, the shape BLIS uses on
    Haswell; no such machine was measured).  ``block``: the rows and columns of a register block that
    the instruction fixes itself (tiles: :func:`.dot_product.dot_blocking`)."""
    lanes = vector_bytes() // d.itemsize
    mr, nr = (4, 4 * lanes) if vector_bytes() == 64 else (6, 2 * lanes)
    if block is not None:
        mr, nr = block
    kc = 256
    return Blocking(mr, nr, kc, (512 << 10) // (kc * d.itemsize))


__all__ = ["WHOLE_L_BYTES", "Blocking", "blocking", "cpu_flags", "tiles_permitted", "vector_bytes", "vector_registers"]
