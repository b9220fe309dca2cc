"""Unroll-and-jam of sums kept in order (polytri/schedule/jam.py) and the elements an innermost loop holds
in C locals (polytri/cpu_codegen/scalar_promotion.py): which loops are jammed, which are not and why,
and every result bit for bit the reference's, in whole blocks of rows and in the last, partial one."""

from __future__ import annotations

import random

import numpy as np
import pytest
from oracles import equal_to_reference

import polytri as pt
from polytri.cpu_codegen.scalar_promotion import held_elements
from polytri.ir.builder import to_program
from polytri.ir.expr import Const, Var
from polytri.schedule.jam import JAM
from polytri.schedule.loop_ast import Block, For, Run
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc


def _jams(k: pt.Kernel) -> list[tuple[str, ...]]:
    return [d.data["statements"] for d in k.decision_records if d.kind == "unroll-and-jam"]


def _equal(prog: pt.Program, args: dict, options: dict) -> pt.Kernel:
    return equal_to_reference(prog, args, options)  # bit for bit: sums in order


@pytest.mark.parametrize("name", ["atax", "bicg", "mvt", "gesummv", "gemver", "ludcmp"])
@pytest.mark.parametrize("n", [1, JAM - 1, JAM, 2 * JAM + 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_jammed_kernels_equal_the_reference_in_whole_and_partial_blocks(name: str, n: int, threads: int) -> None:
    prog = KERNELS[name].build()
    params = {p: n + k for k, p in enumerate(to_program(prog).params)}
    args = make_args(KERNELS[name], params, seed=2)
    k = _equal(prog, args, {"threads": threads, "min_parallel_work": 0})
    assert _jams(k), f"{name}: no loop jammed"


@pytest.mark.parametrize("n", [2, JAM + 1, JAM + 2, 2 * JAM + 5])
@pytest.mark.parametrize("threads", [1, 2])
def test_gramschmidt_jams_blocks_that_start_after_the_column_norm(n: int, threads: int) -> None:
    """Gram-Schmidt's loop over the columns ``j > k`` (a sum down each column, then its update) shares its
    time dimension with the norm of column ``k``: blocks numbered from 0 would run some sums before the
    norm, blocks from ``k + 1`` do not.  Whole and partial blocks, bit for bit the reference's."""
    prog = KERNELS["gramschmidt"].build()
    args = make_args(KERNELS["gramschmidt"], {"M": n + 3, "N": n}, seed=n)
    k = _equal(prog, args, {"threads": threads, "min_parallel_work": 0})
    [jam] = [d.data for d in k.decision_records if d.kind == "unroll-and-jam"]
    assert jam["statements"] == ("S5", "S6") and jam["start"] == "(t1 + (1))"


def test_the_sums_of_eight_rows_are_held_in_registers() -> None:
    k = pt.compile(KERNELS["atax"].build(), "cpu")
    assert _jams(k) == [("S1", "S2", "S3")]
    src = k.source
    assert f"pt__h{JAM - 1} = pt__h{JAM - 1} + A[i][j] * x[j];" in src  # the last row's chain, in a local
    assert "unroll-and-jam" in k.explain()


@pytest.mark.parametrize("n", [1, 2, JAM, JAM + 1, 3 * JAM + 5])
@pytest.mark.parametrize("threads", [1, 2])
def test_instances_that_read_their_own_blocks_results_run_after_it(n: int, threads: int) -> None:
    """trisolv's row ``i`` reads ``x[j]`` for ``j < i``, which the rows before it in the same block finish:
    the plain jam fails its proof; the peeled one runs those reads (and the divisions they wait for)
    after the block, in the input order, and each row's sum still runs in the order of ``j``."""
    prog = KERNELS["trisolv"].build()
    args = make_args(KERNELS["trisolv"], {"N": n}, seed=1)
    k = _equal(prog, args, {"threads": threads, "min_parallel_work": 0})
    (jam,) = [d for d in k.decision_records if d.kind == "unroll-and-jam"]
    assert "S1[i, j]" in jam.data["peeled"] and "S2[i]" in jam.data["peeled"]
    if n == 3 * JAM + 5:
        assert "pt__h7 = pt__h7 - L[i][j] * x[j];" in k.source  # x[j], j < 8 c1, is not the block's x[i]


def _band(division: bool) -> pt.Program:
    """``x[i] -= L[i, j] * x[j]`` over the 4 rows before ``i``, then (``division``) ``x[i] /= L[i, i]``."""
    p = pt.Program("band", params=["N"])
    p.array("x", ("N",), "float64")
    p.array("L", ("N", "N"), "float64")
    with p.loop("i", 0, "N"):
        with p.loop("j", "i - 4", "i"), p.when("j >= 0"):
            p.assign("x[i] = x[i] - L[i, j] * x[j]")
        if division:
            p.assign("x[i] = x[i] / L[i, i]")
    return p


@pytest.mark.parametrize("division, jammed", [(False, True), (True, False)])
def test_a_peel_larger_than_a_quarter_is_refused(division: bool, jammed: bool) -> None:
    """Without the division, each ``x[j]`` is final once the ``j`` loop passes it: the jam is legal as it
    is.  With it, most of the band reads results of its own block: the peel would hold more than a quarter
    of the instances, and the loop stays as it was."""
    prog = _band(division)
    rng = np.random.default_rng(0)
    n = 3 * JAM + 5
    args = {"x": rng.standard_normal(n), "L": rng.standard_normal((n, n)) + 4 * np.eye(n), "N": n}
    assert bool(_jams(_equal(prog, args, {"threads": 1}))) == jammed


def test_no_jam_where_the_sum_loop_stores_down_columns() -> None:
    """gemver's first nest updates ``A`` down its columns in the loop of ``x``'s sums: not jammed; its
    ``w`` sums, a walk along rows, are."""
    assert _jams(pt.compile(KERNELS["gemver"].build(), "cpu")) == [("S3",)]


def test_the_option_turns_it_off() -> None:
    k = pt.compile(KERNELS["atax"].build(), "cpu", options={"jam": False})
    assert _jams(k) == [] and "pt__h1" not in k.source


def _sums(second: str) -> pt.Program:
    """Row sums ``s[i] += A[i, j]`` beside a second statement in the same loop."""
    p = pt.Program("sums", params=["N"])
    p.array("s", ("N",), "float64")
    p.array("A", ("N", "N"), "float64")
    with p.loop("i", 0, "N"), p.loop("j", 0, "N"):
        p.assign("s[i] = s[i] + A[i, j]")
        p.assign(second)
    return p


@pytest.mark.parametrize("second, held", [
    ("A[i, j] = A[i, j] * 0.5", True),      # another array: s[i] still held
    ("s[i] = s[i] * 0.5", True),            # the same element: one local for both
    ("A[i, j] = A[i, j] + s[j]", False),    # s read where the loop moves: s[j] may be s[i]
])
def test_an_element_is_held_only_where_no_other_access_may_touch_it(second: str, held: bool) -> None:
    prog = _sums(second)
    p = to_program(prog)
    statements = {s.name: s for s in p.statements}
    i, j = Var("c0", "iter"), Var("c1", "iter")
    loop = For("c1", 1, Const(0), Const(1), 1, Block((Run("S0", (i, j)), Run("S1", (i, j)))), False, True)
    found = held_elements(loop, statements)
    assert [str(h.element.array) for h in found] == (["s"] if held else [])
    rng = np.random.default_rng(0)
    args = {"s": rng.standard_normal(11), "A": rng.standard_normal((11, 11)), "N": 11}
    _equal(prog, args, {"threads": 1})


def _random_rows(seed: int) -> pt.Program:
    """Row sums ``x[i] -= A[i, j] * <read>`` over a random range of ``j`` (a band, a triangle with or
    without the diagonal, all columns), with a random statement before and after: sums that read
    earlier rows' results (peeled or refused) and sums that do not (jammed as they are)."""
    rng = random.Random(seed)
    lo = rng.choice(["0", "i - 3", "i - 9"])
    hi = rng.choice(["N", "i", "i + 1", "N - 1"])
    read = rng.choice(["x[j]", "y[j]", "x[j] * y[j]", "A[j, i]"])
    pre = rng.choice([None, "x[i] = y[i]"])
    post = rng.choice([None, "x[i] = x[i] / A[i, i]", "y[i] = x[i] * 0.5"])
    p = pt.Program(f"rows{seed}", params=["N"])
    p.array("x", ("N",), "float64")
    p.array("y", ("N",), "float64")
    p.array("A", ("N", "N"), "float64")
    with p.loop("i", 0, "N"):
        if pre:
            p.assign(pre)
        with p.loop("j", lo, hi), p.when("j >= 0"), p.when("j < N"):
            p.assign(f"x[i] = x[i] - A[i, j] * {read}")
        if post:
            p.assign(post)
    return p


def _random_rows_equal(seed: int) -> None:
    prog = _random_rows(seed)
    kernels = [pt.compile(prog, "cpu", options={"threads": t, "min_parallel_work": 0}) for t in (1, 2)]
    for n in (1, JAM - 1, JAM + 1, 2 * JAM + 5):
        rng = np.random.default_rng(n)
        args = {"x": rng.standard_normal(n), "y": rng.standard_normal(n),
                "A": 0.3 * rng.standard_normal((n, n)) + 2 * np.eye(n), "N": n}
        want = copy_args(args)
        pt.reference(prog, **want)
        for k in kernels:
            got = copy_args(args)
            k(**got)
            for name in ("x", "y", "A"):
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"seed {seed}, N={n}, {name}")


@pytest.mark.parametrize("seed", [3, 4, 6, 11, 0])  # peeled, peeled, jammed, jammed, left alone
def test_random_row_sums_equal_the_reference(seed: int) -> None:
    _random_rows_equal(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60))
def test_random_row_sums_equal_the_reference_many(seed: int) -> None:
    _random_rows_equal(seed)
