"""Element types: the promotion rules of polytri.dtypes, and compiled code agreeing with pt.reference."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import torch

import polytri as pt
from polytri import dtypes
from polytri.dtypes import (
    BFLOAT16,
    BOOL,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    INT8,
    INT32,
    INT64,
    UINT8,
    VType,
    arith,
    floating,
    promote,
    true_div,
)
from polytri.ir.parse import Scope, parse_expr
from polytri.ir.types import infer

S = VType          # strong
def W(d):  # noqa: E302  weak
    return VType(d, True)


ALL = [BOOL, INT8, UINT8, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64]


# -- the rules ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, want", [
    # weak meets strong of a kind at least as high: the strong type wins
    (W(INT64), S(INT8), S(INT8)),
    (W(INT64), S(INT32), S(INT32)),
    (W(INT64), S(FLOAT16), S(FLOAT16)),
    (W(INT64), S(BFLOAT16), S(BFLOAT16)),
    (W(FLOAT64), S(FLOAT32), S(FLOAT32)),
    (W(FLOAT64), S(FLOAT16), S(FLOAT16)),
    (W(BOOL), S(BOOL), S(BOOL)),
    (W(BOOL), S(INT8), S(INT8)),
    (W(BOOL), S(FLOAT32), S(FLOAT32)),
    # weak of a higher kind: the default type of the weak kind, strong
    (W(FLOAT64), S(INT8), S(FLOAT64)),
    (W(FLOAT64), S(INT32), S(FLOAT64)),
    (W(FLOAT64), S(BOOL), S(FLOAT64)),
    (W(INT64), S(BOOL), S(INT64)),
    # two weak operands: weak int64 or float64
    (W(INT64), W(INT64), W(INT64)),
    (W(INT64), W(FLOAT64), W(FLOAT64)),
    (W(BOOL), W(INT64), W(INT64)),
    (W(BOOL), W(FLOAT64), W(FLOAT64)),
    # two strong operands
    (S(INT8), S(INT32), S(INT32)),
    (S(INT32), S(INT64), S(INT64)),
    (S(BOOL), S(INT8), S(INT8)),
    (S(INT64), S(FLOAT16), S(FLOAT16)),
    (S(INT8), S(BFLOAT16), S(BFLOAT16)),
    (S(FLOAT16), S(FLOAT32), S(FLOAT32)),
    (S(BFLOAT16), S(FLOAT32), S(FLOAT32)),
    (S(FLOAT32), S(FLOAT64), S(FLOAT64)),
    (S(FLOAT16), S(BFLOAT16), S(FLOAT32)),
    (S(BOOL), S(BOOL), S(BOOL)),
    # uint8: a weak int takes its type; with int8, int32 holds both (no int16 in polytri)
    (W(INT64), S(UINT8), S(UINT8)),
    (S(UINT8), S(INT8), S(INT32)),
    (S(UINT8), S(INT32), S(INT32)),
    (S(BOOL), S(UINT8), S(UINT8)),
    (S(UINT8), S(FLOAT32), S(FLOAT32)),
])
def test_promote_table(a: VType, b: VType, want: VType) -> None:
    assert promote(a, b) == want
    assert promote(b, a) == want


def test_promote_is_commutative_and_idempotent_on_every_pair() -> None:
    vts = [VType(d, w) for d in ALL for w in (False, True) if not (w and d in (INT8, INT32, FLOAT16, BFLOAT16,
                                                                                FLOAT32))]
    for a, b in itertools.product(vts, vts):
        r = promote(a, b)
        assert r == promote(b, a), (a, b)
        # the result's kind is the higher kind of the operands
        assert r.dtype.rank == max(a.dtype.rank, b.dtype.rank) or (a.weak and b.weak), (a, b, r)
        assert r.weak == (a.weak and b.weak), (a, b, r)
    for d in ALL:
        assert promote(S(d), S(d)) == S(d)


@pytest.mark.parametrize("a, b, want", [
    (S(BOOL), S(BOOL), S(INT64)),
    (W(BOOL), W(BOOL), W(INT64)),
    (S(BOOL), W(BOOL), S(INT64)),
    (S(BOOL), S(INT8), S(INT8)),
    (S(INT8), W(INT64), S(INT8)),
    (S(FLOAT16), S(INT32), S(FLOAT16)),
])
def test_arith(a: VType, b: VType, want: VType) -> None:
    assert arith(a, b) == want


@pytest.mark.parametrize("a, b, want", [
    (S(INT32), S(INT32), S(FLOAT64)),
    (S(INT8), W(INT64), S(FLOAT64)),
    (S(BOOL), S(BOOL), S(FLOAT64)),
    (W(INT64), W(INT64), W(FLOAT64)),
    (S(FLOAT16), W(INT64), S(FLOAT16)),
    (S(BFLOAT16), S(FLOAT16), S(FLOAT32)),
    (S(FLOAT32), S(INT64), S(FLOAT32)),
])
def test_true_div(a: VType, b: VType, want: VType) -> None:
    assert true_div(a, b) == want


def test_floating() -> None:
    assert floating(S(INT8)) == S(FLOAT64)
    assert floating(S(BOOL)) == S(FLOAT64)
    assert floating(W(INT64)) == W(FLOAT64)
    assert floating(S(FLOAT16)) == S(FLOAT16)
    assert floating(S(BFLOAT16)) == S(BFLOAT16)


def test_dtype_lookup_and_storage() -> None:
    assert dtypes.dtype("f32") is FLOAT32 and dtypes.dtype("double") is FLOAT64 and dtypes.dtype("half") is FLOAT16
    assert dtypes.dtype("torch.bfloat16") is BFLOAT16
    assert dtypes.dtype(INT8) is INT8
    with pytest.raises(pt.TypeCheckError, match="'complex64'"):
        dtypes.dtype("complex64")
    assert dtypes.numpy_dtype(BFLOAT16) == np.uint16
    assert dtypes.numpy_dtype(FLOAT16) == np.float16
    assert [d.itemsize for d in ALL] == [1, 1, 1, 4, 8, 2, 2, 4, 8]
    assert dtypes.of_array(np.zeros(2, np.int8)) is INT8
    assert dtypes.of_array(torch.zeros(2, dtype=torch.bfloat16)) is BFLOAT16
    assert dtypes.of_array(torch.zeros(2, dtype=torch.bool)) is BOOL
    assert dtypes.of_array(np.zeros(2, np.uint8)) is UINT8
    with pytest.raises(pt.TypeCheckError, match="uint16"):
        dtypes.of_array(np.zeros(2, np.uint16))


ARRAY_TYPES = {"i8": INT8, "i32": INT32, "b": BOOL, "h": FLOAT16, "bh": BFLOAT16, "f": FLOAT32, "d": FLOAT64,
               "l": INT64}
SCOPE = Scope({**{n: "array" for n in ARRAY_TYPES}, "i": "iter", "N": "param", "s32": "scalar"})


@pytest.mark.parametrize("text, want", [
    ("i8[i] + 1", S(INT8)),
    ("i8[i] + 1.5", S(FLOAT64)),
    ("i8[i] + i", S(INT8)),
    ("i8[i] / 2", S(FLOAT64)),
    ("i8[i] + i32[i]", S(INT32)),
    ("h[i] * 2.0", S(FLOAT16)),
    ("h[i] + bh[i]", S(FLOAT32)),
    ("b[i] + b[i]", S(INT64)),
    ("-b[i]", S(INT64)),
    ("b[i] ** 2", S(INT64)),
    ("abs(b[i])", S(INT64)),
    ("floor(i32[i])", S(INT32)),
    ("exp(i8[i])", S(FLOAT64)),
    ("sqrt(h[i])", S(FLOAT16)),
    ("i8[i] < 3", S(BOOL)),
    ("where(f[i] > 0.0, i8[i], h[i])", S(FLOAT16)),
    ("where(f[i] > 0.0, 1, 2.5)", W(FLOAT64)),
    ("min(i32[i], l[i])", S(INT64)),
    ("float32(i)", S(FLOAT32)),
    ("int8(d[i]) * 2", S(INT8)),
    ("i * N + 1", W(INT64)),
    ("i / 2", W(FLOAT64)),
    ("s32 * 2.0", S(FLOAT64)),         # s32 is an int32 scalar: a weak float makes it float64
    ("s32 + 1", S(INT32)),
    ("f[i] ** -2", S(FLOAT32)),
    ("f[i] ** 0.5", S(FLOAT32)),       # a float or variable exponent is pow(x, y): the promoted float type
    ("f[i] ** i", S(FLOAT32)),
    ("pow(h[i], d[i])", S(FLOAT64)),
    ("i32[i] ** 0.5", S(FLOAT64)),
    ("pow(bh[i], 2.0)", S(BFLOAT16)),
])
def test_expression_types(text: str, want: VType) -> None:
    e = parse_expr(text, SCOPE)
    assert infer(e, lambda a: ARRAY_TYPES[a], lambda s: INT32 if s == "s32" else FLOAT32) == want


# -- compiled code against the reference -------------------------------------------------------------
def _copy(x: Any) -> Any:
    return x.clone() if isinstance(x, torch.Tensor) else np.array(x, copy=True)


def _as_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64).numpy() if x.dtype in (torch.bfloat16, torch.float16) else x.numpy()
    return np.asarray(x)


def run_both(p: pt.Program, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the compiled kernel and the reference on copies of ``args``; return both results."""
    k = pt.compile(p, target="cpu")
    got = {n: _copy(v) if hasattr(v, "shape") else v for n, v in args.items()}
    ref = {n: _copy(v) if hasattr(v, "shape") else v for n, v in args.items()}
    k(**got)
    pt.reference(p, **ref)
    return got, ref


