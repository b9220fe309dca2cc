"""Whole-nest contractions on the CPU (``find_domain_contraction``): a convolution's sum over several
iterators, with its padding as a guard, computed by the packed micro-kernel and equal to the reference."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.ir.builder import to_program

pytestmark = pytest.mark.cc

MARK = "packed contraction"


def _conv(*, params: bool, stride: int = 1, pad: int = 1, batch: bool = False) -> pt.Program:
    """``O[f, y, x] += K[f, c, r, s] * I[c, stride * y + r - pad, stride * x + s - pad]`` where the image is
    read, i.e. a 3 x 3 convolution with zero padding; with ``batch``, over several images.  With
    ``params`` the sizes are parameters (stride 1 and padding 1 only)."""
    p = pt.Program("conv", params=["C", "F", "H", "W"] if params else [])
    C, F, H, W = ("C", "F", "H", "W") if params else (3, 5, 9, 7)
    # the output's size: (H + 2 pad - 3) // stride + 1
    Y, X = (H, W) if stride == 1 and pad == 1 else ((H + 2 * pad - 3) // stride + 1, (W + 2 * pad - 3) // stride + 1)
    n = ("n", 0, 2) if batch else None
    lead = "n, " if batch else ""
    p.array("O", ((2,) if batch else ()) + (F, Y, X), "float32")
    p.array("I", ((2,) if batch else ()) + (C, H, W), "float32")
    p.array("K", (F, C, 3, 3), "float32")
    loops = ([n] if n else []) + [("f", 0, F), ("c", 0, C), ("r", 0, 3), ("s", 0, 3), ("y", 0, Y), ("x", 0, X)]
    ctx = [p.loop(*lp) for lp in loops]
    for cm in ctx:
        cm.__enter__()
    iy, ix = f"{stride} * y + r - {pad}", f"{stride} * x + s - {pad}"
    with p.when(f"{iy} >= 0"), p.when(f"{iy} < {H}"), p.when(f"{ix} >= 0"), p.when(f"{ix} < {W}"):
        p.assign(f"O[{lead}f, y, x] += K[f, c, r, s] * I[{lead}c, {iy}, {ix}]")
    for cm in reversed(ctx):
        cm.__exit__(None, None, None)
    return p


def _run(prog: pt.Program, params: dict, options: dict | None = None, *, weights=None, packed: bool = True):
    rng = np.random.default_rng(1)
    args: dict = dict(params)
    for a in to_program(prog).arrays:
        shape = tuple(e.value if hasattr(e, "value") else params[e.name] for e in a.shape)
        args[a.name] = rng.standard_normal(shape).astype(a.dtype)
    if weights is not None:
        weights(args["K"])
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    pt.reference(prog, **want)
    k = pt.compile(prog, "cpu", options=options)
    assert (MARK in k.source) == packed, [d for d in k.decisions if "contraction" in d]
    k(**args)
    # the same additions in the same order (plus zeros): equal, not close
    np.testing.assert_array_equal(args["O"], want["O"])
    return k


@pytest.mark.parametrize("threads", [1, 2])
def test_convolution_is_one_packed_contraction_over_three_summed_iterators(threads: int) -> None:
    k = _run(_conv(params=False), {}, {"threads": threads})
    assert "const int pt__by_cols = 0;" in k.source  # its image is read several times: threads share rows
    assert any("sum over c, r, s, looping over y" in d and "zero-padded" in d for d in k.decisions), k.decisions


@pytest.mark.parametrize("sizes", [dict(C=2, F=6, H=11, W=70), dict(C=1, F=1, H=1, W=1),
                                   dict(C=3, F=9, H=2, W=3)])
@pytest.mark.parametrize("threads", [1, 2])
def test_parametric_sizes_around_the_edges(sizes: dict, threads: int) -> None:
    _run(_conv(params=True), sizes, {"threads": threads})


def test_stride_two_and_padding_two() -> None:
    _run(_conv(params=False, stride=2, pad=2), {})


def test_batch_points_shared_by_threads() -> None:
    _run(_conv(params=False, batch=True), {}, {"threads": 2})


def test_a_weight_that_is_not_finite_takes_the_exact_loops() -> None:
    """``0 * inf`` is NaN: the padded panels would put NaN where the reference sums only the image."""
    def poison(w: np.ndarray) -> None:
        w[1, 0, 0, 0] = np.inf
        w[2, 1, 2, 2] = -np.inf
    _run(_conv(params=False), {}, {"threads": 2}, weights=poison)


def test_fallback_when_the_panels_cannot_be_allocated() -> None:
    _run(_conv(params=True), dict(C=2, F=5, H=6, W=7), {"cflags": "-DPT_NO_PANELS"})


def test_rows_that_depend_on_the_sum_are_not_packed() -> None:
    p = pt.Program("tri", params=["N"])
    p.array("O", ("N", "N"), "float32")
    p.array("A", ("N", "N"), "float32")
    p.array("B", ("N", "N"), "float32")
    with p.loop("i", 0, "N"), p.loop("k", 0, "N"), p.loop("j", 0, "N"), p.when("k <= i"):
        p.assign("O[i, j] += A[i, k] * B[k, j]")
    _run(p, dict(N=9), packed=False)


def test_targets_that_the_domain_never_writes_are_not_packed() -> None:
    """``x >= y``: the box's elements with ``x < y`` get no sum, so the packed code would touch them."""
    p = pt.Program("band", params=["N"])
    p.array("O", ("N", "N", "N"), "float32")
    p.array("K", ("N", "N"), "float32")
    p.array("I", ("N", "N"), "float32")
    with p.loop("f", 0, "N"), p.loop("y", 0, "N"), p.loop("c", 0, "N"), p.loop("x", 0, "N"), p.when("x >= y"):
        p.assign("O[y, f, x] += K[f, c] * I[c, x]")
    _run(p, dict(N=7), packed=False)


def test_columns_that_move_with_the_sum_are_guarded() -> None:
    """``k <= j < k + 10``: the columns have no bounds of their own; the box takes the domain's."""
    p = pt.Program("band", params=[])
    p.array("O", (6, 20), "float32")
    p.array("A", (6, 4), "float32")
    p.array("B", (4, 20), "float32")
    with p.loop("i", 0, 6), p.loop("k", 0, 4), p.loop("j", "k", "k + 10"):
        p.assign("O[i, j] += A[i, k] * B[k, j]")
    _run(p, {}, {"threads": 2})


@pytest.mark.parametrize("threads", [1, 2])
def test_two_summed_iterators_and_a_left_factor_per_batch_point(threads: int) -> None:
    """``L`` changes with the batch point ``n``: its panels are packed again for each one."""
    p = pt.Program("bmm2", params=[])
    p.array("O", (3, 5, 67), "float32")
    p.array("A", (3, 5, 4, 3), "float32")
    p.array("B", (3, 4, 3, 67), "float32")
    with p.loop("n", 0, 3), p.loop("i", 0, 5), p.loop("k", 0, 4), p.loop("l", 0, 3), p.loop("j", 0, 67):
        p.assign("O[n, i, j] += A[n, i, k, l] * B[n, k, l, j]")
    k = _run(p, {}, {"threads": threads})
    assert any("sum over k, l, looping over n" in d for d in k.decisions), k.decisions
    assert "pt__aw[" not in k.source
