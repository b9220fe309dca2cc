"""Loop AST + program -> one C translation unit with an OpenMP-annotated function.

The function takes, in order: one pointer per array (declaration order), one value per scalar, one
``int64_t`` per parameter, the requested thread count (``<= 0``: OpenMP's default) and the smallest work
a parallel region needs to open (``0``: every one opens; see :mod:`.parallel_plan`).  Inside, each
array pointer is re-declared as a pointer to a variable-length array, so accesses read ``A[i][j]``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace

from .. import dtypes
from ..dtypes import INT64
from ..ir.expr import Access, Binary, Const, Expr, Var, accesses, substitute, transform, var_names
from ..ir.indirect import is_indirect_subscript
from ..ir.program import Program, Statement
from ..ir.types import program_typer
from ..schedule.loop_ast import (
    Block,
    For,
    If,
    Node,
    Run,
    loop_upper,
    outermost_loops,
    run_counts,
    walk,
    without,
)
from ..schedule.tiling import cache_sizes
from .c_signature import arguments, array_views, signature, slots_entry, unused, vla_bound
from .cexpr import C, CExprPrinter, call, cname, comment, index_expr
from .codegen_io import CodegenOptions, GeneratedC
from .contraction_model import Contraction
from .hoist import Hoisted, argument_names
from .nest_plan import NestPlan, flat, plan_nests
from .packing import nest_lines
from .parallel_plan import MIN_WORK, RegionChoice, Split, choose_region, work_text
from .prelude import prelude
from .private import local_name, private_arrays
from .row_ring import RowRing, copy_lines, next_rows, ring_lines, ring_ref
from .scalar_promotion import Held, Key, element_key, held_elements, holding_lines, invariant_reads
from .seams import Seams, block_lines, only_loop, parts_lines
from .streaming import StreamedStore, chunk_start, stream_buffer, streamed_stores
from .support import support_code


class _Printer:
    def __init__(self, program: Program, options: CodegenOptions, function: str):
        self.p = program
        self.opts = options
        self.function = function
        self.stmts = {s.name: s for s in program.statements}
        self.private: dict[str, int] = {}
        """Arrays held in local buffers where the node being printed runs, with the subscript dropped."""
        self.localized: set[str] = set()
        """Every array held in local buffers somewhere (never touched in global memory)."""
        self.exprs = CExprPrinter(program_typer(program), self.array_ref)
        self.lines: list[str] = []
        self.outlined: list[str] = []
        """Functions holding the parallel loops (see :meth:`parallel_loop`)."""
        self.counters: list[str] = []
        """Counters of the loops enclosing the node being printed."""
        self.contractions: list[Contraction] = []
        """Contraction nests printed as micro-kernel calls, in order."""
        self.runs: Counter[str] = Counter()
        """How many times each statement appears in the whole loop AST."""
        self.regions: list[RegionChoice] = []
        """The choice made for each parallel loop that could open a region, in order."""
        self.plan = NestPlan()
        """The contraction nests (:mod:`.nest_plan`)."""
        self.streams: dict[int, tuple[StreamedStore, ...]] = {}
        """The stores that may stream (:mod:`.streaming`), by the ``id`` of their innermost loop."""
        self.streamed: list[StreamedStore] = []
        """The stores printed in streamed form, in order."""
        self.stream_to: dict[str, str] = {}
        """The chunk buffer's element each streamed statement of the loop being printed stores to."""
        self.seams: dict[int, Seams] = {}
        """The loops that may run in blocks (:mod:`.seams`), by the ``id`` of the loop opening their region."""
        self.seamed: list[Seams] = []
        """The loops printed in blocks, in order."""
        self.ringed: dict[str, RowRing] = {}
        """The arrays whose rows the block being printed keeps in a ring (:mod:`.row_ring`), by name."""
        self.ring_loop: For | None = None
        """The loop of those rings being printed, whose next row a streamed loop's chunks fetch (:mod:`.row_ahead`)."""
        self.held: dict[Key, str] = {}
        """The elements the loop being printed holds in C locals (:mod:`.scalar_promotion`), by key."""
        self.env: dict[str, Expr] = {}
        """The iterators of the statement instance being printed, in loop counters."""
        self.hoist: Hoisted | None = None
        """The tests computed once where the function starts (:mod:`.hoist`); set after its first lines."""

    def test(self, text: str) -> str:
        """A test of the sizes of the call, hoisted where it reads no counter of this function's loops."""
        return text if self.hoist is None else self.hoist.test(text)

    def subscript(self, e: Expr) -> str:
        """A subscript in int64_t: an affine one as an index expression, an indirect one (its values were
        checked when the kernel was called) as a typed expression converted to int64_t."""
        return self.exprs.conv(e, INT64).text if is_indirect_subscript(e) else index_expr(e).text

    def share(self, inner: _Printer) -> None:
        """Give a printer of another function of this kernel what this one knows of the whole AST."""
        inner.runs = self.runs
        inner.plan = self.plan
        inner.streams = self.streams
        inner.seams = self.seams

    def take(self, inner: _Printer) -> None:
        """Collect what a printer of another function of this kernel chose."""
        self.contractions += inner.contractions
        self.localized |= inner.localized
        self.streamed += inner.streamed
        self.seamed += inner.seamed

    def array_ref(self, acc: Access) -> C:
        key = element_key(acc, self.env) if self.held else None
        if key is not None and key in self.held:
            return C(self.held[key], 16)
        if (ring := self.ringed.get(acc.array)) is not None:
            return C(ring_ref(ring, self.subscript(acc.index[ring.row]), self.subscript(acc.index[-1])), 16)
        p = self.private.get(acc.array)
        if p is None:
            return C(self.global_ref(acc), 16)
        idx = "".join(f"[{self.subscript(i)}]" for k, i in enumerate(acc.index) if k != p) or "[0]"
        return C(f"{local_name(acc.array)}{idx}", 16)

    def global_ref(self, acc: Access) -> str:
        """``acc`` in the array itself."""
        return cname(acc.array) + "".join(f"[{self.subscript(i)}]" for i in acc.index)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def node(self, n: Node, depth: int, in_parallel: bool) -> None:
        if isinstance(n, Block):
            for c in flat(n.body):  # nested blocks are one sequence: a nest's epilogue may be in the next one
                if id(c) not in self.plan.absorbed:  # computed by the contraction nest beside it
                    self.node(c, depth, in_parallel)
        elif isinstance(n, For):
            self.loop(n, depth, in_parallel)
        elif isinstance(n, If):
            self.emit(depth, f"if ({index_expr(n.cond).text}) {{")
            self.node(n.then, depth + 1, in_parallel)
            if n.orelse is not None:
                self.emit(depth, "} else {")
                self.node(n.orelse, depth + 1, in_parallel)
            self.emit(depth, "}")
        elif isinstance(n, Run):
            self.run(self.stmts[n.statement], n, depth)
        else:
            raise TypeError(n)

    def loop(self, n: For, depth: int, in_parallel: bool) -> None:
        contraction = self.plan.contractions.get(id(n))
        if contraction is not None:
            self.contractions.append(contraction)
            if self.opts.openmp and not in_parallel:
                # the packing code splits its own panels statically (contraction.py)
                choice = self.region_choice(n, split="static")
                self.outline(depth, lambda inner: inner.contraction(contraction, 1, threads=True), choice)
            else:
                self.contraction(contraction, depth, threads=False)
            return
        # OpenMP needs a canonical loop: the counter compared with a bound
        canonical = isinstance(n.cond, Binary) and n.cond.op in ("<", "<=", ">", ">=") and n.cond.lhs == Var(n.var, "iter")
        omp_for = self.opts.openmp and n.parallel and not in_parallel and canonical
        # a buffer declared in the body must be visible to all of it: nothing inside is outlined
        local = self.local_buffers(n) if in_parallel or omp_for or not self.opts.openmp else {}
        seams = self.seams.get(id(n))
        if seams is not None and self.opts.openmp and not in_parallel and canonical and not local and not any(
                id(m) in self.plan.contractions for m in walk(n) if isinstance(m, For)):
            self.seam_loop(n, depth, seams)
            return
        if omp_for:
            self.parallel_loop(n, depth, local, self.region_choice(n))
            return
        stores = tuple(s for s in self.streams.get(id(n), ()) if s.array not in self.private)
        if stores and canonical and not local and self.opts.simd:
            self.streamed_loop(n, depth, in_parallel, stores)
            return
        if self.opts.simd and n.lanes and canonical:
            if not local and not self.held and (held := invariant_reads(n, self.stmts)):
                self.holding_loop(n, depth, in_parallel, held, pragma="#pragma omp simd")
                return
            self.emit(depth, "#pragma omp simd")
        elif canonical and not local and n.innermost and not self.held and (
                held := held_elements(n, self.stmts)):
            self.holding_loop(n, depth, in_parallel, held)
            return
        self.plain_loop(n, depth, in_parallel, local, fence=not self.counters)

    def holding_loop(self, n: For, depth: int, in_parallel: bool, held: tuple[Held, ...], pragma: str = "",
                     fence: bool | None = None) -> None:
        """An innermost loop with elements held in C locals (:mod:`.scalar_promotion`): loaded before it and
        stored after it where it runs at least once.  With a ``pragma`` (a vectorized loop), the elements are
        only read: ``const`` locals, nothing stored after.  ``fence``: as :meth:`plain_loop`'s (default:
        an outermost loop's)."""
        before, after = holding_lines(held, lambda a: dtypes.dtype(self.p.array(a).dtype).c_type,
                                      lambda e: self.array_ref(e).text)
        if pragma:
            before, after = [f"const {line}" for line in before], []
        self.emit(depth, f"if ({index_expr(substitute(n.cond, {n.var: n.lower})).text}) {{")
        for line in before:
            self.emit(depth + 1, line)
        self.held = {key: h.local for h in held if (key := element_key(h.element, {})) is not None}
        if pragma:
            self.emit(depth + 1, pragma)
        self.plain_loop(n, depth + 1, in_parallel, fence=not self.counters if fence is None else fence)
        self.held = {}
        for line in after:
            self.emit(depth + 1, line)
        self.emit(depth, "}")

    def local_buffers(self, n: For) -> dict[str, int]:
        """The temporaries that can live in buffers local to one iteration of ``n`` (see :mod:`.private`),
        except those a contraction nest inside (:mod:`.nest_plan`) reads or writes through the packing code."""
        candidates = self.opts.scratch - set(self.private)
        found = private_arrays(n, self.p, candidates, self.runs)
        if found:
            inner = [c for m in walk(n.body) if isinstance(m, For) and (c := self.plan.contractions.get(id(m)))]
            kept = {a.array for c in inner for a in (c.statement.target, *accesses(c.statement.value))}
            if kept & set(found):  # again without them: the budget of local bytes is theirs no more
                found = private_arrays(n, self.p, candidates, self.runs, contracted=kept)
        return found

    def contraction(self, c: Contraction, depth: int, threads: bool) -> None:
        """A contraction nest as packed panels and micro-kernel calls (see :mod:`.contraction`)."""
        for line in nest_lines(c, value=lambda e: self.exprs.conv(e, c.dtype).text, ref=lambda a: self.array_ref(a).text,
                               instance=self.statement_lines, shape=self.p.array(c.statement.target.array).shape,
                               threads=threads):
            self.emit(depth, line)

    def plain_loop(self, n: For, depth: int, in_parallel: bool, local: dict[str, int] | None = None,
                   fence: bool = False, copy: bool = True) -> None:
        """The ``for`` statement itself, without pragmas; ``local`` arrays get a buffer in its body.  With
        ``fence``, an iteration that ran streamed stores (:mod:`.streaming`) ends with
        ``pt__stream_fence()``: the loops whose iterations a thread runs before a barrier (a
        work-shared loop) or before the function returns (an outermost loop)."""
        init, cond = index_expr(n.lower).text, index_expr(n.cond).text
        var = cname(n.var)
        self.emit(depth, f"for (int64_t {var} = {init}; {cond}; {var} += {n.step}) {{")
        outer = self.private
        if local:
            for array, p in local.items():
                a = self.p.array(array)
                dims = "".join(f"[{vla_bound(e)}]" for k, e in enumerate(a.shape) if k != p) or "[1]"
                self.emit(depth + 1, f"{dtypes.dtype(a.dtype).c_type} {local_name(array)}{dims} "
                                     f"__attribute__((aligned(64)));  {comment(f'{array}, this iteration')}")
            self.private = outer | local
            self.localized |= set(local)
        self.counters.append(n.var)
        streamed, ring_loop = len(self.streamed), self.ring_loop
        if any(r.loop == n.var for r in self.ringed.values()):
            self.ring_loop = n
        self.node(n.body, depth + 1, in_parallel)
        if fence and len(self.streamed) > streamed:
            self.emit(depth + 1, "pt__stream_fence();")
        self.counters.pop()
        self.private, self.ring_loop = outer, ring_loop
        self.emit(depth, "}")
        if self.ringed and n.innermost and copy:
            self.copy_rows(n, depth)

    def streamed_loop(self, n: For, depth: int, in_parallel: bool, stores: tuple[StreamedStore, ...]) -> None:
        """An innermost loop whose ``stores`` stream (:mod:`.streaming`): where its nest writes enough, its
        other statements in a loop of their own, then the streamed ones in chunks computed into local
        buffers that ``pt__stream`` copies out; else the plain loop."""
        upper = loop_upper(n)
        assert upper is not None  # streamed_stores() checked
        end, chunk, var = index_expr(upper).text, min(s.chunk for s in stores), cname(n.var)
        names = {s.statement for s in stores}
        rest = without(n.body, names)
        streamed = without(n.body, {r.statement for r in walk(n.body) if isinstance(r, Run)} - names)
        assert streamed is not None
        written = " + ".join(work_text(s.written) for s in stores)
        self.emit(depth, f"if ({self.test(f'pt__stream_pays({written})')}) {{")
        if rest is not None:  # a ring's rows are copied out chunk by chunk below (copy_rows)
            self.emit(depth + 1, "#pragma omp simd")
            self.plain_loop(replace(n, body=rest), depth + 1, in_parallel, copy=False)
        self.emit(depth + 1, f"for (int64_t pt__s = {index_expr(n.lower).text}; pt__s < {end}; pt__s += {chunk}) {{")
        self.emit(depth + 2, f"const int64_t pt__e = pt__min_int64_t(pt__s + {chunk}, {end});")
        for line in next_rows(self.ringed.values(), self.ring_loop, self.global_ref, lambda a: a in self.private):
            self.emit(depth + 2, line)
        if rest is not None:
            self.copy_rows(replace(n, body=rest), depth + 2, (Var("pt__s", "iter"), Var("pt__e", "iter")))
        for s in stores:
            c_type = dtypes.dtype(self.p.array(s.array).dtype).c_type
            self.emit(depth + 2, f"{c_type} {stream_buffer(s)}[{chunk}] __attribute__((aligned(64)));")
        self.emit(depth + 2, "#pragma omp simd")
        self.stream_to = {s.statement: f"{stream_buffer(s)}[{var} - pt__s]" for s in stores}
        self.plain_loop(replace(n, body=streamed, lower=Var("pt__s", "iter"),
                                cond=Binary("<", Var(n.var, "iter"), Var("pt__e", "iter"))), depth + 2, in_parallel)
        self.stream_to = {}
        for s in stores:
            copy = (f"pt__stream(&{self.array_ref(chunk_start(s.target, n.var, 'pt__s')).text}, {stream_buffer(s)}, "
                    f"(pt__e - pt__s) * {s.itemsize});")
            self.emit(depth + 2, copy if s.guard is None else f"if ({index_expr(s.guard).text}) {copy}")
        self.emit(depth + 1, "}")
        if not self.counters:  # no loop around to fence (plain_loop's fence)
            self.emit(depth + 1, "pt__stream_fence();")
        self.emit(depth, "} else {")
        self.emit(depth + 1, "#pragma omp simd")
        self.plain_loop(n, depth + 1, in_parallel)
        self.emit(depth, "}")
        self.streamed += stores

    def region_choice(self, n: For, split: Split | None = None, count_trips: bool = True) -> RegionChoice:
        """Whether the parallel loop ``n`` opens a region (see :mod:`.parallel_plan`), its iterations
        handed out as ``split`` says (default: as the loop's work says), its test counting what unevenly
        split iterations leave idle unless ``count_trips`` is false; recorded."""
        choice = choose_region(n, self.p, self.opts.region_tests)
        if split is not None:
            choice = replace(choice, split=split)
        if not count_trips:
            choice = replace(choice, trips=None)
        self.regions.append(choice)
        return choice

    def parallel_loop(self, n: For, depth: int, local: dict[str, int], choice: RegionChoice) -> None:
        """A parallel loop: an orphaned ``omp for`` in an outlined function (see :meth:`outline`)."""
        simd = " simd" if self.opts.simd and n.innermost else ""
        held = invariant_reads(n, self.stmts) if simd and not local and not self.held else ()

        def body(inner: _Printer) -> None:
            pragma = f"#pragma omp for{simd} {choice.pragma_schedule}"
            if held:  # every thread tests the same bounds: all of them or none reach the omp for
                inner.holding_loop(n, 1, True, held, pragma=pragma, fence=True)
                return
            inner.emit(1, pragma)
            inner.plain_loop(n, 1, in_parallel=True, local=local, fence=True)

        def serial(d: int) -> None:
            if held:
                self.holding_loop(n, d, True, held, pragma="#pragma omp simd", fence=True)
                return
            if simd:
                self.emit(d, "#pragma omp simd")
            self.plain_loop(n, d, in_parallel=True, local=local, fence=True)
        self.outline(depth, body, choice, serial)

    def seam_loop(self, n: For, depth: int, seams: Seams) -> None:
        """A loop run in blocks (:mod:`.seams`): ``n``, the sequential loop or the parallel loop around it,
        in a region whose threads share the blocks, then the deferred instances; the plain loop where the
        region does not open (its rings, one block, where they pay: :mod:`.row_ring`).  Every block gets a
        thread, so the region's test does not count the trips."""
        choice = self.region_choice(n, split="static", count_trips=False)
        self.seamed.append(seams)

        def serial(d: int) -> None:
            setup, release = ring_lines(seams.rings, self.test, cache_sizes()[2])
            if setup:
                self.emit(d, "{")
            for line in setup:
                self.emit(d + 1, line)
            self.ringing(seams, d + bool(setup), lambda e, ringed: self.lanes_loop(n, e, fence=not ringed))
            for line in release:
                self.emit(d + 1, line)
            if setup:
                self.emit(d, "}")
        self.outline(depth, lambda inner: inner.seam_phases(n, seams), choice, serial)

    def lanes_loop(self, n: For, depth: int, fence: bool = False) -> None:
        """``n`` in a region's thread, with ``#pragma omp simd`` where its iterations may run in lanes."""
        if self.opts.simd and n.lanes:
            self.emit(depth, "#pragma omp simd")
        self.plain_loop(n, depth, in_parallel=True, fence=fence)

    def copy_rows(self, n: For, depth: int, chunk: tuple[Expr, Expr] | None = None) -> None:
        """After ``n``, an innermost loop running a ring's producer, the row it wrote copied out, or the
        columns of ``chunk`` of it in a streamed loop's chunk (:func:`.row_ring.copy_lines`)."""
        for line in copy_lines(n, self.stmts, self.ringed, chunk, self.global_ref, lambda a: self.array_ref(a).text):
            self.emit(depth, line)

    def ringing(self, seams: Seams, depth: int, body: Callable[[int, bool], None]) -> None:
        """``body(depth, ringed)`` once with the rings of ``seams`` (:mod:`.row_ring`) where they were
        allocated, its copies fenced, and once without; or once without, where there are none."""
        for ringed in (True, False) if seams.rings else (False,):
            if seams.rings:
                self.emit(depth, "if (pt__ringed) {" if ringed else "} else {")
            self.ringed = {r.array: r for r in seams.rings} if ringed else {}
            body(depth + bool(seams.rings), ringed)
            if ringed:
                self.emit(depth + 1, "pt__stream_fence();")
        self.ringed = {}
        if seams.rings:
            self.emit(depth, "}")

    def first_phase(self, seq: For, seams: Seams, depth: int, ringed: bool) -> None:
        """A block's iterations but the deferred instances of its first ``window`` ones, its streamed stores
        fenced before the barrier (with its ring's copies, ``ringed``: :meth:`ringing`)."""
        streamed = len(self.streamed)
        if (rest := without(seq.body, set(seams.deferred))) is not None:
            self.lanes_loop(replace(seq, body=rest, lower=Var("pt__lo", "iter"), cond=_below(seq, "pt__mid")), depth)
        self.lanes_loop(replace(seq, lower=Var("pt__mid", "iter"), cond=_below(seq, "pt__hi")), depth)
        if not ringed and len(self.streamed) > streamed:
            self.emit(depth, "pt__stream_fence();")

    def seam_phases(self, n: For, seams: Seams) -> None:
        """The body of :meth:`seam_loop`'s region: ``pt__parts`` blocks per iteration of the parallel loop
        (as many as the team needs to divide the iterations times the blocks), each running its
        iterations but the deferred instances of its first ``window`` ones; then, after the ``omp for``'s
        barrier, those instances."""
        seq = n if seams.outer is None else only_loop(n.body)
        assert seq is not None and (upper := loop_upper(seq)) is not None and (outer_upper := loop_upper(n)) is not None
        trips = None if seams.outer is None else index_expr(Binary("-", outer_upper, n.lower)).text
        for line in parts_lines(trips):
            self.emit(1, line)
        setup, release = ring_lines(seams.rings, self.test, cache_sizes()[2])
        for line in setup:
            self.emit(1, line)
        deferred = set(seams.deferred)
        for phase in (1, 2):
            d = phase
            if phase == 2:
                self.emit(1, "if (pt__parts > 1) {")
            self.emit(d, "#pragma omp for schedule(static)" if seams.outer is None
                      else "#pragma omp for collapse(2) schedule(static)")
            if seams.outer is not None:
                self.emit(d, f"for (int64_t {cname(n.var)} = {index_expr(n.lower).text}; {index_expr(n.cond).text}; "
                             f"{cname(n.var)} += 1)")
                self.counters.append(n.var)
            self.emit(d, f"for (int64_t pt__b = {phase - 1}; pt__b < pt__parts; pt__b += 1) {{")
            for line in block_lines(index_expr(seq.lower).text, index_expr(upper).text, seams.window):
                self.emit(d + 1, line)
            if phase == 1:
                self.ringing(seams, d + 1, lambda e, ringed: self.first_phase(seq, seams, e, ringed))
            else:
                only = without(seq.body, {r.statement for r in walk(seq.body) if isinstance(r, Run)} - deferred)
                assert only is not None
                self.lanes_loop(replace(seq, body=only, lower=Var("pt__lo", "iter"), cond=_below(seq, "pt__mid")), d + 1)
            self.emit(d, "}")
            if seams.outer is not None:
                self.counters.pop()
        self.emit(1, "}")
        for line in release:
            self.emit(1, line)

    def outline(self, depth: int, body, choice: RegionChoice, serial=None) -> None:
        """Code run by every thread of a parallel region goes into its own function, which ``body``
        prints.  Its arrays arrive as ``restrict`` parameters: gcc only trusts ``restrict`` on
        parameters, and a loop OpenMP outlines itself reads the pointers from a shared struct, losing the
        no-alias guarantee (measured: gesummv 3x slower on one thread).  Where the region opens only
        when its work pays (:mod:`.parallel_plan`), the calling thread alone runs the work otherwise:
        ``serial(depth)`` prints it inline (a plain loop: no call, no worksharing), or, without it (a
        contraction nest, whose packing code is long and whose work dwarfs a call), the outlined function
        is called outside any region, its ``omp for`` binding to a team of one."""
        assert not self.private, "a loop with local buffers outlines nothing (see loop)"
        name = f"{self.function}_par{len(self.outlined)}"
        inner = _Printer(self.p, self.opts, name)
        inner.counters = list(self.counters)
        self.share(inner)
        for line in array_views(self.p):
            inner.emit(1, line)
        for line in unused(self.p, self.counters):
            inner.emit(1, line)
        inner.hoist = Hoisted(len(inner.lines), argument_names(self.p) | {cname(c) for c in self.counters})
        body(inner)
        inner.hoist.splice(inner.lines)
        self.take(inner)
        params = signature(self.p)[:-2] + [f"int64_t {cname(c)}" for c in self.counters]
        text = "\n".join(inner.lines)
        self.outlined.append(f"static void {name}({', '.join(params)}) {{\n{text}\n}}\n")
        args = arguments(self.p) + [cname(c) for c in self.counters]
        called = f"{name}({', '.join(args)});"
        if choice.verdict == "runtime":
            self.emit(depth, f"if ({self.test(choice.condition())}) {{")
            self.emit(depth + 1, "#pragma omp parallel num_threads(pt__threads)")
            self.emit(depth + 1, called)
            self.emit(depth, "} else {")
            if serial is not None:
                serial(depth + 1)
            else:
                self.emit(depth + 1, called)
            self.emit(depth, "}")
            return
        self.emit(depth, "#pragma omp parallel num_threads(pt__threads)")
        self.emit(depth, called)

    def run(self, st: Statement, n: Run, depth: int) -> None:
        self.env = dict(zip(st.iterators, n.args))
        for line in self.statement_lines(st, n.args):
            self.emit(depth, line)
        self.env = {}

    def statement_lines(self, st: Statement, args: tuple[Expr, ...]) -> list[str]:
        """One instance of ``st``, its iterators given by ``args``, as a C block."""
        redirected = self.stream_to.get(st.name)  # a streamed store: to the chunk's buffer, by loop counter
        def printed(e: Expr) -> Expr:  # an element held in a local (:mod:`.scalar_promotion`) reads no iterator,
            def one(n: Expr) -> Expr | None:  # one in a ring (:mod:`.row_ring`) its row and column only
                if not isinstance(n, Access):
                    return None
                if self.held and element_key(n, self.env) in self.held:
                    return Const(0)
                ring = self.ringed.get(n.array)
                return None if ring is None else Access(n.array, (n.index[ring.row], n.index[-1]))
            return transform(e, one) if self.held or self.ringed else e
        used = var_names(printed(st.value), "iter") | (set() if redirected else var_names(printed(st.target), "iter"))
        binds = [f"const int64_t {cname(it)} = {index_expr(a).text};" for it, a in zip(st.iterators, args)
                 if it in used]
        target = dtypes.dtype(self.p.array(st.target.array).dtype)
        value = self.exprs.conv(st.value, target)
        if target in (dtypes.BFLOAT16, dtypes.FLOAT16):  # converted once: not rounded in float before
            value = value.unrounded or value
        if target is dtypes.BFLOAT16:
            value = call("pt__f32_to_bf16", value)
        elif target is dtypes.FLOAT16:
            value = C(f"(_Float16){value.at(15)}", 15)
        ref = redirected or self.array_ref(st.target).text
        return [f"{{ {comment(f'{st.name}: {st.text()}')}", *("  " + b for b in binds),
                f"  {ref} = {value.text};", "}"]


