"""``@pt.kernel``: restricted Python -> Program.

Three oracles: the decorated function run as plain Python on numpy arrays (the frontend must keep
Python's meaning), ``pt.reference`` on the translated program, and the compiled cpu kernel (``cc`` tier).
"""
# Linters read the shape strings of annotations (f64["N"]) as forward references to undefined names.
# ruff: noqa: F821

import contextlib
import inspect
import re
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

import polytri as pt
from polytri.errors import (
    ArgumentError,
    NameResolutionError,
    NotAffineError,
    ParseError,
    PolytriError,
    ProgramError,
)
from polytri.frontend import ArraySpec, Kernel, bf16, bool_, f16, f32, f64, i8, i32, i64, kernel
from polytri.ir.textform import parse_program
from polytri.suite import copy_args

THIS_FILE = Path(__file__)


def line_of(marker: str) -> tuple[int, str]:
    """Line number (1-based) and code of the only line of this file that ends with ``# <marker>``."""
    hits = [(n, line) for n, line in enumerate(THIS_FILE.read_text().splitlines(), 1)
            if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    n, line = hits[0]
    return n, line.split("#")[0].strip()


def assert_points_at(exc: BaseException, marker: str) -> None:
    n, code = line_of(marker)
    msg = str(exc)
    assert f'File "{THIS_FILE}", line {n}, in @pt.kernel' in msg, msg
    assert code in msg, msg
    assert re.search(r"^\s*\^+\s*$", msg, re.M), f"no caret line in:\n{msg}"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path / "cache"))


# -- kernels at module level (no indentation) --------------------------------------------------------
@kernel
def jacobi_1d(A: f64["N"], B: f64["N"], T: int, N: int):
    """Jacobi 1-D with a time loop (PolyBench)."""
    for _ in range(T):
        for i in range(1, N - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, N - 1):
            A[i] = B[i]


@kernel
def lower_solve(L: f64["N", "N"], x: f64["N"], b: f64["N"], N: int):
    # forward substitution: bounds of the inner loop depend on the outer iterator
    for i in range(N):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]


@kernel
def tri_update(A: f64["N", "N"], B: f64["N", "N"], N: int):
    for i in range(N):
        for j in range(i, N):
            for k in range(i + 1, j + 1):
                A[i, j] += B[i, k] * A[k, j]


@kernel
def guarded(A: f64["N", "M"], B: f64["N", "M"], N: int, M: int):
    for i in range(N):
        for j in range(M):
            if i == j:
                B[i, j] = 1.0
            elif i < j and j < i + 3:
                B[i, j] = A[i, j] * 2.0
            else:
                B[i, j] = -A[i, j]


@kernel
def axpby(x: f64["N"], y: f64["N"], alpha: float, beta: f32, N: int):
    for i in range(N):
        y[i] = alpha * x[i] + beta * y[i]


@kernel
def updates(A: f64["N"], B: f64["N"], C: i64["N"], N: int):
    for i in range(N):
        A[i] += B[i]
        A[i] -= 0.5 * B[i]
        A[i] *= 1.5
        A[i] /= B[i] + 2.0
        C[i] += i
        C[i] *= 3
        C[i] -= 1


@kernel
def with_locals(A: f64["N"], B: f64["N"], C: f64["N", "N"], N: int):
    for i in range(N):
        t = A[i] * 2
        k = i + 1  # an affine local: fine in subscripts, bounds and conditions
        t += 1.0
        if k < N:
            B[i] = t + A[k]
        else:
            B[i] = t
        s = t * 0.5
        for j in range(k):
            u = s + C[i, j]
            C[i, j] = u * u
        c1 = B[i]  # locals never reach the program: any name works
        _fict_ = c1 - 1.0
        A[i] = _fict_


@kernel
def reserved_iterators(A: f64["N", "N"], N: int):
    for c1 in range(N):
        for _fict_ in range(c1 + 1):
            A[c1, _fict_] += c1 * 1.0 + _fict_


