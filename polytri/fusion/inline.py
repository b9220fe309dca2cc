"""Producer inlining: a temporary array's producer recomputed inside its consumers instead of stored.

When the caller declares an array *temporary* (its contents after the call do not matter: an
intermediate of a torch graph, the horizontal pass of a separable blur), a statement ``P`` that is the
only writer of that array can be substituted into every statement that reads it: the read ``T[g(j)]``
becomes ``P``'s value at the instance that wrote ``T[g(j)]``.  The consumer then no longer depends on
``P``, the two fuse without any shift, and ``T`` is never written: fusion with recomputation, in its
simplest (per-use) form.

Inlining is exact when, proved with isl:

* ``P`` writes each element once (its subscripts are distinct iterators plus constants, so the instance
  that wrote an element is known), and every element a consumer reads was written by ``P``, earlier in
  the original order;
* ``P`` reads only arrays that no statement writes (so its inputs have the same values when recomputed)
  and does not read ``T`` itself; on the GPU targets (``settled_inputs``) also arrays whose every write
  of an element ``P`` reads comes before ``P`` reads it (isl), such as a finished row maximum;
* (with a machine ``balance``, as :func:`polytri.compile` does) each read of ``T`` in a consumer reads
  each element at one consumer instance only (an injective access, isl): no recomputation per broadcast
  use; and the operations added cost less than the traffic saved (:mod:`.cost`).

It pays when the recomputed work is small: the producer's expression has at most ``max_nodes`` nodes and
each consumer reads ``T`` at most ``max_reads`` times (the blur's vertical pass reads five rows of the
horizontal one: five recomputations of five additions against a round trip through memory).  Every
decision is logged in ``polytri.fusion`` with its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

import islpy as isl

from .. import dtypes
from ..ir.affine import linear
from ..ir.expr import Access, Binary, Call, Cast, Const, Expr, Unary, accesses, substitute, transform
from ..ir.indirect import is_indirect
from ..ir.program import Program, Statement
from ..ir.reduction import is_nan_extreme, nan_select
from ..pipeline.decisions import Decision
from ..schedule.dependences import follows_writes
from .cost import Recomputation, recomputation

log = logging.getLogger("polytri.fusion")


def _solve(st: Statement) -> dict[str, tuple[int, int]] | None:
    """Each iterator of ``st`` as (subscript position, offset) of its target: ``T[i + 1, j]`` gives
    ``i = x0 - 1, j = x1``; ``None`` when the target is not such a permutation with offsets."""
    out: dict[str, tuple[int, int]] = {}
    for pos, idx in enumerate(st.target.index):
        lin = linear(idx)
        if lin is None:
            return None
        coeffs, const = lin
        iters = {k: v for k, v in coeffs.items() if k in st.iterators}
        if len(iters) != 1 or len(coeffs) != 1 or next(iter(iters.values())) != 1:
            return None
        name = next(iter(iters))
        if name in out:
            return None
        out[name] = (pos, const)
    return out if set(out) == set(st.iterators) else None


def _offset(e: Expr, k: int) -> Expr:
    if k == 0:
        return e
    return Binary("-" if k > 0 else "+", e, Const(abs(k)))


def _written_before_read(program: Program, producer: Statement, consumer: Statement, acc: Access) -> str | None:
    """Why reading ``acc`` in ``consumer`` does not always see ``producer``'s value, or ``None``."""
    params = program.params
    write = isl.UnionMap.from_map(producer.access_map(producer.target, params)).intersect_params(program.context)
    read = isl.UnionMap.from_map(consumer.access_map(acc, params)).intersect_params(program.context)
    if not read.range().is_subset(write.range()):
        return f"{consumer.name} reads elements of {acc.array} that {producer.name} does not write"
    if not follows_writes(program, producer, consumer, (acc,)):
        return f"{consumer.name} may read {acc.array} before {producer.name} writes it"
    return None


def _size(e: Expr, leaf: int = 1) -> int:
    """Nodes of an expression, an array element or a constant counting as ``leaf`` (an element's
    subscripts are address arithmetic); ``leaf=0`` counts the arithmetic operations only.  A ``nanmax`` /
    ``nanmin`` counts as the select it is computed with."""
    if is_nan_extreme(e):
        return _size(nan_select(e), leaf)
    if isinstance(e, Unary | Cast):
        return 1 + _size(e.operand, leaf)
    if isinstance(e, Binary):
        return 1 + _size(e.lhs, leaf) + _size(e.rhs, leaf)
    if isinstance(e, Call):
        return 1 + sum(_size(a, leaf) for a in e.args)
    return leaf


def _settled(program: Program, p: Statement, array: str) -> bool:
    """Whether every write of an element of ``array`` that ``p`` reads comes before every instance of
    ``p`` that reads it: the value ``p`` reads is final, the same when recomputed later."""
    reads = [acc for acc in p.reads if acc.array == array]
    return all(follows_writes(program, w, p, reads) for w in program.statements if w.target.array == array)


def _candidate(program: Program, array: str, written: set[str], max_nodes: int, settled: bool
               ) -> Statement | str:
    """The producer of temporary ``array`` if it can be inlined, else the reason it cannot."""
    writers = [s for s in program.statements if s.target.array == array]
    if len(writers) != 1:
        return f"{array} is written by {len(writers)} statements"
    p = writers[0]
    if _solve(p) is None:
        return f"{p.name} writes {array} through subscripts that are not its iterators plus constants"
    inputs = {a.array for a in accesses(p.value)}
    if array in inputs:
        return f"{p.name} reads {array} itself"
    moving = sorted(a for a in inputs & written if not (settled and _settled(program, p, a)))
    if moving:
        return f"{p.name} reads {', '.join(moving)}, which the program writes" + (
            " after or while it runs" if settled else "")
    size = _size(p.value)
    if size > max_nodes:
        return f"{p.name}'s expression has {size} nodes (recomputation budget {max_nodes})"
    return p