def _below(loop: For, bound: str) -> Expr:
    """``loop``'s counter below the C variable ``bound``."""
    return Binary("<", Var(loop.var, "iter"), Var(bound, "iter"))


def _prologue(pr: _Printer) -> None:
    """The first lines of a kernel function: its thread count, the arrays' shaped views, and ``(void)``
    for what it may leave unused."""
    pr.emit(1, "const int pt__threads = pt__num_threads > 0 ? pt__num_threads : omp_get_max_threads();"
            " (void)pt__threads;" if pr.opts.openmp else "(void)pt__num_threads;")
    pr.emit(1, f"(void){MIN_WORK};")
    for line in array_views(pr.p):
        pr.emit(1, line)
    for line in unused(pr.p, []):
        pr.emit(1, line)
    pr.hoist = Hoisted(len(pr.lines), argument_names(pr.p) | {"pt__threads", MIN_WORK})


def _versions(pr: _Printer, ast: If) -> None:
    """A kernel that carries two schedules (``schedule/choose.py``: an ``If`` on the sizes at the root of
    its loop AST) runs each from a function of its own, which gcc optimizes as it would alone: sharing
    one function with floyd-warshall's tiled version, its untiled loops ran 1.2x slower than the same
    loops compiled alone (95.7 against 78.9 ms at N = 500, one thread, load 0.5).  The functions are
    ``noinline``: gcc inlines a static function called once, and the two versions inlined into one function
    ran nussinov's tiled loops 2.7x slower than alone (38.5 against 14.0 ms at N = 500, AMD EPYC, one
    thread; floyd-warshall 74.3 against 55.1 ms)."""
    assert ast.orelse is not None
    args = arguments(pr.p) + ["pt__num_threads", MIN_WORK]
    calls = []
    for k, branch in enumerate((ast.then, ast.orelse)):
        version = _Printer(pr.p, pr.opts, f"{pr.function}_v{k}")
        pr.share(version)
        _prologue(version)
        version.node(branch, 1, False)
        assert version.hoist is not None
        version.hoist.splice(version.lines)
        pr.outlined += version.outlined
        pr.outlined.append(f"__attribute__((noinline)) static void {version.function}({', '.join(signature(pr.p))}) {{\n"
                           + "\n".join(version.lines) + "\n}\n")
        pr.take(version)
        pr.regions += version.regions
        calls.append(f"{version.function}({', '.join(args)});")
    pr.emit(1, f"if ({index_expr(ast.cond).text}) {{")
    pr.emit(2, calls[0])
    pr.emit(1, "} else {")
    pr.emit(2, calls[1])
    pr.emit(1, "}")


