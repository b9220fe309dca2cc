"""Fusing distributed nests under their common outer parallel loops: fewer GPU launches.

Pluto's smart fusion keeps nests of different depths apart (a product's initialization, the product, its
epilogue), and each nest with a parallel outer loop becomes a launch of its own.  A GPU wants the opposite
wherever it keeps the grid: the nests that share their outer parallel loops run in one launch, one after
the other inside each program.

The transformation works on a distribution dimension ``d`` (a constant per statement) followed by ``k``
parallel loop dimensions.  The statements' constants at ``d`` are split into consecutive *groups*; a new
constant dimension (the group number) is inserted before ``d``, and ``d`` moves below the ``k`` loops:
``[s, i] -> [g(s), i, s]``.  Inserting a non-decreasing function of ``s`` keeps every dependence where it
was, so only the move can break legality; every candidate is checked with isl (legal, and the ``k`` loops
still parallel), and the result is proved legal again.  Groups are grown greedily from the first nest:
a nest joins the current group when the group stays legal and parallel, the poorest launch keeps its
grid loops and every product its ``tl.dot``; otherwise it starts the next group.  A matmul's initialization, its product and its epilogue become one launch; an MLP's two
layers stay two (the second product reads whole rows of the first's result); softmax's row passes become
one; attention in online form becomes one launch of row-block programs, its products on ``tl.dot`` over
chunks of their columns (:func:`.kgen.column_contraction`).  Fusions that would take a product off
``tl.dot``, or off its 2-D tiles outside the online form, are refused.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import islpy as isl

from ..ir.program import Program
from ..pipeline.decisions import Decision
from ..schedule.dependences import Dependences
from ..schedule.legality import is_legal, prove_legal
from ..schedule.loop_ast import Node, build_loop_ast
from ..schedule.permute import permute_dimensions
from ..schedule.schedule import Schedule, parallel_dimensions
from .launches import dot_contractions, launch_chains

log = logging.getLogger("polytri.triton")


def _hoists(schedule: Schedule) -> list[tuple[int, int]]:
    """(d, k): distribution dimension ``d`` followed by ``k`` parallel loop dimensions, longest first."""
    scalar = [d < len(schedule.scalar) and schedule.scalar[d] for d in range(schedule.ndim)]
    out = []
    for d in range(schedule.ndim - 1):
        if not scalar[d]:
            continue
        k = 0
        while d + k + 1 < schedule.ndim and not scalar[d + k + 1] and schedule.parallel[d + k + 1]:
            k += 1
        out += [(d, j) for j in range(k, 0, -1)]
    return out


def distribution_values(schedule: Schedule, d: int) -> dict[str, int]:
    """Each statement's value of the distribution dimension ``d``."""
    out: dict[str, int] = {}

    def one(m: isl.Map) -> None:
        val = m.range().plain_get_val_if_fixed(isl.dim_type.set, d)
        assert not val.is_nan(), f"time dimension {d} is not a constant of {m.get_tuple_name(isl.dim_type.in_)}"
        out[m.get_tuple_name(isl.dim_type.in_)] = val.to_python()
    schedule.map.foreach_map(one)
    return out


def drop_uniform_dimensions(schedule: Schedule, deps: Dependences) -> Schedule:
    """``schedule`` without the distribution dimensions at which every statement has the same constant
    (they order nothing): the original order of a program whose nests share their outer loops interleaves
    such zeros between its loops, which hides the run of parallel loops a GPU hoist fuses below."""
    drop = []
    for d in range(schedule.ndim):
        if (d < len(schedule.scalar) and schedule.scalar[d]
                and len(set(distribution_values(schedule, d).values())) == 1):
            drop.append(d)
    if not drop or len(drop) == schedule.ndim:
        return schedule
    maps: list[isl.Map] = []
    schedule.map.foreach_map(lambda m: maps.append(m))
    new_map: isl.UnionMap | None = None
    for m in maps:
        for d in reversed(drop):
            m = m.project_out(isl.dim_type.out, d, 1)
        new_map = isl.UnionMap.from_map(m) if new_map is None else new_map.union(isl.UnionMap.from_map(m))
    assert new_map is not None, "a dimension is dropped only where some statement has a constant"
    keep = [d for d in range(schedule.ndim) if d not in drop]
    scalar = tuple(schedule.scalar[d] for d in keep) if schedule.scalar else ()
    rows = tuple(schedule.rows[d] for d in keep) if schedule.rows else ()
    return replace(schedule, map=new_map, parallel=parallel_dimensions(new_map, deps), scalar=scalar, rows=rows,
                   bands=())


def _grouped(schedule: Schedule, d: int, group_of: dict[str, int], deps: Dependences) -> Schedule:
    """``schedule`` with a constant dimension inserted before ``d``: statement ``S`` at ``group_of[S]``
    (non-decreasing in the value of ``d``, so the order of the instances is unchanged)."""
    maps: list[isl.Map] = []

    def one(m: isl.Map) -> None:
        g = group_of[m.get_tuple_name(isl.dim_type.in_)]
        at_g = isl.Val.int_from_si(m.get_ctx(), g)
        maps.append(m.insert_dims(isl.dim_type.out, d, 1).fix_val(isl.dim_type.out, d, at_g))
    schedule.map.foreach_map(one)
    new_map = isl.UnionMap.from_map(maps[0])
    for m in maps[1:]:
        new_map = new_map.union(isl.UnionMap.from_map(m))
    scalar = schedule.scalar[:d] + (True,) + schedule.scalar[d:] if schedule.scalar else ()
    rows = (schedule.rows[:d] + ({s: str(g) for s, g in group_of.items()},) + schedule.rows[d:]
            if schedule.rows else ())
    return replace(schedule, map=new_map, parallel=parallel_dimensions(new_map, deps), scalar=scalar, rows=rows,
                   bands=())