def assert_agree(p: pt.Program, args: dict[str, Any], *, exact: bool, rtol: float = 1e-6,
                 atol: float = 1e-6) -> dict[str, Any]:
    got, ref = run_both(p, args)
    for name, v in args.items():
        if not hasattr(v, "shape"):
            continue
        g, r = _as_numpy(got[name]), _as_numpy(ref[name])
        assert g.dtype == r.dtype
        if exact:
            np.testing.assert_array_equal(g, r, err_msg=f"array {name}")
        else:
            np.testing.assert_allclose(g, r, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"array {name}")
    return ref


def _unary_program(name: str, dt: str, body: str, *, out_dt: str | None = None, n_in: int = 2) -> pt.Program:
    p = pt.Program(name, params=["N"])
    for a in "AB"[:n_in]:
        p.array(a, ("N",), dt)
    p.array("C", ("N",), out_dt or dt)
    with p.loop("i", 0, "N"):
        p.assign(body)
    return p


RNG = np.random.default_rng(1234)
N = 64


FLOAT_BODY = "C[i] = A[i] * B[i] + A[i] / (abs(B[i]) + 1) - 0.5 * A[i] + float32(i) * 0.25"


@pytest.mark.cc
@pytest.mark.parametrize("dt, tol", [("float16", 2e-3), ("float32", 1e-5), ("float64", 1e-12)])
def test_float_numpy(dt: str, tol: float) -> None:
    p = _unary_program(f"fl_{dt}", dt, FLOAT_BODY)
    a = RNG.uniform(-4, 4, N).astype(dt)
    b = RNG.uniform(-4, 4, N).astype(dt)
    ref = assert_agree(p, {"A": a, "B": b, "C": np.zeros(N, dt)}, exact=False, rtol=tol, atol=tol)
    # the reference itself computes what numpy computes in the same type (up to rounding)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    expect = af * bf + af / (np.abs(bf) + 1) - 0.5 * af + np.arange(N) * 0.25
    np.testing.assert_allclose(ref["C"].astype(np.float64), expect, rtol=50 * tol, atol=50 * tol)


