"""A Pluto-style affine scheduler (Bondhugula et al., PLDI 2008; Pluto+, TOPLAS 2016) on islpy.

Hyperplanes are found one at a time.  Each is valid for every dependence not yet carried by an
earlier band (so the rows of a band are permutable: the band can be tiled), bounded by ``u . n + w``,
and is the lexicographic minimum of ``(u, w, statement coefficients innermost first, constants)``
(isl's exact integer ``lexmin``), with non-negative coefficients, linearly independent of the
statement's earlier rows.  When no hyperplane exists the band ends; the dependences it carried are
removed (exactly: only the pairs of instances on which all its rows are equal remain), and when still
no hyperplane can be found the statements are distributed between the strongly connected components of
the graph of the remaining dependences (a scalar dimension), as the fusion policy says:

* ``max``: cut only when no hyperplane can be found;
* ``smart`` (default): also cut at the start between components of different loop depths;
* ``none``: cut between all components at the start (one nest per component);
* ``outer``: fuse the outermost parallel loops of all statements, then distribute the components below
  them, independent components of one loop depth in one nest (the rows of a softmax or a layer norm:
  each row's passes run while the row is in cache; a row's sum and maximum share one pass).  A
  statement of contraction form (:mod:`polytri.ir.contraction`) keeps a nest of its own, which the C
  generator computes with packed panels.  Without a loop that every other statement shares and along
  which no dependence has a distance, as ``smart`` after that cut.

The result is checked by :mod:`polytri.schedule.legality`, which knows nothing of this module.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from math import lcm

import islpy as isl
import networkx as nx

from ..errors import PolytriError
from ..ir.contraction import contraction_form
from ..ir.program import Program, params_prefix
from ..pipeline.decisions import Decision
from .band_order import reorder_bands
from .dependences import Dependences
from .farkas import Layout, Rows, aligned_pieces, basic_set, bounding, validity
from .int_rank import int_rank, nullspace
from .rows import Row, union_map
from .schedule import Band, Schedule, parallel_dimensions

log = logging.getLogger("polytri.schedule")

FUSION_POLICIES = ("smart", "max", "none", "outer")

#: Bounds on the unknowns: coefficients, shifts, and the bounding function's terms.
MAX_COEFF = 8
MAX_SHIFT = 64
MAX_BOUND = 256
#: isl operations allowed per lexmin (so that no ILP can hang the compiler).
MAX_OPERATIONS = 2_000_000


class SchedulingError(PolytriError):
    """The scheduler could not find a complete schedule (the caller falls back to the original order)."""


@dataclass
class _State:
    program: Program
    layout: Layout
    rows: list[Row] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    fused_outer: Band | None = None
    """The band of shared parallel loops of policy ``outer`` (its order is kept: loops run inside it)."""

    def stmt_rows(self, name: str) -> list[tuple[int, ...]]:
        return [r.coeffs[name] for r in self.rows if not r.scalar]

    def rank(self, name: str) -> int:
        rows = self.stmt_rows(name)
        return int_rank(rows)

    def full_rank(self, name: str) -> bool:
        return self.rank(name) == self.layout.dims(name)

    def decide(self, kind: str, subject: str, text: str, **data: object) -> None:
        """Record a decision of stage ``schedule`` (and log it)."""
        self.decisions.append(Decision("schedule", kind, subject, text, data))
        log.info("%s: %s", self.program.name, text)


# -- linear independence ------------------------------------------------------------------------------
def _orthogonal_complement(rows: list[tuple[int, ...]], m: int) -> list[tuple[int, ...]]:
    """Integer basis of the vectors orthogonal to ``rows`` (all of Z^m when there are none): one vector per
    free column of the rows' reduced echelon form, scaled to integers and oriented so that its first
    non-zero entry is positive (Pluto does the same)."""
    if not rows:
        return [tuple(1 if j == k else 0 for j in range(m)) for k in range(m)]
    out = []
    for v in nullspace(rows):
        den = lcm(*(f.denominator for f in v))
        ints = [int(f * den) for f in v]
        first = next(x for x in ints if x)
        out.append(tuple(x if first > 0 else -x for x in ints))
    return out


def _independence(state: _State, names: list[str], lazy: bool) -> Rows:
    """Constraints making the new row independent of each listed statement's rows (eager), or of at
    least one statement's (lazy)."""
    lay = state.layout
    sums: list[dict[int, int]] = []
    cons: list[dict[int, int]] = []
    for name in names:
        total: dict[int, int] = {}
        for vec in _orthogonal_complement(state.stmt_rows(name), lay.dims(name)):
            form = {lay.column(lay.coeff(name, j)): h for j, h in enumerate(vec) if h}
            if form:
                cons.append(form)
                for col, h in form.items():
                    total[col] = total.get(col, 0) + h
        if total:
            sums.append(total)
    if not sums:
        return Rows.of(lay)
    if lazy:
        everything: dict[int, int] = {}
        for total in sums:
            for col, h in total.items():
                everything[col] = everything.get(col, 0) + h
        sums = [everything]
    return Rows.of(lay, ineqs=cons + [{0: -1, **total} for total in sums])


