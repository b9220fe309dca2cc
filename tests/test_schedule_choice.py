"""The choice of schedule in pt.compile (auto, pluto, original) and the intra-band locality order."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc


def test_gemm_band_puts_the_stride_one_loop_innermost():
    k = pt.compile(KERNELS["gemm"].build(), options={"schedule": "pluto"})
    info = k.schedule_info
    assert info.origin == "pluto"
    # S1: C[i, j] += alpha * A[i, k] * B[k, j]: j innermost (C, B stride-1, A invariant)
    loop_rows = [row["S1"] for row, scalar in zip(info.rows, info.scalar) if not scalar]
    assert loop_rows == ["i", "k", "j"]
    assert any("moved innermost" in d for d in info.decisions)


def test_blur_keeps_rows_outer_and_columns_inner():
    info = pt.compile(KERNELS["blur"].build(), options={"schedule": "pluto"}).schedule_info
    loop_rows = [row["S0"] for row, scalar in zip(info.rows, info.scalar) if not scalar]
    assert loop_rows[-1] == "x"


def test_auto_keeps_the_input_order_of_a_stencil_until_tiling_exists():
    prog = KERNELS["jacobi_2d"].build()
    auto = pt.compile(prog)
    assert auto.schedule_info.origin == "original"
    assert "the input order is kept" in auto.explain()
    forced = pt.compile(prog, options={"schedule": "pluto"})
    assert forced.schedule_info.origin == "pluto"
    assert forced.schedule_info.rows[1]["S0"] == "2*t + i"


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
    assert k.schedule_info.origin == "pluto+tiled"
    assert any("wavefront" in d for d in k.schedule_info.decisions)
    assert "#pragma omp parallel num_threads" in k.source and "#pragma omp for" in k.source


def test_pluto_alone_does_not_tile_and_tile_true_does():
    prog = KERNELS["gemm"].build()
    assert pt.compile(prog, options={"schedule": "pluto"}).schedule_info.origin == "pluto"
    assert pt.compile(prog, options={"schedule": "pluto", "tile": True}).schedule_info.origin == "pluto+tiled"
    assert pt.compile(prog).schedule_info.origin == "pluto"  # auto: tiling does not pay for gemm yet
