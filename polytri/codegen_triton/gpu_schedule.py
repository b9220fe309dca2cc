"""The GPU targets' schedule: untiled (kernels block their parallel loops themselves), parallel loops
outward, products ordered for ``tl.dot``, and the fusion that makes the best launches."""

from __future__ import annotations

from typing import Any

from ..ir.program import Program
from ..pipeline.decisions import Decision, under
from ..schedule.choose import Chosen, choose_schedule
from ..schedule.dependences import Dependences
from ..schedule.legality import prove_legal
from ..schedule.loop_ast import build_loop_ast
from ..schedule.permute import parallel_outward
from .dot_order import order_for_dot, order_nests_for_dot
from .launches import dot_contractions, launch_chains
from .nest_fusion import drop_uniform_dimensions, hoist_parallel_loops


def _candidate(prog: Program, deps: Dependences, opts: dict[str, Any], fuse: str) -> Chosen:
    schedule, decisions, ast = choose_schedule(prog, deps, opts["schedule"], fuse, False, None)
    if schedule.bands:
        permuted = parallel_outward(schedule, deps)
        if permuted is not schedule:
            prove_legal(permuted.map, deps, what=f"{prog.name}: the GPU band order")
            decisions += [under(d, "schedule", "scheduler: ") for d in permuted.decisions[len(schedule.decisions):]]
            schedule, ast = permuted, build_loop_ast(prog, permuted, deps)
    schedule, ast = order_for_dot(prog, deps, schedule, ast, decisions)
    schedule, ast = order_nests_for_dot(prog, deps, schedule, ast, decisions)
    return schedule, decisions, ast


def _label(name: str) -> str:
    """A candidate as ``explain()`` names it: ``fusion 'smart'``, ``the input order``."""
    return "the input order" if name == "original" else f"fusion '{name}'"


def gpu_schedule(prog: Program, deps: Dependences, opts: dict[str, Any], *, built: bool = False) -> Chosen:
    """The schedule (untiled: kernels block their parallel loops themselves), with the band order that puts
    parallel loops outward, and its loop AST.  With ``schedule='auto'`` and ``fuse='auto'`` the candidates
    are Pluto's schedule with smart fusion and without fusion, and the input order; they are compared by the
    launches they make (the GPU's own measure, where the CPU's ``auto`` weighs cache lines and vector
    loops): most contractions on ``tl.dot``, then most grid loops in the launch with fewest, then fewest
    launches, then most grid loops in the launch with most; on a tie the earlier candidate stays (fusion that
    serializes a parallel loop, or takes a product off the tensor cores, loses to separate kernels).  A
    decision of kind ``gpu-fusion`` (``data``: the fusion chosen, the schedule's origin, each candidate's
    launches and its products on ``tl.dot``, by ``smart``, ``none`` and ``original``)."""
    if built:
        # a rewrite (the online softmax) built the loops in the order they should run; Pluto is not run on
        # them (its search on the rewritten attention takes minutes): the original order, nests fused
        # below their shared parallel loops
        schedule, decisions, _ = _candidate(prog, deps, {**opts, "schedule": "original"}, "smart")
        schedule = drop_uniform_dimensions(schedule, deps)
        decisions = [*decisions, Decision("schedule", "built-order", prog.name,
                                          "GPU: the program is in the order the online softmax built; Pluto not run")]
        return hoist_parallel_loops(prog, deps, schedule, decisions, build_loop_ast(prog, schedule, deps),
                                    columns=True)
    if opts["fuse"] != "auto":
        return _candidate(prog, deps, opts, opts["fuse"])
    if opts["schedule"] == "original":
        return _candidate(prog, deps, opts, "smart")
    # Pluto's maximal fusion is not among the candidates: its search can run for minutes on small
    # programs (a two-layer MLP), and isl's operation budget does not stop it.  Each candidate is named
    # by its fusion, the input order "original"; on a tie the earlier stays.
    candidates = [("smart", "pluto", "smart"), ("none", "pluto", "none")]
    if opts["schedule"] == "auto":
        candidates.append(("original", "original", "smart"))
    best = None
    summary = []
    launches: dict[str, tuple[int, ...]] = {}
    products: dict[str, int] = {}
    for name, kind, fuse in candidates:
        cand = _candidate(prog, deps, {**opts, "schedule": kind}, fuse)
        chains = launch_chains(cand[2]) or [0]
        launches[name], products[name] = tuple(chains), dot_contractions(cand[2], prog)
        summary.append(f"{_label(name)}: {len(chains)} launch(es), grid loops {chains}, "
                       f"{products[name]} product(s) on tl.dot")
        key = (products[name], min(chains), -len(chains), max(chains))
        if best is None or key > best[0]:
            best = (key, name, fuse, cand)
    assert best is not None
    _, name, fuse, (schedule, decisions, ast) = best
    decisions = decisions + [Decision("schedule", "gpu-fusion", prog.name,
                                      f"GPU: {_label(name)} chosen ({'; '.join(summary)})",
                                      {"fuse": fuse, "origin": schedule.origin, "grid_loops": launches,
                                       "products": products})]
    return hoist_parallel_loops(prog, deps, schedule, decisions, ast)
