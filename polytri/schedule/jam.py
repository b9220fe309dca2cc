"""Unroll-and-jam of latency-bound sums: several rows' chains of additions interleaved.

A sum kept in order, ``s[i] = s[i] + A[i, j] * x[j]`` over ``j``, is one chain of floating-point
additions: each waits for the one before (3-4 cycles), so the loop runs at one addition per latency
whatever the core's width, and it cannot be vectorized without reassociating the sum (which polytri
never does).  The rows ``i`` of such a sum are independent chains.  Unroll-and-jam runs :data:`JAM`
rows side by side: the row loop is strip-mined by ``JAM`` and the row within the block becomes the
innermost time dimension, ``t -> (.., floor(t / JAM), .., t mod JAM)``, which the printer unrolls.  Each
sum still adds its terms in order, so the results are bit for bit the loops'; the core overlaps the
``JAM`` chains (two additions per cycle times their latency: 6-8 in flight on current x86 cores).

The new schedule is proved legal with isl like every other.  Where the proof fails because rows read
results of earlier rows of the same block (a triangular solve), the instances it finds out of order run
after the block, in the input order (:func:`_peel`); otherwise the loop stays as it was.  The loop AST of
the jammed rows
is versioned per block: a block of ``JAM`` rows runs the unrolled copies, the last, partial block the
loops over its rows (:func:`unroll_blocks`).  The C printer then keeps each row's sum in a register for
the whole inner loop (``cpu_codegen/scalar_promotion.py``).

A loop is jammed where an innermost loop inside it carries a sum into an element that does not move with
that loop but does move with the jammed one (each row of the block has its own chain) and stores nothing
down a column (:func:`_streams`), and where every statement under it runs nowhere else, none is a
contraction the micro-kernel runs, and none writes a temporary the printer may keep in a buffer local to
one iteration of the loop.  Where the blocks, numbered, fall before statements that run at the same time
dimension (gramschmidt's norm of column ``k`` before its loop over the columns ``j > k``), they start at
the loop's lower bound instead (:func:`_from_start`).  Decision kind ``unroll-and-jam``, ``data``: the
jammed time dimension, the statements, the factor, the peeled instances (isl's text, or ``None``), where
the blocks start (isl's text, or ``None``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

import islpy as isl

from ..errors import NotAffineError
from ..ir.affine import linear, to_isl
from ..ir.expr import Access, Binary, Const, Expr, Var, accesses, conjunction, substitute, var_names
from ..ir.islutil import fix_params, maps, sets
from ..ir.program import Program, Statement
from ..pipeline.decisions import Decision
from .dependences import Dependences
from .legality import is_legal, violations
from .loop_ast import Block, For, If, Node, Run, build_loop_ast, loop_upper, run_counts, straight_runs, walk
from .schedule import Schedule, parallel_dimensions

log = logging.getLogger("polytri.schedule")

#: Rows run side by side: the latency of a floating-point addition (3-4 cycles) times the additions a
#: core starts per cycle (2), rounded to a power of two.  Measured on atax written by hand in C (AMD Zen 4,
#: one thread, the sums in locals): 4 rows ran 2.1x (LARGE) and 3.0x (MEDIUM) faster than the single
#: chain, 8 rows 2.5x and 3.0x.
JAM = 8


@dataclass(frozen=True, eq=False)
class Jam:
    """One loop whose rows run ``JAM`` at a time."""

    dim: int
    """The time dimension of the jammed loop (strip-mined in place)."""
    statements: frozenset[str]
    """The statements it encloses."""
    peeled: isl.UnionSet | None = None
    """Instances that run after the block's jammed ones, in the input order (:func:`_peel`)."""
    after: int = 0
    """The value of time dimension ``dim + 1`` from which the peeled instances run: one past every
    statement's constant there."""
    start: str | None = None
    """Where the blocks start (isl text in the outer time dimensions: the loop's lower bound), the block at
    ``dim`` being its first row's value; ``None``: blocks of multiples of :data:`JAM`, numbered."""

    def block(self) -> str:
        """isl text of the block of time dimension ``dim``'s value ``t<dim>``."""
        t = f"t{self.dim}"
        return f"floor({t}/{JAM})" if self.start is None else f"{self.start} + {JAM}*floor(({t} - ({self.start}))/{JAM})"

    def row(self) -> str:
        """isl text of the row within its block."""
        t = f"t{self.dim}"
        return f"{t} mod {JAM}" if self.start is None else f"({t} - ({self.start})) mod {JAM}"


