"""The online softmax: a softmax and the sum that consumes it, rewritten into one pass over column blocks.

Attention computes, for each row ``x`` (all iterators but the last of the max reduction), over the
columns ``r`` of a row::

    S[x, r] = 0;  S[x, r] += A[x, k] * B[r, k]          a product (any sum over k)
    M[x] = g(x, 0);  M[x] = max(M[x], g(x, r))           g reads S[x, r] (a scale: S * 0.125)
    E[x, r] = exp(g(x, r) - M[x])
    L[x] = 0;  L[x] += E[x, r]
    P[x, r] = E[x, r] * c(x)                             c free of r: 1 / L[x]
    O[x, d] = 0;  O[x, d] += P[x, r] * V[r, d]

which reads each row of ``S`` three times after writing it: three passes, ``S``, ``E`` and ``P`` in
memory.  Two facts of the algebra make one pass over blocks of ``r`` enough:

* ``c`` does not depend on ``r``, so it factors out of the sum over ``r``: ``O = (sum E V) * c``;
* ``exp(g - M) = exp(g - m) * exp(m - M)`` for any ``m``: a sum of terms linear in ``exp(g - m)``,
  accumulated while ``m`` is the maximum of the blocks seen so far, becomes the sum for a larger
  maximum ``m'`` when multiplied by ``exp(m - m')``.

The columns of every row are one range from 0.  The rewrite splits ``r = B * jb + jj``
(``0 <= jj < B``) and runs, for each row and each block ``jb`` in order: the block of ``S`` (the product
over ``k`` for ``B`` columns), the block's running maximum ``Mb`` (seeded with ``M`` from the previous
block, or with ``g(x, 0)`` in the first), the block of ``E`` relative to ``Mb``, the rescaling of ``L``
and ``O`` by ``exp(M - Mb)`` (from the second block on), their sums over the block, and ``M = Mb``; after
the last block, ``O *= c``.  ``L`` and ``M`` end with the values of the original (``M`` exactly: the
same maxima in the same order, NaN included; ``L`` and ``O`` up to the order of the floating-point
operations).  This is the FlashAttention algorithm, derived from the statements, not a template: any
max reduction whose exponential feeds sums over the same index (through a factor free of it) matches.

Array contraction comes with it: the blocks of ``S`` and ``E`` live in the first ``B`` columns of the
arrays ``S`` and ``E`` (``jj <= r`` always), and ``Mb`` in column 0 of ``P``, which the rewritten
program no longer needs; so ``S``, ``E`` and ``P`` must be temporaries that nothing else reads.  The
kernel's arguments do not change.  Every check is exact (isl, or the structure of the expressions); a
program that does not match is left as it is, with the reason logged in ``polytri.fusion``.  The
rewritten statements are in the order they should run: the program is compiled in that order (Pluto
is not run on it), with its nests fused below the rows on GPUs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

import islpy as isl

from ..ir.expr import Access, Binary, Call, Const, Expr, Var, substitute, transform
from ..ir.program import Program, Statement, params_prefix
from ..pipeline.decisions import Decision
from .online_match import Chain, NoMatch, fresh, match, max_term, product_factor, renamed_domain, sum_term

log = logging.getLogger("polytri.fusion")


# -- the rewrite ---------------------------------------------------------------------------------------

def _top_levels(program: Program, chain: Chain) -> tuple[int, int]:
    """The first and last top-level position of the chain, which must hold nothing else."""
    names = {st.name for st in chain.statements()}
    tops = {st.position[0] for st in chain.statements()}
    first, last = min(tops), max(tops)
    for st in program.statements:
        if st.name not in names and first <= st.position[0] <= last:
            raise NoMatch(f"{st.name} runs between the statements of the softmax")
    return first, last


def _rewrite(program: Program, c: Chain, block: int) -> Program:
    """The program of the module docstring, blocks of ``block`` columns."""
    jb = fresh("jb", (*c.rows, c.r, c.k, c.d))
    jj = fresh("jj", (*c.rows, c.r, c.k, c.d, jb))
    S, E = c.s_init.target.array, c.exp.target.array
    col = Binary("+", Binary("*", Const(block), Var(jb, "iter")), Var(jj, "iter"))  # r, in blocks

    def blk(e: Expr) -> Expr:
        """Frame expression with the blocks of S and E in their arrays' first columns, r in blocks."""
        def one(n: Expr) -> Expr | None:
            if isinstance(n, Access) and n.array in (S, E):
                return Access(n.array, tuple(Var(jj, "iter") if i == Var(c.r, "iter") else substitute(i, {c.r: col})
                                             for i in n.index))
            return None
        return substitute(transform(e, one), {c.r: col})

    def swap(e: Expr, old: Access, new: Expr) -> Expr:
        return transform(e, lambda n: new if n == old else None)

    m_acc, l_acc, o_acc = c.target(c.m_red), c.target(c.l_red), c.target(c.o_red)
    mb = substitute(c.target(c.norm), {c.r: Const(0)})  # the block maximum, in column 0 of P
    assert isinstance(mb, Access)
    e_acc = c.target(c.exp)
    rescale = Call("exp", (Binary("-", m_acc, mb),))
    _, factor = product_factor(c.value(c.norm), E)
    term = swap(sum_term(c.value(c.o_red), o_acc), c.target(c.norm), e_acc)
    g = max_term(c.value(c.m_red), m_acc)
    assert g is not None
    rows = c.rows

    def dom(st: Statement, order: tuple[str, ...]) -> isl.Set:
        """``st``'s domain in ``order`` (frame names, r split into jb and jj; jj dropped when absent)."""
        frame = c.frames[st.name]
        old = ", ".join(f"o_{i}" for i in st.iterators)
        eqs = [f"{frame[i]} = o_{i}" if frame[i] != c.r else f"{block} * {jb} + {jj} = o_{i}"
               for i in st.iterators]
        full = order if jj in order else order + (jj,)
        m = isl.Map(f"{params_prefix(program.params)}{{ {st.name}[{old}] -> F[{', '.join(full)}] : "
                    f"{' and '.join(eqs)} and 0 <= {jj} < {block} }}")
        out = st.domain.apply(m)
        if jj not in order:
            out = out.project_out(isl.dim_type.set, len(order), 1).set_tuple_name("F")
        return out

    def stmt(name: str, order: tuple[str, ...], domain: isl.Set, target: Expr, value: Expr, rank: int | None,
             top: int) -> Statement:
        domain = domain.set_tuple_name(name)
        for i, n in enumerate(order):
            domain = domain.set_dim_name(isl.dim_type.set, i, n)
        inner = len(order) - len(rows) - 1
        position = ((top,) + (0,) * len(order) if rank is None else
                    (top,) + (0,) * len(rows) + (rank,) + (0,) * inner)
        assert isinstance(target, Access)
        return Statement(name, domain, order, target, value, position)

    first, last = _top_levels(program, c)
    nest = first + 2
    bj, bjj = rows + (jb,), rows + (jb, jj)
    row_dom = dom(c.m_red, bj)
    first_block = row_dom.intersect(isl.Set(f"{params_prefix(program.params)}{{ F[{', '.join(bj)}] : {jb} = 0 }}"))
    later = row_dom.intersect(isl.Set(f"{params_prefix(program.params)}{{ F[{', '.join(bj)}] : {jb} >= 1 }}"))
    out_dom = dom(c.o_red, rows + (jb, c.d))
    out_later = out_dom.intersect(isl.Set(f"{params_prefix(program.params)}{{ F[{', '.join(rows + (jb, c.d))}] : "
                                          f"{jb} >= 1 }}"))
    seed = substitute(transform(g, lambda n: Access(n.array, tuple(Const(0) if i == Var(c.r, "iter") else i
                                                                     for i in n.index))
                                if isinstance(n, Access) and n.array == S else None), {c.r: Const(0)})
    taken = {st.name for st in program.statements}

    def named(stem: str) -> str:
        name = fresh(stem, taken)
        taken.add(name)
        return name

    body = [
        (c.s_init.name, bjj, dom(c.s_init, bjj), blk(c.target(c.s_init)), blk(c.value(c.s_init))),
        (c.s_red.name, bjj + (c.k,), dom(c.s_red, bjj + (c.k,)), blk(c.target(c.s_red)), blk(c.value(c.s_red))),
        (c.m_init.name, bj, first_block, mb, seed),
        (named(f"{c.m_red.name}_seed"), bj, later, mb, m_acc),
        (c.m_red.name, bjj, dom(c.m_red, bjj), mb, blk(swap(c.value(c.m_red), m_acc, mb))),
        (c.exp.name, bjj, dom(c.exp, bjj), blk(e_acc), blk(swap(c.value(c.exp), m_acc, mb))),
        (named(f"{c.l_red.name}_rescale"), bj, later, l_acc, Binary("*", l_acc, rescale)),
        (c.l_red.name, bjj, dom(c.l_red, bjj), l_acc, blk(c.value(c.l_red))),
        (named(f"{c.o_red.name}_rescale"), rows + (jb, c.d), out_later, o_acc, Binary("*", o_acc, rescale)),
        (c.o_red.name, rows + (jb, c.d, jj), dom(c.o_red, rows + (jb, c.d, jj)), o_acc,
         Binary("+", o_acc, blk(term))),
        (named(f"{c.m_red.name}_carry"), bj, row_dom, m_acc, mb),
    ]
    new = [stmt(name, order, d_, t, v, rank, nest) for rank, (name, order, d_, t, v) in enumerate(body)]
    o_rows = renamed_domain(program, c.o_init, c.frames[c.o_init.name], rows + (c.d,))
    new.append(stmt(named(f"{c.o_red.name}_scale"), rows + (c.d,), o_rows, o_acc, Binary("*", o_acc, factor), None,
                    first + 3))
    inits = [replace(c.l_init, position=(first,) + (0,) * len(c.l_init.iterators)),
             replace(c.o_init, position=(first + 1,) + (0,) * len(c.o_init.iterators))]
    shift = first + 4 - (last + 1)
    names = {st.name for st in c.statements()}
    kept = [st if st.position[0] < first else replace(st, position=(st.position[0] + shift,) + st.position[1:])
            for st in program.statements if st.name not in names]
    before = [st for st in kept if st.position[0] < first]
    after = [st for st in kept if st.position[0] >= first]
    return replace(program, statements=tuple(before + inits + new + after))


