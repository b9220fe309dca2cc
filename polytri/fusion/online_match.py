"""Matching the online softmax's chain of statements (see :mod:`.online_softmax`): which statements
play which part, each one's iterators renamed into one frame (the rows and columns of the max
reduction), and the exact checks (expressions, storage, domains with isl, the original order) that make
the rewrite equal to the program."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import islpy as isl

from ..ir.expr import Access, Binary, Call, Const, Expr, Var, accesses, substitute, var_names
from ..ir.indirect import has_indirect
from ..ir.program import Program, Statement, params_prefix
from ..ir.reduction import statement_update, update_of
from ..schedule.dependences import follows_writes


class NoMatch(Exception):
    """The program has no online softmax to derive (the message says why)."""


@dataclass(frozen=True)
class Chain:
    """The matched statements, and each one's iterators renamed into one frame: ``rows`` and ``r`` (the
    max reduction's iterators), ``k`` (the product's own loop) and ``d`` (the output's columns)."""

    s_init: Statement
    s_red: Statement
    m_init: Statement
    m_red: Statement
    exp: Statement
    l_init: Statement
    l_red: Statement
    norm: Statement
    o_init: Statement
    o_red: Statement
    frames: dict[str, dict[str, str]]
    rows: tuple[str, ...]
    r: str
    k: str
    d: str

    def statements(self) -> tuple[Statement, ...]:
        return (self.s_init, self.s_red, self.m_init, self.m_red, self.exp, self.l_init, self.l_red, self.norm,
                self.o_init, self.o_red)

    def value(self, st: Statement) -> Expr:
        """``st``'s right-hand side in the frame."""
        return substitute(st.value, {a: Var(b, "iter") for a, b in self.frames[st.name].items()})

    def target(self, st: Statement) -> Access:
        """``st``'s target in the frame."""
        return _rename(st.target, self.frames[st.name])


def _rename(acc: Access, frame: dict[str, str]) -> Access:
    out = substitute(acc, {a: Var(b, "iter") for a, b in frame.items()})
    assert isinstance(out, Access)
    return out


def max_term(value: Expr, target: Access) -> Expr | None:
    """``g`` when ``value`` is the update ``max(target, g)``, NaN-propagating or not (:func:`.update_of`)."""
    found = update_of(target, value)
    return found.term if found is not None and found.op in ("max", "nanmax") else None


def sum_term(value: Expr, target: Access) -> Expr:
    """``f`` when ``value`` is the update ``target + f`` (:func:`.update_of`)."""
    found = update_of(target, value)
    if found is None or found.op != "+":
        raise NoMatch(f"{value} is not a sum into {target.array}")
    return found.term


def product_factor(term: Expr, array: str) -> tuple[Access, Expr]:
    """``term`` as ``array[...] * rest``."""
    if isinstance(term, Binary) and term.op == "*":
        for a, b in ((term.lhs, term.rhs), (term.rhs, term.lhs)):
            if isinstance(a, Access) and a.array == array and array not in {x.array for x in accesses(b)}:
                return a, b
    raise NoMatch(f"{term} is not {array}[...] times a factor")


def _is_sum(st: Statement) -> bool:
    """Whether ``st`` is a sum update ``T = T + f``."""
    found = statement_update(st)
    return found is not None and found.op == "+"


def _is_zero(e: Expr) -> bool:
    return e in (Const(0), Const(0.0))


def _unify(index: tuple[Expr, ...], frame: tuple[Expr, ...]) -> dict[str, str] | None:
    """Iterators of ``index`` (bare variables, or constants equal in both) named as in ``frame``."""
    out: dict[str, str] = {}
    if len(index) != len(frame):
        return None
    for a, b in zip(index, frame):
        if isinstance(a, Var) and a.kind == "iter":
            if not (isinstance(b, Var) and b.kind == "iter") or out.setdefault(a.name, b.name) != b.name:
                return None
        elif var_names(a, "iter") or a != b:
            return None
    return out if len(set(out.values())) == len(out) else None


def _frame(st: Statement, index: tuple[Expr, ...], frame: tuple[Expr, ...], extra: str | None = None
           ) -> dict[str, str]:
    """``st``'s iterators in the frame, unified through one access; at most one left, named ``extra``."""
    names = _unify(index, frame)
    if names is None:
        raise NoMatch(f"{st.name} does not index its arrays by plain iterators as the max reduction does")
    left = [i for i in st.iterators if i not in names]
    if len(left) > (extra is not None) or (extra is not None and not left):
        raise NoMatch(f"{st.name}'s loops are not the softmax's rows and columns"
                       + (" and one of its own" if extra else ""))
    if left and extra is not None:  # one iterator left: the frame's ``extra`` one (checked above)
        names[left[0]] = extra
    return names


def _writers(program: Program, array: str) -> list[Statement]:
    return [s for s in program.statements if s.target.array == array]


def _one_access(e: Expr, array: str) -> Access:
    found = [a for a in accesses(e) if a.array == array]
    if len(found) != 1:
        raise NoMatch(f"{len(found)} reads of {array} where one is expected")
    return found[0]


def _init_and_update(program: Program, array: str, what: str) -> tuple[Statement, Statement]:
    """The two writers of ``array``: an initialization and an update with one loop more."""
    ws = _writers(program, array)
    if len(ws) != 2 or len(ws[1].iterators) != len(ws[0].iterators) + 1:
        raise NoMatch(f"{what} {array} is not written by one initialization and one update")
    return ws[0], ws[1]


def fresh(stem: str, taken: Iterable[str]) -> str:
    """``stem``, or ``stem1``, ``stem2``...: the first name not in ``taken``."""
    name, n, used = stem, 0, set(taken)
    while name in used:
        n += 1
        name = f"{stem}{n}"
    return name


def match(program: Program, red: Statement, temporaries: set[str]) -> Chain:
    """The chain of the module docstring around the max reduction ``red``, or :class:`NoMatch`."""
    g = max_term(red.value, red.target)
    if g is None:
        raise NoMatch(f"{red.name} is not a max reduction")
    r, rows = red.iterators[-1], red.iterators[:-1]
    if r in var_names(red.target, "iter") or set(rows) - var_names(red.target, "iter"):
        raise NoMatch(f"{red.name}'s target is not indexed by its rows (all iterators but the last)")
    written = {s.target.array for s in program.statements}
    s_reads = [a for a in accesses(g) if a.array in written]
    if len(s_reads) != 1:
        raise NoMatch(f"{red.name} reduces a value that reads {len(s_reads)} computed arrays, not 1")
    s_read = s_reads[0]
    S, M = s_read.array, red.target.array
    plain = _unify(s_read.index, s_read.index) is not None  # distinct bare iterators, or constants
    if not plain or set(red.iterators) - var_names(s_read, "iter"):
        raise NoMatch(f"{red.name} does not read {S} by its rows and columns, as plain subscripts")
    k = fresh("k", red.iterators)
    d = fresh("d", (*red.iterators, k))
    frames: dict[str, dict[str, str]] = {red.name: {i: i for i in red.iterators}}

    s_init, s_red = _init_and_update(program, S, "the product")
    frames[s_init.name] = _frame(s_init, s_init.target.index, s_read.index)
    frames[s_red.name] = _frame(s_red, s_red.target.index, s_read.index, k)
    m_ws = _writers(program, M)
    if len(m_ws) != 2 or m_ws[1] is not red:
        raise NoMatch(f"the maximum {M} is not written by one initialization and {red.name}")
    m_init = m_ws[0]
    frames[m_init.name] = _frame(m_init, m_init.target.index, red.target.index)

    exps = [s for s in program.statements if isinstance(s.value, Call) and s.value.func == "exp"
            and {S, M} <= {a.array for a in accesses(s.value)}]
    if len(exps) != 1:
        raise NoMatch(f"{len(exps)} statements compute exp({S} - {M}), not 1")
    ex = exps[0]
    frames[ex.name] = _frame(ex, _one_access(ex.value, S).index, s_read.index)
    E = ex.target.array
    e_frame = _rename(ex.target, frames[ex.name]).index
    e_readers = [s for s in program.statements if s.name in program.readers(E)]
    sums = [s for s in e_readers if s.target.array != E and _writers(program, s.target.array)[-1] is s
            and len(_writers(program, s.target.array)) == 2 and _is_sum(s)]
    if len(e_readers) != 2 or len(sums) != 1:
        raise NoMatch(f"{E} is not read by exactly one sum and one other statement")
    l_red, norm = sums[0], next(s for s in e_readers if s is not sums[0])
    L = l_red.target.array
    l_init, _ = _init_and_update(program, L, "the sum")
    frames[l_red.name] = _frame(l_red, _one_access(l_red.value, E).index, e_frame)
    frames[l_init.name] = _frame(l_init, l_init.target.index, _rename(l_red.target, frames[l_red.name]).index)
    frames[norm.name] = _frame(norm, _one_access(norm.value, E).index, e_frame)
    P = norm.target.array
    p_readers = [s for s in program.statements if s.name in program.readers(P)]
    if len(p_readers) != 1:
        raise NoMatch(f"{P} is read by {len(p_readers)} statements, not 1")
    o_red = p_readers[0]
    o_init, o_update = _init_and_update(program, o_red.target.array, "the output")
    if o_update is not o_red:
        raise NoMatch(f"{o_red.name} is not the update of {o_red.target.array}")
    frames[o_red.name] = _frame(o_red, _one_access(o_red.value, P).index,
                                _rename(norm.target, frames[norm.name]).index, d)
    frames[o_init.name] = _frame(o_init, o_init.target.index, _rename(o_red.target, frames[o_red.name]).index)

    chain = Chain(s_init, s_red, m_init, red, ex, l_init, l_red, norm, o_init, o_red, frames, rows, r, k, d)
    _check_values(program, chain, temporaries)
    _check_domains(program, chain)
    _check_order(program, chain)
    return chain


def _check_values(program: Program, c: Chain, temporaries: set[str]) -> None:
    """The right-hand sides, arrays and readers of the module docstring."""
    indirect = [s.name for s in c.statements() if has_indirect(s.value)]
    if indirect:  # the rewrite moves reads into blocks at affine offsets only
        raise NoMatch(f"{', '.join(indirect)} read through indirect subscripts")
    _check_arrays(program, c, temporaries)
    _check_expressions(c)
    _check_indexing(c)


def _chain_arrays(c: Chain) -> tuple[str, str, str, str, str, str]:
    """The arrays of the chain: the product ``S``, the maximum ``M``, the exponentials ``E``, the sum ``L``,
    the normalized weights ``P`` and the output."""
    S, M, E, L, P, Out = (st.target.array for st in (c.s_init, c.m_red, c.exp, c.l_red, c.norm, c.o_red))
    return S, M, E, L, P, Out


def _check_arrays(program: Program, c: Chain, temporaries: set[str]) -> None:
    """The chain's arrays are distinct, ``S`` has no other reader, ``S``, ``E`` and ``P`` are temporaries,
    and ``P`` has the maximum's type (it holds the block maximum in the online form)."""
    S, M, E, L, P, Out = _chain_arrays(c)
    if len({S, M, E, L, P, Out}) != 6:
        raise NoMatch("the softmax's arrays are not distinct")
    readers = program.readers(S) - {c.s_red.name, c.m_init.name, c.m_red.name, c.exp.name}
    if readers:
        raise NoMatch(f"{', '.join(sorted(readers))} read {S}, which the online form keeps one block of")
    for a in (S, E, P):
        if a not in temporaries:
            raise NoMatch(f"{a} is not a temporary: the online form does not compute it")
    if program.array(P).dtype != program.array(M).dtype:
        raise NoMatch(f"{P} cannot hold the block maximum: it is {program.array(P).dtype}, "
                       f"{M} {program.array(M).dtype}")


def _check_expressions(c: Chain) -> None:
    """The right-hand sides: zero initializations, a sum of products, the maximum seeded with the first
    column, ``exp(g - max)``, the sum of the exponentials, their product with a factor free of the columns,
    and the output's sum of ``P`` times values computed before."""
    S, M, E, L, P, Out = _chain_arrays(c)
    chain_arrays = {S, M, E, L, P, Out}
    if not (_is_zero(c.value(c.s_init)) and _is_zero(c.value(c.l_init)) and _is_zero(c.value(c.o_init))):
        raise NoMatch(f"{S}, {L} or {Out} does not start from zero")
    product = sum_term(c.value(c.s_red), c.target(c.s_red))
    if c.k not in var_names(product, "iter") or {a.array for a in accesses(product)} & chain_arrays:
        raise NoMatch(f"{c.s_red.name} is not a sum over its own loop of values computed before")
    m_acc, e_acc, p_acc = c.target(c.m_red), c.target(c.exp), c.target(c.norm)
    g = max_term(c.value(c.m_red), m_acc)
    assert g is not None
    if c.value(c.m_init) != substitute(g, {c.r: Const(0)}):
        raise NoMatch(f"{c.m_init.name} does not seed the maximum with the first column")
    if c.value(c.exp) != Call("exp", (Binary("-", g, m_acc),)):
        raise NoMatch(f"{c.exp.name} is not exp(g - max) of the reduced value g")
    if sum_term(c.value(c.l_red), c.target(c.l_red)) != e_acc:
        raise NoMatch(f"{c.l_red.name} is not a sum of {E}")
    e_read, factor = product_factor(c.value(c.norm), E)
    if e_read != e_acc or c.r in var_names(factor, "iter") or {a.array for a in accesses(factor)} & (chain_arrays - {L}):
        raise NoMatch(f"{c.norm.name} is not {E} times a factor free of the columns")
    p_read, rest = product_factor(sum_term(c.value(c.o_red), c.target(c.o_red)), P)
    if p_read != p_acc or {a.array for a in accesses(rest)} & chain_arrays:
        raise NoMatch(f"{c.o_red.name} does not sum {P} times values computed before")


def _check_indexing(c: Chain) -> None:
    """The row arrays are indexed by the rows only, the output by the rows and its own columns, and the
    arrays that hold blocks by the columns at exactly one subscript."""
    _, M, _, L, _, Out = _chain_arrays(c)
    for sub in c.target(c.m_red).index + c.target(c.l_red).index:
        if var_names(sub, "iter") - set(c.rows):
            raise NoMatch(f"the row arrays {M} and {L} are indexed by more than the rows")
    if var_names(c.target(c.o_red), "iter") != set(c.rows) | {c.d}:
        raise NoMatch(f"{Out} is not indexed by the rows and its own columns")
    for acc in (c.target(c.s_init), c.target(c.exp), c.target(c.norm)):  # their storage holds the blocks
        if sum(1 for e in acc.index if e == Var(c.r, "iter")) != 1:
            raise NoMatch(f"{acc.array} is not indexed by the columns at one subscript")


def renamed_domain(program: Program, st: Statement, frame: dict[str, str], order: tuple[str, ...]) -> isl.Set:
    """``st``'s domain with its iterators renamed into the frame, in the frame's ``order`` (tuple ``F``)."""
    inverse = {b: a for a, b in frame.items()}
    m = isl.Map(f"{params_prefix(program.params)}{{ {st.name}[{', '.join(st.iterators)}] -> "
                f"F[{', '.join(inverse[n] for n in order)}] }}")
    return st.domain.apply(m)


def _drop(s: isl.Set, first: int, n: int) -> isl.Set:
    return s.project_out(isl.dim_type.set, first, n).set_tuple_name("F")


def _check_domains(program: Program, c: Chain) -> None:
    """The statements run over the rows and columns of the max reduction (the product over some of them,
    each with its own loop; the output for each of its elements over all the columns), and the columns
    of every row are the same range, from 0."""
    base = renamed_domain(program, c.m_red, c.frames[c.m_red.name], c.rows + (c.r,))
    rows, cols = _drop(base, len(c.rows), 1), _drop(base, 0, len(c.rows))
    if not base.is_equal(rows.flat_product(cols).set_tuple_name("F")):
        raise NoMatch("the columns of a row depend on the row")
    if not cols.lexmin().is_subset(isl.Set(f"{params_prefix(program.params)}{{ F[0] }}")):
        raise NoMatch("the columns do not start at 0")
    for st in (c.s_init, c.exp, c.norm, c.l_red):
        if not renamed_domain(program, st, c.frames[st.name], c.rows + (c.r,)).is_equal(base):
            raise NoMatch(f"{st.name} does not run over the rows and columns of {c.m_red.name}")
    for st in (c.m_init, c.l_init):
        if not renamed_domain(program, st, c.frames[st.name], c.rows).is_equal(rows):
            raise NoMatch(f"{st.name} does not run over the rows of {c.m_red.name}")
    product = renamed_domain(program, c.s_red, c.frames[c.s_red.name], c.rows + (c.r, c.k))
    if not _drop(product, len(c.rows) + 1, 1).is_subset(base):
        raise NoMatch(f"{c.s_red.name} writes elements of {c.s_red.target.array} that {c.m_red.name} does not read")
    # every output element sums over all the columns (it is rescaled at every block)
    out = renamed_domain(program, c.o_red, c.frames[c.o_red.name], c.rows + (c.d, c.r))
    out_rows = renamed_domain(program, c.o_init, c.frames[c.o_init.name], c.rows + (c.d,))
    if not (out.is_equal(out_rows.flat_product(cols).set_tuple_name("F"))
            and _drop(out_rows, len(c.rows), 1).is_subset(rows)):
        raise NoMatch(f"{c.o_red.name} does not sum over all the columns of the rows {c.o_init.name} initializes")


def _check_order(program: Program, c: Chain) -> None:
    """In the original order, each statement of the chain reads (or updates) an element only after every
    write of it by the statement before it in the chain: each reads the final values the rewrite
    reproduces, and the initializations run first."""
    steps = [(c.s_init, c.s_red), (c.s_red, c.m_init), (c.s_red, c.m_red), (c.m_init, c.m_red),
             (c.s_red, c.exp), (c.m_red, c.exp), (c.exp, c.l_red), (c.l_init, c.l_red), (c.exp, c.norm),
             (c.l_red, c.norm), (c.norm, c.o_red), (c.o_init, c.o_red)]
    for first, then in steps:
        array = first.target.array
        uses = [acc for acc in (*then.reads, then.target) if acc.array == array]
        if not follows_writes(program, first, then, uses):
            raise NoMatch(f"{then.name} does not run after every write of {array} by {first.name}")
