"""Where a loop runs in blocks (:mod:`.seams`), the rows a producer writes kept in a ring of rows per
thread, read back from there and streamed out to the array.

Blur's horizontal pass writes a row of ``tmp`` at each iteration of the rows' loop; the vertical pass,
fused 4 rows behind, reads 5 of them.  With plain stores each row of ``tmp`` goes to memory once (written
back on eviction) after being read from it once (write-allocate), and the vertical pass finds it in the
cache.  Kept in a ring of 8 rows that stays in the core's cache, each row is read back from the ring and
copied to ``tmp`` with non-temporal stores: one transfer to memory instead of two.  On the suite's blur at
LARGE (3 x 2048 x 2048, float32, two threads) that is 150 MB a call instead of 200 (counted, not
measured).

In the first phase of a block every instance reads only what its own block wrote, at most the window
back (:mod:`.seams`); a ring of more rows than the window holds all of it.  That is not enough on its
own: the ring holds only what the producer wrote, so every element a reader reads there must be the
producer's, written in the same iteration of the loops around and at most ``rows - 1`` iterations of the
loop back.  :func:`find_rings` proves both with isl for every read of the array in the loop: the elements
the read touches are among those its own sources (the exact flow dependences from the producer) wrote,
and those dependences are equal on every time dimension before the loop's and span less than the ring
along it.  The ring's slot of an element is its row subscript modulo the ring's rows and its last
subscript: the producer runs once per iteration of the loop, its row subscript is the loop's counter
plus terms of the loops around, and its other subscripts but the last are free of the loop and of
every loop inside it, so the elements written within a ring's span of iterations fall in distinct slots.
The second phase (the deferred instances, which read other blocks' rows) reads the array: the rows went
there before the barrier, fenced.

The ring is allocated by each thread when its region starts, where the producer's writes in the region
reach the size of the last-level cache (as streamed stores: :mod:`.streaming`) and the ring fits in half
the level-2 cache; otherwise, or if the allocation fails, the block runs with plain stores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from .. import dtypes
from ..ir.affine import linear
from ..ir.expr import Access, Binary, Const, Expr, Var, substitute, var_names
from ..ir.indirect import is_indirect_subscript
from ..ir.islutil import maps
from ..ir.program import Program, Statement
from ..schedule.dependences import Dependences
from ..schedule.loop_ast import For, Run, counters_within, loop_upper, walk
from ..schedule.loop_work import Work, loop_work
from ..schedule.schedule import time_dependences, within_loop
from ..schedule.tiling import cache_sizes
from .c_signature import vla_bound
from .cexpr import index_expr
from .parallel_plan import work_text
from .row_ahead import RowAhead, ahead_lines, find_ahead
from .streaming import body_runs, run_target


@dataclass(frozen=True)
class RowRing:
    """An array whose rows, written once per iteration of a loop run in blocks, are kept in a ring."""

    array: str
    producer: str
    """The one statement of the loop that writes the array."""
    row: int
    """The subscript that advances with the blocked loop."""
    rows: int
    """Rows in the ring: the smallest power of two above the longest distance of a read."""
    columns: Expr
    """Elements of one row: the array's last extent."""
    c_type: str
    itemsize: int
    written: Work
    """Bytes the producer writes in the region (a bound, in the parameters)."""
    loop: str
    """The counter of the loop run in blocks."""
    ahead: RowAhead | None = None
    """What the producer reads in the loop's next iteration, fetched while the consumers run."""

    @property
    def name(self) -> str:
        """The C name of the ring (user names never start with ``pt_``)."""
        return f"pt__ring_{self.array}"

    def text(self) -> str:
        fetched = "" if self.ahead is None else (
            f", the next row of {', '.join(dict.fromkeys(r.array for r in self.ahead.reads))} fetched while its readers run")
        return (f"{self.array} (written by {self.producer}) in a ring of {self.rows} rows per thread, "
                f"copied out with non-temporal stores{fetched}")


