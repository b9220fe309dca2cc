"""Fuzzing (issue 8, item 6): random affine programs (nested and triangular loops, several statements,
time loops, reductions, mixed dtypes) through every target of ``polytri.testing.fuzz.TARGETS`` (cpu, and nvgpu in
Triton's interpreter) under several
option sets, compared with ``pt.reference``; random out-of-bounds programs are rejected at compile time
or at call time exactly when a brute-force enumeration finds an access outside its array.

``make test`` runs a bounded number of examples, ``make fuzz`` (marker ``slow``) a long run.  Random
torch graphs are fuzzed in tests/test_fuzz_torch.py.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import polytri as pt
from polytri.errors import ParameterBoundsError
from polytri.ir import to_program
from polytri.ir.verify import check_bounds
from polytri.testing import fuzz

SIZE_LISTS = st.lists(fuzz.SIZES, min_size=1, max_size=3)


def _check(spec: fuzz.ProgramSpec, sizes: list[dict[str, int]]) -> None:
    note(spec.code())
    note(f"sizes: {sizes}")
    fuzz.check(spec, sizes)


@pytest.mark.cc
@settings(max_examples=6)
@given(fuzz.programs(), SIZE_LISTS)
def test_random_programs_agree_with_the_reference(spec: fuzz.ProgramSpec, sizes: list[dict[str, int]]) -> None:
    _check(spec, [{**s, "N": max(s["N"], 1)} for s in sizes])


@pytest.mark.cc
@settings(max_examples=6)
@given(fuzz.programs(in_bounds=False), SIZE_LISTS)
def test_random_bounds_are_checked_at_compile_or_call_time(spec: fuzz.ProgramSpec,
                                                           sizes: list[dict[str, int]]) -> None:
    _check(spec, sizes)


@pytest.mark.cc
@pytest.mark.slow
@settings(max_examples=300)
@given(fuzz.programs(), SIZE_LISTS)
def test_random_programs_fuzz(spec: fuzz.ProgramSpec, sizes: list[dict[str, int]]) -> None:
    _check(spec, [{**s, "N": max(s["N"], 1)} for s in sizes])


@pytest.mark.cc
@pytest.mark.slow
@settings(max_examples=400)
@given(fuzz.programs(in_bounds=False), SIZE_LISTS)
def test_random_bounds_fuzz(spec: fuzz.ProgramSpec, sizes: list[dict[str, int]]) -> None:
    _check(spec, sizes)


def _features(spec: fuzz.ProgramSpec) -> set[str]:
    """The features of ``spec`` the properties claim to exercise."""
    stmts = list(spec.statements())
    kinds = {a.dtype for a in spec.arrays}
    checks = {
        "time loop": "T" in spec.params,
        "reduction": any(s.op == "+=" for s in stmts),
        "three statements": len(stmts) >= 3,
        "mixed int/float": bool(kinds & set(fuzz.INT_DTYPES) and kinds & set(fuzz.FLOAT_DTYPES)),
        "16-bit float": bool(kinds & {"float16", "bfloat16"}),
        "tricky names": bool({a.name for a in spec.arrays} & set(fuzz.TRICKY_NAMES)),
    }
    return {name for name, present in checks.items() if present} | _loop_features(spec.body, 0)


def _loop_features(nodes: tuple, depth: int) -> set[str]:
    """``triangular`` and ``depth 3`` where the loops of ``nodes`` (at ``depth``) have them."""
    seen: set[str] = set()
    for n in nodes:
        if isinstance(n, fuzz.LoopSpec):
            if any(it in n.lo or it in n.hi for it in fuzz.ITERS):
                seen.add("triangular")
            if depth + (n.var != "t") == 3:
                seen.add("depth 3")
            seen |= _loop_features(n.body, depth + (n.var != "t"))
    return seen


def test_the_generators_cover_the_features() -> None:
    """The strategies produce what the properties claim to test (guards against a vacuous fuzz)."""
    seen: set[str] = set()
    verdicts: Counter[str] = Counter()

    @settings(max_examples=60)
    @given(fuzz.programs())
    def collect(spec: fuzz.ProgramSpec) -> None:
        seen.update(_features(spec))
        spec.build()

    @settings(max_examples=60)
    @given(fuzz.programs(in_bounds=False), fuzz.SIZES)
    def classify(spec: fuzz.ProgramSpec, sizes: dict[str, int]) -> None:
        try:
            check_bounds(to_program(spec.build()))
        except pt.BoundsError:
            verdicts["compile-time error"] += 1
            return
        oob = spec.instances_out_of_bounds({p: sizes[p] for p in spec.params})
        verdicts["call rejected" if any(b for _, b in oob.values()) else "call runs"] += 1

    collect()
    classify()
    assert seen == {"time loop", "reduction", "three statements", "mixed int/float", "16-bit float",
                    "triangular", "depth 3", "tricky names"}, seen
    assert set(verdicts) == {"compile-time error", "call rejected", "call runs"}, verdicts


def test_the_brute_force_oracle() -> None:
    """The independent oracle of the bounds property, on a hand-made program."""
    inner = fuzz.StmtSpec(fuzz.AccessSpec("A", ("i",)), "=", "A[i + 1] + 1.0",
                          (fuzz.AccessSpec("A", ("i + 1",)),))
    spec = fuzz.ProgramSpec(("N", "M"), (fuzz.ArraySpec("A", 1, "float64", 1),),
                            (fuzz.LoopSpec("i", "0", "M", (inner,)),))
    assert spec.instances_out_of_bounds({"N": 3, "M": 3}) == {0: (True, False)}   # A has 4 elements
    assert spec.instances_out_of_bounds({"N": 3, "M": 4}) == {0: (True, True)}
    assert spec.instances_out_of_bounds({"N": 3, "M": 0}) == {0: (False, False)}
    fuzz.check(spec, [{"N": 3, "M": 3}, {"N": 3, "M": 4}, {"N": 0, "M": 0}])


# -- regressions the fuzzer found --------------------------------------------------------------------
@pytest.mark.cc
def test_regression_unused_thread_count_warning() -> None:
    """A program without a parallel loop left ``pt__threads`` unused: -Wall -Werror failed."""
    spec = fuzz.ProgramSpec(("N",), (fuzz.ArraySpec("A", 1, "float64", 1),), (fuzz.LoopSpec("i", "0", "N", (
        fuzz.StmtSpec(fuzz.AccessSpec("A", ("i",)), "=", "0.5 * A[i + 1] + 0.125",
                      (fuzz.AccessSpec("A", ("i + 1",)),)),)),))
    fuzz.check(spec, [{"N": 0}, {"N": 3}])


@pytest.mark.cc
def test_regression_rejected_call_leaves_every_array_untouched() -> None:
    p = pt.Program("two", params=["N", "M"])
    p.array("A", ("N",), "int8")
    p.array("B", ("N",), "float16")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = A[i] + 1")
    with p.loop("i", 0, "M"):
        p.assign("B[i] = B[i] + 1.0")
    for run in (pt.compile(p), lambda **kw: pt.reference(p, **kw)):
        a, b = np.zeros(3, np.int8), np.zeros(3, np.float16)
        with pytest.raises(ParameterBoundsError, match="S1"):
            run(A=a, B=b, M=4)          # S0 would run fine, but nothing runs
        assert not a.any() and not b.any()


@pytest.mark.cc
def test_regression_or_of_and_guard_warning() -> None:
    """isl guarded the last statement with ``M >= 4 && M <= 6 && ... || M >= 2 && M <= 3``: gcc's
    -Wparentheses failed the -Werror build."""
    a, b = fuzz.AccessSpec, fuzz.StmtSpec
    first = fuzz.LoopSpec("i", "1", "M", (fuzz.LoopSpec("j", "1", "M", (
        b(a("A", ("i",)), "=", "0.5 * A[i] + 0.5 * A[0] + 0.5 * B[j, i] + 0.125",
          (a("A", ("i",)), a("A", ("0",)), a("B", ("j", "i")))),)),))
    second = fuzz.LoopSpec("i", "1", "M", (
        fuzz.LoopSpec("j", "1", "i", (fuzz.LoopSpec("k", "1", "M", (
            b(a("B", ("i", "i - 1")), "=", "2 * B[4, i + 1] + 1", (a("B", ("4", "i + 1")),)),)),)),
        b(a("B", ("i", "i + 1")), "=", "2 * B[i, i] + 1", (a("B", ("i", "i")),))))
    spec = fuzz.ProgramSpec(("N", "M"), (fuzz.ArraySpec("A", 1, "float64", 0), fuzz.ArraySpec("B", 2, "int64", 0)),
                            (first, second))
    fuzz.check(spec, [{"N": 0, "M": 0}, {"N": 6, "M": 5}, {"N": 3, "M": 5}])
