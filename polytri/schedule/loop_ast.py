"""One loop AST for every printer: isl's AST generator, converted to frozen dataclasses.

Loop counters are named ``c<k>`` after the time dimension ``k`` they scan, which is how a loop finds
its facts (parallel or not) in the :class:`~polytri.schedule.schedule.Schedule`.  Expressions reuse the
IR's expression nodes; the loop AST adds the operators ``and`` and ``or`` to :class:`Binary`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

import islpy as isl

from ..ir.expr import Binary, Call, Const, Expr, Unary, Var, var_names
from ..ir.islutil import maps
from ..ir.program import Program
from .dependences import Dependences
from .schedule import Schedule, carries, loop_is_parallel, time_dependences


@dataclass(frozen=True, slots=True)
class For:
    """``for (var = lower; cond; var += step) body``."""

    var: str
    """Loop counter, ``c<dim>``."""
    dim: int
    """The time dimension the loop scans."""
    lower: Expr
    """Initial value."""
    cond: Expr
    """Loop condition (a comparison of ``var`` with the upper bound)."""
    step: int
    """Increment."""
    body: Node
    """Loop body."""
    parallel: bool
    """No dependence is carried by this loop."""
    innermost: bool
    """No loop is nested inside."""
    lanes: bool = False
    """An innermost loop whose consecutive iterations may run in SIMD lanes, one statement after the
    other: it is parallel, or every dependence it carries goes from a statement to one later in its body
    (vectorizing then runs each source before its sink).  Computed only with dependences."""


@dataclass(frozen=True, slots=True)
class If:
    """A guard."""

    cond: Expr
    """Condition."""
    then: Node
    """Executed when ``cond`` holds."""
    orelse: Node | None
    """Executed otherwise, if present."""


@dataclass(frozen=True, slots=True)
class Block:
    """A sequence of nodes."""

    body: tuple[Node, ...]
    """The nodes, in order."""


@dataclass(frozen=True, slots=True)
class Run:
    """One instance of a statement: the values of its iterators in terms of the loop counters."""

    statement: str
    """Statement name."""
    args: tuple[Expr, ...]
    """One expression per iterator of the statement."""


Node = For | If | Block | Run


def loop_upper(loop: For) -> Expr | None:
    """``u`` such that the loop condition reads ``var < u`` (isl writes ``var <= e`` or ``var < e``), or
    ``None`` for another condition."""
    c = loop.cond
    if isinstance(c, Binary) and isinstance(c.lhs, Var) and c.lhs.name == loop.var:
        if c.op == "<=":
            return Binary("+", c.rhs, Const(1))
        if c.op == "<":
            return c.rhs
    return None

# islpy names the enum members that are Python keywords with a trailing underscore (``and_``, ``or_``,
# ``for_``, ``if_``); its type stubs leave them out, hence the ``attr-defined`` ignores on them below.
_OPS = {
    isl.ast_expr_op_type.add: "+", isl.ast_expr_op_type.sub: "-", isl.ast_expr_op_type.mul: "*",
    isl.ast_expr_op_type.eq: "==", isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<",
    isl.ast_expr_op_type.ge: ">=", isl.ast_expr_op_type.gt: ">",
    isl.ast_expr_op_type.and_: "and",  # type: ignore[attr-defined]  # stub gap: keyword-named member
    isl.ast_expr_op_type.and_then: "and",
    isl.ast_expr_op_type.or_: "or",  # type: ignore[attr-defined]  # stub gap: keyword-named member
    isl.ast_expr_op_type.or_else: "or",
    isl.ast_expr_op_type.fdiv_q: "//", isl.ast_expr_op_type.pdiv_q: "//", isl.ast_expr_op_type.div: "//",
    isl.ast_expr_op_type.pdiv_r: "%", isl.ast_expr_op_type.zdiv_r: "%",
}
_COUNTER = re.compile(r"c(\d+)$")
#: :attr:`For.lanes` is worked out for innermost loops of at most this many statements.
MAX_LANE_STATEMENTS = 8


class _Converter:
    def __init__(self, params: set[str], schedule: Schedule, deps: Dependences | None):
        self.params = params
        self.schedule = schedule
        self.deps = deps
        self._parallel: dict[tuple[int, frozenset[str]], bool] = {}

    def parallel(self, dim: int, stmts: frozenset[str]) -> bool:
        """Parallel for the statements this loop encloses (the schedule's global flag without deps)."""
        if self.deps is None or self.schedule.parallel[dim]:
            return self.schedule.parallel[dim]
        key = (dim, stmts)
        if key not in self._parallel:
            self._parallel[key] = loop_is_parallel(self.schedule.map, self.deps, dim, stmts)
        return self._parallel[key]

    def lanes(self, dim: int, body: Node) -> bool:
        """Whether every dependence that the innermost loop at time dimension ``dim`` carries among the
        statements of ``body`` runs from a statement to one that ``body`` runs later (see
        :attr:`For.lanes`); false without dependences, or where a statement runs in two places."""
        order = [r.statement for r in walk(body) if isinstance(r, Run)]
        if self.deps is None or len(set(order)) != len(order) or len(order) > MAX_LANE_STATEMENTS:
            return False
        place = {name: k for k, name in enumerate(order)}
        for dep in maps(self.deps.all):
            src, dst = dep.get_tuple_name(isl.dim_type.in_), dep.get_tuple_name(isl.dim_type.out)
            if src not in place or dst not in place or place[src] < place[dst]:
                continue
            tdeps = time_dependences(self.schedule.map, isl.UnionMap.from_map(dep))
            if tdeps is not None and carries(tdeps, dim):
                return False
        return True

    def expr(self, e: isl.AstExpr) -> Expr:
        kind = e.get_type()
        if kind == isl.ast_expr_type.int:
            return Const(int(e.get_val().to_python()))
        if kind == isl.ast_expr_type.id:
            name = e.get_id().get_name()
            return Var(name, "param" if name in self.params else "iter")
        op = e.get_op_type()
        args = [self.expr(e.get_op_arg(i)) for i in range(e.get_op_n_arg())]
        if op == isl.ast_expr_op_type.minus:
            return Unary("-", args[0])
        if op in (isl.ast_expr_op_type.min, isl.ast_expr_op_type.max):
            name = "min" if op == isl.ast_expr_op_type.min else "max"
            out = args[0]
            for a in args[1:]:
                out = Call(name, (out, a))
            return out
        if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
            return Call("where", (args[0], args[1], args[2]))
        if op in _OPS:
            out = args[0]
            for a in args[1:]:
                out = Binary(_OPS[op], out, a)
            return out
        raise NotImplementedError(f"isl AST operator {op} is not supported")

    def node(self, n: isl.AstNode) -> Node:
        kind = n.get_type()
        if kind == isl.ast_node_type.block:
            children = n.block_get_children()
            return Block(tuple(self.node(children.get_at(i)) for i in range(children.n_ast_node())))
        if kind == isl.ast_node_type.for_:  # type: ignore[attr-defined]  # stub gap: keyword-named member
            var = n.for_get_iterator().get_id().get_name()
            m = _COUNTER.match(var)
            assert m, f"unexpected loop counter name {var}"
            dim = int(m.group(1))
            body = self.node(n.for_get_body())
            step = int(n.for_get_inc().get_val().to_python())
            stmts = frozenset(r.statement for r in walk(body) if isinstance(r, Run))
            parallel, innermost = self.parallel(dim, stmts), not _has_loop(body)
            return For(var, dim, self.expr(n.for_get_init()), self.expr(n.for_get_cond()), step, body,
                       parallel, innermost, innermost and (parallel or self.lanes(dim, body)))
        if kind == isl.ast_node_type.if_:  # type: ignore[attr-defined]  # stub gap: keyword-named member
            orelse = self.node(n.if_get_else_node()) if n.if_has_else_node() else None
            return If(self.expr(n.if_get_cond()), self.node(n.if_get_then_node()), orelse)
        if kind == isl.ast_node_type.user:
            call = n.user_get_expr()
            name = call.get_op_arg(0).get_id().get_name()
            return Run(name, tuple(self.expr(call.get_op_arg(i)) for i in range(1, call.get_op_n_arg())))
        if kind == isl.ast_node_type.mark:
            return self.node(n.mark_get_node())
        raise NotImplementedError(f"isl AST node {kind} is not supported")


def _has_loop(n: Node) -> bool:
    if isinstance(n, For):
        return True
    if isinstance(n, Block):
        return any(_has_loop(c) for c in n.body)
    if isinstance(n, If):
        return _has_loop(n.then) or (n.orelse is not None and _has_loop(n.orelse))
    return False


#: A loop AST whose innermost loops are split (:func:`build_loop_ast`'s ``separate_guards``) is kept
#: only while it runs statements in at most this many times as many places as the unsplit one.
SEPARATION_GROWTH = 4


def build_loop_ast(program: Program, schedule: Schedule, deps: Dependences | None = None,
                   *, separate_guards: bool = False) -> Node:
    """Scan ``program``'s domain in the order of ``schedule`` and return the loop AST; with ``deps``,
    each loop's parallel flag considers only the statements it encloses.

    ``separate_guards``: where an innermost loop runs a statement behind a guard on its own counter
    (:func:`guarded_in_innermost`), scan that loop's dimension with isl's ``separate`` option instead: the
    loop is split into pieces over which the set of statements it runs does not change, so no piece
    branches per iteration and each can vectorize.  The split AST is kept while it runs statements in at
    most :data:`SEPARATION_GROWTH` times as many places.

    Built once per program, schedule (its map and parallel flags), ``deps`` and ``separate_guards``: the
    program's memo keeps the AST, so the passes of one compilation that ask again for a schedule they
    share (the chosen candidate, the input order) get the same tree."""
    memo: dict[tuple[str, tuple[bool, ...], bool], tuple[Dependences | None, Node]] = program._memo("loop_ast", dict)
    key = (str(schedule.map), tuple(schedule.parallel), separate_guards)
    found = memo.get(key)
    if found is not None and found[0] is deps:
        return found[1]
    ast = _scan(program, schedule, deps, separate_guards)
    memo[key] = (deps, ast)
    return ast


def _scan(program: Program, schedule: Schedule, deps: Dependences | None, separate_guards: bool) -> Node:
    """:func:`build_loop_ast`, not memoized."""
    build = isl.AstBuild.from_context(program.context)
    sched = schedule.map.intersect_domain(program.domain)
    convert = _Converter(set(program.params), schedule, deps)
    ast = convert.node(build.node_from_schedule_map(sched))
    dims = _guarded_innermost_dims(ast) if separate_guards else set()
    if not dims:
        return ast
    width = len(schedule.parallel)
    counters = ", ".join(f"i{k}" for k in range(width))
    where = " or ".join(f"x = {d}" for d in sorted(dims))
    options = isl.UnionMap(f"{{ [{counters}] -> separate[x] : {where} }}")
    split = convert.node(isl.AstBuild.from_context(program.context).set_options(options)
                         .node_from_schedule_map(sched))
    if sum(run_counts(split).values()) > SEPARATION_GROWTH * sum(run_counts(ast).values()):
        return ast
    return split


def _guarded_innermost_dims(n: Node) -> set[int]:
    """The time dimensions of the innermost loops of ``n`` with a guard on their own counter."""
    return {loop.dim for loop in walk(n) if isinstance(loop, For) and loop.innermost
            and any(isinstance(m, If) and loop.var in var_names(m.cond, "iter") for m in walk(loop.body))}


def isl_expr(e: isl.AstExpr, params: tuple[str, ...] | list[str]) -> Expr:
    """An isl AST expression (from ``AstBuild.expr_from_pw_aff``, say) as an IR expression."""
    return _Converter(set(params), Schedule(isl.UnionMap("{ }"), (), "none"), None).expr(e)


def enclosing_loops(n: Node, outer: tuple[bool, ...] = ()) -> dict[str, list[tuple[bool, ...]]]:
    """For each statement run in the AST ``n``, the parallel flags of the loops around it (outermost
    first), once per place where it runs."""
    if isinstance(n, Run):
        return {n.statement: [outer]}
    if isinstance(n, For):
        return enclosing_loops(n.body, outer + (n.parallel,))
    children = n.body if isinstance(n, Block) else (n.then,) + ((n.orelse,) if n.orelse is not None else ())
    out: dict[str, list[tuple[bool, ...]]] = {}
    for c in children:
        for name, places in enclosing_loops(c, outer).items():
            out.setdefault(name, []).extend(places)
    return out


def run_counts(n: Node) -> Counter[str]:
    """How many places of the AST ``n`` run each statement."""
    return Counter(r.statement for r in walk(n) if isinstance(r, Run))


def without(n: Node, names: set[str] | frozenset[str]) -> Node | None:
    """``n`` without the statements ``names``, and without the blocks, guards and loops left empty;
    ``None`` if nothing is left."""
    if isinstance(n, Run):
        return None if n.statement in names else n
    if isinstance(n, Block):
        kept = [k for c in n.body if (k := without(c, names)) is not None]
        return Block(tuple(kept)) if kept else None
    if isinstance(n, If):
        then = without(n.then, names)
        orelse = None if n.orelse is None else without(n.orelse, names)
        if then is None and orelse is None:
            return None
        return If(n.cond, Block(()) if then is None else then, orelse)
    body = without(n.body, names)
    return None if body is None else replace(n, body=body)


def walk(n: Node):
    """All nodes of a loop AST, in pre-order."""
    yield n
    if isinstance(n, For):
        yield from walk(n.body)
    elif isinstance(n, Block):
        for c in n.body:
            yield from walk(c)
    elif isinstance(n, If):
        yield from walk(n.then)
        if n.orelse is not None:
            yield from walk(n.orelse)


def counters_within(loop: For) -> set[str]:
    """The counters of ``loop`` and of every loop inside it."""
    return {loop.var} | {n.var for n in walk(loop.body) if isinstance(n, For)}


def outermost_loops(n: Node) -> list[For]:
    """The loops of the AST ``n`` that no loop encloses, in order."""
    if isinstance(n, For):
        return [n]
    if isinstance(n, Block):
        return [lp for c in n.body for lp in outermost_loops(c)]
    if isinstance(n, If):
        return outermost_loops(n.then) + (outermost_loops(n.orelse) if n.orelse is not None else [])
    return []


def guarded_in_innermost(n: Node) -> set[str]:
    """The statements that some innermost loop of the AST ``n`` runs behind a guard on that loop's own
    counter (``if (c2 == c1)`` inside ``for c2``): a guard on the counter turns the loop's body into a
    branch per iteration, which compilers vectorize poorly or not at all."""
    found: set[str] = set()
    for loop in walk(n):
        if not (isinstance(loop, For) and loop.innermost):
            continue
        for m in walk(loop.body):
            if isinstance(m, If) and loop.var in var_names(m.cond, "iter"):
                found |= {r.statement for r in walk(m) if isinstance(r, Run)}
    return found


def straight_runs(n: Node) -> list[Run] | None:
    """The runs of a body made of runs and blocks only (no guard, no loop), in order, else ``None``."""
    if isinstance(n, Run):
        return [n]
    if isinstance(n, Block):
        out: list[Run] = []
        for c in n.body:
            runs = straight_runs(c)
            if runs is None:
                return None
            out += runs
        return out
    return None
