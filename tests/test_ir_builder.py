"""The program builder: positions, the original schedule and the polyhedral model as islpy objects."""

from __future__ import annotations

import dataclasses

import islpy as isl
import pytest

import polytri as pt
from polytri.ir import Program as FrozenProgram
from polytri.ir import to_program
from polytri.ir.expr import Access, Binary, Const, Var

i_, j_ = Var("i", "iter"), Var("j", "iter")


def _seq() -> pt.Program:
    p = pt.Program("seq", params=["N"])
    p.array("A", ("N", "N"), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("B[i] = 0.0")                 # S0
        with p.loop("j", 0, "N"):
            p.assign("B[i] += A[i, j]")        # S1
            p.assign("A[i, j] = B[i]")         # S2
    with p.loop("k", 0, "N"):
        p.assign("B[k] *= 2")                  # S3
    p.assign("B[0] = 1.0")                     # S4
    return p


def test_statement_names_and_positions() -> None:
    p = _seq()
    assert [s.name for s in p.statements] == ["S0", "S1", "S2", "S3", "S4"]
    pos = {s.name: s.position for s in p.statements}
    assert pos == {"S0": (0, 0), "S1": (0, 1, 0), "S2": (0, 1, 1), "S3": (1, 0), "S4": (2,)}
    its = {s.name: s.iterators for s in p.statements}
    assert its == {"S0": ("i",), "S1": ("i", "j"), "S2": ("i", "j"), "S3": ("k",), "S4": ()}


def test_original_schedule_is_the_2d_plus_1_map() -> None:
    p = _seq()
    expected = isl.UnionMap(
        "[N] -> { S0[i] -> [0, i, 0, 0, 0] : 0 <= i < N; "
        "S1[i, j] -> [0, i, 1, j, 0] : 0 <= i < N and 0 <= j < N; "
        "S2[i, j] -> [0, i, 1, j, 1] : 0 <= i < N and 0 <= j < N; "
        "S3[k] -> [1, k, 0, 0, 0] : 0 <= k < N; "
        "S4[] -> [2, 0, 0, 0, 0] }")
    assert p.schedule == expected
    assert p.schedule.is_equal(expected)
    # a schedule that differs only in the order of two statements is not equal
    swapped = isl.UnionMap(str(expected).replace("j, 0]", "j, 9]").replace("j, 1]", "j, 0]").replace("j, 9]", "j, 1]"))
    assert not p.schedule.is_equal(swapped)


def test_domain_reads_writes() -> None:
    p = _seq()
    assert p.domain == isl.UnionSet(
        "[N] -> { S0[i] : 0 <= i < N; S1[i, j] : 0 <= i, j < N; S2[i, j] : 0 <= i, j < N; "
        "S3[k] : 0 <= k < N; S4[] }")
    assert p.writes == isl.UnionMap(
        "[N] -> { S0[i] -> B[i] : 0 <= i < N; S1[i, j] -> B[i] : 0 <= i, j < N; "
        "S2[i, j] -> A[i, j] : 0 <= i, j < N; S3[k] -> B[k] : 0 <= k < N; S4[] -> B[0] }")
    assert p.reads == isl.UnionMap(
        "[N] -> { S1[i, j] -> B[i] : 0 <= i, j < N; S1[i, j] -> A[i, j] : 0 <= i, j < N; "
        "S2[i, j] -> B[i] : 0 <= i, j < N; S3[k] -> B[k] : 0 <= k < N }")
    assert isinstance(p.domain, isl.UnionSet)
    assert isinstance(p.reads, isl.UnionMap) and isinstance(p.writes, isl.UnionMap)


def test_schedule_orders_instances_as_written() -> None:
    """The lexicographic order of the schedule is the textual order of the program."""
    p = _seq()
    sched = p.schedule
    before = sched.lex_lt_union_map(sched)  # { a -> b : time(a) < time(b) }
    N3 = isl.Set("[N] -> { : N = 3 }")
    before = before.intersect_params(N3)
    assert isl.UnionMap("[N] -> { S0[1] -> S1[1, 0] }").intersect_params(N3).is_subset(before)
    assert isl.UnionMap("[N] -> { S1[1, 2] -> S2[1, 2] }").intersect_params(N3).is_subset(before)
    assert isl.UnionMap("[N] -> { S2[1, 2] -> S0[2] }").intersect_params(N3).is_subset(before)
    assert isl.UnionMap("[N] -> { S2[2, 2] -> S3[0] }").intersect_params(N3).is_subset(before)
    assert isl.UnionMap("[N] -> { S3[2] -> S4[] }").intersect_params(N3).is_subset(before)
    assert not isl.UnionMap("[N] -> { S1[1, 1] -> S1[1, 0] }").intersect_params(N3).is_subset(before)
    assert not isl.UnionMap("[N] -> { S4[] -> S0[0] }").intersect_params(N3).is_subset(before)


@pytest.mark.parametrize("op, sym", [("+=", "+"), ("-=", "-"), ("*=", "*"), ("/=", "/")])
def test_augmented_assignment_is_folded(op: str, sym: str) -> None:
    p = pt.Program("aug", params=["N"])
    p.array("A", ("N",), "float64")
    p.scalar("x", "float64")
    with p.loop("i", 0, "N"):
        p.assign(f"A[i] {op} x")
    st = p.statements[0]
    target = Access("A", (i_,))
    assert st.target == target
    assert st.value == Binary(sym, target, Var("x", "scalar"))
    assert st.text() == f"A[i] = A[i] {sym} x"
    # the updated element is read as well as written
    assert p.reads == isl.UnionMap("[N] -> { S0[i] -> A[i] : 0 <= i < N }")


def test_augmented_assignment_keeps_rhs_grouping() -> None:
    p = pt.Program("aug2", params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] -= A[i] - 1.0")
    st = p.statements[0]
    a = Access("A", (i_,))
    assert st.value == Binary("-", a, Binary("-", a, Const(1.0)))
    assert st.text() == "A[i] = A[i] - (A[i] - 1.0)"


def test_triangular_and_minmax_bounds() -> None:
    p = pt.Program("tri", params=["N", "M"])
    p.array("A", ("N", "N"), "float64")
    with p.loop("i", 0, "N"):
        with p.loop("j", "max(0, i - 2)", "min(i + 1, M)"):
            p.assign("A[i, j] = 1.0")
    assert p.domain == isl.UnionSet("[N, M] -> { S0[i, j] : 0 <= i < N and 0 <= j and i - 2 <= j and j <= i "
                                    "and j < M }")
    assert p.schedule == isl.UnionMap("[N, M] -> { S0[i, j] -> [0, i, 0, j, 0] : 0 <= i < N and "
                                      "0 <= j and i - 2 <= j <= i and j < M }")


def test_when_guards_and_negated_guards() -> None:
    p = pt.Program("guard", params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        with p.when("i % 2 == 0"):
            p.assign("A[i] = 1.0")            # S0
        with p.when("i % 2 == 0", negate=True):
            p.assign("A[i] = 2.0")            # S1
        with p.when("2 * i >= N"):
            with p.when("i != 5", negate=True):
                p.assign("A[i] = 3.0")        # S2
        with p.when("i != 5"):
            p.assign("A[i] = 4.0")            # S3
    doms = {s.name: s.domain for s in p.statements}
    assert doms["S0"] == isl.Set("[N] -> { S0[i] : 0 <= i < N and i mod 2 = 0 }")
    assert doms["S1"] == isl.Set("[N] -> { S1[i] : 0 <= i < N and i mod 2 = 1 }")
    assert doms["S2"] == isl.Set("[N] -> { S2[i] : i = 5 and 2 * i >= N and i < N }")
    assert doms["S3"] == isl.Set("[N] -> { S3[i] : 0 <= i < N and (i < 5 or i > 5) }")
    # guards take no position of their own: the four statements are siblings in loop i
    assert [s.position for s in p.statements] == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_guard_around_loop() -> None:
    p = pt.Program("guard_loop", params=["N"])
    p.array("A", ("N", "N"), "float64")
    with p.loop("i", 0, "N"):
        with p.when("i >= 1", negate=True):
            with p.loop("j", "i", "N"):
                p.assign("A[i, j] = 0.0")
        p.assign("A[i, i] = 1.0")
    assert p.statements[0].domain == isl.Set("[N] -> { S0[i, j] : i = 0 and 0 <= j < N }")
    assert [s.position for s in p.statements] == [(0, 0, 0), (0, 1)]


def test_explicit_statement_domain_and_naming() -> None:
    p = pt.Program("expl", params=["N", "M"])
    p.array("A", ("N", "N"), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i, 0] = 0.0")
    name = p.statement("S9", "[N] -> { S9[a, b] : 0 <= b <= a < N }", "A[a, b] = a + b")
    assert name == "S9"
    assert p.assign("A[0, 0] = 5.0") == "S2"
    s9 = to_program(p).statement("S9")
    assert s9.iterators == ("a", "b")
    assert s9.domain == isl.Set("[N, M] -> { S9[a, b] : 0 <= b <= a < N }")
    assert s9.position == (1, 0, 0)
    assert p.schedule == isl.UnionMap(
        "[N, M] -> { S0[i] -> [0, i, 0, 0, 0] : 0 <= i < N; S9[a, b] -> [1, a, 0, b, 0] : 0 <= b <= a < N; "
        "S2[] -> [2, 0, 0, 0, 0] }")


def test_assume_becomes_the_context() -> None:
    p = pt.Program("ctx", params=["N", "M"])
    p.array("A", ("N",), "float64")
    p.assume("M <= N")
    p.assume("M >= 2")
    with p.loop("i", 0, "M"):
        p.assign("A[i] = 1.0")
    prog = p.build()
    assert prog.context == isl.Set("[N, M] -> { : 2 <= M <= N }")
    # the model is restricted to the context
    assert p.domain == isl.UnionSet("[N, M] -> { S0[i] : 0 <= i < M and 2 <= M <= N }")
    assert p.writes == isl.UnionMap("[N, M] -> { S0[i] -> A[i] : 0 <= i < M and 2 <= M <= N }")


def test_arrays_scalars_and_shapes() -> None:
    p = pt.Program("decl", params="N, M")
    a = p.array("A", ("N + 1", 3, "2 * M"), "f32")
    s = p.scalar("alpha", "double")
    assert p.params == ("N", "M")
    assert a.dtype == "float32" and a.rank == 3
    assert a.shape == (Binary("+", Var("N", "param"), Const(1)), Const(3), Binary("*", Const(2), Var("M", "param")))
    assert s.dtype == "float64"
    assert a.extent_isl(("N", "M")) == isl.Set("[N, M] -> { A[x0, x1, x2] : 0 <= x0 <= N and 0 <= x1 < 3 "
                                              "and 0 <= x2 < 2 * M }")


def test_build_is_cached_and_immutable() -> None:
    p = _seq()
    prog = p.build()
    assert p.build() is prog
    assert to_program(p) is prog and to_program(prog) is prog
    with pytest.raises(dataclasses.FrozenInstanceError):
        prog.name = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        prog.statements[0].position = (5,)  # type: ignore[misc]
    p.assign("B[1] = 2.0")
    prog2 = p.build()
    assert prog2 is not prog
    assert len(prog.statements) == 5 and len(prog2.statements) == 6
    assert isinstance(prog2, FrozenProgram)


def test_depth_and_lookup_errors() -> None:
    prog = _seq().build()
    assert prog.depth == 2
    assert prog.statement("S3").iterators == ("k",)
    with pytest.raises(pt.ProgramError, match="S7"):
        prog.statement("S7")
    with pytest.raises(pt.ProgramError, match="'Z'"):
        prog.array("Z")


def test_reserved_and_clashing_names() -> None:
    p = pt.Program("names", params=["N"])
    p.array("A", ("N",))
    with pytest.raises(pt.ProgramError, match="'N'"):
        p.array("N", (3,))
    with pytest.raises(pt.ProgramError, match="'exp'"):
        p.array("exp", (3,))
    with pytest.raises(pt.ProgramError, match="'c0'"):
        p.scalar("c0")
    with pytest.raises(pt.ProgramError, match="'pt_x'"):
        p.scalar("pt_x")
    with pytest.raises(pt.ProgramError, match="'A'"):
        with p.loop("A", 0, 3):
            pass
    with pytest.raises(pt.ProgramError, match="'k'"):
        with p.loop("k", 0, "N"):
            with p.loop("k", 0, "N"):
                pass
    p.statement("S0", "{ S0[] }", "A[0] = 1.0")
    with pytest.raises(pt.ProgramError, match="'S0'"):
        p.statement("S0", "{ S0[] }", "A[0] = 1.0")


def test_statement_names_stay_unique() -> None:
    p = pt.Program("uniq", params=["N"])
    p.array("A", ("N",))
    p.statement("S1", "[N] -> { S1[i] : 0 <= i < N }", "A[i] = 1.0")
    try:
        p.assign("A[0] = 2.0")  # statements are named by count: this one would be S1 again
    except pt.ProgramError as exc:
        assert "'S1'" in str(exc)
    names = [s.name for s in p.statements]
    assert len(set(names)) == len(names)


def test_rejected_statement_leaves_no_trace() -> None:
    p = pt.Program("trace", params=["N"])
    p.array("A", ("N",))
    with p.loop("i", 0, "N"):
        with pytest.raises(pt.NotAffineError):
            p.assign("A[i * i] = 1.0")
        p.assign("A[i] = 1.0")
    (st,) = p.build().statements
    assert st.name == "S0" and st.position == (0, 0)