@kernel
def powers(A: f64["N"], B: f64["N"], C: f64["N", 4], N: int):
    for i in range(N):
        C[i, 0] = A[i] ** B[i]
        C[i, 1] = A[i] ** 0.5
        C[i, 2] = pow(A[i] + 1.0, i)
        C[i, 3] = (A[i] - 0.5) ** 1.5  # NaN for a negative base, as numpy says


def rng_arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random(s) for s in shapes]


def copies(d: dict) -> dict:
    return copy_args(d)


def assert_same(got: dict, want: dict, rtol: float = 1e-12) -> None:
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_allclose(got[k], v, rtol=rtol, atol=1e-12, err_msg=k)


def cases() -> list[tuple[Kernel, dict]]:
    n = 7
    a, b = rng_arrays(0, (12,), (12,))
    lower = np.tril(rng_arrays(1, (n, n))[0]) + n * np.eye(n)
    tri_a, tri_b = rng_arrays(2, (n, n), (n, n))
    g_a = rng_arrays(3, (5, 8))[0]
    x, y = rng_arrays(4, (9,), (9,))
    u_a, u_b = rng_arrays(5, (6,), (6,))
    l_a, l_b, l_c = rng_arrays(7, (6,), (6,), (6, 6))
    p_a, p_b = rng_arrays(8, (9,), (9,))
    return [
        (jacobi_1d, dict(A=a, B=b, T=4, N=12)),
        (lower_solve, dict(L=lower, x=np.zeros(n), b=rng_arrays(6, (n,))[0], N=n)),
        (tri_update, dict(A=tri_a, B=tri_b, N=n)),
        (guarded, dict(A=g_a, B=np.zeros((5, 8)), N=5, M=8)),
        (axpby, dict(x=x, y=y, alpha=0.5, beta=2.0, N=9)),
        (updates, dict(A=u_a, B=u_b, C=np.arange(6, dtype=np.int64), N=6)),
        (with_locals, dict(A=l_a, B=l_b, C=l_c, N=6)),
        (reserved_iterators, dict(A=l_c.copy(), N=6)),
        (powers, dict(A=p_a, B=p_b * 3 - 1, C=np.zeros((9, 4)), N=9)),
    ]


CASE_IDS = ["jacobi_1d", "lower_solve", "tri_update", "guarded", "axpby", "updates", "with_locals",
            "reserved_iterators", "powers"]


@pytest.mark.parametrize("index", range(len(CASE_IDS)), ids=CASE_IDS)
def test_reference_of_program_equals_python_semantics(index):
    k, args = cases()[index]
    py, ref = copies(args), copies(args)
    with np.errstate(invalid="ignore"):  # powers: a negative base to a non-integer power is NaN
        k.__wrapped__(**py)  # the function is plain Python too
    pt.reference(k.program, **ref)
    assert any(not np.array_equal(ref[n], args[n]) for n in args if isinstance(args[n], np.ndarray))
    assert_same(ref, py, rtol=1e-6 if k is axpby else 1e-12)  # axpby: beta is float32 in the program


@pytest.mark.cc
@pytest.mark.parametrize("index", range(len(CASE_IDS)), ids=CASE_IDS)
def test_compiled_call_equals_reference(index):
    k, args = cases()[index]
    run, ref = copies(args), copies(args)
    k(**run)
    pt.reference(k.program, **ref)
    assert_same(run, ref)


# -- the translated program ---------------------------------------------------------------------------
def test_declarations_follow_the_signature():
    p = axpby.program
    assert p.name == "axpby"
    assert p.params == ("N",)
    assert [(a.name, a.dtype, a.rank) for a in p.arrays] == [("x", "float64", 1), ("y", "float64", 1)]
    assert [(s.name, s.dtype) for s in p.scalars] == [("alpha", "float64"), ("beta", "float32")]
    assert jacobi_1d.program.params == ("T", "N")
    assert [a.name for a in guarded.program.arrays] == ["A", "B"]
    assert updates.program.array("C").dtype == "int64"
    assert "B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])" in str(jacobi_1d)
    assert parse_program(str(tri_update)) == tri_update.program


