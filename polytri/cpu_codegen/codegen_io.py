"""What the C printer (:mod:`.cgen`) is asked to emit, and what it gives back."""

from __future__ import annotations

from dataclasses import dataclass

from .contraction_model import Contraction
from .parallel_plan import RegionChoice
from .seams import Seams
from .streaming import StreamedStore


@dataclass(frozen=True)
class CodegenOptions:
    """What the C printer may emit."""

    openmp: bool = True
    """``#pragma omp parallel for`` on the outermost parallel loop of each nest."""
    simd: bool = True
    """``#pragma omp simd`` on innermost loops whose iterations may run in SIMD lanes
    (:attr:`~polytri.schedule.loop_ast.For.lanes`)."""
    microkernel: bool = True
    """Gemm-like contraction nests as packed panels and a register-blocked micro-kernel
    (:mod:`.contraction`)."""
    fma: bool = False
    """The micro-kernel fuses each product into its sum (one rounding instead of two)."""
    scratch: frozenset[str] = frozenset()
    """Temporaries no read of which sees a value from before the call: they may live in buffers local to
    one loop iteration (:mod:`.private`)."""
    region_tests: bool = True
    """Each parallel region opens only when its work reaches ``pt__min_parallel_work`` (see
    :mod:`.parallel_plan`); otherwise every outermost parallel loop opens one."""


@dataclass(frozen=True)
class GeneratedC:
    """What :func:`generate_c` printed, and what it chose on the way."""

    source: str
    """The complete C translation unit."""
    contractions: tuple[Contraction, ...]
    """The contraction nests computed with the micro-kernel."""
    local_arrays: frozenset[str]
    """The arrays held in local buffers only."""
    regions: tuple[RegionChoice, ...]
    """The choice for each parallel loop that could open an OpenMP region."""
    streams: tuple[StreamedStore, ...] = ()
    """The stores printed in streamed form (:mod:`.streaming`)."""
    seams: tuple[Seams, ...] = ()
    """The loops printed in blocks (:mod:`.seams`)."""


__all__ = ["CodegenOptions", "GeneratedC"]