def _hoisted(schedule: Schedule, d: int, k: int, groups: list[list[int]], deps: Dependences) -> Schedule | None:
    """The schedule with the nests of each group fused below the ``k`` parallel loops after ``d``, or
    ``None`` where that is illegal or serializes one of those loops."""
    number = {v: g for g, vals in enumerate(groups) for v in vals}
    group_of = {s: number[v] for s, v in distribution_values(schedule, d).items()}
    trial = _grouped(schedule, d, group_of, deps)
    # the old dimension d is now d + 1: move it below the k loops after it
    order = list(range(trial.ndim))
    order[d + 1:d + k + 2] = [*range(d + 2, d + k + 2), d + 1]
    trial = permute_dimensions(trial, order, deps)
    if not all(trial.parallel[d + 1:d + k + 1]) or not is_legal(trial.map, deps):
        return None
    return trial


def _launches(prog: Program, schedule: Schedule, deps: Dependences, columns: bool
              ) -> tuple[Node, list[int], int]:
    """The loop AST of ``schedule``, the grid loops of each of its launches and its products on tl.dot."""
    ast = build_loop_ast(prog, schedule, deps)
    return ast, launch_chains(ast) or [0], dot_contractions(ast, prog, columns)


def _greedy_groups(prog: Program, schedule: Schedule, d: int, k: int, deps: Dependences,
                   floor: tuple[int, int], columns: bool) -> tuple[list[list[int]], Schedule] | None:
    """The groups grown from the first nest (see the module's docstring) and their schedule, or ``None``
    where no two nests fuse.  A nest joins a group where the result is legal, keeps the ``k`` loops
    parallel, and keeps ``floor``: at least as many grid loops in the poorest launch and as many products
    on tl.dot (nests whose inner loops differ, fused below their shared outer loop only, would lose grid
    loops)."""
    values = sorted(set(distribution_values(schedule, d).values()))
    groups: list[list[int]] = []
    current = [values[0]]
    fused = False
    for v in values[1:]:
        trial = _hoisted(schedule, d, k, [*groups, current + [v], *([w] for w in values if w > v)], deps)
        keeps = False
        if trial is not None:
            _, chains, dots = _launches(prog, trial, deps, columns)
            keeps = min(chains) >= floor[0] and dots >= floor[1]
        if keeps:
            current.append(v)
            fused = True
        else:
            groups.append(current)
            current = [v]
    groups.append(current)
    if not fused:
        return None
    final = _hoisted(schedule, d, k, groups, deps)  # checked again: a later group could have broken one
    return (groups, final) if final is not None else None


def hoist_parallel_loops(prog: Program, deps: Dependences, schedule: Schedule, decisions: list[Decision],
                         ast: Node, *, columns: bool = False) -> tuple[Schedule, list[Decision], Node]:
    """Fuse nests under their common outer parallel loops where that is legal and the launches improve:
    the most grid loops in the launch that has the fewest, then the fewest launches, and no contraction
    loses its ``tl.dot`` (its row and column loops stay the launch's innermost grid loops).  Each round tries
    every distribution dimension and number of loops, and keeps the best; rounds go on while one
    improves.  ``columns``: products in row-block programs count as on tl.dot (the online softmax's; see
    :func:`.launches.dot_contractions`).  Each fusion is a decision of kind ``gpu-nest-fusion``."""
    chains = launch_chains(ast) or [0]
    dots = dot_contractions(ast, prog, columns)
    hoisted = False
    while True:
        best = None
        for d, k in _hoists(schedule):
            found = _greedy_groups(prog, schedule, d, k, deps, (min(chains), dots), columns)
            if found is None:
                continue
            groups, trial = found
            trial_ast, trial_chains, trial_dots = _launches(prog, trial, deps, columns)
            if trial_dots < dots:
                continue  # a product that ran on tl.dot would run as scalar sums: slower than a launch more
            key = (min(trial_chains), -len(trial_chains))
            if key > (min(chains), -len(chains)) and (best is None or key > best[0]):
                best = (key, d, k, groups, trial, trial_ast, trial_chains, trial_dots)
        if best is None:
            break
        _, d, k, groups, schedule, ast, trial_chains, dots = best
        shown = " | ".join(",".join(str(v) for v in g) for g in groups)
        why = Decision("schedule", "gpu-nest-fusion", prog.name,
                       f"GPU: nests fused below the parallel loop(s) {d + 1}..{d + k} by their distribution "
                       f"dimension {d} (groups {shown}): {len(trial_chains)} launch(es), grid loops {trial_chains} "
                       f"(was {chains})",
                       {"dim": d, "loops": k, "groups": tuple(tuple(g) for g in groups),
                        "grid_loops": tuple(trial_chains), "previous_grid_loops": tuple(chains)})
        log.info("%s: %s", prog.name, why)
        decisions = decisions + [why]
        chains, hoisted = trial_chains, True
    if hoisted:  # a schedule of this function's own: proved before it is used
        prove_legal(schedule.map, deps, what=f"{prog.name}: the GPU schedule")
    return schedule, decisions, ast
