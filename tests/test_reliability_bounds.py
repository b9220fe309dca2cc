"""Static bounds checking (issue 8, item 1): an access out of bounds whenever its statement runs is a
compile-time error; one out of bounds only for some parameter values is checked at call time, before
anything runs, by every backend (through ``polytri.runtime.args.bind``)."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.errors import ParameterBoundsError
from polytri.ir import to_program
from polytri.ir.verify import bounds_violations


def _shift(assume: str | None = None, lo: int = 1) -> pt.Program:
    """``B[i] = B[i - 1] + 1`` for ``lo <= i < M`` on an array of length ``N``: out of bounds iff M > N."""
    p = pt.Program("shift", params=["N", "M"])
    p.array("B", ("N",), "float64")
    if assume:
        p.assume(assume)
    with p.loop("i", lo, "M"):
        p.assign("B[i] = B[i - 1] + 1.0")
    return p


def _runners(p: pt.Program) -> list:
    return [pt.compile(p), lambda **kw: pt.reference(p, **kw)]


@pytest.mark.parametrize("body, lo, hi, culprit, kind", [
    ("B[i] = A[i + 1]", 0, "N", "A[i + 1]", "read"),
    ("B[i] = A[i - 1]", 0, "N", "A[i - 1]", "read"),
    ("A[i + 1] = B[i]", 0, "N", "A[i + 1]", "write"),
    ("B[i] = A[N]", 0, "N", "A[N]", "read"),
    ("B[i] = A[2 * i]", 1, "N", "A[2 * i]", "read"),
])
def test_always_out_of_bounds_is_a_compile_time_error(body: str, lo: int, hi: str, culprit: str, kind: str) -> None:
    p = pt.Program("oob", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", lo, hi):
        p.assign(body)
    with pytest.raises(pt.BoundsError) as info:
        pt.compile(p)
    msg = str(info.value)
    for needle in ("statement S0", f"{kind} {culprit}", "'A'", "out of bounds", "(N)", "for example"):
        assert needle in msg, msg
    with pytest.raises(pt.BoundsError, match="out of bounds"):
        pt.reference(p, A=np.zeros(4), B=np.zeros(4))


def test_the_example_in_the_message_is_a_real_out_of_bounds_instance() -> None:
    p = pt.Program("tri", params=["N"])
    p.array("A", ("N", "N"), "float64")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "i + 1"):
            p.assign("A[i, j + 1] = 1.0")   # j + 1 = N on the last row's diagonal
    with pytest.raises(pt.BoundsError) as info:
        pt.compile(p)
    msg = str(info.value)
    assert "write A[i, j + 1]" in msg and "writes A[" in msg, msg
    # "N=n: i=a, j=b writes A[x, y]": the instance lies in the domain and the element outside the array
    example = msg.split("for example ")[1].split(".")[0]
    values = dict(kv.split("=") for kv in example.replace(":", ",").split(" writes")[0].split(", "))
    n, i, j = int(values["N"]), int(values["i"]), int(values["j"])
    assert 0 <= i < n and 0 <= j < i + 1 and not j + 1 < n


def test_out_of_bounds_only_for_some_parameters_compiles_and_checks_each_call() -> None:
    p = _shift()
    prog = to_program(p)
    found = [(v.statement, v.kind, v.subscript, v.array, v.always) for v in bounds_violations(prog)]
    assert found == [("S0", "write", "B[i]", "B", False), ("S0", "read", "B[i - 1]", "B", False)]
    for run in _runners(p):
        b = np.zeros(4)
        run(B=b, M=4)                       # the largest M that stays inside
        np.testing.assert_array_equal(b, [0.0, 1.0, 2.0, 3.0])
        b = np.full(4, 7.0)
        with pytest.raises(ParameterBoundsError) as info:
            run(B=b, M=5)                   # one past the end: rejected before anything is written
        msg = str(info.value)
        for needle in ("S0", "write B[i]", "'B'", "out of bounds", "N=4, M=5", "i=4 writes B[4]", "Nothing was run"):
            assert needle in msg, msg
        assert isinstance(info.value, pt.ArgumentError) and isinstance(info.value, pt.BoundsError)
        np.testing.assert_array_equal(b, np.full(4, 7.0))


def test_a_statement_that_does_not_run_is_never_out_of_bounds() -> None:
    p = _shift()
    for run in _runners(p):
        b = np.full(4, 3.0)
        run(B=b, M=1)        # empty loop: nothing to check, nothing written
        run(B=b, M=0)
        np.testing.assert_array_equal(b, np.full(4, 3.0))
        b0 = np.zeros(0)
        run(B=b0, M=1)       # N = 0 and an empty loop
        with pytest.raises(ParameterBoundsError, match="N=0, M=2"):
            run(B=b0, M=2)


def test_an_assumption_removes_the_call_time_check() -> None:
    prog = to_program(_shift("M <= N"))
    assert bounds_violations(prog) == ()
    with pytest.raises(pt.ArgumentError, match="M <= N"):
        pt.reference(_shift("M <= N"), B=np.zeros(4), M=5)


def test_a_statement_out_of_bounds_wherever_it_runs_but_not_always_running() -> None:
    """``A[i + 1]`` for ``0 <= i < M`` on length ``N``: out of bounds for M > N, so not "always", although
    M = N + 1 is the first size where it fails."""
    p = pt.Program("m", params=["N", "M"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "M"):
        p.assign("A[i] = A[i + 1]")
    k = pt.compile(p)
    a = np.arange(5.0)
    k(A=a, M=4)
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0, 4.0, 4.0])
    with pytest.raises(ParameterBoundsError, match=r"read A\[i \+ 1\]"):
        k(A=a, M=5)


def test_every_backend_calls_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check lives in ``bind``: a kernel whose library would write out of bounds never gets called."""
    p = _shift()
    k = pt.compile(p)
    called = []
    monkeypatch.setattr(k, "_fn", lambda *a: called.append(a))
    with pytest.raises(ParameterBoundsError):
        k(B=np.zeros(3), M=9)
    assert not called
    k(B=np.zeros(3), M=3)
    assert len(called) == 1


def test_negative_parameters_are_not_sizes() -> None:
    """Parameters are sizes: the analysis assumes them >= 0 and calls enforce it."""
    p = pt.Program("neg", params=["N", "K"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = A[i] + 1.0")
    with p.loop("i", "K", "K + 1"):
        p.assign("A[0] = 5.0")      # runs once for every K; in bounds for N >= 1
    k = pt.compile(p)
    a = np.zeros(2)
    with pytest.raises(pt.ArgumentError, match="'K' = -3 is negative"):
        k(A=a, K=-3)
    np.testing.assert_array_equal(a, [0.0, 0.0])
    with pytest.raises(ParameterBoundsError, match=r"write A\[0\]"):
        k(A=np.zeros(0), K=0)


def test_unknown_target_and_option_list_the_valid_ones() -> None:
    p = _shift("M <= N")
    with pytest.raises(pt.OptionError) as info:
        pt.compile(p, target="tpu")
    assert "'tpu'" in str(info.value) and "cpu" in str(info.value) and "nvgpu" in str(info.value)
    with pytest.raises(pt.OptionError) as info:
        pt.compile(p, options={"unroll": 4})
    msg = str(info.value)
    assert "'unroll'" in msg and all(o in msg for o in ("schedule", "fuse", "tile", "openmp", "threads")), msg