@pytest.mark.cc
@pytest.mark.parametrize("tdt", [torch.float16, torch.bfloat16, torch.float32])
def test_float_torch(tdt: torch.dtype) -> None:
    dt = str(tdt).removeprefix("torch.")
    p = _unary_program(f"tl_{dt}", dt, FLOAT_BODY)
    a = torch.from_numpy(RNG.uniform(-4, 4, N)).to(tdt)
    b = torch.from_numpy(RNG.uniform(-4, 4, N)).to(tdt)
    tol = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float32: 1e-5}[tdt]
    ref = assert_agree(p, {"A": a, "B": b, "C": torch.zeros(N, dtype=tdt)}, exact=False, rtol=tol, atol=tol)
    assert ref["C"].dtype == tdt
    af, bf = a.double(), b.double()
    expect = af * bf + af / (bf.abs() + 1) - 0.5 * af + torch.arange(N) * 0.25
    torch.testing.assert_close(ref["C"].double(), expect, rtol=20 * tol, atol=20 * tol)


@pytest.mark.cc
@pytest.mark.parametrize("tdt", [torch.float16, torch.bfloat16])
def test_16bit_arithmetic_is_bit_exact(tdt: torch.dtype) -> None:
    """+ - * / and sqrt are correctly rounded and rounded to 16 bits after each operation on both paths."""
    dt = str(tdt).removeprefix("torch.")
    p = _unary_program(f"ex_{dt}", dt, "C[i] = (A[i] * B[i] + A[i]) / (B[i] - 7.0) + sqrt(abs(A[i]))")
    a = torch.from_numpy(RNG.uniform(-4, 4, N)).to(tdt)
    b = torch.from_numpy(RNG.uniform(-4, 4, N)).to(tdt)
    assert_agree(p, {"A": a, "B": b, "C": torch.zeros(N, dtype=tdt)}, exact=True)


@pytest.mark.cc
@pytest.mark.parametrize("tdt", [torch.float16, torch.bfloat16])
def test_16bit_results_stored_with_one_conversion_keep_special_values(tdt: torch.dtype) -> None:
    """A stored 16-bit result is converted from its float value once (not rounded in float, then
    converted again): products that overflow the type, NaN from 0 * inf, halfway cases and subnormal
    results equal the reference's bit for bit."""
    dt = str(tdt).removeprefix("torch.")
    p = _unary_program(f"sp_{dt}", dt, "C[i] = A[i] * B[i]")
    info = torch.finfo(tdt)
    # (1 + eps) * 1.5 = 1.5 + 1.5 eps lies halfway between two values of the type: it rounds to even
    a = torch.tensor([info.max, 0.0, float("inf"), float("nan"), 1 + info.eps, 1 + info.eps, info.tiny,
                      -info.max, 3.0], dtype=tdt)
    b = torch.tensor([2.0, float("inf"), -1.0, 1.0, 1 + info.eps, 1.5, 0.25, 2.0, 1 / 3], dtype=tdt)
    got = assert_agree(p, {"A": a, "B": b, "C": torch.zeros(9, dtype=tdt)}, exact=True)
    torch.testing.assert_close(got["C"], a * b, equal_nan=True, rtol=0, atol=0)


def _has_fma() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " fma " in f.read()
    except OSError:
        return False


