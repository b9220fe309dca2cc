"""Exact dependences (pt.dependences) against hand-derived isl maps; parallel dimensions and legality."""

from __future__ import annotations

import islpy as isl
import pytest

import polytri as pt
from polytri.ir import to_program
from polytri.schedule.dependences import Dependences, compute_dependences
from polytri.schedule.legality import is_legal
from polytri.schedule.schedule import original_schedule, parallel_dimensions


def expect(program: pt.Program, text: str) -> isl.UnionMap:
    """``text`` as a union map, restricted to the program's context (as pt.dependences' results are)."""
    return isl.UnionMap(text).intersect_params(to_program(program).context)


def assert_umap_equal(got: isl.UnionMap, want: isl.UnionMap) -> None:
    assert got.is_equal(want), f"\n got: {got}\nwant: {want}\n got - want: {got.subtract(want)}\n" \
                               f"want - got: {want.subtract(got)}"


def jacobi_1d() -> pt.Program:
    p = pt.Program("jacobi_1d", params=["T", "N"])
    p.assume("N >= 3")
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("t", 0, "T"):
        with p.loop("i", 1, "N - 1"):
            p.assign("B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])")
        with p.loop("i", 1, "N - 1"):
            p.assign("A[i] = B[i]")
    return p


def gemm() -> pt.Program:
    p = pt.Program("gemm", params=["NI", "NJ", "NK"])
    p.array("C", ("NI", "NJ"), "float64")
    p.array("A", ("NI", "NK"), "float64")
    p.array("B", ("NK", "NJ"), "float64")
    p.scalar("alpha", "float64")
    p.scalar("beta", "float64")
    with p.loop("i", 0, "NI"):
        with p.loop("j", 0, "NJ"):
            p.assign("C[i, j] *= beta")
            with p.loop("k", 0, "NK"):
                p.assign("C[i, j] += alpha * A[i, k] * B[k, j]")
    return p


def recurrence() -> pt.Program:
    p = pt.Program("rec", params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 1, "N"):
        p.assign("A[i] = A[i - 1]")
    return p


DOM0 = "0 <= t < T and 1 <= i <= N - 2"


def test_jacobi_1d_dependences() -> None:
    p = jacobi_1d()
    d = pt.dependences(p)
    assert isinstance(d, Dependences)
    assert_umap_equal(d.flow, expect(p, (
        "[T, N] -> { S0[t, i] -> S1[t, i] : 0 <= t < T and 1 <= i <= N - 2; "
        "S1[t, j] -> S0[t + 1, i] : 0 <= t < T - 1 and 1 <= i <= N - 2 and 1 <= j <= N - 2 "
        "and i - 1 <= j <= i + 1 }")))
    assert_umap_equal(d.anti, expect(p, (
        "[T, N] -> { S0[t, i] -> S1[t2, j] : 0 <= t <= t2 < T and 1 <= i <= N - 2 and 1 <= j <= N - 2 "
        "and i - 1 <= j <= i + 1; "
        "S1[t, i] -> S0[t2, i] : 0 <= t < t2 < T and 1 <= i <= N - 2 }")))
    assert_umap_equal(d.output, expect(p, (
        "[T, N] -> { S0[t, i] -> S0[t2, i] : 0 <= t < t2 < T and 1 <= i <= N - 2; "
        "S1[t, i] -> S1[t2, i] : 0 <= t < t2 < T and 1 <= i <= N - 2 }")))
    assert_umap_equal(d.all, d.flow.union(d.anti).union(d.output))