def _row(target: Access, seq: For, inner: For) -> int | None:
    """The subscript of ``target`` that is ``seq``'s counter plus terms of the loops around it, where its
    last is ``inner``'s counter plus terms free of it and every other is free of the counters of ``seq``
    and of the loops inside it; else ``None``."""
    inside = counters_within(seq)
    *head, last = target.index
    form = linear(last)
    if not head or form is None or form[0].get(inner.var) != 1:
        return None
    row = None
    for k, e in enumerate(head):
        used = var_names(e, "iter") & inside
        if not used:
            continue
        form = linear(e)
        if row is not None or used != {seq.var} or form is None or form[0].get(seq.var) != 1:
            return None
        row = k
    return row


def _one_map(u: isl.UnionMap, src: str, dst: str) -> isl.Map | None:
    found = [m for m in maps(u) if m.get_tuple_name(isl.dim_type.in_) == src
             and m.get_tuple_name(isl.dim_type.out) == dst]
    return found[0] if found else None


def _served(program: Program, deps: Dependences, schedule: isl.UnionMap, producer: Statement, reader: Statement,
            seq: For, rows: int) -> bool:
    """Whether every element that ``reader`` reads of ``producer``'s array is one ``producer`` wrote in
    the same iteration of the loops around ``seq`` and less than ``rows`` iterations of it back."""
    reads = [acc for acc in reader.reads if acc.array == producer.target.array]
    flow = _one_map(deps.flow, producer.name, reader.name)
    if flow is None or any(is_indirect_subscript(e) for acc in reads for e in acc.index):
        return False
    written = flow.reverse().apply_range(program.access_map(producer, producer.target))
    for acc in reads:
        read = program.access_map(reader, acc).intersect_domain(reader.domain).intersect_params(program.context)
        if not read.is_subset(written):
            return False  # some element read comes from before the loop, or from another statement
    t = time_dependences(schedule, isl.UnionMap.from_map(flow))
    if t is None or not t.is_subset(within_loop(t, seq.dim)):
        return False
    try:
        furthest = t.deltas().dim_max(seq.dim)
    except isl.Error:  # unbounded
        return False
    return all(aff.is_cst() and aff.get_constant_val().to_python() < rows for _, aff in furthest.get_pieces())


def _bytes_of(statement: str, size: int) -> Callable[[str], int]:
    """The weight of a work bound counting the bytes ``statement`` stores."""
    return lambda s: size if s == statement else 0


def find_rings(program: Program, deps: Dependences, schedule: isl.UnionMap, root: For, seq: For, window: int,
               deferred: tuple[str, ...], runs: Counter[str]) -> tuple[RowRing, ...]:
    """The arrays of ``seq`` (a sequential loop run in blocks, in the region that ``root`` opens, its
    ``deferred`` statements and ``window`` as :mod:`.seams` found) whose rows may live in a ring;
    ``runs``: how many times each statement appears in the whole loop AST."""
    inside = [r for r in walk(seq.body) if isinstance(r, Run)]
    writers = Counter(program.statement(r.statement).target.array for r in inside)
    rows = 1 << window.bit_length()  # above the window
    found: list[RowRing] = []
    for inner in (n for n in walk(seq.body) if isinstance(n, For) and n.innermost and n.step == 1):
        for run, guard in body_runs(inner) or ():
            st = program.statement(run.statement)
            array = st.target.array
            if (writers[array] != 1 or runs[st.name] != 1 or st.name in deferred or loop_upper(inner) is None
                    or array in {a.array for a in st.reads}):
                continue
            row = _row(run_target(st, run), seq, inner)
            readers = [program.statement(r.statement) for r in inside
                       if array in {a.array for a in program.statement(r.statement).reads}]
            if row is None or not readers or any(
                    runs[r.name] != 1 or not _served(program, deps, schedule, st, r, seq, rows) for r in readers):
                continue
            dt = dtypes.dtype(program.array(array).dtype)
            written = loop_work(root, _bytes_of(st.name, dt.itemsize))
            if written.terms is None:
                continue
            ahead = None if guard is not None else find_ahead(
                st, run, seq, inner, lambda a: dtypes.dtype(program.array(a).dtype).itemsize)
            found.append(RowRing(array, st.name, row, rows, program.array(array).shape[-1], dt.c_type, dt.itemsize,
                                 Work(tuple(t for t in written.terms if t.weight)), seq.var, ahead))
    return tuple(found)


