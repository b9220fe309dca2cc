"""Every user error is a PolytriError subclass whose message names the culprit; rejected calls write nothing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

import polytri as pt
from polytri import errors

ERROR_CLASSES = [errors.ParseError, errors.NameResolutionError, errors.NotAffineError, errors.TypeCheckError,
                 errors.ProgramError, errors.BoundsError, errors.ArgumentError, errors.OptionError,
                 errors.UnsupportedError, errors.CompilationError, errors.ParameterBoundsError]


def test_hierarchy_and_public_reexports() -> None:
    for cls in ERROR_CLASSES:
        assert issubclass(cls, pt.PolytriError) and cls is not pt.PolytriError
        assert getattr(pt, cls.__name__) is cls
    assert issubclass(pt.PolytriError, Exception)


def test_caret_helper() -> None:
    assert errors.caret("A[i] = x", 7, width=1) == "    A[i] = x\n           ^"
    assert errors.caret("abc", 0, width=3) == "    abc\n    ^^^"
    assert errors.caret("abc", None) == "    abc"


def _program() -> pt.Program:
    p = pt.Program("err", params=["N"])
    p.array("A", ("N", "N"), "float64")
    p.array("B", ("N",), "float64")
    p.scalar("s", "float64")
    return p


def _in_loops(body: str) -> Callable[[], None]:
    def run() -> None:
        p = _program()
        with p.loop("i", 0, "N"):
            with p.loop("j", 0, "N"):
                p.assign(body)
    return run


# -- errors while building ------------------------------------------------------------------------
@pytest.mark.parametrize("body, cls, needles", [
    ("B[i * j] = 1.0", pt.NotAffineError, ["S0", "B[i * j] = 1.0", "i * j", "'B'", "not affine"]),
    ("B[i] = A[i, i * j]", pt.NotAffineError, ["S0", "i * j", "'A'"]),
    ("B[i] = A[i, s]", pt.NotAffineError, ["'s'", "scalar"]),
    ("B[i] = B[int64(A[i, j])]", pt.TypeCheckError, ["int64(A[i, j])", "index array 'A' has dtype float64"]),
    ("B[i] = Z[i]", pt.NameResolutionError, ["unknown array 'Z'", "B[i] = Z[i]\n           ^"]),
    ("Z[i] = 1.0", pt.NameResolutionError, ["unknown array 'Z'"]),
    ("B[i] = foo + 1.0", pt.NameResolutionError, ["unknown name 'foo'", "B[i] = foo + 1.0\n           ^^^"]),
    ("B[i] = frob(A[i, j])", pt.NameResolutionError, ["unknown function 'frob'"]),
    ("B[i] = A + 1.0", pt.NameResolutionError, ["'A'", "without a subscript"]),
    ("B[i] = (A[i, j] + ", pt.ParseError, ["S0", "syntax error", "B[i] = (A[i, j] +"]),
    ("B[i] = A[i, j] +* 2", pt.ParseError, ["S0", "syntax error", "B[i] = A[i, j] +* 2"]),
    ("B[i] = A[i]", pt.TypeCheckError, ["S0", "'A'", "rank 2", "A[i]"]),
    ("B[i, j] = 1.0", pt.TypeCheckError, ["S0", "'B'", "rank 1", "B[i, j]"]),
    ("B[i] = A[i, j, 0]", pt.TypeCheckError, ["'A'", "rank 2", "A[i, j, 0]"]),
    ("B[i] = exp(A[i, j], 2.0)", pt.ParseError, ["exp()", "1 argument"]),
    ("B[i] = where(A[i, j], 1.0, 2.0)", pt.TypeCheckError, ["where(A[i, j], 1.0, 2.0)", "bool"]),
    ("B[i] = i ** j", pt.TypeCheckError, ["i ** j", "integer constant"]),
    ("B[i] = i ** -2", pt.TypeCheckError, ["negative power"]),
    ("B[0:2] = 1.0", pt.ParseError, ["slices"]),
    ("s = 1.0", pt.ParseError, ["array element"]),
    ("B[i] = A[i, j] if i < j else 0.0", pt.ParseError, ["IfExp"]),
    ("B[i] = 1 < i < j", pt.ParseError, ["chained"]),
])
def test_statement_errors_name_the_culprit(body: str, cls: type[Exception], needles: list[str]) -> None:
    with pytest.raises(cls) as info:
        _in_loops(body)()
    msg = str(info.value)
    assert isinstance(info.value, pt.PolytriError)
    for needle in needles:
        assert needle in msg, msg


@pytest.mark.parametrize("make, cls, needles", [
    (lambda p: p.array("C", ("N * N",)), pt.NotAffineError, ["'C'", "N * N"]),
    (lambda p: p.array("C", ("K",)), pt.NameResolutionError, ["'C'", "unknown name 'K'"]),
    (lambda p: p.array("C", (4,), "float128"), pt.TypeCheckError, ["'float128'"]),
    (lambda p: p.array("C", (-1,)), pt.ProgramError, ["'C'", "-1"]),
    (lambda p: p.array("C", ()), pt.ProgramError, ["'C'"]),
    (lambda p: p.array("B", (3,)), pt.ProgramError, ["'B'"]),
    (lambda p: p.array("N", (3,)), pt.ProgramError, ["'N'"]),
    (lambda p: p.array("min", (3,)), pt.ProgramError, ["'min'", "reserved"]),
    (lambda p: p.array("2x", (3,)), pt.ProgramError, ["'2x'"]),
    (lambda p: p.scalar("c1"), pt.ProgramError, ["'c1'"]),
    (lambda p: p.assume("N * N > 3"), pt.NotAffineError, ["assumption", "N * N"]),
    (lambda p: p.assume("K > 3"), pt.NameResolutionError, ["'K'"]),
    (lambda p: p.statement("S5", "{ S6[i] : 0 <= i < 3 }", "B[i] = 1.0"), pt.ProgramError, ["'S5'", "'S6'"]),
    (lambda p: p.statement("S5", "[K] -> { S5[i] : 0 <= i < K }", "B[i] = 1.0"), pt.ProgramError,
     ["'S5'", "'K'"]),
    (lambda p: p.statement("S5", "{ S5[i] : 0 <= i < }", "B[i] = 1.0"), pt.ProgramError, ["'S5'", "domain"]),
    (lambda p: pt.Program("p", params=["N", "N"]), pt.ProgramError, ["duplicate"]),
    (lambda p: pt.Program("p", params=["for"]), pt.ProgramError, ["'for'"]),
])
def test_declaration_errors_name_the_culprit(make, cls, needles) -> None:  # type: ignore[no-untyped-def]
    p = _program()
    with pytest.raises(cls) as info:
        make(p)
    for needle in needles:
        assert needle in str(info.value), str(info.value)


@pytest.mark.parametrize("lo, hi, cls, needles", [
    (0, "A[0, 0]", pt.NotAffineError, ["upper bound of loop 'i'", "'A'"]),
    (0, "s", pt.NotAffineError, ["upper bound of loop 'i'", "'s'"]),
    ("K", "N", pt.NameResolutionError, ["lower bound of loop 'i'", "'K'"]),
    (0, "N * N", pt.NotAffineError, ["upper bound of loop 'i'", "N * N"]),
    (0, 2.5, pt.ProgramError, ["upper bound of loop 'i'", "2.5"]),
    (0, "N +", pt.ParseError, ["upper bound of loop 'i'", "syntax error"]),
])
def test_loop_bound_errors(lo, hi, cls, needles) -> None:  # type: ignore[no-untyped-def]
    p = _program()
    with pytest.raises(cls) as info:
        with p.loop("i", lo, hi):
            pass
    for needle in needles:
        assert needle in str(info.value), str(info.value)


def test_guard_errors() -> None:
    p = _program()
    with p.loop("i", 0, "N"):
        with pytest.raises(pt.NotAffineError, match=r"condition 'i \* i < N'"):
            with p.when("i * i < N"):
                pass
        with pytest.raises(pt.NotAffineError, match="not an affine comparison"):
            with p.when("i + 1"):
                pass
        with pytest.raises(pt.NameResolutionError, match="'q'"):
            with p.when("q < 3"):
                pass


def test_explicit_statement_inside_loop_is_rejected() -> None:
    p = _program()
    with p.loop("i", 0, "N"):
        with pytest.raises(pt.ProgramError, match="'S7'"):
            p.statement("S7", "[N] -> { S7[k] : 0 <= k < N }", "B[k] = 1.0")


def test_builder_stays_usable_after_an_error() -> None:
    p = _program()
    with p.loop("i", 0, "N"):
        with pytest.raises(pt.NotAffineError):
            p.assign("B[i * i] = 1.0")
        p.assign("B[i] = 2.0")
    assert [s.name for s in p.statements] == ["S0"]


# -- errors at compile and call time ----------------------------------------------------------------
def _diag() -> pt.Program:
    p = _program()
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[i, i] * s")
    return p


@pytest.fixture(scope="module")
def diag_kernel():  # type: ignore[no-untyped-def]
    return pt.compile(_diag())


def _call_args() -> dict:
    return {"A": np.arange(16.0).reshape(4, 4), "B": np.full(4, 7.0), "s": 2.0}


BAD_CALLS = [
    (lambda a: {k: v for k, v in a.items() if k != "B"}, ["missing argument(s) B"]),
    (lambda a: {k: v for k, v in a.items() if k != "s"}, ["missing argument(s) s"]),
    (lambda a: {**a, "C": np.zeros(4)}, ["unknown argument(s) C"]),
    (lambda a: {**a, "B": np.zeros(5)}, ["'B'", "extent 5"]),
    (lambda a: {**a, "A": np.zeros((4, 5))}, ["'A'", "extent 5"]),
    (lambda a: {**a, "B": np.zeros((4, 1))}, ["'B'", "rank 1"]),
    (lambda a: {**a, "B": np.zeros(4, np.float32)}, ["'B'", "float64", "float32"]),
    (lambda a: {**a, "B": [0.0] * 4}, ["'B'", "list"]),
    (lambda a: {**a, "B": np.broadcast_to(np.zeros(1), (4,))}, ["'B'", "read-only"]),
    (lambda a: {**a, "N": 5}, ["N=5"]),
    (lambda a: {**a, "N": 4.0}, ["'N'", "int"]),
    (lambda a: {**a, "N": True}, ["'N'", "int"]),
    (lambda a: {**a, "s": "x"}, ["'s'", "str"]),
    (lambda a: {**a, "s": True}, ["'s'", "bool"]),
    (lambda a: {**a, "B": a["A"][1]}, ["'A'", "'B'", "overlap"]),
]


@pytest.mark.cc
@pytest.mark.parametrize("mutate, needles", BAD_CALLS)
def test_rejected_calls_write_nothing(diag_kernel, mutate, needles) -> None:  # type: ignore[no-untyped-def]
    for run in (diag_kernel, lambda **kw: pt.reference(_diag(), **kw)):
        args = mutate(_call_args())
        before = {k: np.array(v, copy=True) for k, v in args.items() if isinstance(v, np.ndarray)}
        with pytest.raises(pt.ArgumentError) as info:
            run(**args)
        for needle in needles:
            assert needle in str(info.value), str(info.value)
        for k, v in before.items():
            np.testing.assert_array_equal(args[k], v, err_msg=f"{k} was modified by a rejected call")


@pytest.mark.cc
def test_valid_call_does_write(diag_kernel) -> None:  # type: ignore[no-untyped-def]
    """Control for the test above: the same arguments, unmutated, are accepted and change B."""
    for run in (diag_kernel, lambda **kw: pt.reference(_diag(), **kw)):
        args = _call_args()
        run(**args)
        np.testing.assert_array_equal(args["B"], np.array([0.0, 10.0, 20.0, 30.0]))


def _assuming() -> pt.Program:
    p = _program()
    p.assume("N >= 8")
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[i, i] + s")
    return p


@pytest.mark.cc
def test_parameter_violating_assumption() -> None:
    k = pt.compile(_assuming())
    for run in (k, lambda **kw: pt.reference(_assuming(), **kw)):
        args = _call_args()
        with pytest.raises(pt.ArgumentError) as info:
            run(**args)
        assert "N" in str(info.value) and "4" in str(info.value) and "N >= 8" in str(info.value)
        np.testing.assert_array_equal(args["B"], np.full(4, 7.0))
    # a size the assumption allows runs
    args = {"A": np.zeros((8, 8)), "B": np.zeros(8), "s": 1.5}
    k(**args)
    np.testing.assert_array_equal(args["B"], np.full(8, 1.5))


def _out_of_bounds() -> pt.Program:
    p = _program()
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[i, i + 1]")
    return p


@pytest.mark.cc
def test_out_of_bounds_access_compile_and_reference() -> None:
    with pytest.raises(pt.BoundsError) as info:
        pt.compile(_out_of_bounds())
    msg = str(info.value)
    assert "S0" in msg and "A[i, i + 1]" in msg and "'A'" in msg and "read" in msg and "out of bounds" in msg
    args = _call_args()
    with pytest.raises(pt.BoundsError) as info:
        pt.reference(_out_of_bounds(), **args)
    assert "A[i, i + 1]" in str(info.value)
    np.testing.assert_array_equal(args["B"], np.full(4, 7.0))


def test_out_of_bounds_write_and_the_fix() -> None:
    p = _program()
    with p.loop("i", 0, "N + 1"):
        p.assign("B[i] = 1.0")
    with pytest.raises(pt.BoundsError, match=r"write B\[i\]"):
        pt.reference(p, **_call_args())

    def shifted(assume: bool) -> pt.Program:
        q = pt.Program("shift", params=["N", "M"])
        q.array("B", ("N",), "float64")
        if assume:
            q.assume("M <= N")
        with q.loop("i", 1, "M"):
            q.assign("B[i] = B[i - 1] + 1.0")
        return q

    # out of bounds only where M > N: compiles, and the call-time check rejects those sizes before any write
    b = np.zeros(4)
    pt.reference(shifted(False), B=b, M=3)
    np.testing.assert_array_equal(b, [0.0, 1.0, 2.0, 0.0])
    b = np.full(4, 7.0)
    with pytest.raises(pt.BoundsError) as info:
        pt.reference(shifted(False), B=b, M=6)
    assert isinstance(info.value, pt.ArgumentError)
    assert "S0" in str(info.value) and "write B[i]" in str(info.value) and "'B'" in str(info.value)
    assert "M=6" in str(info.value) and "Program.assume()" in str(info.value)
    np.testing.assert_array_equal(b, np.full(4, 7.0))
    # the fix the message suggests: an assumption that makes every access provably safe
    assert pt.ir.verify.bounds_violations(pt.ir.to_program(shifted(True))) == ()
    b = np.zeros(4)
    pt.reference(shifted(True), B=b, M=3)
    np.testing.assert_array_equal(b, [0.0, 1.0, 2.0, 0.0])


@pytest.mark.cc
def test_compile_option_and_target_errors() -> None:
    p = _diag()
    with pytest.raises(pt.OptionError) as info:
        pt.compile(p, options={"unroll_factor": 4})
    assert "'unroll_factor'" in str(info.value)
    with pytest.raises(pt.OptionError, match="'threads'"):
        pt.compile(p, options={"threads": 0})
    with pytest.raises(pt.OptionError, match="'openmp'"):
        pt.compile(p, options={"openmp": "yes"})
    with pytest.raises(pt.OptionError) as info:
        pt.compile(p, target="tpu")
    assert "'tpu'" in str(info.value)
    with pytest.raises(pt.OptionError) as info:
        pt.compile(p, target="nvgpu", options={"threads": 2})
    assert "'threads'" in str(info.value) and "'nvgpu'" in str(info.value) and "known: schedule" in str(info.value)
    with pytest.raises(pt.ProgramError, match="int"):
        pt.compile(42)
    with pytest.raises(pt.CompilationError, match="/nonexistent/cc"):
        pt.compile(p, options={"cc": "/nonexistent/cc"})


def test_integer_scalar_out_of_range_is_an_argument_error() -> None:
    p = pt.Program("sc", params=["N"])
    p.array("A", ("N",), "int8")
    p.scalar("c", "int8")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = c")
    with pytest.raises(pt.ArgumentError, match="'c'"):
        pt.reference(p, A=np.zeros(3, np.int8), c=200)


def test_huge_parameter_is_an_argument_error() -> None:
    p = pt.Program("hp", params=["N", "T"])
    p.array("B", ("N",), "float64")
    with p.loop("t", 0, "T"):
        with p.loop("i", 0, "N"):
            p.assign("B[i] = B[i] + 1.0")
    with pytest.raises(pt.ArgumentError, match="'T'"):
        pt.reference(p, B=np.zeros(3), T=2**70)


# -- names that are valid identifiers but mean something to isl or to C ------------------------------
@pytest.mark.parametrize("name", ["rat", "floord", "ceild", "implies"])
def test_isl_keywords_are_rejected_as_names(name: str) -> None:
    with pytest.raises(pt.ProgramError, match=repr(name)):
        p = pt.Program("kw", params=["N"])
        p.array("A", ("N",))
        with p.loop(name, 0, "N"):
            p.assign(f"A[{name}] = 1.0")
        p.build()


_C_NAME_SCRIPT = r"""
import sys
import numpy as np
import torch
import polytri as pt

