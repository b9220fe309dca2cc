"""The C expression printer and the type rules it makes explicit: compiled code must agree bit for bit with
pt.reference on every operation that is correctly rounded (no transcendental functions), for every dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import polytri as pt
from polytri import dtypes
from polytri.cpu_codegen.cexpr import C, CExprPrinter, binop, c_float, c_int, index_expr
from polytri.ir.expr import COMPARE_OPS, Access, Binary, Call, Cast, Const, Expr, Unary, Var, walk
from polytri.ir.parse import Scope, parse_expr
from polytri.ir.printer import expr_to_str
from polytri.ir.types import Typer

N = 8


# -- the printer's building blocks --------------------------------------------------------------------
def test_binop_parenthesizes_by_precedence() -> None:
    a, b, c = C("a", 16), C("b", 16), C("c", 16)
    assert binop("-", a, binop("-", b, c)).text == "a - (b - c)"
    assert binop("-", binop("-", a, b), c).text == "a - b - c"
    assert binop("*", binop("+", a, b), c).text == "(a + b) * c"
    assert binop("+", a, binop("*", b, c)).text == "a + b * c"
    assert binop("==", binop("<", a, b), c).text == "a < b == c"
    assert binop("==", a, binop("==", b, c)).text == "a == (b == c)"


def test_literals() -> None:
    assert c_int(5).text == "5"
    assert c_int(-5).text == "-5"
    assert c_int(2**40).text == f"INT64_C({2**40})"
    assert c_int(-(2**40)).text == f"INT64_C({-(2**40)})"
    assert c_float(1.0, dtypes.FLOAT64).text == "1.0"
    assert c_float(0.5, dtypes.FLOAT32).text == "0.5f"
    assert c_float(1e300, dtypes.FLOAT64).text == "1e+300"
    assert c_float(float("inf"), dtypes.FLOAT64).text == "INFINITY"
    assert c_float(float("-inf"), dtypes.FLOAT64).text == "-INFINITY"


def test_index_expressions() -> None:
    i, n = Var("i", "iter"), Var("N", "param")
    assert index_expr(Binary("-", n, Binary("-", i, Const(1)))).text == "N - (i - 1)"
    assert index_expr(Binary("//", i, Const(2))).text == "pt__floordivp_i64(i, 2)"   # a positive constant
    assert index_expr(Binary("%", Binary("+", i, n), Const(3))).text == "pt__modp_i64(i + N, 3)"
    assert index_expr(Binary("//", i, n)).text == "pt__floordiv_i64(i, N)"             # any other divisor
    assert index_expr(Binary("%", i, Const(-3))).text == "pt__mod_i64(i, -3)"
    assert index_expr(Call("min", (i, n))).text == "pt__min_int64_t(i, N)"


def test_double_negation_is_not_a_decrement() -> None:
    i = Var("i", "iter")
    assert "--" not in index_expr(Unary("-", Unary("-", i))).text


def _run_both(p: pt.Program, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    def copy(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v.clone()
        return np.array(v, copy=True) if isinstance(v, np.ndarray) else v
    got = {k: copy(v) for k, v in args.items()}
    ref = {k: copy(v) for k, v in args.items()}
    pt.compile(p)(**got)
    pt.reference(p, **ref)
    return got, ref


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()
    return x


@pytest.mark.cc
def test_double_negation_compiled() -> None:
    p = pt.Program("negneg", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("B[i] = -(-A[i])")
    got, ref = _run_both(p, {"A": np.arange(4.0), "B": np.zeros(4)})
    np.testing.assert_array_equal(ref["B"], np.arange(4.0))
    np.testing.assert_array_equal(got["A"], np.arange(4.0))   # the input is not modified
    np.testing.assert_array_equal(got["B"], ref["B"])


@pytest.mark.cc
def test_negated_cast_of_negative_constant_compiles() -> None:
    p = pt.Program("negcast", params=["N"])
    p.array("A", ("N",), "float32")
    p.array("B", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("B[i] = -float32(-1.25) + A[i]")
    got, ref = _run_both(p, {"A": np.arange(4.0, dtype=np.float32), "B": np.zeros(4, np.float32)})
    np.testing.assert_array_equal(ref["B"], np.arange(4.0) + 1.25)
    np.testing.assert_array_equal(got["B"], ref["B"])


@pytest.mark.cc
def test_double_negation_in_subscript_compiles() -> None:
    p = pt.Program("negsub", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[-(-i)]")
    got, ref = _run_both(p, {"A": np.arange(4.0), "B": np.zeros(4)})
    np.testing.assert_array_equal(got["B"], ref["B"])


@pytest.mark.cc
@pytest.mark.parametrize("body", ["C[i] = (i + 0.5) // 0", "C[i] = (i + 0.5) % 0"])
def test_weak_float_division_by_zero(body: str) -> None:
    p = pt.Program("wdiv0", params=["N"])
    p.array("C", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign(body)
    got, ref = _run_both(p, {"C": np.zeros(4)})
    np.testing.assert_array_equal(got["C"], ref["C"])


@pytest.mark.cc
def test_weak_where_branches_are_converted() -> None:
    p = pt.Program("wwhere", params=["N"])
    p.array("C", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("C[i] = where(i < 100, 7, 2.5) // 0")
    got, ref = _run_both(p, {"C": np.zeros(2)})
    np.testing.assert_array_equal(got["C"], ref["C"])


BOOL_FORMS = {  # a boolean select or test -> its C form (bitwise on bytes, which gcc vectorizes)
    "where(P[i], True, Q[i])": "P[i] | Q[i]", "where(P[i], Q[i], False)": "P[i] & Q[i]",
    "where(P[i], False, Q[i])": "!P[i] & Q[i]", "where(P[i], Q[i], True)": "!P[i] | Q[i]",
    "P[i] == 0": "!P[i]", "P[i] != 0": "P[i]", "P[i] == 1": "P[i]", "0 != P[i]": "P[i]",
    "where(F[i] < 0, True, Q[i])": "(F[i] < 0.0f) | Q[i]",
}


def test_boolean_selects_print_as_bitwise_operations() -> None:
    types = {"P": dtypes.BOOL, "Q": dtypes.BOOL, "F": dtypes.FLOAT32, "L": dtypes.INT64}
    printer = CExprPrinter(Typer(types.__getitem__, lambda s: dtypes.FLOAT64),
                           lambda a: C(f"{a.array}[{expr_to_str(a.index[0])}]", 16))
    scope = Scope({**{a: "array" for a in types}, "i": "iter"})
    for text, c in BOOL_FORMS.items():
        assert printer.expr(parse_expr(text, scope)).text == c, text
    # a division by zero that the select skips stays skipped; a non-boolean select stays a select
    for text in ("where(P[i], True, L[i] // L[i] == 1)", "where(P[i], 1.5, F[i])"):
        assert "?" in printer.expr(parse_expr(text, scope)).text, text


@pytest.mark.cc
def test_boolean_selects_agree_with_the_reference() -> None:
    p = pt.Program("boolsel", params=["N"])
    for n in "PQ":
        p.array(n, ("N",), "bool")
    p.array("F", ("N",), "float32")
    for k in range(len(BOOL_FORMS)):
        p.array(f"O{k}", ("N",), "bool")
    with p.loop("i", 0, "N"):
        for k, text in enumerate(BOOL_FORMS):
            p.assign(f"O{k}[i] = {text}")
    rng = np.random.default_rng(3)
    args = {"P": rng.integers(0, 2, 64).astype(bool), "Q": rng.integers(0, 2, 64).astype(bool),
            "F": rng.uniform(-1, 1, 64).astype(np.float32), **{f"O{k}": np.zeros(64, bool) for k in range(len(BOOL_FORMS))}}
    got, ref = _run_both(p, args)
    for k, text in enumerate(BOOL_FORMS):
        np.testing.assert_array_equal(got[f"O{k}"], ref[f"O{k}"], err_msg=text)


@pytest.mark.cc
def test_float_mod_zero_has_the_divisors_sign() -> None:
    p = pt.Program("modzero", params=["N"])
    for n in "ABC":
        p.array(n, ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("C[i] = 1.0 / (A[i] % B[i])")
    got, ref = _run_both(p, {"A": np.array([-4.0, 4.0]), "B": np.array([2.0, -2.0]), "C": np.zeros(2)})
    np.testing.assert_array_equal(ref["C"], [np.inf, -np.inf])
    np.testing.assert_array_equal(got["C"], ref["C"])


@pytest.mark.cc
def test_float_floordiv_matches_python() -> None:
    p = pt.Program("fdiv", params=["N"])
    for n in "ABCD":
        p.array(n, ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("C[i] = A[i] // B[i]")
        p.assign("D[i] = A[i] % B[i]")
    a, b = np.array([1.0, 7.0, -1.0]), np.array([0.1, 0.7, 0.1])
    got, ref = _run_both(p, {"A": a, "B": b, "C": np.zeros(3), "D": np.zeros(3)})
    np.testing.assert_array_equal(ref["C"], [x // y for x, y in zip(a, b)])
    np.testing.assert_array_equal(got["C"], ref["C"])


# -- differential fuzzing: random expressions over every dtype ---------------------------------------
ARRAYS = {"A": "int8", "B": "int32", "L": "int64", "P": "bool", "H": "float16", "G": "bfloat16", "F": "float32",
          "D": "float64"}
i_ = Var("i", "iter")
rev = Binary("-", Binary("-", Var("N", "param"), Const(1)), i_)
leaves = st.one_of(
    st.builds(lambda a, ix: Access(a, (ix,)), st.sampled_from(sorted(ARRAYS)), st.sampled_from([i_, rev])),
    st.sampled_from([i_, Var("N", "param")]),
    st.integers(-5, 5).map(Const),
    st.sampled_from([0.5, -1.25, 3.0, 0.1]).map(Const),
    st.booleans().map(Const),
)
EXACT_FUNCS = {"sqrt": 1, "abs": 1, "floor": 1, "ceil": 1, "min": 2, "max": 2}
ARITH = ["+", "-", "*", "/", "//", "%"]


def _grow(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    cond = st.builds(Binary, st.sampled_from(COMPARE_OPS), children, children)
    return st.one_of(
        st.builds(Binary, st.sampled_from(ARITH), children, children),
        st.builds(lambda x, n: Binary("**", x, Const(n)), children, st.integers(0, 3)),
        children.map(lambda x: Unary("-", x)),
        st.builds(lambda f, xs: Call(f, xs[:EXACT_FUNCS[f]]), st.sampled_from(sorted(EXACT_FUNCS)),
                  st.tuples(children, children)),
        st.builds(lambda c, a, b: Call("where", (c, a, b)), cond, children, children),
        st.builds(Cast, st.sampled_from(sorted(dtypes.ALL)), children),
        cond,
    )


exprs = st.recursive(leaves, _grow, max_leaves=7)

def _typer() -> Typer:
    return Typer(lambda a: dtypes.dtype(ARRAYS[a]), lambda s: dtypes.FLOAT64)


def _weak_bound(e: Expr) -> float:
    """Upper bound of |e| over i < N for the weak (Python-number) subtrees; inf when unknown."""
    if isinstance(e, Const):
        return abs(float(e.value))
    if isinstance(e, Var):
        return N
    if isinstance(e, Unary):
        return _weak_bound(e.operand)
    if isinstance(e, Binary):
        a, b = _weak_bound(e.lhs), _weak_bound(e.rhs)
        if e.op in ("+", "-"):
            return a + b
        if e.op == "*":
            return a * b
        if e.op == "**":
            return max(a, 1.0) ** int(e.rhs.value)  # type: ignore[union-attr]
        if e.op in ("//", "%", "/"):
            return max(a, b) if e.op == "%" else (a if e.op == "//" else float("inf"))
        return 1.0
    if isinstance(e, Call):
        args = e.args[1:] if e.func == "where" else e.args
        return max(_weak_bound(x) for x in args)
    return float("inf")


def _acceptable(e: Expr) -> bool:
    """Trees whose meaning is defined, and defined the same way, on both paths."""
    typer = _typer()
    try:
        typer(e)
    except pt.TypeCheckError:
        return False
    for n in walk(e):
        t = typer(n)
        if isinstance(n, Cast) and dtypes.dtype(n.dtype).kind != "f" and typer(n.operand).dtype.kind == "f":
            return False  # float -> int conversion: undefined in C out of range
        if t.weak and t.dtype.kind != "f" and _weak_bound(n) > 2.0**40:
            return False  # Python integers do not overflow, C int64 does
    return True


def _out_dtype(e: Expr) -> str:
    return _typer()(e).dtype.name


def _inputs(rng: np.random.Generator) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, dt in ARRAYS.items():
        if dt == "bool":
            args[name] = rng.integers(0, 2, N).astype(bool)
        elif dt.startswith("int"):
            args[name] = rng.integers(-60, 60, N).astype(dt)
        elif dt == "bfloat16":
            args[name] = torch.from_numpy(rng.uniform(-3, 3, N)).to(torch.bfloat16)
        else:
            args[name] = rng.uniform(-3, 3, N).astype(dt)
    return args


@pytest.mark.cc
@settings(max_examples=40)
@given(st.lists(exprs.filter(_acceptable), min_size=1, max_size=4))
def test_compiled_agrees_with_reference_bit_for_bit(body: list[Expr]) -> None:
    p = pt.Program("fuzz", params=["N"])
    for name, dt in ARRAYS.items():
        p.array(name, ("N",), dt)
    outs = []
    for k, e in enumerate(body):
        dt = _out_dtype(e)
        p.array(f"O{k}", ("N",), dt)
        outs.append((f"O{k}", dt))
    with p.loop("i", 0, "N"):
        for k, e in enumerate(body):
            p.assign(f"O{k}[i] = {expr_to_str(e)}")
    args = _inputs(np.random.default_rng(7))
    for name, dt in outs:
        args[name] = torch.zeros(N, dtype=torch.bfloat16) if dt == "bfloat16" else np.zeros(N, dt)
    got, ref = _run_both(p, args)
    for (name, _), e in zip(outs, body):
        np.testing.assert_array_equal(_np(got[name]), _np(ref[name]), err_msg=f"{name}[i] = {expr_to_str(e)}")