def _sums(loop: For, statements: dict[str, Statement]) -> list[Access]:
    """The targets of the sums an innermost ``loop`` carries: a statement that reads its own target, an
    element that does not move with the loop's counter.  Subscripts in the enclosing loops' counters."""
    runs = straight_runs(loop.body)
    found: list[Access] = []
    for run in runs or ():
        st = statements[run.statement]
        env = dict(zip(st.iterators, run.args))
        target = Access(st.target.array, tuple(substitute(i, env) for i in st.target.index))
        if any(loop.var in var_names(i, "iter") for i in target.index):
            continue
        if any(a == st.target for a in accesses(st.value)):
            found.append(target)
    return found


def _streams(loop: For, statements: dict[str, Statement]) -> bool:
    """Whether every store of an innermost ``loop`` walks memory contiguously along it (its counter only
    in the last subscript, with a coefficient of at most 1) or stays put.  A strided store waits on a
    cache line of its own at each iteration: the jammed body, ``JAM`` times longer, keeps fewer of those
    misses in flight than the small loop did (gemver's update of a 2000 x 2000 matrix down its columns
    ran 1.08x-1.14x slower jammed in three one-thread runs).  Strided reads do not lose: mvt's column walk of its matrix
    ran 1.2x faster jammed (one thread and two)."""
    for run in straight_runs(loop.body) or ():
        st = statements[run.statement]
        env = dict(zip(st.iterators, run.args))
        for k, i in enumerate(st.target.index):
            lin = linear(substitute(i, env))
            step = None if lin is None else lin[0].get(loop.var, 0)
            if step is None or (step and (k != len(st.target.index) - 1 or abs(step) > 1)):
                return False
    return True


def _candidates(ast: Node, statements: dict[str, Statement]) -> list[For]:
    """The loops to jam: for each innermost chain of sums, the innermost enclosing loop whose counter
    moves the sum's element."""
    out: list[For] = []

    def visit(n: Node, path: tuple[For, ...]) -> None:
        if isinstance(n, Block):
            for c in n.body:
                visit(c, path)
        elif isinstance(n, If):
            visit(n.then, path)
            if n.orelse is not None:
                visit(n.orelse, path)
        elif isinstance(n, For):
            if n.innermost and not n.lanes and not n.parallel and _streams(n, statements):
                moved = {v for a in _sums(n, statements) for i in a.index for v in var_names(i, "iter")}
                outer = next((o for o in reversed(path) if o.var in moved), None)
                if outer is not None and all(outer is not o for o in out):
                    out.append(outer)
            else:
                visit(n.body, path + (n,))

    visit(ast, ())
    return out


def _jammed_map(schedule: isl.UnionMap, jams: Iterable[Jam], width: int) -> isl.UnionMap:
    """``schedule`` with one more time dimension: each jam's statements strip-mined at its dimension, the
    row in the block last; the other statements at 0 there.  A jam's peeled instances run after its block's
    others: row in the block at the next dimension, from ``after`` on, then their own dimensions."""
    where = {s: j for j in jams for s in j.statements}
    ts = [f"t{k}" for k in range(width)]
    out = isl.UnionMap.empty(schedule.get_space())

    def to(outs: list[str]) -> isl.UnionMap:
        return isl.UnionMap.from_map(isl.Map(f"{{ [{', '.join(ts)}] -> [{', '.join(outs)}] }}"))

    for m in maps(schedule):
        j = where.get(m.get_tuple_name(isl.dim_type.in_))
        um = isl.UnionMap.from_map(m)
        if j is None:
            out = out.union(um.apply_range(to(ts + ["0"])))
            continue
        d = j.dim
        block = ts[:d] + [j.block()]
        if j.peeled is not None:
            peeled = um.intersect_domain(j.peeled)
            out = out.union(peeled.apply_range(to(block + [f"{j.after} + ({j.row()})"] + ts[d + 1:])))
            um = um.subtract_domain(j.peeled)
        out = out.union(um.apply_range(to(block + ts[d + 1:] + [j.row()])))
    return out


def _constant(schedule: isl.UnionMap, names: frozenset[str], dim: int) -> list[int] | None:
    """The constant value of time dimension ``dim`` of each statement of ``names``, or ``None`` where one is
    not constant (a loop)."""
    out = []
    for m in maps(schedule):
        if m.get_tuple_name(isl.dim_type.in_) not in names:
            continue
        n = m.dim(isl.dim_type.out)
        r = m.range().project_out(isl.dim_type.set, dim + 1, n - dim - 1).project_out(isl.dim_type.set, 0, dim)
        r = r.project_out(isl.dim_type.param, 0, r.dim(isl.dim_type.param))
        if not r.is_singleton():
            return None
        out.append(int(r.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()))
    return out