for name, role in [(n, r) for n in sys.argv[1:] for r in ("iter", "array", "scalar", "param")]:
    try:
        p = pt.Program("cname", params=[name] if role == "param" else ["N"])
        size = name if role == "param" else "N"
        arr = name if role == "array" else "A"
        it = name if role == "iter" else "i"
        p.array(arr, (size,), "float64")
        if role == "scalar":
            p.scalar(name, "float64")
        with p.loop(it, 0, size):
            p.assign(f"{arr}[{it}] = abs({arr}[{it}] - 3.0)" + (f" + {name}" if role == "scalar" else ""))
    except pt.ProgramError as exc:
        assert repr(name) in str(exc), str(exc)
        print(name, role, "rejected", flush=True)
        continue
    kw = {"A": np.arange(4.0)} if arr == "A" else {name: np.arange(4.0)}
    if role == "scalar":
        kw[name] = 0.5
    ref = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    pt.reference(p, **ref)
    pt.compile(p)(**kw)
    assert np.array_equal(kw[arr], ref[arr]), (name, role, kw[arr], ref[arr])
    print(name, role, "ok", flush=True)
"""


C_NAMES = ["int", "INFINITY", "NULL", "fabs"]


@pytest.mark.cc
def test_c_reserved_names_are_rejected_or_mangled() -> None:
    """For each of :data:`C_NAMES` as an iterator, array, scalar and parameter: either the builder rejects the
    name with a ProgramError, or the kernel works and agrees with the reference.  Runs in a subprocess (one
    for all the names: each start imports torch): a miscompiled signature can abort the interpreter; the
    lines printed up to then say which name and role got there."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _C_NAME_SCRIPT, *C_NAMES], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"status {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    results = {tuple(line.split()[:2]): line.split()[2] for line in proc.stdout.splitlines() if line.strip()}
    assert set(results) == {(n, r) for n in C_NAMES for r in ("iter", "array", "scalar", "param")}, proc.stdout
    assert set(results.values()) <= {"ok", "rejected"}, proc.stdout


@pytest.mark.cc
def test_same_array_passed_twice_is_rejected() -> None:
    p = pt.Program("alias", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", 1, "N"):
        p.assign("B[i] = A[i - 1] + 1.0")
    k = pt.compile(p)
    for run in (k, lambda **kw: pt.reference(p, **kw)):
        x = np.arange(5.0)
        with pytest.raises(pt.ArgumentError) as info:
            run(A=x, B=x)
        assert "'A'" in str(info.value) and "'B'" in str(info.value) and "overlap" in str(info.value)
        np.testing.assert_array_equal(x, np.arange(5.0))
        t = torch.arange(5.0, dtype=torch.float64)
        with pytest.raises(pt.ArgumentError, match="overlap"):
            run(A=t, B=t[:])
        assert torch.equal(t, torch.arange(5.0, dtype=torch.float64))


@pytest.mark.parametrize("body", ["A[i] = where(A[i] < 200, A[i], 0)", "A[i] = A[i] + 1000", "A[i] = 300",
                                  "A[i] = min(A[i], -129)"])
def test_integer_literal_out_of_range_of_narrow_type(body: str) -> None:
    p = pt.Program("lit", params=["N"])
    p.array("A", ("N",), "int8")
    with p.loop("i", 0, "N"):
        with pytest.raises(pt.TypeCheckError, match="does not fit in int8"):
            p.assign(body)


def test_integer_literal_in_range_is_accepted() -> None:
    p = pt.Program("lit_ok", params=["N"])
    p.array("A", ("N",), "int8")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = where(A[i] < 127, A[i] + 1, -128)")
    a = np.array([1, 127, -5], np.int8)
    pt.reference(p, A=a)
    np.testing.assert_array_equal(a, [2, -128, -4])