def ring_ref(ring: RowRing, row: str, column: str) -> str:
    """C text of the ring's slot of the element at subscripts ``row`` and ``column`` (C text)."""
    return f"{ring.name}[({row}) & {ring.rows - 1}][{column}]"


def ring_lines(rings: Sequence[RowRing], test: Callable[[str], str], l2_bytes: int) -> tuple[list[str], list[str]]:
    """C lines that allocate each thread's rings where they pay (``test`` prints a test of the sizes) and
    fit in half of ``l2_bytes``, and set ``pt__ringed`` where all of them were; and the lines that free
    them.  No lines without rings."""
    setup, release = [], []
    for r in rings:
        line = max(64 // r.itemsize, 1)  # rows start on cache lines, as the copies' vector stores do
        columns = f"(({vla_bound(r.columns)} + {line - 1}) / {line} * {line})"
        fits = f"{r.rows}.0 * (double)({columns}) * {r.itemsize}.0 <= {float(l2_bytes // 2)!r}"
        size = f"(size_t)(({r.rows} * {columns} * {r.itemsize} + 63) / 64 * 64)"
        setup.append(f"{r.c_type} (*{r.name})[{columns}] = {test(f'pt__stream_pays({work_text(r.written)}) && {fits}')}"
                     f" ? aligned_alloc(64, {size}) : NULL;")
        release.append(f"free({r.name});")
    if rings:
        setup.append(f"const bool pt__ringed = {' && '.join(f'{r.name} != NULL' for r in rings)};")
    return setup, release


def next_rows(rings: Iterable[RowRing], seq: For | None, ref: Callable[[Access], str],
              skip: Callable[[str], bool]) -> list[str]:
    """C lines, in a chunk (``pt__s`` to ``pt__e``) of a streamed loop in the body of ``seq`` (``None``:
    no ring's loop around), that fetch the next row of what the producers of the ``rings`` whose loop
    ``seq`` is read; reads of arrays that ``skip`` names, or that are rings, are left out."""
    if seq is None:
        return []
    rings = list(rings)
    step = Binary("+", Var(seq.var, "iter"), Const(seq.step))
    following = index_expr(substitute(seq.cond, {seq.var: step})).text
    held = {r.array for r in rings}
    return [line for r in rings if r.ahead is not None and r.loop == seq.var
            for line in ahead_lines(r.ahead, following, "pt__s", "pt__e", ref, cache_sizes()[1],
                                    lambda a: a in held or skip(a))]


def copy_lines(n: For, statements: Mapping[str, Statement], rings: Mapping[str, RowRing], chunk: tuple[Expr, Expr] | None,
               array_ref: Callable[[Access], str], in_ring: Callable[[Access], str]) -> list[str]:
    """C lines that copy the row each ring's producer wrote in the innermost loop ``n`` (with ``chunk``:
    the columns from its first to before its second) from the ring (``in_ring`` prints an element there)
    to the array (``array_ref``) with non-temporal stores, under the producer's guards in the loop.
    Where a streamed store's loop runs the producer's loop first, the printer copies the row chunk by
    chunk in the streamed loop, spreading the stores over its arithmetic; in a loop of its own it goes
    out right after the producer's loop, while it is in the level-1 cache (blur at LARGE on two threads
    ran 3.4-3.5 ms against 3.7-3.9 with the row copied after the producer's loop, the next row fetched
    ahead either way; 4.1-4.2 before either; on one thread 4.4-4.6 against 5.3 and 6.3; C harness, fresh
    copies of the arrays at each call, median of 31, twice, load below 0.5)."""
    lines = []
    for run, guard in body_runs(n) or ():
        st = statements[run.statement]
        if (ring := rings.get(st.target.array)) is not None and (upper := loop_upper(n)) is not None:
            lo, hi = chunk or (n.lower, upper)
            first = Access(st.target.array, tuple(substitute(e, {n.var: lo}) for e in run_target(st, run).index))
            copy = (f"pt__stream(&{array_ref(first)}, &{in_ring(first)}, "
                    f"pt__max_int64_t({index_expr(Binary('-', hi, lo)).text}, 0) * {ring.itemsize});")
            lines.append(copy if guard is None else f"if ({index_expr(guard).text}) {copy}")
    return lines


__all__ = ["RowRing", "copy_lines", "find_rings", "next_rows", "ring_lines", "ring_ref"]