def generate_c(program: Program, ast: Node, *, function: str, options: CodegenOptions,
               seams: Mapping[int, Seams] | None = None) -> GeneratedC:
    """The complete C source of ``program`` scanned by ``ast``, as function ``function``, and the
    choices made on the way; ``seams``: the loops of ``ast`` that may run in blocks (:mod:`.seams`)."""
    pr = _Printer(program, options, function)
    pr.seams = dict(seams or {})
    pr.runs = run_counts(ast)
    pr.plan = plan_nests(ast, program, pr.exprs.t, microkernel=options.microkernel, simd=options.simd,
                         scratch=options.scratch)
    if options.simd:
        pr.streams = {k: v for root in outermost_loops(ast) for k, v in streamed_stores(root, program).items()}
    if isinstance(ast, If) and ast.orelse is not None:
        _versions(pr, ast)
    else:
        _prologue(pr)
        pr.node(ast, 1, False)
        assert pr.hoist is not None
        pr.hoist.splice(pr.lines)
    head = f"void {function}({', '.join(signature(program))})"
    body = "\n".join(pr.lines)
    banner = comment(f"polytri: program {program.name}, target cpu") + "\n"
    streams = pr.streamed or any(s.rings for s in pr.seamed)
    kernels = support_code(pr.contractions, simd=options.simd, fma=options.fma,
                           llc_bytes=cache_sizes()[3] if streams else None)
    outlined = "\n".join(pr.outlined)
    unique: list[Contraction] = []  # a nest inside a parallel loop is printed twice: outlined, and inline
    for c in pr.contractions:
        if c not in unique:
            unique.append(c)
    return GeneratedC(f"{banner}{prelude()}\n{kernels}{outlined}\n{head} {{\n{body}\n}}\n{slots_entry(program, function)}",
                      tuple(unique), frozenset(pr.localized), tuple(pr.regions), tuple(dict.fromkeys(pr.streamed)), tuple(pr.seamed))


__all__ = ["CodegenOptions", "GeneratedC", "generate_c"]
