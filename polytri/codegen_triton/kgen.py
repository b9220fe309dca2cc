"""Device code: the body of one Triton kernel, printed from a piece of the loop AST.

A kernel runs one *launch* of the host plan (see :mod:`.host`).  Its grid loops are parallel loops: the
outer ones give one program per iteration, the innermost one or two are strip-mined into blocks of
lanes (``tl.arange``), each lane one iteration.  Running the iterations of a parallel loop in lockstep
is legal because no dependence is carried between them.  Everything below the grid loops runs inside
each program: loops as ``for`` loops over scalars, guards that depend on a block dimension as masks,
other guards as ``if``.  A mask (``pt__m<k>``) is always a full block; loads and stores take it, so a
lane outside the iteration domain touches no memory.  Reduction loops become chunked ``tl.sum`` /
``tl.max`` / ``tl.min`` and contractions ``tl.dot`` (see :mod:`.reduction`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .. import dtypes
from ..dtypes import INT64, DType
from ..errors import UnsupportedError
from ..ir.expr import Access, Expr, accesses, substitute, var_names
from ..ir.program import Program
from ..ir.reduction import NAN_EXTREMES, OPERATIONS
from ..ir.types import Typer
from ..schedule.loop_ast import Block, For, If, Node, Run, loop_upper
from .block_fit import dot_k_block
from .index_width import MAX_CHUNK
from .reduction import Contraction, Reduction, SumPlan
from .store_buffer import StoreBuffer
from .target import LaunchModel
from .texpr import TL_TYPES, TritonExprPrinter, array_offset, index_text, user

#: Row and column broadcasting of a counter (or mask) in a block of rank 1, 2 and 3.
_AXIS = {(1, 0): "", (2, 0): "[:, None]", (2, 1): "[None, :]",
         (3, 0): "[:, None, None]", (3, 1): "[None, :, None]", (3, 2): "[None, None, :]"}


@dataclass(frozen=True)
class KernelSpec:
    """One kernel of the host plan."""

    name: str
    """Python name of the kernel function."""
    chain: tuple[For, ...]
    """Grid loops, outermost first (empty: a single program)."""
    vector: tuple[int, ...]
    """Block side of each of the innermost ``len(vector)`` grid loops (0, 1 or 2 of them)."""
    body: Node
    """What each program runs (inside the grid loops)."""
    host_counters: tuple[str, ...]
    """Counters of the host loops enclosing the launch, passed as arguments."""
    flattened: tuple[int, ...] = ()
    """Indices in ``chain`` of the loops folded into grid axis 2 (more than three grid loops)."""


@dataclass
class _Ctx:
    """What the printer knows at a point of the kernel body."""

    mask: str | None
    """The current mask (full block), or ``None`` in a single-program kernel."""
    names: dict[str, str] = field(default_factory=dict)
    """Text of each counter in scope."""
    zero: str = "pt__zero"
    """A block of int32 zeros of the current shape (added to pointers that vary along fewer axes)."""
    lanes: dict[str, str] | None = None
    """Of a rectangular block, the mask's condition on each axis's counter alone (else ``None``)."""


def upper_exclusive(loop: For) -> Expr:
    """``u`` such that ``loop`` runs while ``var < u``."""
    u = loop_upper(loop)
    if u is None:
        raise UnsupportedError(f"loop condition {loop.cond} is not a bound on {loop.var}")
    return u


def _loop_range(loop: For) -> tuple[Expr, Expr]:
    return loop.lower, upper_exclusive(loop)


class KernelPrinter:
    """Prints one kernel of a program; :meth:`source` returns the function text."""

    def __init__(self, program: Program, spec: KernelSpec, typer: Typer, model: LaunchModel, *,
                 sums: SumPlan, bf16_as_f32: bool, fp32_dot: str, private: frozenset[str] = frozenset(),
                 index: str = "int32"):
        self.p = program
        self.sums = sums
        """Which loops run their sums on ``tl.dot`` or as block reductions (:func:`.reduction.sum_plan`),
        decided before printing."""
        self.index = index
        """The integer type of counters, bounds and offsets: ``int32`` or ``int64`` (see :mod:`.index_width`)."""
        self.spec = spec
        self.t = typer
        self.model = model
        self.bf16 = bf16_as_f32
        self.fp32_dot = fp32_dot
        self.lines: list[str] = []
        self.n = 0
        self.rank = len(spec.vector)
        self.vec_axis: dict[str, int] = {
            loop.var: i for i, loop in enumerate(spec.chain[len(spec.chain) - self.rank:])}
        self.shape = tuple(spec.vector)
        written = {st.target.array for st in program.statements}
        self.stores = StoreBuffer(self.emit, private, frozenset(
            a.array for st in program.statements for a in st.reads if a.array in written))
        """The held stores and the values later statements read from registers (see :mod:`.store_buffer`)."""

    # --- helpers ----------------------------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"pt__{stem}{self.n}"

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def emit_mask(self, depth: int, name: str, conjunction: str) -> None:
        """``name = conjunction``, as a boolean block: Triton 3.9's interpreter turns ``block & scalar``
        of booleans into int32, which ``tl.load`` rejects as a mask; ``!= 0`` makes it boolean again."""
        self.emit(depth, f"{name} = ({conjunction}) != 0")

    def vector_in(self, e: Expr) -> set[str]:
        return var_names(e, "iter") & set(self.vec_axis)

    def printer(self, ctx: _Ctx, mask: str | None) -> TritonExprPrinter:
        names, zero = ctx.names, ctx.zero

        def load(acc: Access) -> str:
            ptr = self.pointer(acc, names, zero, lambda e: printer.conv(e, INT64))
            known = self.stores.load(acc.array, ptr, mask, lanes=bool(self.rank))
            if known is not None:
                return known  # the value this program stored there last (an epilogue reads its accumulator)
            return f"tl.load({ptr}, mask={mask}, other=0)" if mask else f"tl.load({ptr})"
        printer = TritonExprPrinter(self.t, load, names, bf16_as_f32=self.bf16, index=self.index)
        return printer

    def pointer(self, acc: Access, names: dict[str, str], zero: str | None,
                indirect: Callable[[Expr], str] | None = None) -> str:
        """Address(es) of ``acc``; ``+ zero`` makes a full block of pointers, to match the mask, when the
        access does not vary along every axis of the block.  ``indirect`` prints indirect subscripts (the
        loads of their index arrays under the same mask: a masked lane gets index 0, and no load)."""
        arr = self.p.array(acc.array)
        ptr = f"{user(acc.array)} + {array_offset(acc, arr.shape, names, indirect)}"
        if zero and self.vector_in(acc) != set(self.vec_axis):
            ptr += f" + {zero}"
        return ptr

    @contextlib.contextmanager
    def chunk(self, loop: For, side: int, depth: int, ctx: _Ctx, base: str) -> Iterator[_Ctx]:
        """The body of ``for base in range(..., side)``: ``side`` iterations of ``loop`` at once along a
        new innermost block axis; yields the context (widened counters, mask, zeros) of that body."""
        r = self.rank
        widen = f"[{', '.join([':'] * r)}, None]" if r else ""
        names = {**ctx.names, **{c: f"{c}{widen}" for c in self.vec_axis}}
        kk, zero, mk = self.fresh("kk"), self.fresh("zero"), self.fresh("m")
        names[loop.var] = kk
        self.emit(depth, f"{kk} = {base} + {self.lanes(side)}{_AXIS[(r + 1, r)] if r else ''}")
        self.emit(depth, f"{zero} = tl.zeros(({', '.join(map(str, self.shape + (side,)))},), tl.int32)")
        guard = self.loop_guard(loop, names)
        self.emit_mask(depth, mk, f"{ctx.mask}{widen} & {guard}" if ctx.mask else f"({zero} == 0) & {guard}")
        saved = (self.vec_axis, self.rank, self.shape)
        self.vec_axis = {**self.vec_axis, loop.var: r}
        self.rank, self.shape = r + 1, self.shape + (side,)
        try:
            yield _Ctx(mk, names, zero)
        finally:
            self.vec_axis, self.rank, self.shape = saved

    def chunk_side(self) -> int:
        """Iterations of a loop run at once inside a block: about 4096 elements per chunk."""
        size = 1
        for s in self.shape:
            size *= s
        side = 1
        while side * 2 * size <= 4096 and side < MAX_CHUNK:
            side *= 2
        return max(side, 2)

    def dtype(self, name: str) -> DType:
        return dtypes.dtype(self.p.array(name).dtype)

    # --- kernel -----------------------------------------------------------------------------------
    def source(self) -> str:
        spec = self.spec
        self.emit(0, f"def {spec.name}({', '.join(kernel_parameters(self.p, spec))}):")
        for s in self.p.scalars:
            self.emit(1, f"{user(s.name)} = tl.load(pt__s_{s.name})")
        # integer arguments as values of the index type, not Python ints (the interpreter passes them as
        # such, and a comparison of two Python ints would be a Python bool, which does not combine with a
        # mask); the GPU passes them as int32 or int64 by value
        ints = [user(p) for p in self.p.params] + list(spec.host_counters)
        ints += [f"pt__lo{loop.dim}" for loop in spec.chain] + [f"pt__n{spec.chain[i].dim}" for i in spec.flattened]
        for name in ints:
            self.emit(1, f"{name} = {name} + tl.zeros((), tl.{self.index})")
        ctx = _Ctx(mask=None, names={})
        depth = self.grid(ctx)
        self.node(spec.body, depth, ctx)
        self.flush(final=True)
        return "\n".join(self.lines) + "\n"

    def grid(self, ctx: _Ctx) -> int:
        """Counters of the grid loops, their guards, the initial mask; returns the body's depth."""
        spec, depth = self.spec, 1
        chain = list(spec.chain)
        axis_of = {}
        unflat = [i for i in range(len(chain)) if i not in spec.flattened]
        for a, i in enumerate(reversed(unflat)):
            axis_of[i] = a
        if spec.flattened:
            self.emit(depth, f"pt__pid = {self.program_id(2)}")
            for i in reversed(spec.flattened):
                d = chain[i].dim
                self.emit(depth, f"pt__p{d} = pt__pid % pt__n{d}")
                self.emit(depth, f"pt__pid = pt__pid // pt__n{d}")
        conds: list[str] = []
        lanes: dict[str, str] | None = {}
        for i, loop in enumerate(chain):
            pid = f"pt__p{loop.dim}" if i in spec.flattened else self.program_id(axis_of[i])
            if loop.var in self.vec_axis:
                ax = self.vec_axis[loop.var]
                side = spec.vector[ax]
                self.emit(depth, f"{loop.var} = pt__lo{loop.dim} + {pid} * {side} + "
                                 f"tl.arange(0, {side}){_AXIS[(self.rank, ax)]}")
                conds.append(self.loop_guard(loop, ctx.names))
                if lanes is not None and not any(map(self.vector_in, _loop_range(loop))):
                    lanes[loop.var] = conds[-1]
                else:
                    lanes = None
                ctx.names[loop.var] = loop.var
            else:
                self.emit(depth, f"{loop.var} = pt__lo{loop.dim} + {pid}")
                ctx.names[loop.var] = loop.var
                self.emit(depth, f"if {self.loop_guard(loop, ctx.names)}:")
                depth += 1
        if self.rank:
            shape = ", ".join(map(str, self.shape))
            self.emit(depth, f"pt__zero = tl.zeros(({shape},), tl.int32)")
            ctx.mask = self.fresh("m")
            ctx.lanes = lanes
            self.emit_mask(depth, ctx.mask, " & ".join(["(pt__zero == 0)"] + conds))
        return depth

    def program_id(self, axis: int) -> str:
        """The program's index along a grid axis, in the index type (Triton's is int32)."""
        return f"tl.program_id({axis})" if self.index == "int32" else f"tl.program_id({axis}).to(tl.int64)"

    def lanes(self, side: int) -> str:
        """``side`` consecutive offsets from 0, in the index type.  A ``for k in range(lo, hi, side)`` counter
        is a Python int in Triton's interpreter, and a Python int plus an int32 ``tl.arange`` is computed in
        int32 there: in the int64 variant, the offsets must be int64 themselves."""
        return f"tl.arange(0, {side})" if self.index == "int32" else f"tl.arange(0, {side}).to(tl.int64)"

    def sentinel(self, reduce: str) -> str:
        """The identity of a ``min`` / ``max`` over the lanes of index values (no lane active)."""
        top = 2**31 - 1 if self.index == "int32" else 2**63 - 1
        return str(top) if reduce == "min" else str(-top)

    def loop_guard(self, loop: For, names: dict[str, str]) -> str:
        lo, hi = _loop_range(loop)
        c = names.get(loop.var, loop.var)
        text = f"({c} >= {index_text(lo, names)}) & ({c} < {index_text(hi, names)})"
        if loop.step != 1:
            text += f" & (pt__mod({c} - {index_text(lo, names)}, {loop.step}) == 0)"
        return text

    # --- body ---------------------------------------------------------------------------------------
    def node(self, n: Node, depth: int, ctx: _Ctx) -> None:
        if isinstance(n, Block):
            for c in n.body:
                self.node(c, depth, ctx)
        elif isinstance(n, If):
            self.guard(n, depth, ctx)
        elif isinstance(n, For):
            self.loop(n, depth, ctx)
        elif isinstance(n, Run):
            self.run(n, depth, ctx)
        else:
            raise TypeError(n)

    def guard(self, n: If, depth: int, ctx: _Ctx) -> None:
        cond = index_text(n.cond, ctx.names)
        if not self.vector_in(n.cond):
            self.flush()
            self.emit(depth, f"if {cond}:")
            self.node(n.then, depth + 1, ctx)
            self.flush()
            if n.orelse is not None:
                self.emit(depth, "else:")
                self.node(n.orelse, depth + 1, ctx)
                self.flush()
            return
        m = self.fresh("m")
        self.emit_mask(depth, m, f"{ctx.mask} & {cond}")
        self.node(n.then, depth, _Ctx(m, ctx.names, ctx.zero))
        if n.orelse is not None:
            m2 = self.fresh("m")
            self.emit_mask(depth, m2, f"{ctx.mask} & ~{m}")
            self.node(n.orelse, depth, _Ctx(m2, ctx.names, ctx.zero))

    def scalar_bound(self, e: Expr, ctx: _Ctx, reduce: str, depth: int) -> str:
        """A scalar bound of a loop: ``e`` itself, or its min / max over the block's active lanes (an
        empty range when no lane is active)."""
        text = index_text(e, ctx.names)
        if not self.vector_in(e):
            return text
        v = self.fresh("b")
        self.emit(depth, f"{v} = tl.{reduce}(tl.where({ctx.mask}, {text}, {self.sentinel(reduce)}), axis=None)")
        return v

    def loop(self, n: For, depth: int, ctx: _Ctx) -> None:
        con = self.sums.dots.get(id(n))
        if con is not None:
            assert self.rank == 2  # a 2-D launch, or a chunk of a product's columns
            rows, cols = sorted(self.vec_axis, key=self.vec_axis.__getitem__)
            self.contraction(con, rows, cols, depth, ctx)
            return
        reds = self.sums.reductions.get(id(n))
        if reds:
            self.reduction(list(reds), depth, ctx)
            return
        self.flush()
        lo, hi = _loop_range(n)
        lo_t = self.scalar_bound(lo, ctx, "min", depth)
        hi_t = self.scalar_bound(hi, ctx, "max", depth)
        columns = id(n) in self.sums.columns
        if columns or (n.parallel and n.innermost and n.step == 1 and self.rank < 3):
            # a parallel innermost loop: chunks of its iterations along a new block axis; a parallel loop
            # around a contraction over (block rows, its iterations): chunks of tl.dot's column side
            side, kb = (self.model.dot_block[1] if columns else self.chunk_side()), self.fresh("k")
            self.emit(depth, f"for {kb} in range({lo_t}, {hi_t}, {side}):")
            with self.chunk(n, side, depth + 1, ctx, kb) as inner:
                self.node(n.body, depth + 1, inner)
                self.flush()
            return
        self.emit(depth, f"for {n.var} in range({lo_t}, {hi_t}, {n.step}):")
        names = dict(ctx.names)
        names[n.var] = n.var
        inner = _Ctx(ctx.mask, names, ctx.zero, ctx.lanes)
        if self.vector_in(lo) or self.vector_in(hi):
            inner.mask, inner.lanes = self.fresh("m"), None
            self.emit_mask(depth + 1, inner.mask, f"{ctx.mask} & {self.loop_guard(n, names)}")
        self.node(n.body, depth + 1, inner)
        self.flush()

    def store(self, depth: int, target: Access, value: str, mask: str | None, ctx: _Ctx) -> None:
        """Store ``value``: held back until something else needs memory (see :mod:`.store_buffer`)."""
        v = self.fresh("v")
        self.emit(depth, f"{v} = {value}")
        self.stores.store(depth, target.array, self.pointer(target, ctx.names, ctx.zero), mask, v,
                          lanes=bool(self.rank))

    def flush(self, array: str | None = None, final: bool = False) -> None:
        """Print the held stores (of ``array`` only); with no ``array``, the end of a straight-line stretch
        (:meth:`.StoreBuffer.flush`)."""
        self.stores.flush(array, lanes=bool(self.rank), final=final)

    def run(self, n: Run, depth: int, ctx: _Ctx) -> None:
        st = self.p.statement(n.statement)
        env = dict(zip(st.iterators, n.args))
        target = substitute(st.target, env)
        value = substitute(st.value, env)
        assert isinstance(target, Access)
        self.emit(depth, f"# {st.name}: {st.text()}")
        text = self.printer(ctx, ctx.mask).conv(value, self.dtype(target.array))
        self.store(depth, target, text, ctx.mask, ctx)

    # --- reductions --------------------------------------------------------------------------------
    def _identity(self, op: str, d: DType) -> str:
        """The operation's identity (:data:`polytri.ir.reduction.OPERATIONS`) as a value of ``d``."""
        identity = OPERATIONS[op].identity
        if identity == "zero":
            return "0"
        if d.kind == "f":
            return 'float("-inf")' if identity == "lowest" else 'float("inf")'
        lim = 2 ** (d.bits - 1)
        return str(-lim if identity == "lowest" else lim - 1)

    def _combine(self, op: str, a: str, b: str) -> str:
        """``a op b``; the NaN-propagating forms keep ``a`` when it is NaN and give ``b`` when ``b`` is."""
        if op in NAN_EXTREMES:
            return f"tl.where({a} {NAN_EXTREMES[op]} {b}, {a}, tl.where({a} != {a}, {a}, {b}))"
        return {"+": f"{a} + {b}", "-": f"{a} + {b}", "max": f"tl.maximum({a}, {b})",
                "min": f"tl.minimum({a}, {b})"}[op]

    def _chunk_part(self, op: str, term: str, mask: str, d: DType, axis: int, depth: int) -> str:
        """The reduction of a chunk of terms along ``axis`` (masked-off lanes give the identity); for the
        NaN-propagating forms, NaN when any active term is NaN, whatever ``tl.max`` does with NaN."""
        ident = self._identity(op, d)
        if op in ("+", "-"):
            return f"tl.sum(tl.where({mask}, {term}, {ident}), axis={axis})"
        base = OPERATIONS[op].base
        if op == base or d.kind != "f":
            return f"tl.{base}(tl.where({mask}, {term}, {ident}), axis={axis})"
        t = self.fresh("t")
        self.emit(depth, f"{t} = {term}")
        nan = f"tl.max(tl.where({mask} & ({t} != {t}), 1, 0), axis={axis}) > 0"
        # the NaN literal is a Python float: the select would widen a 16-bit chunk to float32, and the
        # accumulator (of the chunk's type) would change type inside its loop, which Triton's compiler
        # rejects (its interpreter does not)
        tl_d = TritonExprPrinter(self.t, str, {}, bf16_as_f32=self.bf16).tl_type(d)
        return (f"tl.where({nan}, float(\"nan\"), tl.{base}(tl.where({mask}, {t}, {ident}), axis={axis}))"
                f".to({tl_d})")

    def reduction(self, reds: list[Reduction], depth: int, ctx: _Ctx) -> None:
        """``T op= f`` over a loop (several statements sharing it: one pass): chunks (:meth:`chunk_side`)
        iterations reduced along a new innermost axis."""
        for name in {a.array for red in reds for a in accesses(red.term)}:
            self.flush(name)
        loop, r = reds[0].loop, self.rank
        lo, hi = _loop_range(loop)
        rb = self.chunk_side()
        lo_t = self.scalar_bound(lo, ctx, "min", depth)
        hi_t = self.scalar_bound(hi, ctx, "max", depth)
        shape = f"({', '.join(map(str, self.shape))},)" if r else "()"
        accs = []
        for red in reds:
            d = self.t(red.value).dtype
            tl_d = TritonExprPrinter(self.t, str, {}, bf16_as_f32=self.bf16).tl_type(d)
            acc = self.fresh("acc")
            accs.append((red, acc, d))
            self.emit(depth, f"# {red.statement.name}: {red.statement.text()}  (reduction over {loop.var})")
            self.emit(depth, f"{acc} = tl.full({shape}, {self._identity(red.op, d)}, {tl_d})")
        kb = self.fresh("k")
        self.emit(depth, f"for {kb} in range({lo_t}, {hi_t}, {rb}):")
        with self.chunk(loop, rb, depth + 1, ctx, kb) as inner:
            mask = inner.mask
            assert mask is not None, "a chunk always has its mask"
            for red, acc, d in accs:
                term = self.printer(inner, mask).conv(red.term, d)
                part = self._chunk_part(red.op, term, mask, d, r, depth + 1)
                self.emit(depth + 1, f"{acc} = {self._combine(red.op, acc, part)}")
        for red, acc, d in accs:
            self.finish(red, acc, d, lo, hi, depth, ctx)

    def finish(self, red: Reduction, acc: str, d: DType, lo: Expr, hi: Expr, depth: int, ctx: _Ctx) -> None:
        """``T = T op acc`` for the lanes whose loop ran at least once."""
        ran = f"({index_text(lo, ctx.names)} < {index_text(hi, ctx.names)})"
        vector = bool(self.vector_in(lo) or self.vector_in(hi))
        inside = ctx.mask is None
        if inside:  # one program, scalars: a plain if
            self.flush()
            self.emit(depth, f"if {ran}:")
            depth += 1
            mask = None
        elif vector:
            mask = self.fresh("m")
            self.emit_mask(depth, mask, f"{ctx.mask} & {ran}")
        else:
            mask = ctx.mask  # the mask of the statements around: an epilogue can read the result
        pr = self.printer(ctx, mask)
        stored = self.dtype(red.target.array)
        old_v = self.fresh("old")
        self.emit(depth, f"{old_v} = {pr.conv(red.target, stored)}")
        old = pr.cast(old_v, stored, d)
        new = f"({old} - {acc})" if red.op == "-" else f"({self._combine(red.op, old, acc)})"
        new = pr.cast(pr.rnd(d, new), d, stored)
        if not inside and not vector:
            new = f"tl.where({ran}, {new}, {old_v})"  # an empty loop leaves the element as it was
        self.store(depth, red.target, new, mask, ctx)
        if inside:
            self.flush()

    def contraction(self, con: Contraction, rows: str, cols: str, depth: int, ctx: _Ctx) -> None:
        """``C[a, b] += s * X[a, k] * Y[k, b]``: ``tl.dot`` of (rows x K) and (K x cols) tiles."""
        red, loop = con.reduction, con.reduction.loop
        for name in {con.x.array, con.y.array} | {a.array for s in con.scale for a in accesses(s)}:
            self.flush(name)
        d = self.t(red.value).dtype
        lo, hi = _loop_range(loop)
        bk = dot_k_block(lo, hi, self.model.dot_block[2])
        b0, b1 = self.shape
        pr = TritonExprPrinter(self.t, str, {}, bf16_as_f32=self.bf16)
        acc_t, op_t = TL_TYPES[con.accumulator.name], pr.tl_type(con.operand)
        self.emit(depth, f"# {red.statement.name}: {red.statement.text()}  (contraction over {loop.var}: tl.dot)")
        rv, cv = self.fresh("rows"), self.fresh("cols")
        self.operand_lanes(rv, cv, rows, cols, depth, ctx)
        lo_t = self.scalar_bound(lo, ctx, "min", depth)
        hi_t = self.scalar_bound(hi, ctx, "max", depth)
        # bounds of k that vary with the other tile's dimension: per row (column) of a tile, the range of
        # its active lanes, so that every element loaded belongs to a statement instance
        bound_dims = self.vector_in(lo) | self.vector_in(hi)
        ranges: dict[str, tuple[str, str]] = {}
        for which, other, axis, widen in (("x", cols, 1, "[:, None]"), ("y", rows, 0, "[None, :]")):
            if other in bound_dims:
                lo_r, hi_r = self.fresh("lo"), self.fresh("hi")
                self.emit(depth, f"{lo_r} = tl.min(tl.where({ctx.mask}, {index_text(lo, ctx.names)}, "
                                 f"{self.sentinel('min')}), axis={axis}){widen}")
                self.emit(depth, f"{hi_r} = tl.max(tl.where({ctx.mask}, {index_text(hi, ctx.names)}, "
                                 f"{self.sentinel('max')}), axis={axis}){widen}")
                ranges[which] = (lo_r, hi_r)
        acc, kb = self.fresh("acc"), self.fresh("k")
        self.emit(depth, f"{acc} = tl.zeros(({b0}, {b1}), {acc_t})")
        self.emit(depth, f"for {kb} in range({lo_t}, {hi_t}, {bk}):")
        kx, ky = self.fresh("kx"), self.fresh("ky")
        self.emit(depth + 1, f"{kx} = {kb} + {self.lanes(bk)}[None, :]")
        self.emit(depth + 1, f"{ky} = {kb} + {self.lanes(bk)}[:, None]")
        tiles = []
        for operand, kname, valid, which in ((con.x, kx, rv, "x"), (con.y, ky, cv, "y")):
            names = {**ctx.names, loop.var: kname}
            ptr = self.pointer(operand, names, None)
            tile = self.fresh("t")
            tmask = self.fresh("m")
            if which in ranges:
                guard = f"({kname} >= {ranges[which][0]}) & ({kname} < {ranges[which][1]})"
            else:
                guard = self.loop_guard(loop, names)
            self.emit_mask(depth + 1, tmask, f"{valid} & {guard}")
            self.stores.loaded_tile(operand.array)
            self.emit(depth + 1, f"{tile} = tl.load({ptr}, mask={tmask}, other=0)")
            tiles.append(tile if pr.tl_type(self.dtype(operand.array)) == op_t else f"{tile}.to({op_t})")
        precision = f", input_precision=\"{self.fp32_dot}\"" if con.operand.kind == "f" and con.operand.bits >= 32 else ""
        self.emit(depth + 1, f"{acc} = tl.dot({tiles[0]}, {tiles[1]}, {acc}, out_dtype={acc_t}{precision})")
        term_t = self.t(red.term).dtype
        total = pr.cast(acc, con.accumulator, term_t)
        for s in con.scale:
            total = pr.rnd(term_t, f"({total} * {self.printer(ctx, ctx.mask).conv(s, term_t)})")
        out = self.fresh("dot")
        self.emit(depth, f"{out} = {pr.cast(total, term_t, d)}")
        self.finish(red, out, d, lo, hi, depth, ctx)

    def operand_lanes(self, rv: str, cv: str, rows: str, cols: str, depth: int, ctx: _Ctx) -> None:
        """``rv`` / ``cv``: the block's rows / columns with an active lane.  Of a rectangular block, the rows' and
        columns' own tests, constant over runs of lanes for Triton: the operand loads vectorize."""
        if ctx.lanes is not None and rows in ctx.lanes and cols in ctx.lanes:
            row, col = ctx.lanes[rows], ctx.lanes[cols]
            self.emit(depth, f"{rv} = ({row}) & (tl.max(({col}).to(tl.int32)) > 0)")
            self.emit(depth, f"{cv} = ({col}) & (tl.max(({row}).to(tl.int32)) > 0)")
            return
        self.emit(depth, f"{rv} = tl.max({ctx.mask}.to(tl.int32), axis=1)[:, None] > 0")
        self.emit(depth, f"{cv} = tl.max({ctx.mask}.to(tl.int32), axis=0)[None, :] > 0")


def kernel_parameters(program: Program, spec: KernelSpec) -> list[str]:
    """Arguments of a kernel, in order: arrays, scalars (1-element arrays), parameters, host counters,
    the lowest value of each grid loop, and the trip counts of flattened grid loops."""
    out = [user(a.name) for a in program.arrays]
    out += [f"pt__s_{s.name}" for s in program.scalars]
    out += [user(p) for p in program.params]
    out += list(spec.host_counters)
    out += [f"pt__lo{loop.dim}" for loop in spec.chain]
    out += [f"pt__n{spec.chain[i].dim}" for i in spec.flattened]
    return out
