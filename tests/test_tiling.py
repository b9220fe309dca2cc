"""Tiling of permutable bands (option tile=True): legal, correct at sizes that are not multiples of the
tile, smaller than one tile, and with a wavefront where no tile loop is parallel."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sympy

import polytri as pt
from polytri.ir.builder import to_program
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.legality import is_legal
from polytri.schedule.pluto import pluto_schedule
from polytri.schedule.tiling import cache_sizes, tile_schedule, tile_sizes
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc


def _run(name: str, params: dict, options: dict) -> None:
    kern = KERNELS[name]
    args = make_args(kern, params)
    want = copy_args(args)
    pt.reference(kern.build(), **want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback allowed
        k = pt.compile(kern.build(), options=options)
    if any(b.width >= 2 for b in pluto_schedule(to_program(kern.build()), k.dependences).bands):
        assert k.schedule_info.origin == "pluto+tiled"
    k(**args)
    for n, v in args.items():
        if isinstance(v, np.ndarray):
            f32 = v.dtype == np.float32
            np.testing.assert_allclose(v, want[n], rtol=1e-4 if f32 else 1e-5, atol=1e-5 if f32 else 1e-9,
                                       err_msg=f"{name}: {n}")


@pytest.mark.parametrize("threads", [2, pytest.param(1, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", list(KERNELS))
def test_tiled_kernels_match_reference(name: str, threads: int) -> None:
    # tile side 4 against sizes like 13: partial tiles everywhere; on two threads every parallel loop opens
    # its region, however little work it has (one thread runs the same loops without them: make fuzz)
    _run(name, KERNELS[name].small, {"schedule": "pluto", "tile": True, "tile_size": 4, "threads": threads,
                                     "min_parallel_work": 0 if threads > 1 else None})


@pytest.mark.parametrize("name", ["gemm", "jacobi_2d", "seidel_2d", "lu", pytest.param("heat_3d", marks=pytest.mark.slow)])
def test_parameters_smaller_than_one_tile(name: str) -> None:
    _run(name, KERNELS[name].tiny, {"schedule": "pluto", "tile": True, "tile_size": 8})


def test_stencil_gets_a_wavefront_and_a_parallel_tile_loop() -> None:
    prog = to_program(KERNELS["jacobi_2d"].build())
    deps = compute_dependences(prog)
    tiled = tile_schedule(prog, pluto_schedule(prog, deps), deps, size=16)
    assert is_legal(tiled.map, deps)
    assert any(d.kind == "tile" and d.data["wavefront"] for d in tiled.decisions)
    assert tiled.parallel[1] and not tiled.parallel[0]  # tile loops: (T0 + T1) sequential, T1 parallel
    assert tiled.rows[0]["S0"] == "tile(t, 16) + tile(2*t + i, 16)"


def test_seidel_points_run_along_a_wavefront_inside_a_tile() -> None:
    prog = to_program(KERNELS["seidel_2d"].build())
    deps = compute_dependences(prog)
    sched = pluto_schedule(prog, deps)
    plain = tile_schedule(prog, sched, deps, size=8, intra_tile=False)
    assert not plain.parallel[-1]  # the j sweep: each point waits for its left neighbour
    tiled = tile_schedule(prog, sched, deps, size=8)
    assert is_legal(tiled.map, deps)
    assert tiled.parallel[-1] and any(d.kind == "point-wavefront" and d.data["dims"] == (tiled.ndim - 2, tiled.ndim - 1)
                                      for d in tiled.decisions)
    assert tiled.rows[-1]["S0"] == plain.rows[-2]["S0"]
    skewed, a, b = tiled.rows[-2]["S0"], plain.rows[-2]["S0"], plain.rows[-1]["S0"]
    assert sympy.expand(sympy.sympify(skewed) - sympy.sympify(f"({a}) + ({b})")) == 0, (skewed, a, b)
    assert all(skewed.count(name) == 1 for name in ("t", "i", "j")), skewed  # terms collected: not t + t + i
    assert tiled.map.apply_range(plain.map.reverse()).is_injective()  # same points, one time each


@pytest.mark.parametrize("name", ["ludcmp", "lu", "atax", "fdtd_2d"])
def test_no_intra_tile_wavefront_without_a_recurrence(name: str) -> None:
    # reductions, eliminations and dependences between different statements only: measured slower
    prog = to_program(KERNELS[name].build())
    deps = compute_dependences(prog)
    tiled = tile_schedule(prog, pluto_schedule(prog, deps), deps)
    assert not any(d.kind == "point-wavefront" for d in tiled.decisions)


def test_gemm_tiles_keep_outer_parallelism_without_wavefront() -> None:
    prog = to_program(KERNELS["gemm"].build())
    deps = compute_dependences(prog)
    tiled = tile_schedule(prog, pluto_schedule(prog, deps), deps, size=32)
    tiles = [d for d in tiled.decisions if d.kind == "tile"]
    assert tiles and not any(d.data["wavefront"] for d in tiles)
    assert not any(d.kind == "point-wavefront" for d in tiled.decisions)
    loops = [d for d in range(tiled.ndim) if not tiled.scalar[d]]
    assert tiled.parallel[loops[0]]
    assert [b.width for b in tiled.bands] == [3, 3]


def test_tile_size_model() -> None:
    assert set(cache_sizes()) >= {1, 2}
    gemm = tile_sizes(to_program(KERNELS["gemm"].build()), 3)  # float32
    assert gemm[2] == 1024 and gemm[0] <= gemm[1] <= gemm[2]
    heat = tile_sizes(to_program(KERNELS["heat_3d"].build()), 4)  # float64
    assert len(heat) == 4 and heat[3] == 512 and heat[0] == 8


def test_tile_options_are_checked() -> None:
    with pytest.raises(pt.OptionError, match="'tile_size'"):
        pt.compile(KERNELS["gemm"].build(), options={"tile": True, "tile_size": 0})
    with pytest.raises(pt.OptionError, match="'tile'"):
        pt.compile(KERNELS["gemm"].build(), options={"tile": "yes"})
