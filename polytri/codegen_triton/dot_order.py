"""The order of a launch's parallel loops that puts products on ``tl.dot``.

A product runs on ``tl.dot`` when the two innermost grid loops of its launch are the rows and the
columns of its target, one factor varying with the rows and the sum, the other with the sum and the
columns (:func:`.reduction.dot_launch`).  Pluto orders parallel loops for locality and the GPU pass
moves them outward (:func:`polytri.schedule.permute.parallel_outward`); neither knows about ``tl.dot``.
A convolution's loops come out as (output channels, output rows, output columns): the blocks are then
output rows by columns, and the input tile depends on both, so its sum runs on scalar lanes.  Ordering
them (rows, channels, columns) makes the innermost step of its sum (over the kernel's width, for each
input channel and kernel row) a product of a (channels x width) weight tile by a (width x columns) input
tile: on ``tl.dot``, though a sum of 3 fills few of its lanes.

:func:`order_for_dot` tries every order of the first run of consecutive parallel dimensions (at most
:data:`MAX_RUN` of them) and keeps one with more products on ``tl.dot`` than the schedule has, if any.
Each candidate is checked with isl (every dependence still goes forward) and must keep as many leading
parallel dimensions.

A distributed schedule (Pluto's without fusion, or its cut components) shares its time dimensions among
nests that scan different loops: one nest's reduction at a dimension makes that dimension sequential for
all, and a product whose sum Pluto placed before its columns stays off ``tl.dot`` whatever the order of
the shared dimensions.  :func:`order_nests_for_dot` then orders the loop dimensions of each nest that holds
a product on its own (:func:`polytri.schedule.permute.permute_nest`), checked the same way.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator

import islpy as isl

from ..ir.contraction import contraction_form
from ..ir.program import Program
from ..pipeline.decisions import Decision
from ..schedule.dependences import Dependences
from ..schedule.legality import is_legal
from ..schedule.loop_ast import Node, build_loop_ast
from ..schedule.permute import permute_dimensions, permute_nest
from ..schedule.schedule import Schedule, loops_are_parallel
from .launches import dot_contractions
from .nest_fusion import distribution_values

log = logging.getLogger("polytri.triton")

#: Longest run of parallel dimensions whose orders are all tried (4! = 24 loop trees at most).
MAX_RUN = 4


def _parallel_run(s: Schedule) -> list[int]:
    """The first run of consecutive parallel loop dimensions (scalar dimensions end it)."""
    run: list[int] = []
    for d in range(s.ndim):
        loop = not (s.scalar and s.scalar[d])
        if loop and s.parallel[d]:
            run.append(d)
        elif run or loop:
            break
    return run


def _most_products(prog: Program, deps: Dependences, trials: Iterable[tuple[tuple[int, ...], Schedule | None]],
                   dots: int) -> tuple[int, Schedule, Node, tuple[int, ...]] | None:
    """Of the legal ``trials`` (an order and its schedule, ``None`` where the order was refused before isl
    was asked), the first with the most products on ``tl.dot``, if more than ``dots``: (products, schedule,
    loop tree, order)."""
    best: tuple[int, Schedule, Node, tuple[int, ...]] | None = None
    for perm, trial in trials:
        if trial is None or not is_legal(trial.map, deps):
            continue
        trial_ast = build_loop_ast(prog, trial, deps)
        n = dot_contractions(trial_ast, prog)
        if n > (best[0] if best else dots):
            best = (n, trial, trial_ast, perm)
    return best


def order_for_dot(prog: Program, deps: Dependences, schedule: Schedule, ast: Node,
                  decisions: list[Decision]) -> tuple[Schedule, Node]:
    """``schedule`` (and its loop tree) with its first parallel loops reordered when that puts more
    products on ``tl.dot``; the reason is appended to ``decisions`` (kind ``dot-order``)."""
    products = sum(contraction_form(s) is not None for s in prog.statements)
    dots = dot_contractions(ast, prog)
    run = _parallel_run(schedule)
    if dots >= products or not 2 <= len(run) <= MAX_RUN:
        return schedule, ast
    def trials() -> Iterator[tuple[tuple[int, ...], Schedule | None]]:
        for perm in itertools.permutations(run):
            if list(perm) != run:
                order = list(range(schedule.ndim))
                order[run[0]:run[-1] + 1] = perm
                trial = permute_dimensions(schedule, order, deps)
                yield perm, (trial if all(trial.parallel[d] for d in run) else None)
    best = _most_products(prog, deps, trials(), dots)
    if best is None:
        return schedule, ast
    n, trial, trial_ast, perm = best
    why = Decision("schedule", "dot-order", prog.name,
                   f"GPU: parallel dimensions {run} reordered {list(perm)}: {n} product(s) on tl.dot instead of "
                   f"{dots}", {"dims": tuple(run), "order": tuple(perm), "products": n, "previous_products": dots})
    log.info("%s: %s", prog.name, why)
    decisions.append(why)
    return trial, trial_ast


def _nests(schedule: Schedule) -> list[frozenset[str]]:
    """The statements of each nest of ``schedule`` distributed at its first time dimension (none when that
    dimension is not a distribution, or holds one nest)."""
    if not (schedule.scalar and schedule.scalar[0]):
        return []
    nests: dict[int, set[str]] = {}
    for st, value in distribution_values(schedule, 0).items():
        nests.setdefault(value, set()).add(st)
    return [frozenset(v) for _, v in sorted(nests.items())] if len(nests) > 1 else []


def _loops_kept(schedule: Schedule, trial: Schedule) -> bool:
    """Whether every loop dimension of ``schedule`` is still a loop for some statement in ``trial`` (a
    nest's permutation must not leave a dimension that only constants fill: its scalar flag would lie)."""
    varies = [False] * trial.ndim

    def one(m: isl.Map) -> None:
        rng = m.range()
        for d in range(trial.ndim):
            varies[d] = varies[d] or rng.plain_get_val_if_fixed(isl.dim_type.set, d).is_nan()
    trial.map.foreach_map(one)
    return all(varies[d] for d in range(schedule.ndim) if not (schedule.scalar and schedule.scalar[d]))


def _nest_orders(schedule: Schedule, deps: Dependences, nest: frozenset[str], loops: list[int]
                 ) -> Iterator[tuple[int, ...]]:
    """The orders of ``loops`` worth a try for ``nest``: its parallel loops (parallel among its own
    statements) first, in every order, then the others in theirs (a product's rows and columns must be the
    launch's innermost grid loops, its sum inside them)."""
    par = loops_are_parallel(schedule.map, deps, loops, nest)
    outer, inner = [d for d in loops if par[d]], [d for d in loops if not par[d]]
    for perm in itertools.permutations(outer):
        if [*perm, *inner] != loops:
            yield (*perm, *inner)


def _nest_trials(schedule: Schedule, deps: Dependences, nest: frozenset[str], loops: list[int]
                 ) -> Iterator[tuple[tuple[int, ...], Schedule | None]]:
    """Each order of :func:`_nest_orders` and ``schedule`` with ``nest``'s loops in it (``None`` where a
    dimension would be left with constants only)."""
    for perm in _nest_orders(schedule, deps, nest, loops):
        order = list(range(schedule.ndim))
        for d, e in zip(loops, perm):
            order[d] = e
        trial = permute_nest(schedule, nest, order, deps)
        yield perm, (trial if _loops_kept(schedule, trial) else None)


def order_nests_for_dot(prog: Program, deps: Dependences, schedule: Schedule, ast: Node,
                        decisions: list[Decision]) -> tuple[Schedule, Node]:
    """``schedule`` with the loop dimensions of each nest that holds a product reordered on their own where
    that puts more products on ``tl.dot`` (see the module's docstring); a decision of kind ``dot-order``
    (``data["statements"]``: the nest) for each nest reordered."""
    forms = {st.name for st in prog.statements if contraction_form(st) is not None}
    loops = [d for d in range(1, schedule.ndim) if not (schedule.scalar and schedule.scalar[d])]
    if not forms or not 2 <= len(loops) <= MAX_RUN:
        return schedule, ast
    dots = dot_contractions(ast, prog)
    for nest in _nests(schedule):
        if dots >= len(forms) or not nest & forms:
            continue
        best = _most_products(prog, deps, _nest_trials(schedule, deps, nest, loops), dots)
        if best is None:
            continue
        n, schedule, ast, perm = best
        why = Decision("schedule", "dot-order", prog.name,
                       f"GPU: loop dimensions {loops} of the nest {', '.join(sorted(nest))} reordered {list(perm)}: "
                       f"{n} product(s) on tl.dot instead of {dots}",
                       {"dims": tuple(loops), "order": tuple(perm), "products": n, "previous_products": dots,
                        "statements": tuple(sorted(nest))})
        log.info("%s: %s", prog.name, why)
        decisions.append(why)
        dots = n
    return schedule, ast
