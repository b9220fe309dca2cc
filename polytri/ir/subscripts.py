"""Subscripts with divisions that are affine after all, written without them.

Views compose their index maps as text: a ``(2, 128, K)`` tensor seen as ``(256, K)`` is read at
``[i // 128, i % 128, k]``, and that view seen again as ``(2, 128, K)`` or through a matrix product's
``(256, N)`` result reads ``[128 * (i // 128) + i % 128, j]``, which is ``[i, j]``.  The division hides
that from the analyses that match subscripts as written, such as the cpu target's test for a product's
epilogue (the GELU after BERT's first MLP layer ran as a pass of its own over the product's result;
simplified, it runs on each register block of the product, in the same time: docs/pytorch.md).

:func:`affine_on` asks isl for the function a subscript computes on the instances of its statement; where
it is one affine function of the iterators and parameters with integer coefficients, that function is the
subscript's simpler form.  :func:`simplify_subscripts` replaces every subscript with a division or a
modulo that has one.  A subscript that keeps a division on the domain (``i // 128`` over ``0 <= i < 256``)
or reads an index array stays as written.  The statements run the same instances and access the same
elements.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import islpy as isl

from .affine import NotAffineError, to_isl
from .expr import Access, Binary, Const, Expr, Var, transform, walk
from .indirect import is_indirect_subscript
from .program import Program, Statement, params_prefix

log = logging.getLogger("polytri.ir")


def divides(e: Expr) -> bool:
    """Whether ``e`` has a floor division or a modulo."""
    return any(isinstance(n, Binary) and n.op in ("//", "%") for n in walk(e))


def affine_on(e: Expr, domain: isl.Set, iterators: list[str] | tuple[str, ...], params: tuple[str, ...]
              ) -> Expr | None:
    """``e`` as an affine expression without divisions, equal to it on ``domain`` (whose dimensions are
    ``iterators``), or ``None`` when it is not one there (or is not quasi-affine at all)."""
    try:
        text = to_isl(e, what="subscript")
    except NotAffineError:
        return None
    name = domain.get_tuple_name()
    try:
        pa = isl.PwAff(f"{params_prefix(params)}{{ {name}[{', '.join(iterators)}] -> [({text})] }}")
        pieces = pa.intersect_domain(domain).gist(domain).get_pieces()
    except isl.Error:
        return None
    if len(pieces) != 1:
        return None
    aff = pieces[0][1]
    if any(not aff.get_coefficient_val(isl.dim_type.div, k).is_zero() for k in range(aff.dim(isl.dim_type.div))):
        return None
    if not aff.get_denominator_val().is_one():
        return None
    names = [Var(n, "iter") for n in iterators]
    names += [Var(str(aff.get_dim_name(isl.dim_type.param, k)), "param") for k in range(aff.dim(isl.dim_type.param))]
    kinds = [isl.dim_type.in_] * len(iterators) + [isl.dim_type.param] * (len(names) - len(iterators))
    terms: list[Expr] = []
    for k, (kind, v) in enumerate(zip(kinds, names)):
        c = aff.get_coefficient_val(kind, k if kind == isl.dim_type.in_ else k - len(iterators)).to_python()
        if c:
            terms.append(v if c == 1 else Binary("*", Const(int(c)), v))
    const = aff.get_constant_val().to_python()
    if const or not terms:
        terms.append(Const(int(const)))
    out = terms[0]
    for t in terms[1:]:
        out = Binary("+", out, t)
    return out


def simplify_subscripts(prog: Program) -> Program:
    """``prog`` with every subscript that divides, but is affine on its statement's domain, written as
    that affine function (see the module's text); ``prog`` itself when there is none."""
    statements = tuple(_simplified(st, prog.params) for st in prog.statements)
    if all(a is b for a, b in zip(statements, prog.statements)):
        return prog
    return replace(prog, statements=statements)


def _simplified(st: Statement, params: tuple[str, ...]) -> Statement:
    """``st`` with its subscripts simplified, or ``st`` itself where none changes."""
    if st.domain.is_empty() or not any(divides(e) for acc in (st.target, *st.reads) for e in acc.index):
        return st
    memo: dict[Expr, Expr] = {}

    def subscript(e: Expr) -> Expr:
        if e not in memo:
            found = None if is_indirect_subscript(e) or not divides(e) else affine_on(e, st.domain, st.iterators, params)
            memo[e] = e if found is None else found
        return memo[e]

    def access(n: Expr) -> Expr | None:
        if not isinstance(n, Access):
            return None
        index = tuple(subscript(e) for e in n.index)
        return n if index == n.index else Access(n.array, index)

    if all(subscript(e) == e for acc in (st.target, *st.reads) for e in acc.index):
        return st
    target = access(st.target)
    assert isinstance(target, Access)
    log.debug("%s: subscripts simplified: %s", st.name, {str(k): str(v) for k, v in memo.items() if k != v})
    return replace(st, target=target, value=transform(st.value, access))


__all__ = ["affine_on", "divides", "simplify_subscripts"]
