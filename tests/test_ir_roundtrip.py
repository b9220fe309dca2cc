"""Round trips of the canonical text forms: ``parse(print(x)) == x`` for expressions and programs."""

from __future__ import annotations

import math

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytri as pt
from polytri import dtypes
from polytri.ir.expr import (
    BINARY_OPS,
    FUNCTIONS,
    Access,
    Binary,
    Call,
    Cast,
    Const,
    Unary,
    Var,
)
from polytri.ir.parse import Scope, parse_expr
from polytri.ir.printer import expr_to_str
from polytri.ir.program import Program
from polytri.ir.textform import parse_program, program_to_text

SCOPE = Scope({"i": "iter", "j": "iter", "N": "param", "M": "param", "alpha": "scalar", "beta": "scalar",
               "A": "array", "B": "array"})
RANKS = {"A": 1, "B": 2}

def deterministic(max_examples: int) -> settings:
    """``max_examples`` examples under the shared profile (tests/conftest.py: deterministic, no database)."""
    return settings(max_examples=max_examples)


def strict_repr(e: object) -> str:
    """repr distinguishes Const(1), Const(1.0) and Const(True), which == does not."""
    return repr(e)


# -- expression strategies ---------------------------------------------------------------------------
ints = st.integers(min_value=-(10**12), max_value=10**12).map(Const)
floats = st.floats(allow_nan=False, allow_infinity=False).map(Const)
bools = st.booleans().map(Const)
consts = st.one_of(ints, floats, bools)
iters = st.sampled_from([Var("i", "iter"), Var("j", "iter")])
names = st.one_of(iters, st.sampled_from([Var("N", "param"), Var("M", "param"), Var("alpha", "scalar"),
                                          Var("beta", "scalar")]))


@st.composite
def affine(draw: st.DrawFn) -> object:
    """An affine subscript: c0 + sum(c_k * name_k), sometimes with a floor division or modulo."""
    terms = []
    for v in draw(st.lists(st.sampled_from([Var("i", "iter"), Var("j", "iter"), Var("N", "param")]),
                           max_size=3)):
        c = draw(st.integers(-3, 3))
        terms.append(v if c == 1 else Binary("*", Const(c), v))
    const = draw(st.integers(-5, 5))
    e = terms[0] if terms else Const(const)
    for t in terms[1:]:
        e = Binary(draw(st.sampled_from(["+", "-"])), e, t)
    if terms and const:
        e = Binary("+", e, Const(const))
    if draw(st.booleans()) and terms:
        e = Binary(draw(st.sampled_from(["//", "%"])), e, Const(draw(st.integers(1, 4))))
    return e


@st.composite
def access(draw: st.DrawFn) -> Access:
    name = draw(st.sampled_from(sorted(RANKS)))
    return Access(name, tuple(draw(affine()) for _ in range(RANKS[name])))


def _not_numeric_const(e: object) -> bool:
    # the parser folds -<numeric literal> into a negative constant, so Unary('-', Const(number)) is not
    # a tree the parser can build
    return not (isinstance(e, Const) and not isinstance(e.value, bool))


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    unary = children.filter(_not_numeric_const).map(lambda e: Unary("-", e))
    binary = st.builds(Binary, st.sampled_from(BINARY_OPS), children, children)
    calls = st.sampled_from(sorted(FUNCTIONS)).flatmap(
        lambda f: st.tuples(*[children] * FUNCTIONS[f]).map(lambda args, f=f: Call(f, args)))
    casts = st.builds(Cast, st.sampled_from(sorted(dtypes.ALL)), children)
    return st.one_of(unary, binary, calls, casts)


exprs = st.recursive(st.one_of(consts, names, access()), _extend, max_leaves=12)


@deterministic(600)
@given(exprs)
def test_expr_roundtrip(e: object) -> None:
    text = expr_to_str(e)
    back = parse_expr(text, SCOPE)
    assert back == e, text
    assert strict_repr(back) == strict_repr(e), text
    # printing is canonical: the text of the parsed tree is the same text
    assert expr_to_str(back) == text


@deterministic(300)
@given(st.sampled_from(BINARY_OPS), st.sampled_from(BINARY_OPS), exprs, exprs, exprs)
def test_binary_nesting_roundtrip(op1: str, op2: str, a: object, b: object, c: object) -> None:
    """Both associations of two operators: parentheses must be placed exactly where needed."""
    for e in (Binary(op1, Binary(op2, a, b), c), Binary(op1, a, Binary(op2, b, c))):
        text = expr_to_str(e)
        assert parse_expr(text, SCOPE) == e, text