def _from_start(schedule: isl.UnionMap, deps: Dependences, jams: list[Jam], jam: Jam, loop: For,
                width: int) -> Jam | None:
    """``jam`` with its blocks starting at ``loop``'s first row where that makes it legal, else ``None``.
    Blocks of multiples of :data:`JAM`, numbered, compare wrongly with the values other statements take
    at the same time dimension: gramschmidt's loop over the columns ``j > k`` shares its dimension with
    the statements that run at ``j = k`` before it (the column's norm), and numbering the blocks put the
    first block's sums before that norm.  Blocks that start at the loop's lower bound (an affine expression
    of the outer counters) keep their first row's value there."""
    names = {f"c{k}": Var(f"t{k}", "iter") for k in range(loop.dim)}
    if var_names(loop.lower, "param") or var_names(loop.lower, "scalar") or not var_names(loop.lower, "iter") <= set(names):
        return None
    try:
        start = to_isl(substitute(loop.lower, names), what="a jammed loop's start")
    except NotAffineError:
        return None
    trial = replace(jam, start=start)
    return trial if is_legal(_jammed_map(schedule, [*jams, trial], width), deps) else None


#: A peel is kept while, with every parameter at this value, it holds at most a quarter of the jammed
#: statements' instances.
PEEL_SAMPLE = 64


def _peel(program: Program, deps: Dependences, schedule: isl.UnionMap, jams: list[Jam], jam: Jam,
          width: int) -> Jam | None:
    """``jam`` with the instances that its proof finds out of order (a row reading an earlier row's result
    in the same block: trisolv's ``x[j]`` for ``j`` in the block) peeled: run after the block's jammed
    instances, in the input order.  Index-set splitting guided by the violated dependences: up to three
    rounds, each peeling what the one before still finds out of order.  ``None`` where a violation leaves
    the jam's statements, where the dimensions around the jammed one are not constants for them (the
    peeled instances need a place after the block, and no loop at the row dimension), where the peel is
    larger than a quarter of the instances at :data:`PEEL_SAMPLE`, or where three rounds do not make it
    legal."""
    before, last = _constant(schedule, jam.statements, jam.dim + 1), _constant(schedule, jam.statements, width - 1)
    if before is None or last is None or jam.dim + 1 >= width - 1:
        return None
    peeled = isl.UnionSet.empty(schedule.domain().get_space())
    for _ in range(3):
        trial = replace(jam, peeled=peeled, after=max(before) + 1)
        bad = violations(_jammed_map(schedule, [*jams, trial], width), deps)
        if bad.is_empty():
            return trial if _share(program, peeled, jam.statements) <= 0.25 else None
        involved = bad.domain().union(bad.range())
        if any(s.get_tuple_name() not in jam.statements for s in sets(involved)):
            return None
        peeled = peeled.union(involved).coalesce()
    return None


def _share(program: Program, peeled: isl.UnionSet, names: frozenset[str]) -> float:
    """The peeled instances' share of the statements' instances with every parameter at
    :data:`PEEL_SAMPLE` (1.0 where that size is outside the program's context)."""
    fixed = fix_params(program.context, dict.fromkeys(program.params, PEEL_SAMPLE))
    if fixed.is_empty():
        return 1.0

    def count(u: isl.UnionSet) -> int:
        return sum(s.intersect_params(fixed).count_val().to_python() for s in sets(u)
                   if s.get_tuple_name() in names)

    total = count(program.domain)
    return count(peeled) / total if total else 1.0


def jam_chains(program: Program, deps: Dependences, schedule: Schedule, ast: Node, *,
               exclude: frozenset[str] = frozenset(), buffered: frozenset[str] = frozenset()
               ) -> tuple[Schedule, Node, list[Decision]]:
    """Jam the loops around latency-bound sums (see the module's docstring) where isl proves it legal;
    ``exclude``: statements another mechanism runs (the micro-kernel's contractions); ``buffered``:
    temporaries the printer may hold in a buffer local to one iteration of a loop (a row of a softmax's
    exponentials), whose writers' loops are left alone.  Returns the new schedule, its versioned loop AST
    and one decision per jammed loop; unchanged inputs where none."""
    if schedule.tiled or schedule.alternative is not None:
        return schedule, ast, []
    statements = {s.name: s for s in program.statements}
    counts = run_counts(ast)
    width = schedule.ndim
    jams: list[Jam] = []
    for loop in _candidates(ast, statements):
        inside = run_counts(loop)
        names = frozenset(inside)
        if (names & exclude or any(counts[s] != inside[s] for s in names)
                or any(statements[s].target.array in buffered for s in names)):
            continue
        jam = Jam(loop.dim, names)
        if not is_legal(_jammed_map(schedule.map, [*jams, jam], width), deps):
            mended = _from_start(schedule.map, deps, jams, jam, loop, width) or _peel(program, deps, schedule.map,
                                                                                     jams, jam, width)
            if mended is None:
                log.info("%s: jamming loop c%d over %s fails the legality proof", program.name, loop.dim,
                         sorted(names))
                continue
            jam = mended
        jams.append(jam)
    if not jams:
        return schedule, ast, []
    new_map = _jammed_map(schedule.map, jams, width)
    decisions = [Decision("schedule", "unroll-and-jam", f"loop c{j.dim}",
                          f"unroll-and-jam: the rows of loop c{j.dim} ({', '.join(sorted(j.statements))}) run "
                          f"{JAM} at a time, their sums' chains of additions interleaved (each sum still in order)"
                          + ("" if j.start is None else f"; the blocks start at the loop's first row, {j.start}")
                          + ("" if j.peeled is None else f"; the instances that read a result of the same block "
                             f"run after it, in the input order: {j.peeled}"),
                          {"dim": j.dim, "statements": tuple(sorted(j.statements)), "factor": JAM,
                           "peeled": None if j.peeled is None else str(j.peeled), "start": j.start})
                 for j in jams]
    for d in decisions:
        log.info("%s: %s", program.name, d)
    # the bands and rows described the map before: the explain table reads the new one from isl
    jammed = replace(schedule, map=new_map, parallel=parallel_dimensions(new_map, deps),
                     scalar=schedule.scalar + (False,) if schedule.scalar else (), bands=(), rows=(),
                     decisions=schedule.decisions + tuple(decisions))
    new_ast = build_loop_ast(program, jammed, deps, separate_guards=True)
    return jammed, unroll_blocks(new_ast, jams, width), decisions


