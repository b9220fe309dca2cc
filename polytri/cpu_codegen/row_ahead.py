"""The next row a ring's producer reads, fetched into the level-1 cache while the consumers of the ring
run (:mod:`.row_ring`).

In a loop whose rows live in a ring, each iteration runs the producer's row (blur's horizontal pass:
it reads a row of ``img`` from memory and writes the ring) and then the consumers' row (the vertical
pass: it reads the ring, in the cache, and streams its results out).  The consumers' part reads nothing
from memory, and the producer's part waits for its row: the memory and the arithmetic take turns.  The
consumer's chunks (:mod:`.streaming`) each prefetch the part of the producer's next row that the same
columns cover, so the row arrives while the consumer computes.  Blur at LARGE (3 x 2048 x 2048, two
threads, a C harness calling the kernel on fresh copies of the arrays as ``polytri bench`` does, 31
rounds, median) ran 3.4 ms instead of 4.1 with the row fetched into the L1 cache; into the L2 cache or
two rows ahead, no faster than without; on one thread, the same either way.

A read is fetched ahead where the producer runs unguarded in an innermost loop directly in the ring's
loop, with bounds free of the ring loop's counter, and the read's last subscript is that loop's counter
plus a constant, one other subscript the ring loop's counter plus terms of the loops around, and the
rest free of both loops' counters: then the producer's next iteration reads, in each row, consecutive
elements of one row of the array.  Reads of one row at different constant offsets (a stencil's taps)
are fetched once, over the span of their offsets; a row that the current iteration reads too (a vertical
stencil's rows but the newest) is in the cache already and is not fetched.  Every element fetched is one the producer reads in
the next iteration (or one between two of them in the same row): the prefetch runs only where the next
iteration is in the loop and the producer's loop is not empty.  It runs where the rows fetched fit in
half the level-1 cache (tested in the sizes of the call); a prefetch changes no value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..ir.affine import linear
from ..ir.expr import Access, Binary, Const, Expr, Var, substitute, var_names
from ..ir.indirect import is_indirect_subscript
from ..ir.program import Statement
from ..schedule.loop_ast import Block, For, Node, Run, counters_within, loop_upper
from .c_signature import vla_bound
from .cexpr import index_expr


@dataclass(frozen=True)
class AheadRead:
    """The elements of one row that the producer's next iteration reads."""

    array: str
    head: tuple[Expr, ...]
    """The subscripts but the last, at the next iteration of the ring's loop (loop counters)."""
    first: int
    """The smallest constant added to the inner counter in the last subscript."""
    span: int
    """The largest constant less the smallest."""
    itemsize: int


@dataclass(frozen=True)
class RowAhead:
    """What a ring's producer reads in the next iteration of the ring's loop."""

    lower: Expr
    """The producer's innermost loop: its first column and the bound its counter stays below."""
    upper: Expr
    reads: tuple[AheadRead, ...]

    def bytes(self) -> str:
        """C text: the bytes one iteration's rows span."""
        width = f"(double)({vla_bound(Binary('-', self.upper, self.lower))})"
        return " + ".join(f"({width} + {r.span}.0) * {r.itemsize}.0" for r in self.reads)


Form = tuple[frozenset[tuple[str, int]], int] | None
"""An affine subscript as its terms and constant, comparable (``None``: not affine)."""


def _forms(subscripts: list[Expr] | tuple[Expr, ...]) -> tuple[Form, ...]:
    return tuple(None if (f := linear(e)) is None else (frozenset(f[0].items()), f[1]) for e in subscripts)


def _directly_in(seq: For, inner: For) -> bool:
    """Whether ``inner`` is in ``seq``'s body through blocks only (no guard, no loop between)."""
    def visit(n: Node) -> bool:
        return n is inner or (isinstance(n, Block) and any(visit(c) for c in n.body))
    return visit(seq.body)


def find_ahead(producer: Statement, run: Run, seq: For, inner: For, itemsize: Callable[[str], int]) -> RowAhead | None:
    """The next-row reads of ``producer`` (run as ``run`` in ``inner``, unguarded) in the ring loop
    ``seq``, or ``None`` where there are none to fetch; ``itemsize`` gives an array's element size."""
    upper = loop_upper(inner)
    inside = counters_within(seq)
    if (upper is None or inner.step != 1 or not _directly_in(seq, inner)
            or (var_names(inner.lower, "iter") | var_names(upper, "iter")) & inside):
        return None
    rows: dict[tuple[str, tuple[Form, ...]], tuple[tuple[Expr, ...], list[int]]] = {}
    now: set[tuple[str, tuple[Form, ...]]] = set()
    nxt = {seq.var: Binary("+", Var(seq.var, "iter"), Const(seq.step))}
    for acc in producer.reads:
        a = substitute(acc, dict(zip(producer.iterators, run.args)))
        if not isinstance(a, Access) or not a.index or any(is_indirect_subscript(e) for e in a.index):
            continue
        *head, last = a.index
        column, moving = linear(last), [e for e in head if var_names(e, "iter") & inside]
        row = linear(moving[0]) if len(moving) == 1 else None
        if (column is None or column[0] != {inner.var: 1} or row is None or row[0].get(seq.var) != 1
                or set(row[0]) & (inside - {seq.var}) or None in (forms := _forms(head))):
            continue
        ahead = tuple(substitute(e, nxt) for e in head)
        now.add((a.array, forms))
        rows.setdefault((a.array, _forms(ahead)), (ahead, []))[1].append(column[1])
    # rows the current iteration reads too are in the cache already
    reads = tuple(AheadRead(array, head, min(offs), max(offs) - min(offs), itemsize(array))
                  for (array, key), (head, offs) in rows.items() if (array, key) not in now)
    return RowAhead(inner.lower, upper, reads) if reads else None


def ahead_lines(ahead: RowAhead, next_in_loop: str, lower: str, upper: str, ref: Callable[[Access], str],
                l1_bytes: int, skip: Callable[[str], bool]) -> list[str]:
    """C lines that fetch the columns ``lower`` to ``upper`` (C text: a chunk) of the producer's next row,
    where the next iteration is in the loop (``next_in_loop``: C text) and the rows fit in half of
    ``l1_bytes``; reads of arrays that ``skip`` names (held elsewhere than the array) are left out."""
    reads = [r for r in ahead.reads if not skip(r.array)]
    if not reads:
        return []
    lo, hi = index_expr(ahead.lower).text, index_expr(ahead.upper).text
    fits = f"{replace(ahead, reads=tuple(reads)).bytes()} <= {float(l1_bytes // 2)!r}"
    lines = [f"if ({next_in_loop} && {lo} < {hi} && {fits}) {{"]
    for r in reads:
        line = max(64 // r.itemsize, 1)
        column = Binary("+", Var("pt__p", "iter"), Const(r.first))
        lines.append(f"  for (int64_t pt__p = pt__max_int64_t({lower}, {lo}); pt__p < pt__min_int64_t({upper}, {hi}) + "
                     f"{r.span}; pt__p += {line}) __builtin_prefetch(&{ref(Access(r.array, (*r.head, column)))}, 0, 3);")
    lines.append("}")
    return lines


__all__ = ["AheadRead", "RowAhead", "ahead_lines", "find_ahead"]