@pytest.mark.parametrize("e, text", [
    (Unary("-", Binary("**", Var("i", "iter"), Const(2))), "-i ** 2"),
    (Binary("**", Unary("-", Var("i", "iter")), Const(2)), "(-i) ** 2"),
    (Binary("**", Const(-2), Var("i", "iter")), "(-2) ** i"),
    (Binary("**", Var("i", "iter"), Binary("**", Var("j", "iter"), Const(2))), "i ** j ** 2"),
    (Binary("**", Binary("**", Var("i", "iter"), Var("j", "iter")), Const(2)), "(i ** j) ** 2"),
    (Binary("-", Var("i", "iter"), Binary("-", Var("j", "iter"), Const(1))), "i - (j - 1)"),
    (Binary("-", Binary("-", Var("i", "iter"), Var("j", "iter")), Const(1)), "i - j - 1"),
    (Binary("/", Var("i", "iter"), Binary("*", Var("j", "iter"), Const(2))), "i / (j * 2)"),
    (Binary("==", Binary("<", Var("i", "iter"), Var("j", "iter")), Const(True)), "(i < j) == True"),
    (Binary("*", Const(-3), Var("i", "iter")), "-3 * i"),
    (Cast("float32", Binary("+", Var("i", "iter"), Const(1))), "float32(i + 1)"),
    (Call("where", (Binary("<", Var("i", "iter"), Const(0)), Const(1.5), Var("alpha", "scalar"))),
     "where(i < 0, 1.5, alpha)"),
])
def test_printer_parenthesization(e: object, text: str) -> None:
    assert expr_to_str(e) == text
    assert parse_expr(text, SCOPE) == e


def test_parser_folds_negative_literals_and_unary_plus() -> None:
    assert strict_repr(parse_expr("-3", SCOPE)) == strict_repr(Const(-3))
    assert strict_repr(parse_expr("-2.5", SCOPE)) == strict_repr(Const(-2.5))
    assert parse_expr("+i", SCOPE) == Var("i", "iter")
    assert parse_expr("-i", SCOPE) == Unary("-", Var("i", "iter"))
    # a bool is not folded: -True stays a negation
    assert strict_repr(parse_expr("-True", SCOPE)) == strict_repr(Unary("-", Const(True)))


def test_infinities_roundtrip_and_nan_is_rejected() -> None:
    for v in (math.inf, -math.inf):
        e = Binary("+", Var("alpha", "scalar"), Const(v))
        back = parse_expr(expr_to_str(e), SCOPE)
        assert back == e
    with pytest.raises(ValueError):
        expr_to_str(Const(math.nan))


def test_casts_accept_aliases_and_store_canonical_names() -> None:
    assert parse_expr("f32(i)", SCOPE) == Cast("float32", Var("i", "iter"))
    assert parse_expr("double(alpha)", SCOPE) == Cast("float64", Var("alpha", "scalar"))


def test_names_resolve_to_their_kind() -> None:
    e = parse_expr("A[i + N] * alpha + M", SCOPE)
    assert e == Binary("+", Binary("*", Access("A", (Binary("+", Var("i", "iter"), Var("N", "param")),)),
                                   Var("alpha", "scalar")), Var("M", "param"))


# -- program round trips ------------------------------------------------------------------------------
BODIES = [
    "A[{a}, {b}] = A[{a}, {b}] * alpha + 1.0",
    "A[{a}, {b}] += B[{a}] * B[{b}]",
    "B[{a}] = where(A[{a}, {b}] > 0.0, sqrt(A[{a}, {b}]), -A[{a}, {b}])",
    "B[{a}] -= float64(C[{a}, {b}]) / 3",
    "C[{a}, {b}] = int32(A[{a}, {b}]) // 2 + {a} % 3",
    "C[{a}, {b}] *= 2",
    "A[{a}, {b}] = max(A[{a}, {b}], exp(-B[{b}])) ** 2",
]


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """Random builder programs: nested and sequenced loops, triangular and min/max bounds, guards."""
    p = pt.Program("rand", params=["N", "M"])
    if draw(st.booleans()):
        p.assume("M <= N")
    if draw(st.booleans()):
        p.assume("N >= 4")
    p.array("A", ("N", "N"), "float64")
    p.array("B", ("N",), "float64")
    p.array("C", ("N + 1", "M"), draw(st.sampled_from(["int32", "int64"])))
    p.scalar("alpha", draw(st.sampled_from(["float32", "float64"])))

    def body(iters: list[str]) -> None:
        a = iters[0] if iters else "0"
        b = iters[-1] if iters else "0"
        p.assign(draw(st.sampled_from(BODIES)).format(a=a, b=b))

    def block(iters: list[str], depth: int) -> None:
        for _ in range(draw(st.integers(1, 2))):
            kind = draw(st.sampled_from(["stmt", "loop", "loop", "when"])) if depth < 3 else "stmt"
            if kind == "stmt":
                body(iters)
            elif kind == "when":
                cond = draw(st.sampled_from(["{v} % 2 == 0", "{v} < M", "{v} != 1", "2 * {v} >= N - 1"]))
                v = iters[-1] if iters else "N"
                with p.when(cond.format(v=v), negate=draw(st.booleans())):
                    block(iters, depth + 1)
            else:
                var = "ijk"[len(iters)]
                outer = iters[-1] if iters else None
                los = ["0", "1"] + ([outer, f"max(0, {outer} - 2)"] if outer else [])
                his = ["N", "min(N, M)"] + ([f"{outer} + 1", f"min(N, {outer} + 3)"] if outer else [])
                lo, hi = draw(st.sampled_from(los)), draw(st.sampled_from(his))
                with p.loop(var, int(lo) if lo.isdigit() else lo, hi):
                    block(iters + [var], depth + 1)

    block([], 0)
    if draw(st.booleans()):
        p.statement(f"S{len(p.statements) + 10}",
                    f"[N, M] -> {{ S{len(p.statements) + 10}[x, y] : 0 <= x < N and 0 <= y < M and y <= x }}",
                    "C[x, y] = C[x, y] + x - y")
    return p.build()