@pytest.mark.cc
@pytest.mark.skipif(not _has_fma(), reason="the contraction only happens where -march=native has FMA")
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_no_fma_contraction(dt: str) -> None:
    p = pt.Program(f"fma_{dt}", params=["N"])
    for n in "ABCD":
        p.array(n, ("N",), dt)
    with p.loop("i", 0, "N"):
        p.assign("D[i] = A[i] * B[i] - C[i]")
    eps = np.finfo(dt).eps
    a = (1 + eps * np.arange(1, 17)).astype(dt)
    c = (a * a).astype(dt)  # the rounded product: a*a - c is exactly 0 when rounded after each operation
    args = {"A": a, "B": a.copy(), "C": c, "D": np.ones(16, dt)}
    ref = assert_agree(p, args, exact=True)
    np.testing.assert_array_equal(ref["D"], 0)


@pytest.mark.cc
def test_int8_wraps_around() -> None:
    p = _unary_program("i8wrap", "int8", "C[i] = A[i] * B[i] + A[i] * 3 - 7 + i * 50")
    a = np.arange(-128, 128, 4, dtype=np.int8)
    b = np.roll(a, 5)
    ref = assert_agree(p, {"A": a, "B": b, "C": np.zeros_like(a)}, exact=True)
    ai, bi = a.astype(np.int64), b.astype(np.int64)
    expect = ((ai * bi + ai * 3 - 7 + np.arange(len(a)) * 50 + 128) % 256 - 128).astype(np.int8)
    np.testing.assert_array_equal(ref["C"], expect)
    assert (ai * bi + ai * 3).max() > 127  # the test does overflow