def unroll_blocks(ast: Node, jams: Iterable[Jam], row_dim: int) -> Node:
    """The loop AST of a jammed schedule with each jammed loop's body versioned: where every loop over
    the block's rows (time dimension ``row_dim``) runs all ``JAM`` rows, those loops are unrolled;
    elsewhere (a last, partial block) the body stays as it was."""
    jams = tuple(jams)

    def rewrite(n: Node) -> Node:
        if isinstance(n, Block):
            return Block(tuple(rewrite(c) for c in n.body))
        if isinstance(n, If):
            return If(n.cond, rewrite(n.then), None if n.orelse is None else rewrite(n.orelse))
        if isinstance(n, For):
            if any(n.dim == j.dim and set(run_counts(n)) <= j.statements for j in jams):
                tests: list[Expr] = []
                full = _unroll(n.body, row_dim, frozenset(), tests)
                if full is None or not tests:
                    return n
                test = conjunction(list(dict.fromkeys(tests)))  # each row loop's test, once
                assert test is not None
                return replace(n, body=If(test, full, n.body))
            return replace(n, body=rewrite(n.body))
        return n

    return rewrite(ast)


def _unroll(n: Node, row_dim: int, inner: frozenset[str], tests: list[Expr]) -> Node | None:
    """``n`` with each loop over the rows unrolled into ``JAM`` copies, the tests that make it run exactly
    ``JAM`` rows added to ``tests``; ``None`` where a row loop's bounds depend on a loop inside the jammed
    one (``inner``: their counters) or are not ``var < bound``."""
    if isinstance(n, Run):
        return n
    if isinstance(n, Block):
        parts = [_unroll(c, row_dim, inner, tests) for c in n.body]
        return None if any(p is None for p in parts) else Block(tuple(p for p in parts if p is not None))
    if isinstance(n, If):
        then = _unroll(n.then, row_dim, inner, tests)
        orelse = None if n.orelse is None else _unroll(n.orelse, row_dim, inner, tests)
        return None if then is None or (n.orelse is not None and orelse is None) else If(n.cond, then, orelse)
    if n.dim == row_dim:
        upper = loop_upper(n)
        if upper is None or n.step != 1 or (var_names(n.lower, "iter") | var_names(upper, "iter")) & inner:
            return None
        tests.append(Binary(">=", upper, Const(JAM)))
        if n.lower != Const(0):
            tests.append(Binary("<=", n.lower, Const(0)))
        return Block(tuple(_at(n.body, n.var, k) for k in range(JAM)))
    body = _unroll(n.body, row_dim, inner | {n.var}, tests)
    if body is None:
        return None
    innermost = not any(isinstance(m, For) for m in walk(body))
    return replace(n, body=body, innermost=innermost, lanes=n.lanes or (innermost and n.parallel))


def _at(n: Node, var: str, value: int) -> Node:
    """``n`` with the loop counter ``var`` replaced by ``value``."""
    env = {var: Const(value)}
    if isinstance(n, Run):
        return Run(n.statement, tuple(substitute(a, env) for a in n.args))
    if isinstance(n, Block):
        return Block(tuple(_at(c, var, value) for c in n.body))
    if isinstance(n, If):
        return If(substitute(n.cond, env), _at(n.then, var, value),
                  None if n.orelse is None else _at(n.orelse, var, value))
    return replace(n, lower=substitute(n.lower, env), cond=substitute(n.cond, env),
                   body=_at(n.body, var, value))

