"""Block sides fitted to the loops they cover: no lanes beyond a loop's end, a program per multiprocessor.

The launch model's elementwise blocks (1024 elements, 32 x 32 in two dimensions) suit large loops.  A
model's small ones waste them: attention's softmax over 3 heads x 197 rows in 32 x 32 blocks runs 7
programs on a GPU of 132 multiprocessors, 29 of each block's 32 head lanes masked off.  Where isl bounds
the grid loops' iterations by constants, each side is cut to its loop's iterations (rounded up to a power
of two), then the largest side (the outer one on a tie: the inner one is the contiguous axis) is halved
while the launch has fewer programs than the architecture has multiprocessors.  Loops inside such a
program run in chunks of about 4096 elements whatever the lanes (:meth:`.kgen.KernelPrinter.chunk_side`),
so the smaller blocks lose no vector width there.  Where the parameters decide the iterations the model's
sides stay: the count of programs is not known when the kernel is generated.
"""

from __future__ import annotations

import math


def _pow2_at_least(n: int) -> int:
    side = 1
    while side < n:
        side *= 2
    return side


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
    while launched() < programs:
        k = max(range(len(fit)), key=lambda i: (fit[i], -i))
        if fit[k] == 1:
            break
        fit[k] //= 2
    return tuple(fit)


__all__ = ["fitted_sides"]
