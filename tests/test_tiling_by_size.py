"""The default tiles where a loop's reuse exceeds the L2 cache at the sizes of the call
(:mod:`polytri.schedule.reuse`): both versions are compiled, the kernel picks one when it runs.  Pluto's
schedules get Pluto's tiles; stencils kept in their input order get time tiles around it
(:mod:`polytri.schedule.time_tiles`)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import polytri as pt
from polytri.ir.affine import evaluate
from polytri.ir.builder import to_program
from polytri.schedule import choose
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.loop_ast import Block, For, If, build_loop_ast, guarded_in_innermost
from polytri.schedule.reuse import loop_reuse, reuse_exceeding
from polytri.schedule.schedule import original_schedule
from polytri.schedule.time_tiles import (
    SIZES,
    SIZES_1D,
    side_by_side_condition,
    spanning_band,
    tiles_side_by_side,
)
from polytri.suite import KERNELS
from polytri.suite.datasets import DATASETS

pytestmark = pytest.mark.cc


def _auto(name: str):
    prog = to_program(KERNELS[name].build())
    return prog, choose.choose_schedule(prog, compute_dependences(prog), "auto", "smart", None, None,
                                        vector_loops=True)


def test_syr2k_is_tiled_above_the_cache_only() -> None:
    prog, (sched, decisions, ast) = _auto("syr2k")
    assert isinstance(ast, If) and sched.origin == "pluto" and sched.alternative is not None
    assert (sched.alternative.origin, sched.alternative.condition) == ("pluto+tiled", "size")
    assert sched.label == "pluto/pluto+tiled by size"
    assert any(d.kind == "tile" for d in sched.alternative.decisions)
    (why,) = [d for d in decisions if d.kind == "tile-by-size"]
    assert why.data["tiled"] == "pluto+tiled" and why.data["l2"] == choose.cache_sizes()[2]
    found = reuse_exceeding(prog, ast.orelse, choose.cache_sizes()[2])
    assert found is not None and found[0] == ast.cond   # the kernel's test is this machine's L2
    reuse = found[1]
    assert why.data["reuse"] == tuple(reuse)
    assert not _exceeds(reuse, {"M": 200, "N": 240}, 2 << 20)   # MEDIUM: A fits in a 2 MiB L2
    assert _exceeds(reuse, {"M": 1000, "N": 1200}, 2 << 20)     # LARGE: it does not


def _exceeds(reuse, env: dict[str, int], cache: int) -> bool:
    return any(evaluate(r.footprint, env) > cache for r in reuse)


@pytest.mark.parametrize("name", ["gesummv", "gemm"])
def test_row_sweeps_and_packed_contractions_are_not_versioned(name: str) -> None:
    # gesummv rereads x for every i, but one iteration of i sweeps two rows and x only: a row fits the
    # cache; gemm's micro-kernel packs its operands in panels of its own
    prog, (sched, _, ast) = _auto(name)
    assert not isinstance(ast, If) and sched.alternative is None
    if name == "gesummv":
        assert loop_reuse(prog, ast) == []


@pytest.mark.parametrize("name", ["syr2k", "trmm", "covariance"])
def test_the_tiled_version_is_right(name: str, monkeypatch: pytest.MonkeyPatch, suite_kernel_agrees) -> None:
    # a 64-byte "cache" makes the tiled version run at test sizes
    monkeypatch.setattr(choose, "cache_sizes", lambda: {1: 64, 2: 64, 3: 64})
    kern = KERNELS[name]
    k = pt.compile(kern.build(), options={"threads": 2})
    alt = k.schedule_info.alternative
    assert alt is not None and (alt.origin, alt.condition) == ("pluto+tiled", "size"), k.schedule_info.label
    suite_kernel_agrees(k, name, {"T": 4, "N": 23, "M": 19})


@pytest.mark.parametrize("n,kept", [(32, False), (1024, True)])
def test_a_constant_footprint_that_fits_is_no_test(n: int, kept: bool) -> None:
    """A graph captured with static shapes: the footprint is a number, and one that fits the cache is not
    a version to compile (its test would be false at every call)."""
    p = pt.Program("sweeps", params=[])
    p.array("A", (n, n), "float32")
    p.array("B", (n, n), "float32")
    with p.loop("t", 0, 8), p.loop("i", 0, n), p.loop("j", 0, n):
        p.assign("B[i, j] = B[i, j] + A[i, j] * A[j, i]")
    prog = to_program(p)
    deps = compute_dependences(prog)
    ast = build_loop_ast(prog, original_schedule(prog, deps), deps)
    assert loop_reuse(prog, ast)   # t rereads A and B: 2 n^2 floats
    found = reuse_exceeding(prog, ast, 2 << 20)
    assert (found is not None) == kept


def test_each_schedule_of_a_versioned_kernel_is_a_function_of_its_own() -> None:
    """gcc optimizes each version as it would alone (floyd-warshall's untiled loops ran 1.2x slower
    inside the function that also held its tiled version, nussinov's tiled loops 2.7x slower when gcc
    inlined both versions into the kernel's function): each is a function of its own in the built library
    too, not inlined; strict warnings hold."""
    k = pt.compile(KERNELS["syr2k"].build(), options={"cflags": "-Wall -Wextra -Werror"})
    assert k.schedule_info.alternative is not None
    src = k.source
    main = src[src.rindex("\nvoid pt_syr2k("):]
    assert "static void pt_syr2k_v0(" in src and "static void pt_syr2k_v1(" in src
    assert "pt_syr2k_v0(" in main and "pt_syr2k_v1(" in main and "for (" not in main
    if shutil.which("nm"):
        symbols = subprocess.run(["nm", str(k.library)], capture_output=True, text=True, check=True).stdout.split()
        assert "pt_syr2k_v0" in symbols and "pt_syr2k_v1" in symbols


def _loops(n):
    """Every ``For`` of a loop AST."""
    if isinstance(n, For):
        return [n, *_loops(n.body)]
    if isinstance(n, Block):
        return [x for c in n.body for x in _loops(c)]
    if isinstance(n, If):
        return _loops(n.then) + (_loops(n.orelse) if n.orelse is not None else [])
    return []


@pytest.mark.parametrize("name", ["jacobi_2d", "fdtd_2d"])
def test_2d_stencils_kept_in_the_input_order_run_it_in_time_tiles_above_the_cache(name: str) -> None:
    prog, (sched, decisions, ast) = _auto(name)
    assert isinstance(ast, If) and sched.origin == "original"
    assert sched.label == "original/time-tiled by size"
    (tiles,) = [d for d in sched.alternative.decisions if d.kind == "time-tile"]
    assert tiles.data["wavefront"] and tiles.data["sizes"] == SIZES
    tiled_dims = len(SIZES)
    # the tiled version's innermost loops are the input order's: whole rows, in SIMD lanes, no guard
    tiled, untiled = ast.then, ast.orelse
    assert not guarded_in_innermost(tiled)
    inner = [(f.dim - tiled_dims, f.lanes) for f in _loops(tiled) if f.innermost]
    assert inner and inner == [(f.dim, f.lanes) for f in _loops(untiled) if f.innermost]
    assert all(lanes for _, lanes in inner)
    # the wavefront's second tile loop is parallel
    assert [f.parallel for f in _loops(tiled) if f.dim < 2][:2] == [False, True]
    medium, large = (DATASETS[d][name] for d in ("medium", "large"))
    assert not _exceeds(reuse_exceeding(prog, untiled, 2 << 20)[1], medium, 2 << 20)
    assert _exceeds(reuse_exceeding(prog, untiled, 2 << 20)[1], large, 2 << 20)


def test_a_3d_stencil_keeps_its_input_order_untiled() -> None:
    # tiles of whole planes outgrow the L2, smaller ones reread each point fewer than twice
    _, (sched, _, ast) = _auto("heat_3d")
    assert sched.origin == "original" and sched.alternative is None and not isinstance(ast, If)


@pytest.mark.parametrize("name, threads", [("jacobi_2d", 1), ("jacobi_2d", 2), ("fdtd_2d", 2)])
def test_the_time_tiled_version_is_right(name: str, threads: int, monkeypatch: pytest.MonkeyPatch,
                                        suite_kernel_agrees) -> None:
    # a 64-byte "cache" makes the time-tiled version run at test sizes; sides of 2 give many tiles
    monkeypatch.setattr(choose, "cache_sizes", lambda: {1: 64, 2: 64, 3: 64})
    k = pt.compile(KERNELS[name].build(), options={"threads": threads, "tile_size": 2})
    assert k.schedule_info.label == "original/time-tiled by size"
    suite_kernel_agrees(k, name, {"T": 5, "N": 13, "NX": 11, "NY": 9})


def test_a_1d_stencil_runs_in_time_tiles_where_two_run_side_by_side() -> None:
    """jacobi-1d's rows fit the L1 cache: its time tiles are for parallelism, picked by the tiles' count."""
    prog, (sched, decisions, ast) = _auto("jacobi_1d")
    assert isinstance(ast, If) and sched.origin == "original"
    assert (sched.alternative.origin, sched.alternative.condition) == ("time-tiled", "tile-count")
    assert sched.label == "original/time-tiled by tile count"
    (tiles,) = [d for d in sched.alternative.decisions if d.kind == "time-tile"]
    assert tiles.data["wavefront"] and tiles.data["sizes"] == SIZES_1D
    (why,) = [d for d in decisions if d.kind == "time-tile-by-count"]
    assert (why.data["tiled"], why.data["untiled"]) == ("time-tiled", "original")
    assert [least for _, _, least in why.data["trips"]] == [2 * SIZES_1D[0], 2 * SIZES_1D[1]]
    tiled = ast.then
    # the tiles' points run the input order's loops, in SIMD lanes, without a guard; tile loop 2 is parallel
    assert not guarded_in_innermost(tiled)
    assert [f.lanes for f in _loops(tiled) if f.innermost] == [True, True]
    assert [f.parallel for f in _loops(tiled) if f.dim < 2][:2] == [False, True]
    medium, large = (DATASETS[d]["jacobi_1d"] for d in ("medium", "large"))
    assert ast.cond == side_by_side_condition(list(why.data["trips"]))
    assert not _holds(why.data["trips"], medium) and _holds(why.data["trips"], large)   # N = 400: one tile a row


def _holds(tests, env: dict[str, int]) -> bool:
    return all(evaluate(t, env) >= least for _, t, least in tests)


def test_time_tiles_need_two_tiles_along_both_loops() -> None:
    _, (_, _, ast) = _auto("jacobi_1d")
    tests = tiles_side_by_side(ast.orelse, (4, 8))
    assert tests is not None and sorted(least for _, _, least in tests) == [8, 16]
    for T, N, runs in ((8, 18, True), (7, 18, False), (8, 17, False)):
        assert _holds(tests, {"T": T, "N": N}) == runs
    p = pt.Program("one_step", params=["N"])   # a single time step: no tile rows to run side by side
    p.array("A", ("N",))
    p.array("B", ("N",))
    with p.loop("i", 1, "N - 1"):
        p.assign("B[i] = A[i - 1] + A[i + 1]")
    prog = to_program(p)
    assert tiles_side_by_side(build_loop_ast(prog, original_schedule(prog, compute_dependences(prog)),
                                             compute_dependences(prog)), (4, 8)) is None


@pytest.mark.parametrize("threads", [1, 2])
def test_the_1d_time_tiled_version_is_right(threads: int, suite_kernel_agrees) -> None:
    # sides of 2: the tiles run at T >= 4 and N - 2 >= 4; every region opens (no work threshold)
    k = pt.compile(KERNELS["jacobi_1d"].build(),
                   options={"threads": threads, "tile_size": 2, "min_parallel_work": 0})
    assert k.schedule_info.label == "original/time-tiled by tile count"
    for T, N in ((5, 13), (9, 30), (4, 6)):
        suite_kernel_agrees(k, "jacobi_1d", {"T": T, "N": N})


def _three_point_chain() -> pt.Program:
    """A 1-D stencil of three statements with uneven reaches (two to the left, one to the right)."""
    p = pt.Program("chain_1d", params=["T", "N"])
    p.assume("N >= 4")
    for name in ("A", "B", "C"):
        p.array(name, ("N",))
    with p.loop("t", 0, "T"):
        with p.loop("i", 2, "N - 1"):
            p.assign("B[i] = 0.5 * A[i - 2] + 0.25 * A[i + 1]")
        with p.loop("i", 1, "N - 1"):
            p.assign("C[i] = B[i - 1] - 0.5 * B[i + 1]")
        with p.loop("i", 2, "N - 2"):
            p.assign("A[i] = 0.75 * C[i] + 0.125 * A[i]")
    return p


@pytest.mark.parametrize("threads", [1, 2])
def test_time_tiles_of_an_uneven_1d_stencil_are_right(threads: int) -> None:
    k = pt.compile(_three_point_chain(), options={"threads": threads, "tile_size": 2, "min_parallel_work": 0})
    assert k.schedule_info.label == "original/time-tiled by tile count"
    rng = np.random.default_rng(7)
    for T, N in ((4, 6), (7, 19), (12, 40)):
        args = {n: rng.uniform(-1, 1, N) for n in ("A", "B", "C")}
        want = {n: v.copy() for n, v in args.items()}
        pt.reference(_three_point_chain(), T=T, **want)
        k(T=T, **args)
        for n in args:
            np.testing.assert_allclose(args[n], want[n], rtol=1e-12, atol=1e-14, err_msg=f"{n} at T={T} N={N}")


def test_a_stencil_among_other_loops_gets_no_time_tiles() -> None:
    """Time tiles need one band that every statement runs in: a statement before the time loop (here, an
    initialisation) leaves the input order untiled."""
    p = pt.Program("init_then_jacobi", params=["T", "N"])
    p.array("A", ("N", "N"))
    p.array("B", ("N", "N"))
    with p.loop("i", 0, "N"):   # one loop: the band of the stencil is the only one of two dimensions or more
        p.assign("A[i, 0] = 0.5 * A[i, 0]")
    with p.loop("t", 0, "T"):
        with p.loop("i", 1, "N - 1"), p.loop("j", 1, "N - 1"):
            p.assign("B[i, j] = 0.25 * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1])")
        with p.loop("i", 1, "N - 1"), p.loop("j", 1, "N - 1"):
            p.assign("A[i, j] = B[i, j]")
    prog = to_program(p)
    deps = compute_dependences(prog)
    sched, _, _ = choose.choose_schedule(prog, deps, "pluto", "smart", False, None)
    assert [b.width for b in sched.bands if b.width >= 2] == [3]   # the stencil's skewed band, after the initialisation
    assert spanning_band(sched) is None
    auto, _, _ = choose.choose_schedule(prog, deps, "auto", "smart", None, None, vector_loops=True)
    assert auto.alternative is None