def test_domains_of_time_loop_and_triangular_nest():
    s0, s1 = jacobi_1d.program.statements
    assert s0.iterators == ("it_", "i") and s1.iterators == ("it_", "i")  # `for _ in range(T)`
    assert s0.domain.is_equal(isl.Set("[T, N] -> { S0[t, i] : 0 <= t < T and 1 <= i < N - 1 }"))
    assert s0.position[0] == s1.position[0] and s0.position[1] < s1.position[1]  # two loops inside t
    (st,) = tri_update.program.statements
    assert st.domain.is_equal(isl.Set("[N] -> { S0[i, j, k] : 0 <= i < N and i <= j < N and i < k <= j }"))


def test_if_elif_else_domains_partition_the_loop():
    s_then, s_elif, *s_else = guarded.program.statements
    want_then = isl.Set("[N, M] -> { S0[i, j] : 0 <= i < N and 0 <= j < M and i = j }")
    want_elif = isl.Set("[N, M] -> { S1[i, j] : 0 <= i < N and 0 <= j < M and i < j < i + 3 }")
    assert s_then.domain.is_equal(want_then)
    assert s_elif.domain.is_equal(want_elif)
    # the else of `i < j and j < i + 3` is `not i < j` or `i < j and not j < i + 3`: two disjoint copies
    assert len(s_else) == 2
    a, b = (st.domain.set_tuple_name("E") for st in s_else)
    assert a.intersect(b).is_empty()
    everything = isl.Set("[N, M] -> { E[i, j] : 0 <= i < N and 0 <= j < M }")
    rest = everything.subtract(want_then.set_tuple_name("E")).subtract(want_elif.set_tuple_name("E"))
    assert a.union(b).is_equal(rest)


def test_or_not_and_chained_comparisons_keep_python_meaning():
    @kernel
    def conds(A: f64["N", "N"], N: int):
        for i in range(N):
            for j in range(N):
                if 0 < j <= i - 1 and not (i == 3 or j == 2):
                    A[i, j] += 1.0
                else:
                    A[i, j] *= 2.0
                if i < 2 or j > 4:
                    A[i, j] -= 10.0

    a = rng_arrays(7, (7, 7))[0]
    py, ref = a.copy(), a.copy()
    conds.__wrapped__(py, 7)
    pt.reference(conds.program, A=ref, N=7)
    np.testing.assert_array_equal(ref, py)


def test_shape_names_that_are_not_arguments_become_parameters():
    @kernel
    def scale(A: f64["N", "M + 1"], alpha: f64):
        for i in range(N):
            for j in range(M + 1):
                A[i, j] = alpha * A[i, j]

    assert scale.program.params == ("N", "M")
    assert scale.program.scalars[0].dtype == "float64"
    a = np.ones((3, 5))
    scale.reference(a, 4.0)  # N and M inferred from the shape
    np.testing.assert_array_equal(a, 4.0)


def test_underscore_loop_variables_are_renamed():
    @kernel
    def f(A: f64["T", "N"], T: int, N: int):
        for _ in range(T):
            for _i in range(N):
                A[_, _i] = 10 * _ + _i
            for _i in range(min(2, N)):  # a sibling loop may reuse the name
                A[_, _i] += _

    assert f.program.statements[0].iterators == ("it_", "i_")
    assert f.program.statements[1].iterators == ("it_", "i_")
    a = np.zeros((3, 4))
    py = a.copy()
    f.__wrapped__(py, 3, 4)
    f.reference(a, 3, 4)
    np.testing.assert_array_equal(a, py)
    with pytest.raises(ProgramError, match="enclosing loop") as ei:
        @kernel
        def g(A: f64["N"], N: int):
            for _ in range(N):
                for _ in range(N):  # err-shadow
                    A[_] = 0.0
    assert_points_at(ei.value, "err-shadow")