def _constant_extent(program: Program) -> int:
    """Largest constant bound of any iterator (0 when every bound involves a parameter)."""
    best = 0
    for st in program.statements:
        dom = st.domain.intersect_params(program.context)
        for j in range(dom.dim(isl.dim_type.set)):
            for pa in (dom.dim_max(j), dom.dim_min(j)):
                for _, aff in pa.get_pieces():
                    if aff.is_cst():
                        best = max(best, abs(int(aff.get_constant_val().to_python())))
    return best


def _bounds(layout: Layout, program: Program) -> Rows:
    """Boxes of the unknowns.  The constant ``w`` of the bounding function must be able to exceed every
    dependence distance when sizes are constants (a reduction over 2048 elements has distances up to
    2047 along its loop), so its bound grows with the largest constant extent."""
    w_max = max(MAX_BOUND, MAX_COEFF * program.depth * (_constant_extent(program) + 1))
    boxes = [(layout.u(k), MAX_BOUND) for k in range(len(layout.params))] + [("w", w_max)]
    for name, m in layout.statements:
        boxes += [(layout.coeff(name, j), MAX_COEFF) for j in range(m)] + [(layout.const(name), MAX_SHIFT)]
    cons: list[dict[int, int]] = []
    for unknown, hi in boxes:
        col = layout.column(unknown)
        cons += [{col: 1}, {0: hi, col: -1}]
    return Rows.of(layout, ineqs=cons)


# -- one hyperplane -----------------------------------------------------------------------------------
def _lexmin(space_set: isl.BasicSet | isl.Set) -> dict[str, int] | None:
    ctx = space_set.get_ctx()
    ctx.reset_operations()
    ctx.set_max_operations(MAX_OPERATIONS)
    try:
        # implicit equalities (coefficients that the constraints force to one value) made explicit first:
        # isl's integer lexmin on the set as built took 40 ms where it takes 1 ms after (adi)
        best = space_set.detect_equalities().lexmin()
        if best.is_empty():
            return None
        pt = best.sample_point()
    except isl.Error as exc:
        raise SchedulingError(f"the hyperplane ILP exceeded its budget or failed: {exc}") from None
    finally:
        ctx.set_max_operations(0)
    values: dict[str, int] = {}
    for i in range(best.dim(isl.dim_type.set)):
        name = best.get_dim_name(isl.dim_type.set, i)
        assert name is not None, "every unknown of the layout's space is named"
        values[name] = int(pt.get_coordinate_val(isl.dim_type.set, i).to_python())
    return values


def _row_from_solution(layout: Layout, sol: dict[str, int]) -> Row:
    coeffs = {n: tuple(sol[layout.coeff(n, j)] for j in range(m)) for n, m in layout.statements}
    consts = {n: sol[layout.const(n)] for n, _ in layout.statements}
    return Row(coeffs, consts, scalar=False)


# -- dependences left after a band or a cut -----------------------------------------------------------
def _row_constraint(row: Row, program: Program, piece: isl.BasicMap, op: str) -> isl.BasicMap:
    """``piece`` restricted by ``phi_T(t) op phi_S(s)`` for one row."""
    src = program.statement(piece.get_tuple_name(isl.dim_type.in_))
    dst = program.statement(piece.get_tuple_name(isl.dim_type.out))
    s_vars = [f"s{j}" for j in range(len(src.iterators))]
    t_vars = [f"t{j}" for j in range(len(dst.iterators))]

    def phi(stmt_name: str, vars_: list[str]) -> str:
        terms = [f"{c}*{v}" for c, v in zip(row.coeffs[stmt_name], vars_) if c]
        return " + ".join(terms + [str(row.consts[stmt_name])])

    text = (f"{params_prefix(program.params)}{{ {src.name}[{', '.join(s_vars)}] -> {dst.name}[{', '.join(t_vars)}] : "
            f"{phi(dst.name, t_vars)} {op} {phi(src.name, s_vars)} }}")
    return piece.intersect(isl.BasicMap(text).align_params(piece.get_space()))


