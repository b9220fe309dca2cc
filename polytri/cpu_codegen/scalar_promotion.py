"""Elements that an innermost loop updates in place, held in C locals for the whole loop.

``s[i] = s[i] + A[i, j] * x[j]`` over ``j`` reads and writes the same element at every iteration.  gcc
keeps one such element in a register, but not several (the rows of an unroll-and-jam,
``schedule/jam.py``, run eight): it then loads and stores each at every iteration, and the chain of each
sum goes through memory.  The printer loads each such element into a local before the loop, updates the
local, and stores it back after (scalar replacement).  The values and their order are unchanged.

An element is held when the loop's body is a sequence of statements (no guard), its subscripts are
affine and do not move with the loop's counter, some statement writes it, no store to its array moves
with the loop, and every other access to its array in the loop is the same element or provably another
one: a fixed element whose subscripts differ by a nonzero constant, or a read that moves with the loop
but meets the element only outside the loop's range (:func:`_apart`).

A loop that vectorizes (``#pragma omp simd``) holds the elements it only reads and does not move
(:func:`invariant_reads`), in ``const`` locals loaded before it.  gcc reloads such an element at every
iteration and, where a statement before the loop stored it, its partial redundancy elimination carries the
stored value into the loop as a branch, and the loop is no longer vectorized ("control flow in loop"):
floyd-warshall's ``path[i, k]`` after the piece ``j = k`` of its index-set split: without the locals the
split kernel took 22.5 ms against 11.4 at MEDIUM on two threads, 39.1 against 19.3 on one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..ir.affine import linear
from ..ir.expr import Access, Expr, accesses, substitute
from ..ir.program import Statement
from ..schedule.loop_ast import For, loop_upper, straight_runs

#: An element's key: the array, then each subscript as (coefficients by name, constant).
Key = tuple[str, tuple[tuple[tuple[tuple[str, int], ...], int], ...]]


@dataclass(frozen=True)
class Held:
    """An element held in a local for one loop."""

    element: Access
    """The array element, its subscripts in the enclosing loops' counters."""
    local: str
    """The C local that holds it."""


def element_key(access: Access, env: Mapping[str, Expr]) -> Key | None:
    """The key of ``access`` with the statement's iterators replaced by ``env`` (a run's arguments), or
    ``None`` where a subscript is not affine."""
    index = []
    for i in access.index:
        lin = linear(substitute(i, env))
        if lin is None:
            return None
        index.append((tuple(sorted(lin[0].items())), lin[1]))
    return access.array, tuple(index)


def _moves(key: Key, counter: str) -> bool:
    """Whether the element of ``key`` moves with ``counter``."""
    return any(counter == name for sub in key[1] for name, _ in sub[0])


def _distinct(a: Key, b: Key) -> bool:
    """Whether two invariant elements differ whatever the counters: one subscript differs by a constant."""
    return any(x[0] == y[0] and x[1] != y[1] for x, y in zip(a[1], b[1]))


def _minus(a: tuple[dict[str, int], int], b: tuple[dict[str, int], int]) -> tuple[dict[str, int], int]:
    coeffs = dict(a[0])
    for name, v in b[0].items():
        coeffs[name] = coeffs.get(name, 0) - v
    return {n: v for n, v in coeffs.items() if v}, a[1] - b[1]


def _apart(moving: Key, fixed: Key, loop: For) -> bool:
    """Whether an access that moves with ``loop`` never meets a fixed element: in one subscript it is
    ``counter + f`` and the fixed element's ``g`` puts the meeting point ``g - f`` outside the loop's
    range, at or past its upper bound or before its lower one by a constant (trisolv's ``x[j]``, ``j <
    8 c``, against the block's ``x[8 c + r]``)."""
    lower, upper = linear(loop.lower), (linear(u) if (u := loop_upper(loop)) is not None else None)
    for (m_coeffs, m_const), (f_coeffs, f_const) in zip(moving[1], fixed[1]):
        rest = dict(m_coeffs)
        if rest.pop(loop.var, 0) != 1:
            continue
        meet = _minus((dict(f_coeffs), f_const), (rest, m_const))
        above = None if upper is None else _minus(meet, upper)
        below = None if lower is None else _minus(lower, meet)
        for gap, least in ((above, 0), (below, 1)):
            if gap is not None and not gap[0] and gap[1] >= least:
                return True
    return False


