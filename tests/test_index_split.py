"""Index-set splitting (polytri/schedule/index_split.py) and the invariant reads a vectorized loop holds in
``const`` locals (polytri/cpu_codegen/scalar_promotion.py): which loops are split and where, which are
not, and every result bit for bit the reference's, with data that makes the pivot's writes change what
the other iterations read."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest
from oracles import equal_to_reference

import polytri as pt
from polytri.ir.builder import to_program
from polytri.schedule.index_split import split_loops
from polytri.suite import KERNELS

pytestmark = pytest.mark.cc


def _splits(k: pt.Kernel) -> list[dict]:
    return [dict(d.data) for d in k.decision_records if d.kind == "index-set-split"]


def _paths(n: int, seed: int) -> dict:
    """Distances with negative entries on and off the diagonal: the pivot ``j = k`` then lowers
    ``path[i, k]``, which the later iterations read (with positive data it would never change it)."""
    rng = np.random.default_rng(seed)
    return {"path": rng.integers(-5, 40, (n, n)).astype(np.float64) / 4, "N": n}


def _equal(prog: pt.Program, args: dict, options: dict) -> pt.Kernel:
    return equal_to_reference(prog, args, options)


def test_floyd_warshall_is_split_at_j_equals_k_then_at_i_equals_k() -> None:
    prog, decisions = split_loops(to_program(KERNELS["floyd_warshall"].build()))
    assert [d.data["level"] for d in decisions] == [2, 1]
    assert len(prog.statements) == 9
    assert "[k, i] -> [j = k]" in decisions[0].data["pivot"] and "[k] -> [i = k]" in decisions[1].data["pivot"]
    # the pieces run in the input order: rows before k, row k, rows after; in each, j < k, j = k, j > k
    assert [s.name for s in prog.statements] == [f"S0_{a}_{b}" for b in ("lt", "eq", "gt") for a in ("lt", "eq", "gt")]
    fixed = isl.Set("[N] -> { : N = 6 }")
    assert sum(s.domain.intersect_params(fixed).count_val().to_python() for s in prog.statements) == 6 ** 3


@pytest.mark.parametrize("n", [1, 2, 3, 8, 21])
@pytest.mark.parametrize("threads", [1, 2])
def test_split_floyd_warshall_equals_the_reference(n: int, threads: int) -> None:
    k = _equal(KERNELS["floyd_warshall"].build(), _paths(n, seed=n), {"threads": threads, "min_parallel_work": 0})
    assert len(_splits(k)) == 2
    assert "index-set split" in k.explain()


def test_the_pieces_vectorize_and_run_in_parallel() -> None:
    k = pt.compile(KERNELS["floyd_warshall"].build(), "cpu")
    assert k.source.count("#pragma omp simd") >= 4 and "#pragma omp for" in k.source
    # path[i, k], read by the rows' vector loops, is loaded once before each
    assert "const double pt__h0 = path[" in k.source
    assert "pt__min_double(path[i][j], pt__h0 + path[k][j])" in k.source


def test_option_split_false_and_the_original_order_leave_the_loops_whole() -> None:
    for options in ({"split": False}, {"schedule": "original"}):
        k = pt.compile(KERNELS["floyd_warshall"].build(), "cpu", options=options)
        assert not _splits(k) and "S0_lt" not in k.source


def _gauss_jordan() -> pt.Program:
    """Every row, the pivot's own included, updated from the pivot row: the pivot column ``A[i, k]`` is
    read by every ``j`` and written at ``j = k``; row ``k`` is written at ``i = k`` and read by every row."""
    p = pt.Program("gauss_jordan", params=["N"])
    p.array("A", ("N", "N"), "float64")
    with p.loop("k", 0, "N"), p.loop("i", 0, "N"), p.loop("j", 0, "N"):
        p.assign("A[i, j] = A[i, j] - A[i, k] * A[k, j] / 4.0")
    return p


def _two_statements() -> pt.Program:
    """Two statements in the split loop: ``B[i, j]`` reads the pivot column, ``A[i, j]`` writes it."""
    p = pt.Program("two", params=["N"])
    p.array("A", ("N", "N"), "float64")
    p.array("B", ("N", "N"), "float64")
    with p.loop("k", 0, "N"), p.loop("i", 0, "N"), p.loop("j", 0, "N"):
        p.assign("B[i, j] = A[i, k] * 0.5 + B[i, j]")
        p.assign("A[i, j] = A[i, j] + B[i, j] * 0.25")
    return p


@pytest.mark.parametrize("build", [_gauss_jordan, _two_statements])
@pytest.mark.parametrize("n", [1, 4, 13])
def test_other_pivots_equal_the_reference(build, n: int) -> None:
    rng = np.random.default_rng(n)
    args = {a.name: rng.uniform(-1, 1, (n, n)) for a in to_program(build()).arrays} | {"N": n}
    k = _equal(build(), args, {"threads": 2, "min_parallel_work": 0})
    assert _splits(k), "not split"


@pytest.mark.parametrize("offset", [-1, 1, 2])
def test_a_pivot_off_the_diagonal(offset: int) -> None:
    """``path[i, k + c]`` read by every ``j``: the pivot is ``j = k + c``."""
    p = pt.Program("shifted", params=["N"])
    p.array("path", ("N", "N"), "float64")
    with p.loop("k", max(0, -offset), f"N - {max(0, offset)}"), p.loop("i", 0, "N"), p.loop("j", 0, "N"):
        p.assign(f"path[i, j] = min(path[i, j], path[i, k + {offset}] + path[k, j])")
    for n in (1, 2, 9):
        k = _equal(p, _paths(n, seed=n + offset), {"threads": 2, "min_parallel_work": 0})
        if n == 9:
            assert [d["level"] for d in _splits(k)][:1] == [2]


def test_loops_whose_dependences_do_not_meet_one_iteration_stay_whole() -> None:
    """A running sum carries a dependence from every iteration to the next; a reduction into one element
    from every iteration to every later one: neither has a pivot."""
    p = pt.Program("scan", params=["N"])
    p.array("a", ("N",), "float64")
    p.array("s", ("N",), "float64")
    with p.loop("i", 1, "N"):
        p.assign("a[i] = a[i - 1] + a[i]")
    with p.loop("i", 0, "N"), p.loop("j", 0, "N"):
        p.assign("s[i] = s[i] + a[j]")
    prog, decisions = split_loops(to_program(p))
    assert decisions == [] and prog == to_program(p)
    # a mean over a 2 x 2 window: its only pair of iterations starts at r1 = 0, a "pivot" with nothing
    # to gain (no piece off it runs two iterations); the loops stay whole (mobilenet's pooling)
    q = pt.Program("pool", params=[])
    q.array("m", (8,), "float32")
    q.array("x", (8, 2, 2), "float32")
    with q.loop("c", 0, 8), q.loop("r0", 0, 2), q.loop("r1", 0, 2):
        q.assign("m[c] = m[c] + x[c, r0, r1]")
    assert split_loops(to_program(q))[1] == []
    for name in ("gemm", "lu", "cholesky", "nussinov", "seidel_2d", "durbin"):
        assert split_loops(to_program(KERNELS[name].build()))[1] == [], name


def test_an_invariant_read_is_held_only_where_no_store_of_the_loop_may_meet_it() -> None:
    """``x[2 j]`` never meets ``x[5]`` (isl proves the loop parallel), but the printer's proof takes only
    a counter with coefficient 1: ``x[5]`` is read in place.  ``y[j]``, stored below ``c`` only, holds
    ``y[c]``; an array the loop does not store to is left to gcc."""
    p = pt.Program("meet", params=["N"])
    p.array("x", ("2 * N + 6",), "float64")
    with p.loop("j", 0, "N"):
        p.assign("x[2 * j] = x[2 * j] + x[5]")
    src = pt.compile(p, "cpu", options={"threads": 1}).source
    assert "#pragma omp simd" in src and "pt__h" not in src
    q = pt.Program("below", params=["N"])
    q.array("y", ("N",), "float64")
    q.array("z", ("N",), "float64")
    with q.loop("c", 0, "N"), q.loop("j", 0, "c"):
        q.assign("y[j] = y[j] + y[c] * z[c]")
    src = pt.compile(q, "cpu", options={"threads": 1}).source
    assert src.count("const double pt__h0 = y[c0];") == 2 and "y[j] = y[j] + pt__h0 * z[c];" in src