def _broadcast_read(program: Program, consumer: Statement, acc: Access) -> str | None:
    """Why ``acc`` reads some element at several instances of ``consumer`` (a recomputation per use would
    repeat the producer that many times), or ``None``."""
    read = consumer.access_map(acc, program.params).intersect_params(program.context)
    if read.is_injective():
        return None
    return f"{consumer.name} reads each element of {acc.array} at several of its instances (recomputed each time)"


def inline_producers(program: Program, temporaries: Iterable[str], *, max_nodes: int = 32,
                     max_reads: int = 9, settled_inputs: bool = False, balance: float | None = None
                     ) -> tuple[Program, list[Decision]]:
    """``program`` with the producers of temporary arrays recomputed in their consumers, and the decisions.
    ``settled_inputs``: a producer may also read arrays the program writes, where every write of what it
    reads comes first (a softmax's exponentials of the finished row maximum): the GPU targets, where an
    ``exp`` recomputed costs less than a round trip through global memory (the CPU keeps such rows in
    local buffers instead).  ``balance`` (operations per byte, :mod:`.cost`): a recomputation must pay
    for itself against the traffic it saves, and every consumer access must read each element at one of
    its instances only (the MLP's second product reads each element of the first's gelu once per output
    column: recomputed there, the gelu would run that many times, and the product would leave tl.dot)."""
    decisions: list[Decision] = []
    names = {a.name for a in program.arrays}
    for array in [t for t in temporaries if t in names]:
        program, decision = _inline(program, array, max_nodes=max_nodes, max_reads=max_reads,
                                    settled_inputs=settled_inputs, balance=balance)
        decisions.append(decision)
        log.info("%s: %s", program.name, decision)
    return program, decisions


def _inline(program: Program, array: str, *, max_nodes: int, max_reads: int, settled_inputs: bool,
            balance: float | None) -> tuple[Program, Decision]:
    """``program`` with the producer of temporary ``array`` recomputed in its readers where it can and (with
    a ``balance``) it pays, and the decision; the program is unchanged when the array is kept in memory."""
    written = {s.target.array for s in program.statements}
    found = _candidate(program, array, written, max_nodes, settled_inputs)
    if isinstance(found, str):
        return program, _kept(array, found)
    p = found
    readers = [s for s in program.statements if s is not p and any(a.array == array for a in s.reads)]
    why = _unsafe_reads(program, p, readers, array, max_reads, broadcast=balance is not None)
    cost = None
    if balance is not None and not why:
        cost = _cost(program, p, readers, array, balance)
        if not cost.pays:
            why = f"recomputing {p.name} does not pay: {cost}"
    if why:
        return program, _kept(array, why)
    program = _recomputed(program, p, readers, array)
    text = (f"{p.name} ({p.text()}) recomputed in {', '.join(r.name for r in readers) or 'no statement'}; "
            f"temporary {array} is not written" + (f" ({cost})" if cost is not None else ""))
    return program, Decision("inline", "recompute", array, text,
                             {"producer": p.name, "readers": tuple(r.name for r in readers), "cost": cost})


def _kept(array: str, why: str) -> Decision:
    return Decision("inline", "keep", array, f"temporary {array} kept in memory: {why}", {"reason": why})


def _unsafe_reads(program: Program, p: Statement, readers: list[Statement], array: str, max_reads: int, *,
                  broadcast: bool) -> str | None:
    """Why the reads of ``array`` by ``readers`` cannot see ``p``'s value recomputed (too many reads in
    one reader, a read before the write, with ``broadcast`` an element read at several instances), or
    ``None``.  A reader with too many reads overrides an earlier reason; otherwise the first one found
    is kept."""
    why = None
    for r in readers:
        reads = [a for a in r.reads if a.array == array]
        if len(reads) > max_reads:
            why = f"{r.name} reads {array} {len(reads)} times (budget {max_reads})"
        for acc in reads:
            if is_indirect(acc):  # which element it reads is known only at run time
                return f"{r.name} reads {array} through an indirect subscript"
            why = why or _written_before_read(program, p, r, acc)
            why = why or (_broadcast_read(program, r, acc) if broadcast else None)
    return why


def _cost(program: Program, p: Statement, readers: list[Statement], array: str, balance: float) -> Recomputation:
    """The cost of recomputing ``p`` at every read of ``array`` by ``readers`` (:mod:`.cost`)."""
    n_reads = sum(1 for r in readers for a in r.reads if a.array == array)
    return recomputation(_size(p.value, leaf=0), n_reads, dtypes.dtype(program.array(array).dtype).itemsize,
                         balance)


def _recomputed(program: Program, p: Statement, readers: list[Statement], array: str) -> Program:
    """``program`` without ``p``, each read of ``array`` by ``readers`` replaced by ``p``'s value at the
    instance that wrote the element."""
    solution = _solve(p)
    assert solution is not None

    def recompute(n: Expr) -> Expr | None:
        """A read of ``array`` as the producer's value at the instance that wrote the element."""
        if not (isinstance(n, Access) and n.array == array):
            return None
        env = {it: _offset(n.index[pos], k) for it, (pos, k) in solution.items()}
        return substitute(p.value, env)

    statements = []
    for s in program.statements:
        if s is p:
            continue
        if s in readers:
            s = replace(s, value=transform(s.value, recompute))
        statements.append(s)
    return replace(program, statements=tuple(statements))
