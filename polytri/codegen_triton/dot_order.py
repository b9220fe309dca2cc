"""The order of a launch's parallel loops that puts products on ``tl.dot``.

A product runs on ``tl.dot`` when the two innermost grid loops of its launch are the rows and the
columns of its target, one factor varying with the rows and the sum, the other with the sum and the
columns (:func:`.kgen.dot_contractions_in`).  Pluto orders parallel loops for locality and the GPU pass
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
"""

from __future__ import annotations

import itertools
import logging

from ..ir.contraction import contraction_form
from ..ir.program import Program
from ..pipeline.decisions import Decision
from ..schedule.dependences import Dependences
from ..schedule.legality import is_legal
from ..schedule.loop_ast import Node, build_loop_ast
from ..schedule.permute import permute_dimensions
from ..schedule.schedule import Schedule
from .host import dot_contractions

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


def order_for_dot(prog: Program, deps: Dependences, schedule: Schedule, ast: Node,
                  decisions: list[Decision]) -> tuple[Schedule, Node]:
    """``schedule`` (and its loop tree) with its first parallel loops reordered when that puts more
    products on ``tl.dot``; the reason is appended to ``decisions`` (kind ``dot-order``)."""
    products = sum(contraction_form(s) is not None for s in prog.statements)
    dots = dot_contractions(ast, prog)
    run = _parallel_run(schedule)
    if dots >= products or not 2 <= len(run) <= MAX_RUN:
        return schedule, ast
    best: tuple[int, Schedule, Node, tuple[int, ...]] | None = None
    for perm in itertools.permutations(run):
        if list(perm) == run:
            continue
        order = list(range(schedule.ndim))
        order[run[0]:run[-1] + 1] = perm
        trial = permute_dimensions(schedule, order, deps)
        if not all(trial.parallel[d] for d in run) or not is_legal(trial.map, deps):
            continue
        trial_ast = build_loop_ast(prog, trial, deps)
        n = dot_contractions(trial_ast, prog)
        if n > (best[0] if best else dots):
            best = (n, trial, trial_ast, perm)
    if best is None:
        return schedule, ast
    n, trial, trial_ast, perm = best
    why = Decision("schedule", "dot-order", prog.name,
                   f"GPU: parallel dimensions {run} reordered {list(perm)}: {n} product(s) on tl.dot instead of "
                   f"{dots}", {"dims": tuple(run), "order": tuple(perm), "products": n, "previous_products": dots})
    log.info("%s: %s", prog.name, why)
    decisions.append(why)
    return trial, trial_ast
