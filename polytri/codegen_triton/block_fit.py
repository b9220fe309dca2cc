"""Blocks fitted to the loops they cover: no lanes beyond a loop's end, a program per multiprocessor.

The launch model's elementwise blocks (1024 elements, 32 x 32 in two dimensions) suit large loops.  A
model's small ones waste them: attention's softmax over 3 heads x 197 rows in 32 x 32 blocks runs 7
programs on a GPU of 132 multiprocessors, 29 of each block's 32 head lanes masked off.  Where isl bounds
the grid loops' iterations by constants, each side is cut to its loop's iterations (rounded up to a power
of two).  Where each lane runs loops, the largest side (the outer one on a tie: the inner one is the
contiguous axis) is then halved, down to :data:`MIN_LANES` lanes, while the launch has fewer programs
than the architecture has multiprocessors: those loops run in chunks of about 4096 elements whatever the
lanes (:meth:`.kgen.KernelPrinter.chunk_side`), so the smaller blocks lose no vector width.  An
elementwise launch is only cut: a program of 4 lanes would leave most of its threads idle.  Where the
parameters decide the iterations, the model's sides stay: the count of programs is not known when the
kernel is generated.

The sum of a ``tl.dot`` contraction is blocked the same way (:func:`dot_k_block`): a short constant sum
takes the smallest block that holds it.
"""

from __future__ import annotations

import math

import islpy as isl

from ..errors import PolytriError
from ..ir.affine import to_isl
from ..ir.expr import Expr, var_names

#: The fewest lanes a program is halved to: its loops' chunks then hold about 1024 iterations per lane's
#: row (Triton's interpreter, which runs the programs one by one, slows with the number of programs).
MIN_LANES = 4


def _pow2_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def fitted_sides(sides: tuple[int, ...], trips: tuple[int | None, ...], programs: int | None
                 ) -> tuple[int, ...]:
    """``sides`` of the innermost ``len(sides)`` grid loops of a launch whose grid loops make ``trips``
    iterations (outermost first; ``None``: not a constant), fitted to them (see the module's docstring)
    for a device of ``programs`` multiprocessors (``None``: the sides the user set, kept)."""
    if programs is None or not trips or any(t is None for t in trips):
        return sides
    counts: list[int] = [t for t in trips if t is not None]
    outer, inner = counts[:len(counts) - len(sides)], counts[len(counts) - len(sides):]
    fit = [min(s, _pow2_at_least(max(t, 1))) for s, t in zip(sides, inner)]

    def launched() -> int:
        return math.prod(outer) * math.prod(-(-t // s) for t, s in zip(inner, fit))
    while launched() < programs and math.prod(fit) > MIN_LANES:
        k = max(range(len(fit)), key=lambda i: (fit[i], -i))
        fit[k] //= 2
    return tuple(fit)


#: The smallest sum block ``tl.dot`` takes.
MIN_DOT_K = 16


def most_iterations(lo: Expr, hi: Expr) -> int | None:
    """The most iterations a loop over ``[lo, hi)`` makes whatever the outer counters, where isl bounds it
    by a constant (``None`` where the parameters decide)."""
    names = sorted(var_names(lo, "iter") | var_names(hi, "iter"))
    params = sorted(var_names(lo, "param") | var_names(hi, "param"))
    try:
        extent = isl.PwAff(f"[{', '.join(params)}] -> {{ [{', '.join(names)}] -> "
                           f"[({to_isl(hi, what='bound', allow_minmax=True)}) - "
                           f"({to_isl(lo, what='bound', allow_minmax=True)})] }}").max_val()
    except (PolytriError, isl.Error):
        return None
    return extent.to_python() if extent.is_int() else None


def dot_k_block(lo: Expr, hi: Expr, model_k: int) -> int:
    """The block of the sum of a ``tl.dot`` contraction over ``[lo, hi)``: the model's, or a smaller power
    of two (at least :data:`MIN_DOT_K`) when isl bounds the loop's extent below it whatever the outer
    counters and parameters (a convolution's sum over the kernel width, 3: 16 lanes of the sum instead of
    32, most of them zero padding either way)."""
    extent = most_iterations(lo, hi)
    return model_k if extent is None else min(max(MIN_DOT_K, _pow2_at_least(extent)), model_k)


__all__ = ["MIN_DOT_K", "dot_k_block", "fitted_sides", "most_iterations"]