def test_gemm_reduction_dependences() -> None:
    p = gemm()
    d = pt.dependences(p)
    dom = "0 <= i < NI and 0 <= j < NJ"
    assert_umap_equal(d.flow, expect(p, (
        f"[NI, NJ, NK] -> {{ S0[i, j] -> S1[i, j, 0] : {dom} and NK >= 1; "
        f"S1[i, j, k] -> S1[i, j, k + 1] : {dom} and 0 <= k and k + 1 < NK }}")))
    assert_umap_equal(d.anti, expect(p, (
        f"[NI, NJ, NK] -> {{ S0[i, j] -> S1[i, j, k] : {dom} and 0 <= k < NK; "
        f"S1[i, j, k] -> S1[i, j, k2] : {dom} and 0 <= k < k2 < NK }}")))
    assert_umap_equal(d.output, expect(p, (
        f"[NI, NJ, NK] -> {{ S0[i, j] -> S1[i, j, k] : {dom} and 0 <= k < NK; "
        f"S1[i, j, k] -> S1[i, j, k2] : {dom} and 0 <= k < k2 < NK }}")))


def test_recurrence_dependences() -> None:
    p = recurrence()
    d = pt.dependences(p)
    assert_umap_equal(d.flow, expect(p, "[N] -> { S0[i] -> S0[i + 1] : 1 <= i and i + 1 < N }"))
    assert d.anti.is_empty()
    assert d.output.is_empty()


