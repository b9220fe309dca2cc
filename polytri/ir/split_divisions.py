"""Loop counters divided by constants in subscripts, turned into loops of their own.

A reshape that merges two dimensions reads its source at ``[i // c, i % c]``: the loop over ``i`` walks
the source in runs of ``c`` with a jump between runs, which gcc does not vectorize (it emits scalar code
with the division's shifts and masks).  The attention output of a transformer, moved from
``(batch, heads, tokens, width)`` to ``(batch, tokens, heads * width)``, is read that way.

Here the statement's loop over ``i`` becomes two loops, ``i = c * h + l`` with ``0 <= l < c``, and each
subscript becomes the affine function that isl finds for it on the new domain: ``i // c`` is ``h``,
``i % c`` is ``l``, ``4 * (i // 128) + j // 64`` is ``4 * ih + jh``.  The statement runs the same instances
(``(h, l)`` ranges over the preimage of its domain) and each reads and writes what it did; only the loops
of its own nest change, so a statement is rewritten only when it shares no loop with another, and only
when no subscript keeps a division of a new counter.  It is rewritten only where its innermost counter is
divided (elsewhere its innermost loop vectorizes as it is), and never an update ``T[..] = T[..] + ..``:
the recognizers of products and reductions (the micro-kernel's, for one) take their loops as written.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import islpy as isl

from .expr import Access, Binary, Const, Expr, Var, substitute, transform, walk
from .indirect import is_indirect_subscript
from .program import Program, Statement, params_prefix
from .subscripts import affine_on, divides


def split_divisions(prog: Program) -> Program:
    """``prog`` with every statement that qualifies rewritten (see the module's text); ``prog`` itself
    when none does."""
    nests = Counter(st.position[0] for st in prog.statements)
    alone = {p for p, n in nests.items() if n == 1}
    statements = tuple(_split(st, prog.params) if st.position[0] in alone else st for st in prog.statements)
    if all(a is b for a, b in zip(statements, prog.statements)):
        return prog
    return replace(prog, statements=statements)


def _divisors(st: Statement) -> dict[str, int]:
    """The iterators that the statement's subscripts divide by one positive constant (``i // c``,
    ``i % c``), with that constant; an iterator divided by two constants is left out."""
    found: dict[str, set[int]] = {}
    for acc in (st.target, *st.reads):
        for e in acc.index:
            for n in walk(e):
                if isinstance(n, Binary) and n.op in ("//", "%") and isinstance(n.lhs, Var) \
                        and n.lhs.kind == "iter" and isinstance(n.rhs, Const) and type(n.rhs.value) is int \
                        and n.rhs.value > 1:
                    found.setdefault(n.lhs.name, set()).add(n.rhs.value)
    return {v: next(iter(cs)) for v, cs in found.items() if len(cs) == 1}


def _split(st: Statement, params: tuple[str, ...]) -> Statement:
    """``st`` with its divided iterators split, or ``st`` where it does not qualify."""
    if any(is_indirect_subscript(e) for acc in (st.target, *st.reads) for e in acc.index):
        return st
    divisors = _divisors(st)
    if not st.iterators or st.iterators[-1] not in divisors or st.target.array in {a.array for a in st.reads}:
        return st  # the innermost loop vectorizes already; an update keeps the form its recognizers expect
    taken = set(st.iterators) | set(params)
    iterators: list[str] = []
    position: list[int] = []
    env: dict[str, Expr] = {}
    for k, v in enumerate(st.iterators):
        position.append(st.position[k])
        if v not in divisors:
            iterators.append(v)
            continue
        h, lo = _fresh(f"{v}h", taken), _fresh(f"{v}l", taken)
        iterators += [h, lo]
        position.append(0)  # the new inner loop: the only child of the outer one
        env[v] = Binary("+", Binary("*", Const(divisors[v]), Var(h, "iter")), Var(lo, "iter"))
    position.append(st.position[-1])
    domain = _preimage(st, params, iterators, divisors)
    target = substitute(st.target, env)
    assert isinstance(target, Access)
    try:
        target = _undivided(target, domain, iterators, params)
        value = transform(substitute(st.value, env), lambda n: _undivided(n, domain, iterators, params)
                          if isinstance(n, Access) else None)
    except _KeepsDivision:
        return st
    return Statement(st.name, domain, tuple(iterators), target, value, tuple(position))


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _preimage(st: Statement, params: tuple[str, ...], iterators: list[str], divisors: dict[str, int]) -> isl.Set:
    """The new domain: the points ``(.., h, l, ..)`` with ``0 <= l < c`` whose ``(.., c * h + l, ..)`` is in
    the statement's domain."""
    old, bounds = [], []
    k = 0
    for v in st.iterators:
        if v in divisors:
            h, lo = iterators[k], iterators[k + 1]
            old.append(f"{divisors[v]} * {h} + {lo}")
            bounds.append(f"0 <= {lo} < {divisors[v]}")
            k += 2
        else:
            old.append(iterators[k])
            k += 1
    pre = params_prefix(params)
    m = isl.Map(f"{pre}{{ {st.name}[{', '.join(iterators)}] -> {st.name}[{', '.join(old)}] : "
                f"{' and '.join(bounds)} }}")
    dom = st.domain.apply(m.reverse())
    for k, name in enumerate(iterators):
        dom = dom.set_dim_name(isl.dim_type.set, k, name)
    return dom.set_tuple_name(st.name)


class _KeepsDivision(Exception):
    """A subscript of the rewritten statement still divides a loop counter."""


def _undivided(acc: Access, domain: isl.Set, iterators: list[str], params: tuple[str, ...]) -> Access:
    """``acc`` (written in the new iterators) with each subscript that divides as isl's affine function of
    the new iterators on ``domain``."""
    return Access(acc.array, tuple(_affine(e, domain, iterators, params) if divides(e) else e for e in acc.index))


def _affine(e: Expr, domain: isl.Set, iterators: list[str], params: tuple[str, ...]) -> Expr:
    """``e`` as an affine expression without divisions on ``domain`` (:class:`_KeepsDivision` if it is not
    one there)."""
    found = affine_on(e, domain, iterators, params)
    if found is None:
        raise _KeepsDivision
    return found