def test_top_level_assert_becomes_an_assumption():
    @kernel
    def last(A: f64["N"], N: int):
        assert N >= 1 and N <= 100, "needs a non-empty array"
        if N > 3:
            A[0] = 5.0
        else:
            A[N - 1] = 7.0  # in bounds only because N >= 1

    assert last.program.context.is_equal(isl.Set("[N] -> { : 1 <= N <= 100 }"))
    for n in (2, 5):
        a, py = np.zeros(n), np.zeros(n)
        last.reference(a)
        last.__wrapped__(py, n)
        np.testing.assert_array_equal(a, py)
    with pytest.raises(ArgumentError, match="assumptions"):
        last.reference(np.zeros(0))


def test_string_annotations_are_evaluated():
    @kernel
    def fill(A: "f32['N']", v: "float", N: "int"):
        for i in range(N):
            A[i] = v

    assert fill.program.array("A").dtype == "float32" and fill.program.params == ("N",)


def test_docstrings_pass_ellipsis_and_min_max_bounds_are_accepted():
    @kernel(name="blocked_copy")
    def f(A: f64["N"], B: f64["N"], N: int):
        """A docstring.
this line is less indented than the body
        """
        pass
        ...
        for ii in range(0, (N + 3) // 4):
            for i in range(4 * ii, min(4 * ii + 4, N)):
                B[i] = A[i]

    assert f.program.name == "blocked_copy" and f.__name__ == "f"
    a, b = rng_arrays(8, (10,), (10,))
    f.reference(a, b)
    np.testing.assert_array_equal(a, b)


def test_annotation_objects():
    assert f64["N"] == ArraySpec("float64", ("N",))
    assert f32["N", "M + 1", 3].shape == ("N", "M + 1", 3)
    assert (f16.dtype, bf16.dtype, i8.dtype, i32.dtype, i64.dtype, bool_.dtype) == (
        "float16", "bfloat16", "int8", "int32", "int64", "bool")
    assert repr(f64["N", 4]) == "pt.f64['N', 4]"
    assert pt.dtypes.dtype(f32).name == "float32"
    spec = i32[8]
    with pytest.raises(AttributeError):
        spec.shape = (9,)  # type: ignore[misc]
    for bad in [(), (1.5,), (-1,), ("",), (slice(None),), (True,)]:
        with pytest.raises(ProgramError):
            f64[bad]


def test_16_bit_and_integer_element_types():
    @kernel
    def mixed(H: f16["N"], C: i32["N"], D: i8["N"], E: bool_["N"], s: f16, N: int):
        for i in range(N):
            H[i] = H[i] * s
            C[i] += i
            D[i] = int8(C[i] * 2)
            E[i] = C[i] > 3

    args = dict(H=np.full(6, 1.5, np.float16), C=np.arange(6, dtype=np.int32), D=np.zeros(6, np.int8),
                E=np.zeros(6, bool), s=2.0)
    mixed.reference(**args)
    np.testing.assert_array_equal(args["H"], np.full(6, 3.0, np.float16))
    np.testing.assert_array_equal(args["C"], 2 * np.arange(6))
    np.testing.assert_array_equal(args["D"], 4 * np.arange(6))
    np.testing.assert_array_equal(args["E"], 2 * np.arange(6) > 3)


# -- calling ------------------------------------------------------------------------------------------
@pytest.mark.cc
def test_call_compiles_once_per_signature_and_runs_in_place():
    a, b = rng_arrays(9, (10,), (10,))
    ra, rb = a.copy(), b.copy()
    jacobi_1d(a, b, 3)  # N inferred from the shapes
    pt.reference(jacobi_1d.program, A=ra, B=rb, T=3)
    np.testing.assert_allclose(a, ra, rtol=1e-12)
    (first,) = jacobi_1d.kernels.values()
    jacobi_1d(A=a, B=b, T=2, N=10)
    jacobi_1d(a, B=b, T=1)
    assert list(jacobi_1d.kernels.values()) == [first]
    assert list(jacobi_1d.kernels) == [(("float64", 1), ("float64", 1))]


@pytest.mark.cc
def test_pt_compile_accepts_a_kernel():
    k = pt.compile(axpby, target="cpu")
    assert k.program is axpby.program
    x, y = rng_arrays(10, (5,), (5,))
    ref = y.copy()
    k(x=x, y=y, alpha=2.0, beta=0.5)
    pt.reference(axpby, x=x, y=ref, alpha=2.0, beta=0.5)
    np.testing.assert_allclose(y, ref, rtol=1e-6)
    assert "pt_axpby" in axpby.compile(options={"openmp": False}).source


def test_bad_calls_are_argument_errors_before_any_build(monkeypatch):
    def no_build(*a, **k):
        raise AssertionError("compiled a call that should have been rejected")

    monkeypatch.setattr(Kernel, "compile", no_build)
    a = np.zeros(4)
    with pytest.raises(ArgumentError, match="missing argument"):
        axpby(a, alpha=1.0, beta=1.0)
    with pytest.raises(ArgumentError, match="too many positional"):
        axpby(a, a.copy(), 1.0, 1.0, 4, 5)
    with pytest.raises(ArgumentError, match="unexpected keyword|got an unexpected"):
        axpby(a, a.copy(), 1.0, 1.0, gamma=3)
    with pytest.raises(ArgumentError, match="declared float64"):
        axpby(a.astype(np.float32), a.copy(), 1.0, 1.0)
    with pytest.raises(ArgumentError, match="extent"):
        axpby(a, np.zeros(5), 1.0, 1.0)


# -- errors point at the offending line ---------------------------------------------------------------
def test_while_loop_is_rejected():
    with pytest.raises(ParseError) as ei:
        @kernel
        def bad(A: f64["N"], N: int):
            for i in range(N):
                A[i] = 0.0
            while N > 0:  # err-while
                A[0] = 1.0
    assert_points_at(ei.value, "err-while")
    assert "'while' loops are not supported" in str(ei.value)


def test_non_affine_subscript_is_rejected():
    with pytest.raises(NotAffineError) as ei:
        @kernel
        def bad(A: f64["N", "N"], N: int):
            for i in range(N):
                for j in range(N):
                    A[i * j, j] = 1.0  # err-subscript
    assert_points_at(ei.value, "err-subscript")
    assert "not affine" in str(ei.value)


def test_unknown_name_is_rejected():
    with pytest.raises(NameResolutionError) as ei:
        @kernel
        def bad(A: f64["N"], N: int):
            for i in range(N):
                A[i] = A[i] * THIS_FILE + 1.0  # err-name
    assert_points_at(ei.value, "err-name")
    msg = str(ei.value)
    assert "unknown name 'THIS_FILE'" in msg and "pass it as an argument" in msg
    # the caret is under the name itself
    src, carets = msg.splitlines()[1:3]
    assert src[carets.index("^"):].startswith("THIS_FILE") and carets.count("^") == len("THIS_FILE")


def back_substitution(U: f64["N", "N"], b: f64["N"], x: f64["N"], N: int):
    for i in range(N - 1, -1, -1):          # as PolyBench writes it: downwards
        x[i] = b[i]
        for j in range(i + 1, N):
            x[i] -= U[i, j] * x[j]
        x[i] = x[i] / U[i, i]


def strided_sweep(A: f64["N", "N"], B: f64["N", "N"], N: int):
    for i in range(1, N, 3):
        for j in range(N - 2, i, -2):         # a bound depending on a stepped loop's variable
            B[i, j] = A[i, j] + A[j, i] * 2.0


@pytest.mark.parametrize("n", [1, 2, 13])
def test_loops_with_steps_run_as_python_runs_them(n: int):
    rng = np.random.default_rng(n)
    u, b = rng.random((n, n)) + n * np.eye(n), rng.random(n)
    want, got = np.zeros(n), np.zeros(n)
    back_substitution(u, b, want, n)                   # plain Python: the oracle
    kernel(back_substitution)(u, b, got)
    np.testing.assert_array_equal(got, want)
    a = rng.random((n, n))
    want2, got2 = np.zeros((n, n)), np.zeros((n, n))
    strided_sweep(a, want2, n)
    kernel(strided_sweep)(a, got2)
    np.testing.assert_array_equal(got2, want2)


def test_a_zero_step_is_rejected():
    with pytest.raises(ParseError) as ei:
        @kernel
        def bad(A: f64["N"], N: int):
            for i in range(0, N, 0):  # err-zero
                A[i] = 0.0
    assert_points_at(ei.value, "err-zero")
    assert "must not be zero" in str(ei.value)


def test_a_step_that_is_not_a_literal_is_rejected():
    with pytest.raises(ParseError) as ei:
        @kernel
        def bad(A: f64["N"], N: int, k: int):
            for i in range(0, N, k):  # err-step
                A[i] = 0.0
    assert_points_at(ei.value, "err-step")
    assert "must be an integer literal" in str(ei.value)


def test_locals_are_substituted_and_reserved_names_renamed():
    text = str(with_locals)
    assert "B[i] = A[i] * 2 + 1.0 + A[i + 1]" in text and " t " not in text and "c1" not in text
    assert "C[i, j] = ((A[i] * 2 + 1.0) * 0.5 + C[i, j]) * ((A[i] * 2 + 1.0) * 0.5 + C[i, j])" in text
    assert "S0[c1_, fict_]" in str(reserved_iterators)
    assert "C[i, 0] = A[i] ** B[i]" in str(powers) and "C[i, 2] = (A[i] + 1.0) ** i" in str(powers)


def bad_locals_before_use(A: f64["N"], B: f64["N"], N: int):
    for i in range(N):
        B[i] = t + 1.0  # err-before
        B[i] = 0.0
    t = 1.0  # noqa: F841


def bad_locals_carried(A: f64["N"], B: f64["N"], N: int):
    s = 0.0
    for k in range(N):
        s = s + A[k]  # err-carried
    B[0] = s


def bad_locals_later_iteration(A: f64["N"], B: f64["N"], N: int):
    for i in range(N):
        B[i] = t  # err-later
        t = A[i]  # noqa: F841


def bad_locals_after_loop(A: f64["N"], B: f64["N"], N: int):
    for i in range(N):
        t = A[i]
        B[i] = t
    B[0] = t  # err-after


def bad_locals_one_branch(A: f64["N"], B: f64["N"], N: int):
    for i in range(N):
        if i > 0:
            t = A[i]
        B[i] = t  # err-branch


def bad_locals_stale(A: f64["N"], B: f64["N"], N: int):
    for i in range(N):
        t = A[i]
        A[i] = 0.0
        B[i] = t  # err-stale


def bad_locals_argument(A: f64["N"], B: f64["N"], N: int):
    N = 3  # err-argument
    B[0] = A[0] * N


@pytest.mark.parametrize("fn, cls, marker, needle", [
    (bad_locals_before_use, NameResolutionError, "err-before", "used before it is assigned"),
    (bad_locals_carried, ParseError, "err-carried", "carried from one iteration to the next"),
    (bad_locals_later_iteration, ParseError, "err-later", "carried from one iteration to the next"),
    (bad_locals_after_loop, ParseError, "err-after", "last iteration's value"),
    (bad_locals_one_branch, ParseError, "err-branch", "one branch only"),
    (bad_locals_stale, ParseError, "err-stale", "line 0 writes"),
    (bad_locals_argument, ParseError, "err-argument", "cannot assign to the argument 'N'"),
], ids=["before", "carried", "later", "after", "branch", "stale", "argument"])
def test_locals_that_python_would_read_differently_are_errors(fn, cls, marker, needle):
    if needle == "line 0 writes":
        needle = f"line {line_of(marker)[0] - 1} writes"
    with pytest.raises(cls) as ei:
        kernel(fn)
    assert_points_at(ei.value, marker)
    assert needle in str(ei.value)
    if marker != "err-argument":  # and Python agrees where it can tell
        with pytest.raises((NameError, UnboundLocalError)) if marker in ("err-before", "err-later", "err-branch") \
                else contextlib.nullcontext():
            fn(np.ones(3), np.zeros(3), 3)


def test_reserved_argument_names_are_errors_at_the_argument():
    with pytest.raises(ProgramError) as ei:
        @kernel
        def bad(A: f64["c1"], c1: int):  # err-reserved
            A[0] = 1.0
    assert_points_at(ei.value, "err-reserved")
    msg = str(ei.value)
    assert "'c1' is reserved" in msg and "rename it" in msg and "        ^^^^^^^" in msg
    with pytest.raises(ProgramError, match="'_fict_': names starting with"):
        @kernel
        def bad2(_fict_: f64["N"], N: int):
            _fict_[0] = 1.0


def test_error_in_a_condition_and_in_a_loop_bound():
    with pytest.raises(NotAffineError) as ei:
        @kernel
        def bad(A: f64["N"], N: int):
            for i in range(N):
                if i * i < N:  # err-cond
                    A[i] = 0.0
    assert_points_at(ei.value, "err-cond")
    with pytest.raises(NotAffineError) as ei:
        @kernel
        def bad2(A: f64["N"], N: int):
            for i in range(A[0], N):  # err-bound
                A[i] = 0.0
    assert_points_at(ei.value, "err-bound")


@pytest.mark.parametrize("snippet, cls, words", [
    ("return", ParseError, "'return' is not supported"),
    ("break", ParseError, "'break'"),
    ("foo(A)", ParseError, "a call is not a statement"),
    ("A[0] = A[1] = 0.0", ParseError, "chained assignment"),
    ("A[i] = A[i] // B[i]", NameResolutionError, "unknown name 'B'"),
    ("assert N > 2", ParseError, "only allowed at the top level"),
])
def test_more_statements_outside_the_subset(tmp_path, snippet, cls, words):
    # the kernel lives in its own file, like a user's module
    path = tmp_path / "user_kernels.py"
    path.write_text("from polytri.frontend import f64, kernel\n\n\n"
                    "def foo(x):\n    pass\n\n\n"
                    "@kernel\n"
                    "def bad(A: f64['N'], N: int):\n"
                    "    for i in range(N):\n"
                    f"        {snippet}\n")
    spec = __import__("importlib.util").util.spec_from_file_location("user_kernels", path)
    module = __import__("importlib.util").util.module_from_spec(spec)
    with pytest.raises(cls) as ei:
        spec.loader.exec_module(module)
    msg = str(ei.value)
    assert f'File "{path}", line 11, in @pt.kernel bad' in msg and snippet in msg and words in msg


def test_bad_arguments_point_at_the_signature():
    with pytest.raises(ParseError, match="needs an annotation") as ei:
        @kernel
        def bad(A: f64["N"], N):  # err-noann
            pass
    assert_points_at(ei.value, "err-noann")
    with pytest.raises(ParseError, match="unsupported annotation") as ei:
        @kernel
        def bad2(A: f64["N"], N: str):  # err-ann
            pass
    assert_points_at(ei.value, "err-ann")
    with pytest.raises(ProgramError, match="clashes") as ei:
        @kernel
        def bad3(A: f64["N"], N: int):
            for N in range(3):  # err-clash
                A[N] = 0.0
    assert_points_at(ei.value, "err-clash")


def test_errors_are_polytri_errors_without_internal_frames():
    with pytest.raises(PolytriError) as ei:
        kernel(lambda A: None)
    assert "lambdas are not supported" in str(ei.value)
    assert ei.value.__cause__ is None
    assert not inspect.isfunction(jacobi_1d) and isinstance(jacobi_1d, Kernel)