def test_flow_is_value_based_and_output_memory_based() -> None:
    """A read sees only the last write: the overwritten value is not a flow source (but is an output dep)."""
    p = pt.Program("kill", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = 1.0")          # S0
    with p.loop("i", 0, "N"):
        p.assign("A[i] = 2.0")          # S1: kills S0's values
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[i] + B[i]")  # S2
    d = pt.dependences(p)
    assert_umap_equal(d.flow, expect(p, "[N] -> { S1[i] -> S2[i] : 0 <= i < N }"))
    assert_umap_equal(d.output, expect(p, "[N] -> { S0[i] -> S1[i] : 0 <= i < N }"))
    assert_umap_equal(d.anti, expect(p, "[N] -> { }"))


def test_no_self_dependence_of_an_instance() -> None:
    """An update A[i] = A[i] + 1 reads before it writes, in the same instance: no dependence."""
    p = pt.Program("upd", params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] += 1.0")
    d = pt.dependences(p)
    assert d.flow.is_empty() and d.anti.is_empty() and d.output.is_empty()


def test_dependences_respect_the_context() -> None:
    p = pt.Program("ctx", params=["N", "M"])
    p.array("A", ("N",), "float64")
    p.assume("M >= N")
    with p.loop("i", 1, "N"):
        with p.when("i >= M"):
            p.assign("A[i] = A[i - 1]")
    d = pt.dependences(p)
    # i < N <= M, so the guard never holds: no instance, no dependence
    assert d.flow.is_empty()
    q = pt.Program("noctx", params=["N", "M"])
    q.array("A", ("N",), "float64")
    with q.loop("i", 1, "N"):
        with q.when("i >= M"):
            q.assign("A[i] = A[i - 1]")
    assert_umap_equal(pt.dependences(q).flow,
                      expect(q, "[N, M] -> { S0[i] -> S0[i + 1] : i >= M and i >= 1 and i + 1 < N }"))


# -- parallel dimensions and legality ---------------------------------------------------------------
def test_parallel_dimensions_of_the_original_schedules() -> None:
    cases = [(jacobi_1d(), (True, False, False, True, True)),
             (gemm(), (True, True, True, True, False, False, True)),
             (recurrence(), (True, False, True))]
    for p, want in cases:
        prog = to_program(p)
        d = pt.dependences(p)
        assert parallel_dimensions(prog.schedule, d) == want, prog.name
        s = original_schedule(prog, d)
        assert s.parallel == want and s.ndim == len(want) and s.origin == "original"
        assert s.map.is_equal(prog.schedule)


def test_parallel_dimensions_without_dependences() -> None:
    p = pt.Program("copy", params=["N"])
    p.array("A", ("N", "N"), "float64")
    p.array("B", ("N", "N"), "float64")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("B[i, j] = A[j, i]")
    d = pt.dependences(p)
    assert d.all.is_empty()
    assert parallel_dimensions(to_program(p).schedule, d) == (True,) * 5


def test_original_schedules_are_legal() -> None:
    for p in (jacobi_1d(), gemm(), recurrence()):
        assert is_legal(to_program(p).schedule, pt.dependences(p))


@pytest.mark.parametrize("make, schedule, legal", [
    (recurrence, "[N] -> { S0[i] -> [0, -i, 0] }", False),
    (recurrence, "[N] -> { S0[i] -> [0, i, 0] }", True),
    (jacobi_1d, "[T, N] -> { S0[t, i] -> [0, t, 1, i, 0]; S1[t, i] -> [0, t, 0, i, 0] }", False),
    (jacobi_1d, "[T, N] -> { S0[t, i] -> [0, t, 0, -i, 0]; S1[t, i] -> [0, t, 1, -i, 0] }", True),
    (jacobi_1d, "[T, N] -> { S0[t, i] -> [0, i, 0, t, 0]; S1[t, i] -> [0, i, 1, t, 0] }", False),
    (jacobi_1d, "[T, N] -> { S0[t, i] -> [0, t, 0, 2 * t + i, 0]; S1[t, i] -> [0, t, 1, 2 * t + i, 0] }", True),
    (gemm, "[NI, NJ, NK] -> { S0[i, j] -> [0, j, 0, i, 0, 0, 0]; S1[i, j, k] -> [0, j, 0, i, 1, k, 0] }", True),
    (gemm, "[NI, NJ, NK] -> { S0[i, j] -> [0, i, 0, j, 0, 0, 0]; S1[i, j, k] -> [0, i, 0, j, 1, -k, 0] }", False),
    (gemm, "[NI, NJ, NK] -> { S0[i, j] -> [0, i, 0, j, 2, 0, 0]; S1[i, j, k] -> [0, i, 0, j, 1, k, 0] }", False),
    (gemm, "[NI, NJ, NK] -> { S0[i, j] -> [0, i, 0, j, 0, 0, 0]; S1[i, j, k] -> [1, i, 0, j, 0, k, 0] }", True),
])
def test_is_legal_on_hand_written_schedules(make, schedule: str, legal: bool) -> None:  # type: ignore[no-untyped-def]
    p = make()
    assert is_legal(isl.UnionMap(schedule), pt.dependences(p)) is legal


def test_parallel_dimensions_of_transformed_schedules() -> None:
    # gemm with S0 hoisted out into its own nest: the i and j loops of both nests are parallel
    p = gemm()
    d = pt.dependences(p)
    fissioned = isl.UnionMap("[NI, NJ, NK] -> { S0[i, j] -> [0, i, 0, j, 0, 0, 0]; "
                             "S1[i, j, k] -> [1, i, 0, j, 0, k, 0] }")
    assert parallel_dimensions(fissioned, d) == (False, True, True, True, True, False, True)
    # jacobi-1d with the time loop inside: i carries the dependences
    j = jacobi_1d()
    inner_t = isl.UnionMap("[T, N] -> { S0[t, i] -> [0, i, 0, t, 0]; S1[t, i] -> [0, i, 0, t, 1] }")
    par = parallel_dimensions(inner_t, pt.dependences(j))
    assert par[1] is False


def test_dependences_under_another_order() -> None:
    """compute_dependences(program, schedule): the same accesses, ordered by a different schedule."""
    p = to_program(recurrence())
    reversed_order = isl.UnionMap("[N] -> { S0[i] -> [0, -i, 0] }")
    d = compute_dependences(p, reversed_order)
    # now A[i - 1] is read before S0[i - 1] writes it: an anti dependence, no flow
    assert d.flow.is_empty()
    assert_umap_equal(d.anti, expect(recurrence(), "[N] -> { S0[j] -> S0[j - 1] : 2 <= j < N }"))
