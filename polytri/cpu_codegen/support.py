"""The C functions a kernel's source carries besides its own: the scratch buffers, micro-kernels, transposes
and row packers its contraction nests call, and the streamed stores' helpers."""

from __future__ import annotations

from collections.abc import Iterable

from .. import dtypes
from .contraction_model import Contraction, left_units, transpose_lanes
from .dot_product import dot_blocking
from .microkernel import micro_kernel
from .row_pack import rows_kernel
from .scratch import SCRATCH_HELPERS
from .streaming import stream_helpers
from .transpose import swapped_pairs_kernel, transpose_kernel


def support_code(contractions: Iterable[Contraction], *, simd: bool, fma: bool, llc_bytes: int | None) -> str:
    """The helpers that ``contractions`` call, each once, and those of streamed stores unless
    ``llc_bytes`` (the last-level cache's size, which sets when stores stream) is ``None``."""
    cs = list(contractions)
    used = {(c.dtype.name, c.op, c.dot) for c in cs}
    code = SCRATCH_HELPERS if cs else ""
    code += "".join(micro_kernel(dtypes.dtype(t), op, simd, fma, dot)
                   for t, op, dot in sorted(used, key=lambda u: (u[0], u[1], u[2] is not None)))
    squares = {(c.dtype.name if c.dot is None else "float32", lanes) for c in cs
               if (lanes := transpose_lanes(c)) is not None}
    code += "".join(transpose_kernel(dtypes.dtype(t), lanes, simd) for t, lanes in sorted(squares))
    swapped = sorted({lanes for c in cs if c.dot is not None and c.dot.descending
                      and (lanes := transpose_lanes(c)) is not None})
    code += "".join(swapped_pairs_kernel(lanes) for lanes in swapped)
    rows = {(dot_blocking(c.dtype, c.dot).mr, *units) for c in cs if (units := left_units(c)) is not None}
    code += "".join(rows_kernel(mr, unit, swap) for mr, unit, swap in sorted(rows))
    if llc_bytes is not None:
        code += stream_helpers(llc_bytes)
    return code


__all__ = ["support_code"]
