"""The choice of schedule in pt.compile (auto, pluto, original) and the intra-band locality order."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import polytri as pt
from polytri.schedule.locality import dominant_streams, loop_dimensions, strided_streams
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc


def test_gemm_band_puts_the_stride_one_loop_innermost():
    k = pt.compile(KERNELS["gemm"].build(), options={"schedule": "pluto"})
    info = k.schedule_info
    assert info.origin == "pluto"
    # S1: C[i, j] += alpha * A[i, k] * B[k, j]: j innermost (C, B stride-1, A invariant)
    loop_rows = [row["S1"] for row, scalar in zip(info.rows, info.scalar) if not scalar]
    assert loop_rows == ["i", "k", "j"]
    moved = [d for d in info.decisions if d.kind == "band-order"]
    assert moved and moved[0].data["vectorizable"] and moved[0].data["score"] > moved[0].data["previous_score"]


def test_blur_keeps_rows_outer_and_columns_inner():
    info = pt.compile(KERNELS["blur"].build(), options={"schedule": "pluto"}).schedule_info
    loop_rows = [row["S0"] for row, scalar in zip(info.rows, info.scalar) if not scalar]
    assert loop_rows[-1] == "x"


def test_auto_keeps_the_input_order_of_a_stencil_and_time_tiles_it_above_the_cache():
    prog = KERNELS["jacobi_2d"].build()
    auto = pt.compile(prog)
    # untiled, Pluto's skew loses the parallel loop: the input order is kept; Pluto's tiles give it back,
    # but ran 1.34x slower on two threads at PolyBench's LARGE size: the input order runs in time tiles
    # instead, where its arrays outgrow the L2 cache
    info = auto.schedule_info
    assert info.origin == "original" and info.alternative is not None
    assert (info.alternative.origin, info.alternative.condition) == ("time-tiled", "size")
    assert info.label == "original/time-tiled by size"
    kinds = {(d.kind, d.data.get("reason")) for d in auto.decision_records if d.stage == "schedule"}
    assert ("original-order", "parallelism-lost") in kinds
    assert ("tile-by-count", None) not in kinds
    (why,) = [d for d in auto.decision_records if d.kind == "tile-by-size"]
    assert (why.data["tiled"], why.data["untiled"]) == ("time-tiled", "original")
    forced = pt.compile(prog, options={"schedule": "pluto"})
    assert forced.schedule_info.origin == "pluto"
    assert forced.schedule_info.rows[1]["S0"] == "2*t + i"
    assert pt.compile(prog, options={"tile": False}).schedule_info.alternative is None


@pytest.mark.parametrize("kind", ["auto", "pluto", "original"])
@pytest.mark.parametrize("name", ["gemm", "jacobi_1d", "seidel_2d", "lu", "fdtd_2d"])
def test_every_choice_equals_the_reference(kind, name):
    kern = KERNELS[name]
    prog = kern.build()
    args = make_args(kern, kern.small)
    ref = copy_args(args)
    pt.reference(prog, **ref)
    pt.compile(prog, options={"schedule": kind})(**args)
    for a in pt.ir.to_program(prog).arrays:
        np.testing.assert_allclose(args[a.name], ref[a.name], rtol=1e-5, atol=1e-6)


def test_bad_schedule_options_are_errors():
    prog = KERNELS["gemm"].build()
    with pytest.raises(pt.OptionError, match="'schedule'"):
        pt.compile(prog, options={"schedule": "fastest"})
    with pytest.raises(pt.OptionError, match="'fuse'"):
        pt.compile(prog, options={"fuse": "always"})


def test_auto_tiles_a_sweep_with_no_other_parallelism():
    # seidel-2d: neither the input order nor Pluto's band has a parallel loop; a wavefront over tiles does
    k = pt.compile(KERNELS["seidel_2d"].build())
    info = k.schedule_info
    assert info.origin == "pluto+tiled" and info.tiled and info.alternative is not None
    assert (info.alternative.origin, info.alternative.condition) == ("pluto", "tile-count")
    assert info.label == "pluto+tiled/pluto by tile count"
    assert any(d.kind == "tile" and d.data["wavefront"] for d in info.decisions)
    assert "#pragma omp parallel num_threads" in k.source and "#pragma omp for" in k.source


def test_pluto_alone_does_not_tile_and_tile_true_does():
    prog = KERNELS["gemm"].build()
    assert pt.compile(prog, options={"schedule": "pluto"}).schedule_info.origin == "pluto"
    assert pt.compile(prog, options={"schedule": "pluto", "tile": True}).schedule_info.origin == "pluto+tiled"
    assert pt.compile(prog).schedule_info.origin == "pluto"  # auto: tiling does not pay for gemm yet


# -- the locality guard of schedule='auto' ----------------------------------------------------------------
def _dominant(name: str, schedule: str) -> list[str]:
    """Strided streams of the deepest statements of suite kernel ``name`` compiled with ``schedule``."""
    prog = pt.ir.to_program(KERNELS[name].build())
    chosen = pt.compile(prog, options={"schedule": schedule}).schedule_info
    streams = list(strided_streams(prog, chosen.map).values())
    depth = max((s.depth for s in streams), default=0)
    return sorted(dominant_streams(streams, depth))


def test_auto_keeps_the_row_walk_of_bicg():
    # Pluto scans S2 (s[j] += r[i] * A[i, j]) on (j, i): A column by column, 3-4x slower than the naive C
    assert _dominant("bicg", "pluto") == ["S2: A[i, j]"]
    k = pt.compile(KERNELS["bicg"].build())
    assert k.schedule_info.origin == "original"
    (why,) = [d for d in k.decision_records if d.kind == "original-order"]
    assert why.data["reason"] == "locality-lost" and why.data["depth"] == 2
    assert why.data["strided"] == ("S2: A[i, j]",) and why.data["original"] == ()
    assert _dominant("bicg", "auto") == []


@pytest.mark.parametrize("name", ["2mm", "3mm", "covariance", "correlation", "gemver", "lu", "seidel_2d"])
def test_auto_keeps_pluto_where_its_innermost_loops_are_no_worse(name):
    k = pt.compile(KERNELS[name].build())
    assert k.schedule_info.origin.startswith("pluto")
    assert not any(d.data.get("reason") == "locality-lost" for d in k.decision_records)


def test_fused_statements_walking_the_same_lines_count_once():
    # gemver: Pluto fuses A[i, j] += ... (on (j, i)) with x[i] += A[j, i] * y[j] (on (i, j)): one column walk
    # of A shared by both, as the input order's single column walk in S1
    assert _dominant("gemver", "pluto") == ["S0: A[i, j]"]
    assert _dominant("gemver", "original") == ["S1: A[j, i]"]


def test_loop_dimensions_skip_scalar_and_dependent_rows():
    times = [((0, 0), 1), ((1, 0), 0), ((1, 0), 3), ((2, 1), 0), ((0, 0), 2)]
    assert loop_dimensions(times) == [1, 3]


def test_innermost_motion_classes():
    prog = pt.ir.to_program(KERNELS["mvt"].build())
    streams = strided_streams(prog, prog.schedule)
    # x1[i] += A[i, j] * y_1[j]: x1 invariant, A and y_1 stride-1; x2[i] += A[j, i] * y_2[j]: A strided
    assert sorted(s.where for s in streams.values()) == ["S1: A[j, i]"]


def test_auto_keeps_the_input_order_where_pluto_guards_an_innermost_loop():
    # Pluto fuses durbin's y[k] = alpha (S9) into the loop of z[i] = ... (S7) behind `if (c2 == c1)`:
    # that loop no longer vectorizes (0.82-0.87x the naive C's time at MEDIUM and LARGE)
    from polytri.schedule.choose import _vector_loops_guarded, choose_schedule
    from polytri.schedule.dependences import compute_dependences
    from polytri.schedule.loop_ast import guarded_in_innermost
    prog = KERNELS["durbin"].build().build()
    deps = compute_dependences(prog)
    _, _, pluto_ast = choose_schedule(prog, deps, "pluto", "smart")
    assert guarded_in_innermost(pluto_ast) == {"S9"}
    original, _, original_ast = choose_schedule(prog, deps, "original", "smart")
    guarded = _vector_loops_guarded(pluto_ast, original_ast)
    assert guarded is not None and guarded.code == "guarded-vector-loop" and guarded.data["statements"] == ("S9",)
    # on the CPU, Pluto's loop is split around the guard (build_loop_ast's separate_guards), which then
    # shows that the split pieces lose the input order's parallel loop of S7: the input order is kept
    sched, decisions, ast = choose_schedule(prog, deps, "auto", "smart", vector_loops=True)
    assert guarded_in_innermost(ast) == set()
    assert decisions[0].kind == "original-order" and decisions[0].data["reason"] == "parallelism-lost"
    assert decisions[0].data["loops"] == ({"statements": ("S7",), "pluto": None, "original": 1},)  # loop 2 of S7
    assert sched.map.is_equal(original.map)
    # a GPU target masks guards: the rule is the CPU's
    _, gpu_decisions, _ = choose_schedule(prog, deps, "auto", "smart")
    assert not any(d.data.get("reason") == "guarded-vector-loop" for d in gpu_decisions)


def test_a_wavefront_with_one_tile_per_step_runs_untiled(suite_kernel_agrees):
    """floyd-warshall's wavefront over 32 x 512 tiles has one tile per step up to N = 512: the kernel runs
    the untiled schedule there, the tiles past it; both branches compute what the reference does."""
    from polytri.ir.affine import evaluate
    from polytri.ir.builder import to_program
    from polytri.ir.expr import Binary, Const
    from polytri.schedule.choose import choose_schedule
    from polytri.schedule.dependences import compute_dependences
    from polytri.schedule.loop_ast import If
    prog = to_program(KERNELS["floyd_warshall"].build())
    sched, decisions, ast = choose_schedule(prog, compute_dependences(prog), "auto", "smart", None, vector_loops=True)
    assert isinstance(ast, If) and sched.origin == "pluto+tiled" and sched.alternative is not None
    assert (sched.alternative.origin, sched.alternative.condition) == ("pluto", "tile-count")
    (why,) = [d for d in decisions if d.kind == "tile-by-count"]
    assert [var for var, _ in why.data["trips"]] == ["c2"] and why.data["untiled"] == "pluto"
    assert isinstance(ast.cond, Binary) and ast.cond.op == "or"   # two tiles at once, or path outgrows L2
    tiles, reuse = ast.cond.lhs, ast.cond.rhs
    assert isinstance(tiles, Binary) and tiles.op == ">=" and tiles.rhs == Const(2)
    assert evaluate(tiles.lhs, {"N": 512}) == 1 and evaluate(tiles.lhs, {"N": 513}) == 2
    assert isinstance(reuse, Binary) and reuse.op == ">" and evaluate(reuse.lhs, {"N": 500}) == 8 * 500 * 500
    k = pt.compile(KERNELS["floyd_warshall"].build(), options={"threads": 1})   # one thread: the test's
    suite_kernel_agrees(k, "floyd_warshall", {"N": 24})                      # sibling worker is busy
    args = make_args(KERNELS["floyd_warshall"], {"N": 520})
    path = args["path"].copy()
    for m in range(520):   # exact: the inputs have no negative cycle, so row and column m keep their values
        np.minimum(path, path[:, m:m + 1] + path[m:m + 1, :], out=path)
    k(**args)
    np.testing.assert_array_equal(args["path"], path)


@pytest.mark.parametrize("target", ["cpu", "nvgpu"])
def test_a_program_whose_instances_are_none_compiles_in_its_order(target: str) -> None:
    """Bounds that meet nowhere (``0 <= j < -1``): nothing to schedule.  Pluto's result for it had no time
    dimension but a band of three, and tiling it was an internal error (the original order, with a
    warning); now the input order, with reason ``empty``, and no warning."""
    p = pt.Program("empty", params=["N"])
    p.array("A", ("N", "N"))
    with p.loop("i", 0, "N"), p.loop("j", 0, -1):
        p.assign("A[i, j] = 1.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = pt.compile(p, target=target)
    assert [d.data["reason"] for d in k.decision_records if d.kind == "original-order"] == ["empty"]
    if target == "cpu":
        a = np.zeros((3, 3))
        k(A=a, N=3)
        assert not a.any()