@deterministic(60)
@given(programs())
def test_program_roundtrip(prog: Program) -> None:
    text = program_to_text(prog)
    back = parse_program(text)
    assert back == prog, text
    # isl may print a re-parsed set differently (redundant constraints dropped), so the text is compared
    # through a second round trip rather than character by character
    assert parse_program(program_to_text(back)) == prog
    for s, t in zip(back.statements, prog.statements, strict=True):
        assert s.name == t.name and s.position == t.position and s.iterators == t.iterators
        assert s.domain.is_equal(t.domain)
        assert strict_repr(s.value) == strict_repr(t.value)
    # the derived polyhedral model is the same
    assert back.domain.is_equal(prog.domain)
    assert back.reads.is_equal(prog.reads)
    assert back.writes.is_equal(prog.writes)
    assert back.schedule.is_equal(prog.schedule)


def _example_program() -> pt.Program:
    p = pt.Program("tri", params=["N", "M"])
    p.assume("M <= N")
    p.assume("M >= 1")
    p.array("A", ("N", "N + 1"), "float32")
    p.array("x", ("N",), "float32")
    p.scalar("alpha", "float32")
    with p.loop("i", 0, "N"):
        p.assign("x[i] = 0.0")
        with p.loop("j", 0, "min(i + 1, M)"):
            p.assign("x[i] += A[i, j] * alpha")
        with p.loop("j", "max(0, i - 2)", "i"):
            with p.when("j % 2 == 0"):
                p.assign("A[i, j + 1] = -x[j] ** 2")
    p.statement("S9", "[N] -> { S9[i] : 0 <= i < N }", "A[i, i] = 1.0")
    return p


def test_program_roundtrip_example() -> None:
    p = _example_program()
    prog = p.build()
    text = program_to_text(prog)
    back = parse_program(text)
    assert back == prog
    assert [s.name for s in back.statements] == ["S0", "S1", "S2", "S9"]
    assert back.context.is_equal(isl.Set("[N, M] -> { : 1 <= M <= N }"))
    assert back.statement("S1").value == Binary("+", Access("x", (Var("i", "iter"),)),
                                                Binary("*", Access("A", (Var("i", "iter"), Var("j", "iter"))),
                                                       Var("alpha", "scalar")))
    assert back.statement("S9").position == (1, 0)
    assert str(p) == text


def test_program_equality_sees_differences() -> None:
    """The round-trip property would be vacuous if unequal programs compared equal."""
    base = _example_program().build()
    text = program_to_text(base)
    variants = [
        text.replace("A[i, i] = 1.0", "A[i, i] = 2.0"),
        text.replace("array x [N] float32", "array x [N] float64"),
        text.replace("statement S9 (1, 0)", "statement S9 (2, 0)"),
        text.replace("M <= N", "M < N") if "M <= N" in text else text.replace("N >= M", "N > M"),
        text.replace("program tri", "program tri2"),
    ]
    for v in variants:
        assert v != text
        assert parse_program(v) != base, v


def test_parse_program_ignores_comments_and_blank_lines() -> None:
    prog = _example_program().build()
    text = "# a comment\n\n" + program_to_text(prog).replace("\n", "\n\n")
    assert parse_program(text) == prog


@pytest.mark.parametrize("bad", ["", "programme x []", "program x [N]\nfrobnicate\n",
                                 "program x [N]\narray A [N] float64\nstatement S0 (0, 0) [N] -> { S0[i] : 0 <= i < N }\n"])
def test_parse_program_errors_are_parse_errors(bad: str) -> None:
    with pytest.raises(pt.ParseError):
        parse_program(bad)
