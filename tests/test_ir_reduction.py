"""Updates (:mod:`polytri.ir.reduction`): the one recognizer of ``T = T op f``, and the NaN-propagating
``nanmax`` / ``nanmin`` through the text form, the reference, the C target and Triton's interpreter."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

import polytri as pt
from polytri.cpu_codegen.parallel_plan import weight
from polytri.ir.builder import to_program
from polytri.ir.expr import Access, Call, Const, Var
from polytri.ir.parse import Scope, parse_expr
from polytri.ir.printer import expr_to_str
from polytri.ir.reduction import OPERATIONS, Update, nan_select, statement_update, update_of
from polytri.ir.textform import parse_program
from polytri.ir.types import program_typer


def _update(text: str) -> Update | None:
    p = pt.Program("one", params=[])
    p.array("T", (4,))
    p.array("X", (4, 4))
    with p.loop("i", 0, 4), p.loop("j", 0, 4):
        p.assign(text)
    return statement_update(to_program(p).statements[0])


@pytest.mark.parametrize("text, op, term", [
    ("T[i] += X[i, j]", "+", "X[i, j]"),
    ("T[i] = X[i, j] + T[i]", "+", "X[i, j]"),
    ("T[i] -= X[i, j]", "-", "X[i, j]"),
    ("T[i] = max(T[i], X[i, j])", "max", "X[i, j]"),
    ("T[i] = max(X[i, j], T[i])", "max", "X[i, j]"),
    ("T[i] = min(T[i], 2.0 * X[i, j])", "min", "2.0 * X[i, j]"),
    ("T[i] = nanmax(T[i], X[i, j])", "nanmax", "X[i, j]"),
    ("T[i] = nanmin(T[i], X[j, i] - 1.0)", "nanmin", "X[j, i] - 1.0"),
    ("T[i] = T[i] + T[i]", "+", "T[i]"),
])
def test_each_update_form_is_recognized(text: str, op: str, term: str) -> None:
    u = _update(text)
    assert u is not None and (u.op, expr_to_str(u.term)) == (op, term)
    assert u.operation is OPERATIONS[op]


@pytest.mark.parametrize("text", [
    "T[i] = X[i, j] - T[i]",
    "T[i] = T[i] * X[i, j]",
    "T[i] = X[i, j]",
    "T[i] = T[j] + X[i, j]",
    "T[i] = max(X[i, j], X[j, i])",
    "T[i] = nanmax(X[i, j], T[i])",  # not commutative: the target must come first
    "T[i] = where(T[i] > X[i, j], T[i], where(T[i] != T[i], T[i], X[i, j]))",  # spell it nanmax
])
def test_other_values_are_not_updates(text: str) -> None:
    assert _update(text) is None


def test_a_substituted_target_and_value_are_recognized() -> None:
    """The Triton printer asks about statements whose iterators are replaced by loop counters."""
    t = Access("T", (Var("c0", "iter"),))
    x = Access("X", (Var("c0", "iter"), Var("c1", "iter")))
    assert update_of(t, Call("nanmin", (t, x))) == Update("nanmin", x)
    assert update_of(t, Call("nanmin", (x, t))) is None


def test_the_operations_table() -> None:
    rows = {o.op: (o.identity, o.partials, o.nan_propagating, o.base) for o in OPERATIONS.values()}
    assert rows == {
        "+": ("zero", "+", True, "+"), "-": ("zero", "+", True, "-"),
        "max": ("lowest", "max", False, "max"), "min": ("highest", "min", False, "min"),
        "nanmax": ("lowest", "nanmax", True, "max"), "nanmin": ("highest", "nanmin", True, "min"),
    }


def test_nanmax_text_round_trip_type_and_select() -> None:
    scope = Scope({"i": "iter", "A": "array", "B": "array"})
    e = parse_expr("nanmax(A[i], nanmin(B[i], 0.5))", scope)
    a, b = Access("A", (Var("i", "iter"),)), Access("B", (Var("i", "iter"),))
    assert e == Call("nanmax", (a, Call("nanmin", (b, Const(0.5)))))
    assert parse_expr(expr_to_str(e), scope) == e
    assert expr_to_str(nan_select(Call("nanmin", (a, b)))) == "where(A[i] < B[i], A[i], where(A[i] != A[i], A[i], B[i]))"
    prog = to_program(_pointwise("float32"))
    assert parse_program(str(prog)) == prog
    typer = program_typer(prog)
    assert typer(prog.statements[0].value).dtype.name == "float32"


def test_costs_count_a_nan_extreme_as_the_select_it_is_computed_with() -> None:
    """The parallel-region threshold (and the inliner's size) are what they were for the select."""
    p = pt.Program("costs", params=[])
    p.array("T", (4,))
    p.array("X", (4, 4))
    with p.loop("i", 0, 4), p.loop("j", 0, 4):
        p.assign("T[i] = nanmax(T[i], X[i, j])")
        p.assign("T[i] = where(T[i] > X[i, j], T[i], where(T[i] != T[i], T[i], X[i, j]))")
    a, b = to_program(p).statements
    assert weight(a) == weight(b) == 12


# -- semantics: NaN in either operand, signed zeros, ties -------------------------------------------
A = [np.nan, 1.0, np.nan, 2.0, 1.0, -0.0, 0.0, 3.0, -np.inf, np.inf, 5.0, np.nan, -1.5]
B = [1.0, np.nan, np.nan, 2.0, 3.0, 0.0, -0.0, 3.0, 4.0, np.nan, -np.inf, -np.inf, -2.5]


@functools.cache
def _pointwise(dtype: str) -> pt.Program:
    p = pt.Program(f"nanext_{dtype}", params=["N"])
    for name in ("a", "b", "hi", "lo"):
        p.array(name, ("N",), dtype)
    with p.loop("i", 0, "N"):
        p.assign("hi[i] = nanmax(a[i], b[i])")
        p.assign("lo[i] = nanmin(a[i], b[i])")
    return p


def _expected(a: np.ndarray, b: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The documented rule: ``a`` where it wins or is NaN, else ``b`` (so ``b`` on ties)."""
    return np.where(keep | np.isnan(a), a, b)


def _run(target: str, dtype: str) -> dict[str, np.ndarray]:
    args = {"a": np.array(A, dtype), "b": np.array(B, dtype), "hi": np.zeros(len(A), dtype),
            "lo": np.zeros(len(A), dtype)}
    if target == "reference":
        pt.reference(_pointwise(dtype), **args)
    else:
        pt.compile(_pointwise(dtype), target=target)(**args)
    return args


@pytest.mark.parametrize("target, dtype", [
    ("reference", "float64"), ("reference", "float32"),
    pytest.param("cpu", "float64", marks=pytest.mark.cc), pytest.param("cpu", "float32", marks=pytest.mark.cc),
    pytest.param("nvgpu", "float32", marks=pytest.mark.interp),
])
def test_nanmax_and_nanmin_propagate_nan_and_give_the_second_operand_on_ties(target: str, dtype: str) -> None:
    out = _run(target, dtype)
    a, b = out["a"], out["b"]
    for name, keep, torch_fn in (("hi", a > b, torch.maximum), ("lo", a < b, torch.minimum)):
        want = _expected(a, b, keep)
        got = out[name]
        np.testing.assert_array_equal(got, want, err_msg=f"{target} {name}")
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{target} {name}: zero signs")
        eager = torch_fn(torch.from_numpy(a), torch.from_numpy(b)).numpy()  # NaN and values as PyTorch's
        np.testing.assert_array_equal(got, eager, err_msg=f"{target} {name} against torch")


@functools.cache
def _row_extremes() -> pt.Program:
    p = pt.Program("rowext", params=["M", "N"])
    p.array("x", ("M", "N"), "float32")
    p.array("hi", ("M",), "float32")
    p.array("lo", ("M",), "float32")
    with p.loop("i", 0, "M"):
        p.assign("hi[i] = -1e999")
        p.assign("lo[i] = 1e999")
        with p.loop("j", 0, "N"):
            p.assign("hi[i] = nanmax(hi[i], x[i, j])")
            p.assign("lo[i] = nanmin(lo[i], x[i, j])")
    return p


@pytest.mark.parametrize("target", ["reference", pytest.param("cpu", marks=pytest.mark.cc),
                                    pytest.param("nvgpu", marks=pytest.mark.interp)])
def test_row_reductions_propagate_nan_like_amax(target: str) -> None:
    """On the GPU targets these are chunked reductions (``tl.max`` with a NaN test per chunk)."""
    x = np.random.default_rng(0).standard_normal((5, 150)).astype(np.float32)
    x[1, 0] = x[2, 149] = x[3, 70] = np.nan
    args = {"x": x, "hi": np.zeros(5, np.float32), "lo": np.zeros(5, np.float32)}
    if target == "reference":
        pt.reference(_row_extremes(), **args)
    else:
        k = pt.compile(_row_extremes(), target=target)
        assert target != "nvgpu" or ("tl.max(" in k.source and "tl.min(" in k.source)
        k(**args)
    t = torch.from_numpy(x)
    np.testing.assert_array_equal(args["hi"], t.amax(1).numpy())
    np.testing.assert_array_equal(args["lo"], t.amin(1).numpy())
