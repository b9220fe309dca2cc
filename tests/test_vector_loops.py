"""Innermost loops that vectorize: guards split away (``build_loop_ast(..., separate_guards=True)``), and
``#pragma omp simd`` on sequential loops whose carried dependences all run forward in the body
(``For.lanes``)."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.ir.builder import to_program
from polytri.schedule.dependences import Dependences, compute_dependences
from polytri.schedule.loop_ast import For, If, build_loop_ast, guarded_in_innermost, walk
from polytri.schedule.schedule import Schedule, parallel_dimensions

pytestmark = pytest.mark.cc


def _shifted_pair(backward: bool) -> pt.Program:
    """``B[i] = A[i] + 1`` and ``C[i] = B[i - 1] * 2`` in one loop (the second shifted by one), or with
    ``backward`` the first reads what the second wrote one iteration before."""
    p = pt.Program("pair", params=["N"])
    for name in "ABC":
        p.array(name, ("N",))
    with p.loop("i", 1, "N"):
        p.assign("B[i] = A[i] + C[i - 1]" if backward else "B[i] = A[i] + 1.0")
        p.assign("C[i] = B[i - 1] * 2.0" if not backward else "C[i] = B[i] * 2.0")
    return p


def _schedule(prog, text: str) -> tuple[Schedule, Dependences]:
    import islpy as isl
    umap = isl.UnionMap(text)
    deps = compute_dependences(prog)
    return Schedule(umap, parallel_dimensions(umap, deps), "test", scalar=(False, True)), deps


def test_a_guard_on_the_innermost_counter_is_split_away() -> None:
    prog = to_program(_shifted_pair(backward=False))
    # S1 one iteration later than S0: the fused loop needs guards at both ends
    sched, deps = _schedule(prog, "[N] -> { S0[i] -> [i, 0]; S1[i] -> [i + 1, 1] }")
    plain = build_loop_ast(prog, sched, deps)
    assert guarded_in_innermost(plain) == {"S0", "S1"}
    split = build_loop_ast(prog, sched, deps, separate_guards=True)
    assert guarded_in_innermost(split) == set()
    loops = [n for n in walk(split) if isinstance(n, For)]
    assert loops and not any(isinstance(m, If) for loop in loops for m in walk(loop.body))


def test_forward_carried_dependences_allow_lanes_backward_ones_do_not() -> None:
    fwd = to_program(_shifted_pair(backward=False))
    sched, deps = _schedule(fwd, "[N] -> { S0[i] -> [i, 0]; S1[i] -> [i, 1] }")
    (loop,) = [n for n in walk(build_loop_ast(fwd, sched, deps)) if isinstance(n, For)]
    assert not loop.parallel and loop.lanes   # C[i] reads B[i - 1], written by S0 one iteration before
    bwd = to_program(_shifted_pair(backward=True))
    sched, deps = _schedule(bwd, "[N] -> { S0[i] -> [i, 0]; S1[i] -> [i, 1] }")
    (loop,) = [n for n in walk(build_loop_ast(bwd, sched, deps)) if isinstance(n, For)]
    assert not loop.parallel and not loop.lanes   # B[i] reads C[i - 1], written later in the body


@pytest.mark.parametrize("backward", [False, True])
def test_simd_pragma_follows_lanes_and_results_match(backward: bool) -> None:
    prog = _shifted_pair(backward)
    k = pt.compile(prog, options={"schedule": "original"})
    assert ("#pragma omp simd" in k.source) is (not backward)
    rng = np.random.default_rng(0)
    args = {n: rng.random(37) for n in "ABC"}
    want = {n: v.copy() for n, v in args.items()}
    pt.reference(prog, **want)
    k(**args)
    for n in "ABC":
        np.testing.assert_allclose(args[n], want[n], rtol=1e-12)


@pytest.mark.parametrize("name", ["jacobi_2d", "fdtd_2d"])
def test_time_tiled_stencils_vectorize_their_point_loops_and_match(name: str, suite_kernel_agrees) -> None:
    from polytri.schedule.choose import choose_schedule
    from polytri.suite import KERNELS
    kern = KERNELS[name]
    prog = to_program(kern.build())
    _, _, ast = choose_schedule(prog, compute_dependences(prog), "pluto", "smart", tile=True, vector_loops=True)
    inner = [n for n in walk(ast) if isinstance(n, For) and n.innermost]
    assert inner and guarded_in_innermost(ast) == set()
    assert all(n.lanes for n in inner)
    if name == "jacobi_2d":   # its point loops carry B's values from S0 to S1: sequential, yet lanes
        assert not all(n.parallel for n in inner)
    k = pt.compile(kern.build(), options={"schedule": "pluto", "tile": True, "threads": 2})
    assert k.schedule_info.origin == "pluto+tiled"
    suite_kernel_agrees(k, name, {"T": 5, "N": 21, "NX": 19, "NY": 23})
