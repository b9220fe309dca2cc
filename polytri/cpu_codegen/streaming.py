"""Non-temporal stores for arrays that a nest writes without reading them, when they outgrow the
last-level cache.

A store to a line that is not in the cache first reads the line from memory (write-allocate), and the
line goes back to memory when it is evicted: two transfers for one.  A non-temporal store writes whole
lines to memory directly: one transfer, and the cache keeps what will be read again.  It pays when the nest
writes more of the array than the last-level cache holds (the lines it wrote first are evicted before
the nest ends whatever the stores, so the next nest would not find them in cache either) and reads none of
it (a read would go to memory again).

gcc 12 emits no non-temporal stores for C loops (it accepts ``#pragma omp simd nontemporal`` and ignores
it), so an innermost loop with such a store computes chunks of :data:`CHUNK_BYTES` into a local buffer,
which ``pt__stream`` copies to the array with the machine's non-temporal vector stores (AVX-512, AVX or
SSE2, whichever the compiler targets; plain stores at the unaligned ends and elsewhere).  The loop takes
that form when the bytes its nest writes to the array reach the size of the last-level cache, tested
where the loop starts in the sizes of the call (``pt__stream_pays``); otherwise the plain loop runs.
Non-temporal stores are weakly ordered: ``pt__stream_fence`` (``sfence``) ends each iteration of a
work-shared loop that ran some, and each outermost loop, before another thread may read the values.

A statement's store streams when the statement runs in the body of an innermost loop of unit step that
the printer vectorizes (directly, or under a guard free of the loop's counter), after the body's other
statements (:func:`streamed_stores`), its last subscript is the loop's counter plus terms free of it and
its other subscripts are free of the counter (consecutive elements), and no other statement of the
outermost loop around it reads or writes the array.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .. import dtypes
from ..ir.affine import linear
from ..ir.expr import Access, Binary, Expr, Var, accesses, substitute, var_names
from ..ir.program import Program, Statement
from ..pipeline.decisions import Decision
from ..schedule.loop_ast import Block, For, If, Node, Run, loop_upper, walk
from ..schedule.loop_work import Work, loop_work

CHUNK_BYTES = 2048
"""Bytes of one chunk of a streamed store: a buffer that stays in the L1 cache, 32 vectors of 64 bytes."""


@dataclass(frozen=True)
class StreamedStore:
    """A statement whose stores stream in one innermost loop."""

    statement: str
    target: Access
    """The element it writes, in the loop counters."""
    guard: Expr | None
    """The conditions (free of the loop's counter) under which it runs in the loop's body."""
    loop: str
    """The innermost loop's counter."""
    itemsize: int
    """Bytes of one element of the target's array."""
    written: Work
    """Bytes the outermost loop around the statement writes to the array (a bound, in the parameters)."""

    @property
    def array(self) -> str:
        return self.target.array

    @property
    def chunk(self) -> int:
        """Elements of one chunk."""
        return CHUNK_BYTES // self.itemsize

    def decision(self) -> Decision:
        """The record of the choice."""
        return Decision("codegen", "stream-stores", self.array,
                        f"loop {self.loop} ({self.statement}): {self.array} written with non-temporal stores when "
                        f"the nest writes at least the last-level cache's size of it (tested as the loop starts)",
                        {"statement": self.statement, "loop": self.loop, "chunk": self.chunk})


def body_runs(loop: For) -> list[tuple[Run, Expr | None]] | None:
    """The statements run in ``loop``'s body, directly or under guards free of its counter, each with
    the conjunction of its guards; ``None`` when the body holds a loop or a guard on the counter."""
    out: list[tuple[Run, Expr | None]] = []

    def visit(n: Node, guard: Expr | None) -> bool:
        if isinstance(n, Run):
            out.append((n, guard))
            return True
        if isinstance(n, Block):
            return all(visit(c, guard) for c in n.body)
        if isinstance(n, If) and n.orelse is None and loop.var not in var_names(n.cond, "iter"):
            return visit(n.then, n.cond if guard is None else Binary("and", guard, n.cond))
        return False
    return out if visit(loop.body, None) else None


def run_target(st: Statement, run: Run) -> Access:
    """The element ``run`` writes, in the loop counters."""
    target = substitute(st.target, dict(zip(st.iterators, run.args)))
    assert isinstance(target, Access)
    return target


def _consecutive(target: Access, counter: str) -> bool:
    """Whether ``target``'s last subscript is ``counter`` plus terms free of it and the others are free
    of it: the loop's iterations write consecutive elements."""
    *outer, last = target.index
    if any(counter in var_names(e, "iter") for e in outer):
        return False
    form = linear(last)
    return form is not None and form[0].get(counter) == 1


def _touches(program: Program, runs: list[Run]) -> tuple[set[str], Counter[str]]:
    """The arrays that ``runs`` read (subscripts included), and how many of them write each array."""
    read: set[str] = set()
    writes: Counter[str] = Counter()
    for r in runs:
        st = program.statement(r.statement)
        read |= {acc.array for acc in accesses(st.value)} | {acc.array for e in st.target.index for acc in accesses(e)}
        writes[st.target.array] += 1
    return read, writes


def _store(root: For, loop: For, program: Program, run: Run, guard: Expr | None,
           touches: tuple[set[str], Counter[str]]) -> StreamedStore | None:
    """The streamed store of ``run`` in ``loop``, or ``None`` when it may not stream."""
    st = program.statement(run.statement)
    target = run_target(st, run)
    read, writes = touches
    if target.array in read or writes[target.array] != 1 or not _consecutive(target, loop.var):
        return None  # read in the nest, or written by another statement, or not consecutive elements
    size = dtypes.dtype(program.array(target.array).dtype).itemsize
    written = loop_work(root, lambda s: size if s == st.name else 0)
    if written.terms is None:
        return None
    return StreamedStore(st.name, target, guard, loop.var, size, Work(tuple(t for t in written.terms if t.weight)))


def streamed_stores(root: For, program: Program) -> dict[int, tuple[StreamedStore, ...]]:
    """The stores that may stream in the innermost loops of ``root`` (an outermost loop), by the loops'
    ``id``: the statements at the end of the loop's body that may (:func:`_store`).  The printer runs the
    body's other statements first, in a loop of their own, then the streamed ones in chunks (mixed with
    normal stores in one loop, blur's streamed rows ran no faster than plain ones, 7.1-8.0 against 7.1-7.3 ms
    best of 21 in a C harness, and 5.8-5.9 ms once apart).  That order keeps every dependence: the loop is one that vectorizes
    (:attr:`~polytri.schedule.loop_ast.For.lanes`), so each dependence it carries goes to a later statement of
    its body, and the streamed arrays are read by no statement of the nest, so no dependence leaves a
    streamed statement for another."""
    touches = _touches(program, [n for n in walk(root) if isinstance(n, Run)])
    found: dict[int, tuple[StreamedStore, ...]] = {}
    for loop in (n for n in walk(root) if isinstance(n, For)):
        body = body_runs(loop) if loop.innermost and loop.lanes and loop.step == 1 else None
        if body is None or loop_upper(loop) is None:
            continue
        stores: list[StreamedStore] = []
        for run, guard in reversed(body):
            store = _store(root, loop, program, run, guard, touches)
            if store is None:
                break
            stores.insert(0, store)
        if stores:
            found[id(loop)] = tuple(stores)
    return found


def stream_buffer(s: StreamedStore) -> str:
    """The C name of the chunk buffer of ``s``'s array (user names never start with ``pt_``)."""
    return f"pt__nt_{s.array}"


def chunk_start(target: Access, counter: str, start: str) -> Access:
    """``target`` at the first iteration of a chunk: the counter replaced by the variable ``start``."""
    return Access(target.array, tuple(substitute(e, {counter: Var(start, "iter")}) for e in target.index))



def stream_helpers(llc_bytes: int) -> str:
    """The C helpers of streamed stores, for a machine whose last-level cache holds ``llc_bytes``.  They
    use the compilers' builtins, not ``<immintrin.h>``: parsing that header took 0.15 s a kernel, and most
    of a model's kernels carry a streamed loop, taken or not (a ViT's cold compile, one thread: 5.4 s
    before streamed stores, 5.8 s with the header, 5.0 s with the builtins; load 0.73 -> 1.10)."""
    return f"""\
/* Non-temporal stores (polytri.cpu_codegen.streaming): whole lines written to memory without reading them
   first; worth it when a nest writes more than the last-level cache ({llc_bytes} bytes) holds. */
PT_HELPER bool pt__stream_pays(double bytes) {{ return bytes >= {float(llc_bytes)!r}; }}
#if defined(__AVX512F__)
#define pt__stream_width 64
#elif defined(__AVX__)
#define pt__stream_width 32
#elif defined(__SSE2__)
#define pt__stream_width 16
#endif
PT_HELPER void pt__stream(void *restrict dst, const void *restrict src, int64_t bytes) {{
  char *d = (char *)dst;
  const char *s = (const char *)src;
#ifdef pt__stream_width
  typedef long long pt__vec __attribute__((vector_size(pt__stream_width)));
  int64_t head = (int64_t)((pt__stream_width - ((uintptr_t)d & (pt__stream_width - 1))) & (pt__stream_width - 1));
  if (head > bytes) head = bytes;
  memcpy(d, s, (size_t)head);
  d += head, s += head, bytes -= head;
  for (; bytes >= pt__stream_width; bytes -= pt__stream_width, d += pt__stream_width, s += pt__stream_width) {{
    pt__vec v;
    memcpy(&v, s, sizeof v);
#if defined(__clang__)
    __builtin_nontemporal_store(v, (pt__vec *)d);
#elif pt__stream_width == 64
    __builtin_ia32_movntdq512((pt__vec *)d, v);
#elif pt__stream_width == 32
    __builtin_ia32_movntdq256((pt__vec *)d, v);
#else
    __builtin_ia32_movntdq((pt__vec *)d, v);
#endif
  }}
#endif
  memcpy(d, s, (size_t)bytes);
}}
PT_HELPER void pt__stream_fence(void) {{
#if defined(__SSE2__)
  __builtin_ia32_sfence();
#endif
}}
"""