def _uncarried(pieces: list[isl.BasicMap], rows: list[Row], program: Program) -> list[isl.BasicMap]:
    """The parts of the dependence pieces on which every row of ``rows`` is equal at source and target."""
    out = []
    for piece in pieces:
        for row in rows:
            piece = _row_constraint(row, program, piece, "=")
            if piece.is_empty():
                break
        if not piece.is_empty():
            out.append(piece)
    return out


# -- cuts ---------------------------------------------------------------------------------------------
def _dep_graph(program: Program, pieces: list[isl.BasicMap]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(s.name for s in program.statements)
    for p in pieces:
        g.add_edge(p.get_tuple_name(isl.dim_type.in_), p.get_tuple_name(isl.dim_type.out))
    return g


def _components_in_order(program: Program, g: nx.DiGraph) -> list[list[str]]:
    """Strongly connected components in a topological order (ties: original statement order)."""
    order = {s.name: k for k, s in enumerate(program.statements)}
    cond = nx.condensation(g)
    members = {c: sorted(cond.nodes[c]["members"], key=order.__getitem__) for c in cond.nodes}
    topo = nx.lexicographical_topological_sort(cond, key=lambda c: order[members[c][0]])
    return [members[c] for c in topo]


def _passes_shared(program: Program, comps: list[list[str]], pieces: list[isl.BasicMap]) -> list[list[str]]:
    """Gather components (in topological order) into groups for a cut below loops the statements share.

    A component joins the earliest group of statements of its loop depth that comes after every group
    holding a component it depends on; otherwise it opens a group at the end.  No dependence then links
    two components of one group, so the bands found below hold for each of them as they would alone,
    and independent passes over the same data (a row's sum and its max) run in one loop: the data is
    read once.  Moving a component ahead of later groups is legal: those groups do not depend on it
    (they come before it in the topological order, or are unrelated to it)."""
    depth = {s.name: len(s.iterators) for s in program.statements}
    where: dict[str, int] = {}
    groups: list[list[str]] = []
    preds = _dep_graph(program, pieces).pred
    for comp in comps:
        after = max((where[p] for n in comp for p in preds[n] if p not in comp), default=-1)
        d = max(depth[n] for n in comp)
        k = next((k for k in range(after + 1, len(groups)) if max(depth[n] for n in groups[k]) == d), None)
        if k is None:
            groups.append([])
            k = len(groups) - 1
        groups[k].extend(comp)
        where.update((n, k) for n in comp)
    return groups


#: Why the scheduler cuts (the ``reason`` of a ``fusion-cut`` decision), as ``explain()`` says it.
CUT_REASONS = {
    "fuse-none": "fusion policy 'none' distributes every strongly connected component",
    "smart-depths": "smart fusion keeps loop nests of different depths apart",
    "outer-contraction": "fusion policy 'outer' keeps each contraction in a nest of its own",
    "outer-below-shared": "fusion policy 'outer' distributes the strongly connected components below the shared "
                          "parallel loops (independent ones of one depth together)",
    "no-hyperplane": "no further permutable hyperplane; distributing the strongly connected components",
    "statement-order": "orders statements that share every loop (no dependence between them remains)",
}


def _cut(state: _State, groups: list[list[str]], reason: str) -> None:
    """Add a scalar dimension placing each group of statements after the previous groups; ``reason`` is a
    key of :data:`CUT_REASONS`."""
    consts = {n: k for k, grp in enumerate(groups) for n in grp}
    zero = {n: (0,) * m for n, m in state.layout.statements}
    state.rows.append(Row(zero, consts, scalar=True))
    state.decide("fusion-cut", ", ".join(n for g in groups for n in g),
                 f"cut {' | '.join(', '.join(g) for g in groups)}: {CUT_REASONS[reason]}",
                 groups=tuple(tuple(g) for g in groups), reason=reason, dim=len(state.rows) - 1)


def _initial_cut(state: _State, fuse: str, pieces: list[isl.BasicMap]) -> None:
    comps = _components_in_order(state.program, _dep_graph(state.program, pieces))
    if len(comps) <= 1 or fuse == "max":
        return
    if fuse == "none":
        _cut(state, comps, "fuse-none")
        return
    depth = {s.name: len(s.iterators) for s in state.program.statements}
    groups: list[list[str]] = []
    last = None
    for comp in comps:
        d = max(depth[n] for n in comp)
        if groups and d == last:
            groups[-1].extend(comp)
        else:
            groups.append(list(comp))
        last = d
    if len(groups) > 1:
        _cut(state, groups, "smart-depths")


def _contraction_cut(state: _State, pieces: list[isl.BasicMap]) -> set[str]:
    """Policy ``outer``: each statement of contraction form that is a component by itself gets a nest of
    its own, between the groups of the other components (in topological order).  Returns those
    statements."""
    program = state.program
    comps = _components_in_order(program, _dep_graph(program, pieces))
    apart = {c[0] for c in comps if len(c) == 1 and contraction_form(program.statement(c[0])) is not None}
    # a component that only writes what a contraction sums into (its init) also keeps a nest of its own,
    # next to the contraction, which the C generator then folds into it (a zero init); merged with the
    # previous group it would also keep that group's statements from folding into the contraction before
    sums_into = {program.statement(n).target.array for n in apart}
    inits = {c[0] for c in comps if c[0] not in apart
             and all(program.statement(n).target.array in sums_into for n in c)}
    groups: list[list[str]] = []
    for comp in comps:
        alone = comp[0] in apart or comp[0] in inits
        if not groups or alone or groups[-1][0] in apart or groups[-1][0] in inits:
            groups.append(list(comp))
        else:
            groups[-1].extend(comp)
    if len(groups) > 1:
        _cut(state, groups, "outer-contraction")
    return apart


def _shared_parallel_band(state: _State, pieces: list[isl.BasicMap], bounds: Rows,
                          apart: set[str]) -> list[Row]:
    """Policy ``outer``: hyperplanes shared by every statement not in ``apart`` along which no remaining
    dependence has a distance (parallel loops), until one of these statements has all its loops.  The
    statements in ``apart`` (already in nests of their own) get zero rows."""
    lay = state.layout
    names = [n for n, _ in lay.statements if n not in apart]
    zero = [{lay.column(lay.coeff(n, j)): 1} for n in apart for j in range(lay.dims(n))]
    zero += [{lay.column(lay.const(n)): 1} for n in apart]
    base = [bounds, Rows.of(lay, eqs=zero)]
    for p in pieces:
        base += [validity(lay, p), validity(lay, p.reverse())]
    band: list[Row] = []
    while names and not any(state.full_rank(n) for n in names):
        sol = _lexmin(basic_set(lay, base + [_independence(state, names, lazy=False)]))
        if sol is None:
            break
        row = _row_from_solution(lay, sol)
        state.rows.append(row)
        band.append(row)
        done = [state.full_rank(n) for n in names]
        if len(band) > 1 and any(done) and not all(done):
            # a row that ends some statements' loops, deeper than the first, is their innermost loop
            # (often the stride-1 one): the other statements' remaining loops would run inside it
            state.rows.pop()
            band.pop()
            break
    return band


#: Shared parallel loops (policy ``outer``) that each run at most this many times in every statement are
#: not fused for: they give the threads little to share, and everything below runs once per iteration.
SHORT_SHARED = 4


def _short(program: Program, row: Row) -> bool:
    """Whether ``row`` runs over at most :data:`SHORT_SHARED` values in every statement that it moves (a
    single iterator with a constant range; any other form counts as long)."""
    moved = False
    for st in program.statements:
        coeffs = row.coeffs.get(st.name, ())
        used = [j for j, c in enumerate(coeffs) if c]
        if not used:
            continue
        if len(used) > 1:
            return False
        j = used[0]
        hi, lo = st.domain.dim_max_val(j), st.domain.dim_min_val(j)
        if not (hi.is_int() and lo.is_int()) or abs(coeffs[j]) * (hi.to_python() - lo.to_python()) >= SHORT_SHARED:
            return False
        moved = True
    return moved


def _fuse_outer(state: _State, pieces: list[isl.BasicMap], bounds: Rows) -> list[isl.BasicMap]:
    """The start of policy ``outer``; returns the dependence pieces left."""
    program = state.program
    apart = _contraction_cut(state, pieces)
    pieces = _uncarried(pieces, state.rows, program)
    first = len(state.rows)
    band = _shared_parallel_band(state, pieces, bounds, apart)
    if band and all(_short(program, row) for row in band):
        # a batch of 4 rows shared by a product and its epilogue: 4 iterations to share among threads, and
        # each runs every nest below it, which streams the product's whole weight once per row (a longer
        # shared loop beside it, as attention's tokens beside its 3 heads, keeps the band)
        del state.rows[first:]
        st = next(st for st in program.statements if any(band[0].coeffs.get(st.name, ())))
        state.decide("short-shared-parallel", "program",
                     f"the parallel loop the statements share runs at most {SHORT_SHARED} times "
                     f"({band[0].text(st.name, st.iterators)} of {st.name}): fused as 'smart'",
                     fuse="smart", most=SHORT_SHARED)
        band = []
    if not band:
        if not state.decisions or state.decisions[-1].kind != "short-shared-parallel":
            state.decide("no-shared-parallel", "program", "no parallel loop shared by the statements: fused as "
                         "'smart'", fuse="smart")
        _initial_cut(state, "smart", pieces)
        return _uncarried(pieces, state.rows[first:], program)
    state.fused_outer = Band(first, len(band))
    state.bands.append(state.fused_outer)
    shared = "; ".join(", ".join(f"{st.name}: {r.text(st.name, st.iterators)}" for st in program.statements
                                 if st.name not in apart) for r in band)
    sharing = [st.name for st in program.statements if st.name not in apart]
    state.decide("shared-parallel", ", ".join(sharing),
                 f"{len(band)} parallel loop(s) shared by the statements"
                 + (f" other than the contraction(s) {', '.join(sorted(apart))}" if apart else "") + f" ({shared})",
                 loops=len(band), dims=tuple(range(first, first + len(band))), statements=tuple(sharing),
                 apart=tuple(sorted(apart)), rows=tuple({n: r.text(n, program.statement(n).iterators)
                                                         for n in sharing} for r in band))
    pieces = _uncarried(pieces, band, program)
    comps = _components_in_order(program, _dep_graph(program, pieces))
    if len(comps) > 1:
        _cut(state, _passes_shared(program, comps, pieces), "outer-below-shared")
        pieces = _uncarried(pieces, state.rows[-1:], program)
    return pieces


def _carrying_row(state: _State, pieces: list[isl.BasicMap], bounds: Rows) -> Row | None:
    """A row, valid for every remaining dependence, that carries at least one remaining piece entirely
    (no linear independence asked): the way out when zero-distance dependences form a cycle that no cut
    can break, after every statement is already full rank."""
    lay = state.layout
    base = [bounds]
    for p in pieces:
        base += [validity(lay, p), bounding(lay, p)]
    for k, target in enumerate(pieces):
        sol = _lexmin(basic_set(lay, base + [validity(lay, target, strict=True)]))
        if sol is not None:
            row = _row_from_solution(lay, sol)
            state.decide("extra-hyperplane", "program", f"extra hyperplane carrying dependence piece {k} (a cycle "
                         f"of zero-distance dependences that no cut separates)", piece=k, dim=len(state.rows))
            return row
    return None


# -- the driver ---------------------------------------------------------------------------------------
def _find_band(state: _State, pieces: list[isl.BasicMap], constraints: isl.BasicSet) -> list[Row]:
    lay = state.layout
    band: list[Row] = []
    max_rows = max((m for _, m in lay.statements), default=0)
    while len(band) < max_rows:
        pending = [n for n, _ in lay.statements if not state.full_rank(n)]
        if not pending:
            break
        sol = None
        for lazy in (False, True):
            sol = _lexmin(constraints.intersect(basic_set(state.layout, [_independence(state, pending, lazy)])))
            if sol is not None:
                if lazy:
                    state.decide("lazy-hyperplane", ", ".join(pending), "hyperplane found in lazy mode "
                                 "(independent for some statements only)", dim=len(state.rows), statements=tuple(pending))
                break
        if sol is None:
            break
        row = _row_from_solution(lay, sol)
        state.rows.append(row)
        band.append(row)
        log.info("%s: hyperplane %s", state.program.name,
                 ", ".join(f"{s.name}: {row.text(s.name, s.iterators)}" for s in state.program.statements))
    return band


def pluto_schedule(program: Program, deps: Dependences, *, fuse: str = "smart") -> Schedule:
    """Find a Pluto schedule for ``program``; raise :class:`SchedulingError` when none is found."""
    if fuse not in FUSION_POLICIES:
        raise SchedulingError(f"unknown fusion policy {fuse!r}; known: {', '.join(FUSION_POLICIES)}")
    lay = Layout.of(program)
    state = _State(program, lay)
    pieces = aligned_pieces(deps.all, program.params)
    bounds = _bounds(lay, program)
    if fuse == "outer":
        pieces = _fuse_outer(state, pieces, bounds)
    else:
        _initial_cut(state, fuse, pieces)
        pieces = _uncarried(pieces, state.rows, program)
    _complete(state, pieces, bounds)
    placement = {s.name: tuple(r.consts[s.name] for r in state.rows if r.scalar) for s in program.statements}
    if len(set(placement.values())) < len(program.statements) and not (state.rows and state.rows[-1].scalar):
        order = [[s.name] for s in program.statements]
        _cut(state, order, "statement-order")
    state.rows = reorder_bands(program, deps, state.rows, state.bands, state.fused_outer, state.decisions)
    return _as_schedule(state, deps)


def _complete(state: _State, pieces: list[isl.BasicMap], bounds: Rows) -> None:
    """Add rows (:func:`_next_rows`) until every statement is full rank and every dependence piece is
    carried; :class:`SchedulingError` when that takes too many steps."""
    program = state.program
    for _ in range(4 * (program.depth + 2) * max(1, len(program.statements))):
        done = all(state.full_rank(n) for n, _ in state.layout.statements)
        if done and not pieces:
            return
        pieces = _next_rows(state, pieces, bounds, done)
    raise SchedulingError(f"{program.name}: the scheduler did not converge")


def _next_rows(state: _State, pieces: list[isl.BasicMap], bounds: Rows, done: bool) -> list[isl.BasicMap]:
    """One step of the scheduler: a band of permutable hyperplanes while some statement is not full rank
    (``done``), else a cut between strongly connected components, else a row carrying a dependence piece;
    returns the pieces left."""
    program = state.program
    if not done:
        band_rows = _next_band(state, pieces, bounds)
        if band_rows:
            return _uncarried(pieces, band_rows, program)
    if not pieces:
        raise SchedulingError(f"{program.name}: no independent hyperplane within the coefficient bounds")
    comps = _components_in_order(program, _dep_graph(program, pieces))
    where = {n: k for k, comp in enumerate(comps) for n in comp}
    if any(where[p.get_tuple_name(isl.dim_type.in_)] != where[p.get_tuple_name(isl.dim_type.out)] for p in pieces):
        _cut(state, comps, "no-hyperplane")
        return _uncarried(pieces, state.rows[-1:], program)
    row = _carrying_row(state, pieces, bounds)
    if row is None:
        raise SchedulingError(f"{program.name}: no hyperplane satisfies the remaining dependences, and they "
                              f"lie within strongly connected components that a cut cannot separate")
    state.bands.append(Band(len(state.rows), 1))
    state.rows.append(row)
    return _uncarried(pieces, [row], program)


def _next_band(state: _State, pieces: list[isl.BasicMap], bounds: Rows) -> list[Row]:
    """A band of hyperplanes valid and bounded for every remaining dependence piece (:func:`_find_band`),
    recorded in ``state`` when not empty."""
    lay = state.layout
    parts = [bounds]
    for p in pieces:
        parts += [validity(lay, p), bounding(lay, p)]
    constraints = basic_set(lay, parts)
    first = len(state.rows)
    band_rows = _find_band(state, pieces, constraints)
    if band_rows:
        state.bands.append(Band(first, len(band_rows)))
    return band_rows


def _as_schedule(state: _State, deps: Dependences) -> Schedule:
    program = state.program
    union = union_map(program, state.rows)
    par = parallel_dimensions(union, deps)
    scalar = tuple(r.scalar for r in state.rows)
    return Schedule(union, par, "pluto", bands=tuple(state.bands), scalar=scalar,
                    decisions=tuple(state.decisions),
                    rows=tuple({st.name: r.text(st.name, st.iterators) for st in program.statements}
                               for r in state.rows))
