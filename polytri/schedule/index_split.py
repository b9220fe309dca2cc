"""Index-set splitting: a loop whose carried dependences all meet one iteration runs as three loops.

floyd-warshall updates ``path[i, j] = min(path[i, j], path[i, k] + path[k, j])`` over ``j``.  Every
iteration reads ``path[i, k]``, and the iteration ``j = k`` writes it: the loop carries a dependence, so it
neither vectorizes nor runs its iterations in any other order, although a single iteration is involved.
Split at that iteration, into ``j < k``, ``j = k`` and ``j > k``, run one after the other, the program
runs the same instances in the same order, and no piece carries a dependence: the first and the last
vectorize.  The same holds one level out: row ``k`` writes ``path[k, j]``, which every other row reads, and
split at ``i = k`` the rows before and after it run in parallel.

A loop is split where every pair of its statements' instances that touch one element (at least one of
them writing it), at two different iterations of the loop and the same iterations of the loops around it,
has an end at one point ``x = f(outer counters)``: the *pivot*, a single-valued affine function that isl
finds as the place of one end of one such pair.  The pieces are the loop's statements restricted to
``x < f``, ``x = f`` and ``x > f`` (outer iterations with no pivot run whole in the first), placed as
three sibling loops in the input order; every other statement keeps its place.  A split where no piece off
the pivot runs two iterations of the loop is not made (a sum of two terms "meets" its first one and has
nothing to gain: a 2 x 2 pooling window).  Dependences are computed
on the split program and every schedule is proved legal on it as on any other.  Loops are examined from the
innermost out, and a statement is split at most :data:`MAX_SPLITS` times (floyd-warshall's nine pieces).

Decision kind ``index-set-split``, ``data``: the loop's level, its statements, the pivot (isl's text).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from dataclasses import replace

import islpy as isl

from ..ir.islutil import maps
from ..ir.program import Program, Statement
from ..pipeline.decisions import Decision

log = logging.getLogger("polytri.schedule")

#: The most times one statement of the input is split: twice makes nine pieces.
MAX_SPLITS = 2
#: The pieces' name suffixes, in their order.
PIECES = ("lt", "eq", "gt")


def _loops(program: Program, level: int) -> dict[tuple[int, ...], list[Statement]]:
    """The statements of each loop at ``level`` (counted from 0, outermost), by the loop's position."""
    out: dict[tuple[int, ...], list[Statement]] = defaultdict(list)
    for st in program.statements:
        if len(st.iterators) > level:
            out[st.position[:level + 1]].append(st)
    return out


def _conflicts(program: Program, group: list[Statement], level: int) -> list[isl.Map]:
    """The pairs of instances of ``group`` that touch one element, one of them writing it, at two
    iterations of the loop at ``level`` (the earlier first) and the same iterations of the loops around it:
    one map per pair of statements."""
    inside = isl.UnionSet.empty(program.context.get_space())
    for s in group:
        inside = inside.union(isl.UnionSet.from_set(s.domain))
    w, r = program.writes.intersect_domain(inside), program.reads.intersect_domain(inside)
    touch = w.apply_range(w.reverse()).union(w.apply_range(r.reverse())).union(r.apply_range(w.reverse()))
    arity = {s.name: len(s.iterators) for s in group}
    out = []
    for m in maps(touch):
        a, b = m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)
        same = [f"a{d} = b{d}" for d in range(level)]
        order = isl.Map(f"{{ {a}[{', '.join(f'a{d}' for d in range(arity[a]))}] -> "
                        f"{b}[{', '.join(f'b{d}' for d in range(arity[b]))}] : "
                        f"{' and '.join([*same, f'a{level} < b{level}'])} }}")
        pairs = m.intersect(order.align_params(m.get_space()))
        if not pairs.is_empty():
            out.append(pairs)
    return out


def _outer(s: isl.Set, level: int) -> isl.Map:
    """A statement's instances as a map from the loops around ``level`` to the counter at ``level``."""
    n = s.dim(isl.dim_type.set)
    kept = s.project_out(isl.dim_type.set, level + 1, n - level - 1).reset_tuple_id()
    return isl.Map.from_range(kept).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, level)


def _pivots(conflicts: list[isl.Map], level: int) -> list[isl.Map]:
    """Candidate pivots: the union of the single-valued places of one end of a conflict where it is
    single-valued itself (floyd-warshall's writes of ``path[i, k]`` at ``j = k`` for ``k < N - 1`` and its
    reads for ``k > 0`` together), then each of them alone."""
    found: list[isl.Map] = []
    for c in conflicts:
        for part in c.get_basic_maps():  # the pairs of one pair of accesses lie in a basic map of their own
            for end in (part.domain(), part.range()):
                f = _outer(isl.Set.from_basic_set(end), level)
                if f.is_single_valued() and not any(f.is_equal(g) for g in found):
                    found.append(f)
    if len(found) > 1:
        union = found[0]
        for f in found[1:]:
            union = union.union(f)
        union = union.coalesce()
        if union.is_single_valued():
            found.insert(0, union)
    return found


def _lift(outer: isl.Set, st: Statement, level: int) -> isl.Set:
    """A set of (outer counters, counter at ``level``) as a set of ``st``'s instances."""
    n = len(st.iterators)
    s = outer.add_dims(isl.dim_type.set, n - level - 1).set_tuple_name(st.name)
    return st.domain.intersect(s.align_params(st.domain.get_space()))


def _at(pivot: isl.Map) -> isl.Set:
    return pivot.wrap().flatten()