def online_softmax(program: Program, temporaries: Iterable[str], *, block: int) -> tuple[Program, list[Decision]]:
    """``program`` with its softmax-weighted sums in online form (module docstring), blocks of ``block``
    columns, and the decisions; the program itself when nothing matches."""
    temps = set(temporaries)
    decisions: list[Decision] = []
    seen: set[str] = set()
    changed = True
    while changed:  # each chain in turn (several attention layers), each max reduction tried once
        changed = False
        for red in program.statements:
            if red.name in seen or max_term(red.value, red.target) is None or not red.iterators:
                continue
            seen.add(red.name)
            try:
                chain = match(program, red, temps)
                program = _rewrite(program, chain, block)
            except NoMatch as why:
                decisions.append(Decision("rewrite", "online-softmax-declined", red.name,
                                          f"max reduction {red.name} not put in online form: {why}"))
                log.info("%s: %s", program.name, decisions[-1])
                continue
            decisions.append(Decision(
                "rewrite", "online-softmax", red.name,
                f"online softmax: max reduction {red.name} and the sums over its columns "
                f"({chain.l_red.name}, {chain.o_red.name}) run in one pass over blocks of {block} "
                f"columns; {chain.s_init.target.array}, {chain.exp.target.array} and "
                f"{chain.norm.target.array} hold one block per row",
                {"sums": (chain.l_red.name, chain.o_red.name), "block": block}))
            log.info("%s: %s", program.name, decisions[-1])
            changed = True
            break
    return program, decisions