def held_elements(loop: For, statements: Mapping[str, Statement]) -> tuple[Held, ...]:
    """The elements ``loop`` may hold in locals (see the module's docstring), named ``pt__h0``,
    ``pt__h1``, ... (one innermost loop at a time holds elements)."""
    runs = straight_runs(loop.body)
    if not runs:
        return ()
    seen: dict[str, dict[Key | None, tuple[Access, bool]]] = {}
    moving: dict[str, list[Key]] = {}
    for run in runs:
        st = statements[run.statement]
        env = dict(zip(st.iterators, run.args))
        for acc, written in ((st.target, True), *((a, False) for a in accesses(st.value))):
            key = element_key(acc, env)
            if key is not None and _moves(key, loop.var):
                moving.setdefault(acc.array, []).append(key)
                if not written:
                    continue
                key = None  # a store that moves with the loop: nothing of this array is held
            element = Access(acc.array, tuple(substitute(i, env) for i in acc.index))
            was = seen.setdefault(acc.array, {}).get(key)
            seen[acc.array][key] = (element, written or (was is not None and was[1]))
    out: list[Held] = []
    for array, elements in seen.items():
        keys = [k for k in elements if k is not None]
        if len(keys) < len(elements) or not any(w for _, w in elements.values()):
            continue
        if all(_distinct(a, b) for k, a in enumerate(keys) for b in keys[k + 1:]) and all(
                _apart(m, f, loop) for m in moving.get(array, ()) for f in keys):
            out += [Held(elements[k][0], f"pt__h{len(out) + n}")
                    for n, k in enumerate(k for k in keys if elements[k][1])]
    return tuple(out)


def invariant_reads(loop: For, statements: Mapping[str, Statement]) -> tuple[Held, ...]:
    """The elements a vectorized ``loop`` holds in ``const`` locals (see the module's docstring): read at
    subscripts that are affine and do not move with the loop, of an array the loop stores to, and provably
    never written in it (every store to the array is a fixed element distinct from it, or moves with the
    loop and meets it only outside the loop's range).  Elements of arrays the loop does not store to gcc
    hoists itself: held in locals, doitgen's ``A[r, q, s]`` ran 1.5x slower (MEDIUM).  Named ``pt__h0``,
    ``pt__h1``, ..."""
    runs = straight_runs(loop.body)
    if not runs:
        return ()
    reads: dict[Key, Access] = {}
    stores: dict[str, list[tuple[Key | None, bool]]] = {}
    for run in runs:
        st = statements[run.statement]
        env = dict(zip(st.iterators, run.args))
        key = element_key(st.target, env)
        stores.setdefault(st.target.array, []).append(
            (key, key is not None and _moves(key, loop.var)))
        for acc in accesses(st.value):
            key = element_key(acc, env)
            if key is not None and acc.index and not _moves(key, loop.var):
                reads.setdefault(key, Access(acc.array, tuple(substitute(i, env) for i in acc.index)))

    def unwritten(key: Key) -> bool:
        return all(k is not None and (_apart(k, key, loop) if moves else _distinct(k, key))
                   for k, moves in stores.get(key[0], ()))

    held = [element for key, element in reads.items() if key[0] in stores and unwritten(key)]
    return tuple(Held(e, f"pt__h{n}") for n, e in enumerate(held))


def holding_lines(held: tuple[Held, ...], c_type: Callable[[str], str], ref: Callable[[Access], str]
                  ) -> tuple[list[str], list[str]]:
    """The declarations that load the held elements before the loop, and the stores after it."""
    return ([f"{c_type(h.element.array)} {h.local} = {ref(h.element)};" for h in held],
            [f"{ref(h.element)} = {h.local};" for h in held])