def _around(pivot: isl.Map, op: str) -> isl.Set:
    """The (outer counters, counter) on one side of the pivot: ``op`` is ``<`` or ``>``."""
    side = isl.Map(f"{{ [p] -> [x] : x {op} p }}").align_params(pivot.get_space())
    return pivot.apply_range(side).wrap().flatten()


def _touches(c: isl.Map, pivot_sets: dict[str, isl.Set]) -> bool:
    """Whether every pair of ``c`` has an end at the pivot."""
    src = pivot_sets[c.get_tuple_name(isl.dim_type.in_)]
    dst = pivot_sets[c.get_tuple_name(isl.dim_type.out)]
    return c.subtract_domain(src).subtract_range(dst).is_empty()


def _pieces(st: Statement, pivot: isl.Map, level: int) -> list[isl.Set]:
    """``st``'s domain before, at and after the pivot; outer iterations without a pivot run in the first."""
    none = pivot.domain().complement().add_dims(isl.dim_type.set, 1)
    lt = _lift(_around(pivot, "<"), st, level).union(_lift(none, st, level))
    return [lt, _lift(_at(pivot), st, level), _lift(_around(pivot, ">"), st, level)]


def _split_group(program: Program, group: list[Statement], level: int, pivot: isl.Map) -> Program | None:
    """``program`` with ``group``'s loop at ``level`` split at ``pivot``; ``None`` where the pieces do not
    partition a domain exactly, where no piece off the pivot runs two iterations of the loop (a sum over
    two terms has a "pivot", its first one, and nothing to gain), or where a piece's name is taken."""
    names = {s.name for s in program.statements}
    rank = group[0].position[level]
    parent = group[0].position[:level]
    members = {s.name for s in group}
    new: list[Statement] = []
    useful = False
    for st in program.statements:
        if st.name not in members:
            pos = st.position
            if pos[:level] == parent and len(pos) > level and pos[level] > rank:
                pos = pos[:level] + (pos[level] + len(PIECES) - 1,) + pos[level + 1:]
            new.append(replace(st, position=pos))
            continue
        pieces = _pieces(st, pivot, level)
        whole = pieces[0].union(pieces[1]).union(pieces[2])
        if not whole.is_equal(st.domain) or any(
                not pieces[a].intersect(pieces[b]).is_empty() for a in range(3) for b in range(a + 1, 3)):
            return None
        useful = useful or any(not _outer(pieces[k], level).is_single_valued() for k in (0, 2))
        for k, (piece, suffix) in enumerate(zip(pieces, PIECES)):
            if piece.is_empty():
                continue
            name = f"{st.name}_{suffix}"
            if name in names:
                return None
            pos = st.position[:level] + (rank + k,) + st.position[level + 1:]
            new.append(replace(st, name=name, domain=piece.set_tuple_name(name).coalesce(), position=pos))
    if not useful:
        return None
    new.sort(key=lambda s: s.position)
    return replace(program, statements=tuple(new))


def split_loops(program: Program) -> tuple[Program, list[Decision]]:
    """``program`` with every loop that qualifies split at its pivot (see the module's text), and one
    decision per split; ``program`` itself where none does."""
    decisions: list[Decision] = []
    splits: dict[str, int] = {s.name: 0 for s in program.statements}
    for level in reversed(range(program.depth)):
        while True:  # a split's pieces carry nothing: each round splits one more loop or ends
            step = _split_one(program, level, splits)
            if step is None:
                break
            program, decision = step
            decisions.append(decision)
    return program, decisions


def _equation(pivot: isl.Map, names: tuple[str, ...]) -> str:
    """The pivot as ``j = k`` in the statement's counters (isl's text of the map where it has no such
    form)."""
    named = pivot
    for d, name in enumerate(names[:-1]):
        named = named.set_dim_name(isl.dim_type.in_, d, name)
    named = named.set_dim_name(isl.dim_type.out, 0, names[-1])
    found = re.search(rf"-> \[({re.escape(names[-1])} = [^\]:]+)\]", str(named))
    return found.group(1) if found else str(pivot)


def _split_one(program: Program, level: int, splits: dict[str, int]) -> tuple[Program, Decision] | None:
    """The program with the first loop at ``level`` that qualifies split, and its decision; ``None`` where
    no loop at ``level`` does.  ``splits``: how many times each statement's input statement was split."""
    for group in _loops(program, level).values():
        if any(splits[s.name] >= MAX_SPLITS for s in group):
            continue
        conflicts = _conflicts(program, group, level)
        if not conflicts:
            continue
        for pivot in _pivots(conflicts, level):
            ends = {s.name: _lift(_at(pivot), s, level) for s in group}
            if not all(_touches(c, ends) for c in conflicts):
                continue
            split = _split_group(program, group, level, pivot)
            if split is None:
                continue
            names = sorted(s.name for s in group)
            for s in split.statements:
                base = s.name.rsplit("_", 1)[0]
                if s.name not in splits and base in splits:
                    splits[s.name] = splits[base] + 1
            counter = group[0].iterators[level]
            text = (f"index-set split: the loop over {counter} of {', '.join(names)} runs in three pieces, "
                    f"before, at and after {_equation(pivot, group[0].iterators[:level + 1])}: every "
                    f"dependence it carried has an end at that iteration, and no piece carries one")
            decision = Decision("schedule", "index-set-split", ", ".join(names), text,
                                {"level": level, "statements": tuple(names), "pivot": str(pivot)})
            log.info("%s: %s", program.name, text)
            return split, decision
    return None