@pytest.mark.cc
def test_uint8_wraps_around_and_widens() -> None:
    """uint8 arithmetic wraps modulo 256; mixed with int8 it computes in int32; on both paths."""
    p = pt.Program("u8wrap", params=["N"])
    p.array("A", ("N",), "uint8")
    p.array("B", ("N",), "int8")
    p.array("C", ("N",), "uint8")
    p.array("D", ("N",), "int32")
    p.array("E", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("C[i] = A[i] * 3 + 7 - i")
        p.assign("D[i] = A[i] * B[i] - A[i]")
        p.assign("E[i] = (A[i] - 122) * 0.5")
    a = np.arange(0, 256, 4, dtype=np.uint8)
    b = np.arange(-128, 128, 4, dtype=np.int8)
    args = {"A": a, "B": b, "C": np.zeros_like(a), "D": np.zeros(len(a), np.int32), "E": np.zeros(len(a), np.float32)}
    ref = assert_agree(p, args, exact=True)
    ai, bi = a.astype(np.int64), b.astype(np.int64)
    np.testing.assert_array_equal(ref["C"], ((ai * 3 + 7 - np.arange(len(a))) % 256).astype(np.uint8))
    np.testing.assert_array_equal(ref["D"], (ai * bi - ai).astype(np.int32))
    np.testing.assert_array_equal(ref["E"], (((ai - 122) % 256) * 0.5).astype(np.float32))


@pytest.mark.cc
@pytest.mark.parametrize("dt, big", [("int32", 2**30), ("int64", 2**62)])
def test_wide_ints_wrap_around(dt: str, big: int) -> None:
    p = _unary_program(f"wrap_{dt}", dt, "C[i] = A[i] * B[i] + A[i] - B[i] * 3")
    a = (np.arange(N, dtype=np.int64) * (big // N) - big // 2).astype(dt)
    b = np.roll(a, 7)
    ref = assert_agree(p, {"A": a, "B": b, "C": np.zeros(N, dt)}, exact=True)
    bits = np.iinfo(dt).bits
    expect = [((int(x) * int(y) + int(x) - int(y) * 3 + 2 ** (bits - 1)) % 2 ** bits) - 2 ** (bits - 1)
              for x, y in zip(a, b)]
    assert ref["C"].tolist() == expect


@pytest.mark.cc
def test_bool_comparisons_and_where() -> None:
    p = pt.Program("bools", params=["N"])
    p.array("A", ("N",), "int32")
    p.array("B", ("N",), "int32")
    p.array("P", ("N",), "bool")
    p.array("Q", ("N",), "bool")
    p.array("C", ("N",), "bool")
    p.array("D", ("N",), "int64")
    p.array("E", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("C[i] = where(A[i] > B[i], A[i] != B[i] + 1, A[i] == 0)")
        p.assign("D[i] = P[i] + Q[i] * 2 - (A[i] <= B[i])")
        p.assign("E[i] = where(P[i] == Q[i], float32(A[i]), -1.5) + bool(B[i])")
        p.assign("Q[i] = (P[i] + Q[i]) > 1")
    a = RNG.integers(-3, 4, N).astype(np.int32)
    b = RNG.integers(-3, 4, N).astype(np.int32)
    pb = RNG.integers(0, 2, N).astype(bool)
    qb = RNG.integers(0, 2, N).astype(bool)
    args = {"A": a, "B": b, "P": pb, "Q": qb, "C": np.zeros(N, bool), "D": np.zeros(N, np.int64),
            "E": np.zeros(N, np.float32)}
    ref = assert_agree(p, args, exact=True)
    np.testing.assert_array_equal(ref["C"], np.where(a > b, a != b + 1, a == 0))
    np.testing.assert_array_equal(ref["D"], pb.astype(int) + qb * 2 - (a <= b))
    np.testing.assert_array_equal(ref["E"], np.where(pb == qb, a.astype(np.float32), -1.5) + (b != 0))
    np.testing.assert_array_equal(ref["Q"], pb & qb)


@pytest.mark.cc
def test_bool_tensors() -> None:
    p = pt.Program("tbool", params=["N"])
    p.array("A", ("N",), "float32")
    p.array("M", ("N",), "bool")
    with p.loop("i", 0, "N"):
        p.assign("M[i] = A[i] >= 0.0")
    a = torch.linspace(-1, 1, 9)
    ref = assert_agree(p, {"A": a, "M": torch.zeros(9, dtype=torch.bool)}, exact=True)
    assert torch.equal(ref["M"], a >= 0)


def _py_floordiv(a: int, b: int) -> int:
    return 0 if b == 0 else a // b


def _py_mod(a: int, b: int) -> int:
    return 0 if b == 0 else a % b


@pytest.mark.cc
@pytest.mark.parametrize("dt", ["int8", "int32", "int64"])
def test_integer_floordiv_and_mod_follow_python(dt: str) -> None:
    p = pt.Program(f"divmod_{dt}", params=["N"])
    for n in ("A", "B", "Q", "R", "S", "T", "U", "V"):
        p.array(n, ("N",), dt)
    with p.loop("i", 0, "N"):
        p.assign("Q[i] = A[i] // B[i]")
        p.assign("R[i] = A[i] % B[i]")
        p.assign("S[i] = A[i] // -3 + A[i] % -3")
        p.assign("T[i] = -7 // B[i]")
        p.assign("U[i] = (i - 5) // 3 * 10 + (i - 5) % 3")   # positive constant divisors: their own helpers
        p.assign("V[i] = A[(i - 5) % 3] + A[(i + 5) // 3]")  # the same in subscripts
    vals = [(x, y) for x in range(-9, 10, 2) for y in (-4, -3, -1, 0, 1, 2, 5)]
    a = np.array([x for x, _ in vals], dt)
    b = np.array([y for _, y in vals], dt)
    n = len(vals)
    zeros = {k: np.zeros(n, dt) for k in "QRSTUV"}
    ref = assert_agree(p, {"A": a, "B": b, **zeros}, exact=True)
    assert ref["V"].tolist() == [np.array(a[(i - 5) % 3] + a[(i + 5) // 3]).astype(dt).item() for i in range(n)]
    source = pt.compile(p).source
    assert "A[pt__modp_i64(i - 5, 3)] + A[pt__floordivp_i64(i + 5, 3)]" in source
    assert ref["Q"].tolist() == [_py_floordiv(x, y) for x, y in vals]
    assert ref["R"].tolist() == [_py_mod(x, y) for x, y in vals]
    assert ref["S"].tolist() == [x // -3 + x % -3 for x, _ in vals]
    assert ref["T"].tolist() == [_py_floordiv(-7, y) for _, y in vals]
    assert ref["U"].tolist() == [np.array((i - 5) // 3 * 10 + (i - 5) % 3).astype(dt).item() for i in range(n)]


@pytest.mark.cc
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_float_floordiv_and_mod_follow_python(dt: str) -> None:
    p = _unary_program(f"fdivmod_{dt}", dt, "C[i] = A[i] // B[i] * 100 + A[i] % B[i]")
    vals = [(x, y) for x in (-7.5, -3.0, -0.5, 2.25, 9.0) for y in (-2.0, -0.75, 1.5, 4.0)]
    a = np.array([x for x, _ in vals], dt)
    b = np.array([y for _, y in vals], dt)
    ref = assert_agree(p, {"A": a, "B": b, "C": np.zeros(len(vals), dt)}, exact=True)
    assert ref["C"].tolist() == [(x // y) * 100 + x % y for x, y in vals]


@pytest.mark.cc
@pytest.mark.parametrize("dt, exact", [("int8", True), ("int32", True), ("int64", True), ("float16", True),
                                       ("float32", True), ("float64", True)])
def test_integer_powers(dt: str, exact: bool) -> None:
    body = "C[i] = A[i] ** 3 + A[i] ** 0 + A[i] ** 1 + 2 ** 5 + i ** 2"
    if dt.startswith("float"):
        body += " + A[i] ** -2 + B[i] ** 5"
    p = _unary_program(f"pow_{dt}", dt, body)
    a = np.array([-5, -3, -2, -1, 1, 2, 3, 4, 7, 11], dt)
    b = (np.linspace(-1.5, 1.5, len(a))).astype(dt) if dt.startswith("float") else a
    ref = assert_agree(p, {"A": a, "B": b, "C": np.zeros(len(a), dt)}, exact=exact)
    if dt.startswith("int"):
        bits = np.iinfo(dt).bits
        expect = [((int(x) ** 3 + 1 + int(x) + 32 + i * i + 2 ** (bits - 1)) % 2 ** bits) - 2 ** (bits - 1)
                  for i, x in enumerate(a)]
        assert ref["C"].tolist() == expect
    else:
        af, bf = a.astype(np.float64), b.astype(np.float64)
        expect = af ** 3 + 1 + af + 32 + np.arange(len(a)) ** 2 + af ** -2.0 + bf ** 5
        np.testing.assert_allclose(ref["C"].astype(np.float64), expect, rtol=2e-3 if dt == "float16" else 1e-6)


@pytest.mark.cc
def test_weak_float_power_matches_reference_exactly() -> None:
    p = pt.Program("wpow", params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = (1.1 + i) ** 10")
    assert_agree(p, {"A": np.zeros(8)}, exact=True)


FUNCS = ["exp(A[i] * 0.5)", "log(abs(A[i]) + 0.5)", "sqrt(abs(A[i]))", "abs(A[i])", "min(A[i], B[i])",
         "max(A[i], B[i])", "tanh(A[i])", "sigmoid(A[i])", "erf(A[i])", "floor(A[i])", "ceil(A[i])",
         "where(A[i] < B[i], A[i], B[i] * 2.0)", "round(A[i])"]


@pytest.mark.cc
@pytest.mark.parametrize("dt, tol", [("float32", 2e-6), ("float64", 1e-14), ("float16", 1e-3)])
def test_functions_agree(dt: str, tol: float) -> None:
    p = pt.Program(f"funcs_{dt}", params=["N"])
    p.array("A", ("N",), dt)
    p.array("B", ("N",), dt)
    p.array("C", ("N", len(FUNCS)), dt)
    with p.loop("i", 0, "N"):
        for k, f in enumerate(FUNCS):
            p.assign(f"C[i, {k}] = {f}")
    a = np.concatenate([RNG.uniform(-3, 3, N - 6), [-2.5, -0.5, 0.0, 0.5, 1.5, 2.5]]).astype(dt)
    b = RNG.uniform(-3, 3, N).astype(dt)
    ref = assert_agree(p, {"A": a, "B": b, "C": np.zeros((N, len(FUNCS)), dt)}, exact=False, rtol=tol, atol=tol)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    erf = np.vectorize(math.erf)
    expect = [np.exp(af * 0.5), np.log(np.abs(af) + 0.5), np.sqrt(np.abs(af)), np.abs(af), np.minimum(af, bf),
              np.maximum(af, bf), np.tanh(af), 1 / (1 + np.exp(-af)), erf(af), np.floor(af), np.ceil(af),
              np.where(af < bf, af, bf * 2), np.rint(af)]
    for k, e in enumerate(expect):
        np.testing.assert_allclose(ref["C"][:, k].astype(np.float64), e, rtol=10 * tol, atol=10 * tol,
                                   err_msg=FUNCS[k])


def test_pow_needs_a_float_unless_the_exponent_is_an_integer_constant() -> None:
    """An integer constant exponent is exact repeated products; any other is C's ``pow``, which needs a
    float operand (numpy's integer power fails on negative exponents)."""
    assert parse_expr("pow(f[i], 0.5)", SCOPE) == parse_expr("f[i] ** 0.5", SCOPE)
    for text in ("i32[i] ** i", "pow(i8[i], i32[i])", "i ** N"):
        with pytest.raises(pt.TypeCheckError, match="cast the base to a float"):
            infer(parse_expr(text, SCOPE), lambda a: ARRAY_TYPES[a], lambda s: INT32)


POW_BASES = [-2.0, -2.0, -0.5, 0.0, -0.0, 0.0, 1.0, 2.5, -1.0, float("nan"), 4.0, -float("inf"), 3.0, -3.0, 1e-3, 7.0]
POW_EXPONENTS = [3.0, 0.5, 2.0, -1.0, 0.5, 0.0, float("nan"), 1.5, float("inf"), 0.0, -0.5, 0.5, 2.0, -2.0, 1.7, 0.25]


def _pow_program(dt: str) -> pt.Program:
    p = pt.Program(f"pow_{dt}", params=["N"])
    for a in "AB":
        p.array(a, ("N",), dt)
    p.array("C", ("N", 3), dt)
    with p.loop("i", 0, "N"):
        p.assign("C[i, 0] = A[i] ** B[i]")
        p.assign("C[i, 1] = A[i] ** 0.5")
        p.assign("C[i, 2] = pow(A[i], float32(i) / 4)")
    return p


def _pow_expected(dt: str) -> np.ndarray:
    """C's pow, through ** on numpy scalars (np.power of an array by 0.5 takes a square root instead)."""
    t = np.dtype(dt).type
    with np.errstate(all="ignore"):
        return np.array([[t(x) ** t(y), t(x) ** t(0.5), t(x) ** t(np.float32(i) / 4)]
                         for i, (x, y) in enumerate(zip(POW_BASES, POW_EXPONENTS))], dt)


@pytest.mark.cc
@pytest.mark.parametrize("dt, tol", [("float64", 1e-15), ("float32", 1e-6), ("float16", 1e-3)])
def test_pow_agrees_with_numpy(dt: str, tol: float) -> None:
    """NaN for a finite negative base and a non-integer exponent, the sign of odd integer powers, C's
    special cases (pow(x, 0) = pow(1, y) = 1, pow(-inf, 0.5) = inf): compiled code, reference, numpy."""
    n = len(POW_BASES)
    args = {"A": np.array(POW_BASES, dt), "B": np.array(POW_EXPONENTS, dt), "C": np.zeros((n, 3), dt)}
    ref = assert_agree(_pow_program(dt), args, exact=False, rtol=tol, atol=tol)
    np.testing.assert_allclose(ref["C"], _pow_expected(dt), rtol=tol, atol=tol, equal_nan=True)
    assert np.isnan(ref["C"][0:2, 1]).tolist() == [True, True] and ref["C"][0, 0] == -8.0


@pytest.mark.interp
@pytest.mark.parametrize("dt, tol", [("float64", 1e-13), ("float32", 1e-6)])
def test_pow_in_triton_agrees_with_the_reference(dt: str, tol: float) -> None:
    """Triton has no pow: exp(y log|x|) in float64 with the sign and NaN cases of C's pow."""
    n = len(POW_BASES)
    args = {"A": np.array(POW_BASES, dt), "B": np.array(POW_EXPONENTS, dt), "C": np.zeros((n, 3), dt)}
    got, ref = {k: v.copy() for k, v in args.items()}, {k: v.copy() for k, v in args.items()}
    p = _pow_program(dt)
    pt.compile(p, target="nvgpu")(**got)
    pt.reference(p, **ref)
    np.testing.assert_allclose(got["C"], ref["C"], rtol=tol, atol=tol, equal_nan=True)
    np.testing.assert_allclose(got["C"], _pow_expected(dt), rtol=tol, atol=tol, equal_nan=True)


INT_FUNCS = ["abs(A[i])", "min(A[i], B[i])", "max(A[i], B[i])", "floor(A[i])", "ceil(A[i])",
             "where(A[i] < B[i], A[i], B[i])", "abs(A[i] - 100)", "round(A[i])"]


@pytest.mark.cc
@pytest.mark.parametrize("dt", ["int8", "uint8", "int32", "int64"])
def test_integer_functions_agree(dt: str) -> None:
    p = pt.Program(f"ifuncs_{dt}", params=["N"])
    p.array("A", ("N",), dt)
    p.array("B", ("N",), dt)
    p.array("C", ("N", len(INT_FUNCS)), dt)
    with p.loop("i", 0, "N"):
        for k, f in enumerate(INT_FUNCS):
            p.assign(f"C[i, {k}] = {f}")
    info = np.iinfo(dt)
    a = np.array([info.min, info.min + 1, -5, -1, 0, 1, 7, info.max], np.int64).astype(dt)  # uint8: wrapped
    b = np.array([0, -3, 3, info.max, info.min, 2, -7, 1], np.int64).astype(dt)
    ref = assert_agree(p, {"A": a, "B": b, "C": np.zeros((len(a), len(INT_FUNCS)), dt)}, exact=True)
    np.testing.assert_array_equal(ref["C"][:, 1], np.minimum(a, b))
    np.testing.assert_array_equal(ref["C"][:, 2], np.maximum(a, b))
    np.testing.assert_array_equal(ref["C"][:, 3], a)
    np.testing.assert_array_equal(ref["C"][:, 0], np.abs(a))  # abs(min) wraps to min, as in numpy


@pytest.mark.cc
def test_exp_of_integers_is_float64() -> None:
    p = pt.Program("iexp", params=["N"])
    p.array("A", ("N",), "int32")
    p.array("C", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("C[i] = exp(A[i]) + sqrt(A[i] * A[i]) + A[i] / 4")
    a = np.arange(-5, 5, dtype=np.int32)
    ref = assert_agree(p, {"A": a, "C": np.zeros(10)}, exact=False, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(ref["C"], np.exp(a) + np.abs(a) + a / 4, rtol=1e-14)


@pytest.mark.cc
def test_casts_agree() -> None:
    p = pt.Program("casts", params=["N"])
    p.array("D", ("N",), "float64")
    p.array("F", ("N",), "float32")
    p.array("H", ("N",), "float16")
    p.array("I8", ("N",), "int8")
    p.array("I32", ("N",), "int32")
    p.array("Bo", ("N",), "bool")
    p.array("X", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("F[i] = float32(D[i]) * float32(3)")            # rounded to float32 before the product
        p.assign("H[i] = float16(D[i]) + float16(F[i])")
        p.assign("I8[i] = int8(D[i] * 10)")                       # truncation toward zero
        p.assign("I32[i] = int32(D[i] * 1000) + int32(i)")
        p.assign("Bo[i] = bool(I32[i])")
        p.assign("X[i] = float64(float32(D[i])) - D[i] + float64(I8[i])")
    d = np.concatenate([RNG.uniform(-12, 12, N - 4), [0.0, -0.04, 0.15, 12.7]])
    args = {"D": d, "F": np.zeros(N, np.float32), "H": np.zeros(N, np.float16), "I8": np.zeros(N, np.int8),
            "I32": np.zeros(N, np.int32), "Bo": np.zeros(N, bool), "X": np.zeros(N)}
    ref = assert_agree(p, args, exact=True)
    np.testing.assert_array_equal(ref["F"], d.astype(np.float32) * np.float32(3))
    np.testing.assert_array_equal(ref["I8"], np.trunc(d * 10).astype(np.int8))
    np.testing.assert_array_equal(ref["I32"], np.trunc(d * 1000).astype(np.int32) + np.arange(N))
    np.testing.assert_array_equal(ref["Bo"], ref["I32"] != 0)
    np.testing.assert_array_equal(ref["X"], d.astype(np.float32).astype(np.float64) - d + ref["I8"])


@pytest.mark.cc
@pytest.mark.parametrize("dt, value", [("float16", 0.1), ("bfloat16", 0.1), ("float32", 0.1), ("float64", 0.1),
                                       ("int8", -7), ("int32", 123456), ("int64", -(2**40)), ("bool", True)])
def test_scalar_arguments_of_each_dtype(dt: str, value: Any) -> None:
    p = pt.Program(f"scal_{dt}", params=["N"])
    p.array("C", ("N",), dt)
    p.scalar("s", dt)
    with p.loop("i", 0, "N"):
        p.assign("C[i] = where(i < 2, s, C[i])")
    if dt == "bfloat16":
        c = torch.zeros(4, dtype=torch.bfloat16)
        ref = assert_agree(p, {"C": c, "s": value}, exact=True)
        assert ref["C"][0].item() == torch.tensor(value, dtype=torch.bfloat16).item()
        return
    ref = assert_agree(p, {"C": np.zeros(4, dt), "s": value}, exact=True)
    assert ref["C"].tolist() == [np.array(value, dt).item()] * 2 + [0] * 2


@pytest.mark.cc
@pytest.mark.parametrize("src", ["float32", "float16"])
@pytest.mark.parametrize("dst", ["int8", "int32", "int64"])
def test_cast_narrow_floats_to_int_agree(src: str, dst: str) -> None:
    p = pt.Program(f"f2i_{src}_{dst}", params=["N"])
    p.array("A", ("N",), src)
    p.array("C", ("N",), dst)
    p.array("D", ("N",), dst)
    with p.loop("i", 0, "N"):
        p.assign(f"C[i] = {dst}(A[i] * 10.0)")   # explicit cast: truncation toward zero
        p.assign("D[i] = A[i]")                  # implicit conversion on store
    a = np.array([-12.5, -1.99, -0.5, 0.0, 0.75, 3.25, 9.9], src)
    ref = assert_agree(p, {"A": a, "C": np.zeros(7, dst), "D": np.zeros(7, dst)}, exact=True)
    # A[i] * 10.0 is computed in A's type (the literal is weak): float32(9.9) * 10 rounds to 99.0
    np.testing.assert_array_equal(ref["C"], np.trunc(a * a.dtype.type(10.0)).astype(dst))
    np.testing.assert_array_equal(ref["D"], np.trunc(a).astype(dst))


_CRASH_SCRIPT = r"""
import numpy as np, polytri as pt
p = pt.Program("minover", params=["N"])
for n in "ABQR":
    p.array(n, ("N",), "int64")
with p.loop("i", 0, "N"):
    p.assign("Q[i] = A[i] // B[i]")
    p.assign("R[i] = A[i] % B[i]")
k = pt.compile(p)
a = np.array([-2**63, 7], np.int64); b = np.array([-1, -1], np.int64)
q = np.zeros(2, np.int64); r = np.zeros(2, np.int64)
k(A=a, B=b, Q=q, R=r)
q2 = np.zeros(2, np.int64); r2 = np.zeros(2, np.int64)
pt.reference(p, A=a, B=b, Q=q2, R=r2)
print(q.tolist(), r.tolist(), q2.tolist(), r2.tolist())
"""


@pytest.mark.cc
def test_int64_min_floordiv_minus_one_does_not_crash() -> None:
    """INT64_MIN // -1 and % -1 used to trap (SIGFPE) in C and kill the process; run in a subprocess."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _CRASH_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"the process died with status {proc.returncode}: {proc.stderr[-2000:]}"
    q, r, q2, r2 = (eval(part) for part in proc.stdout.strip().replace("] [", "]|[").split("|"))
    assert (q, r) == (q2, r2)
    assert q[1] == -7 and r == [0, 0]


def test_equal_constants_of_different_types_keep_their_types() -> None:
    from polytri.ir.expr import Const
    from polytri.ir.types import Typer
    t = Typer(lambda a: FLOAT64, lambda s: FLOAT64)
    assert t(Const(2)) == W(INT64)
    assert t(Const(2.0)) == W(FLOAT64)
    assert t(Const(1)) == W(INT64)
    assert t(Const(True)) == W(BOOL)


@pytest.mark.cc
def test_int8_times_float_constant_in_a_program_that_also_uses_the_int() -> None:
    p = pt.Program("memo", params=["N"])
    p.array("A", ("N",), "int8")
    p.array("O", ("N",), "float64")
    p.array("Q", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("O[i] = A[i] * 2 + 0.0")
        p.assign("Q[i] = A[i] * 2.0")
    ref = assert_agree(p, {"A": np.array([100, 3], np.int8), "O": np.zeros(2), "Q": np.zeros(2)}, exact=True)
    np.testing.assert_array_equal(ref["O"], [-56.0, 6.0])   # int8 product wraps, then converts
    np.testing.assert_array_equal(ref["Q"], [200.0, 6.0])   # int8 * weak float is float64: no wrap
