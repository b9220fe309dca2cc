"""The IR contract (issue 21): a program's memo is its own, the verifier is a list of named checks, and
the text parser reports every bad input as a :class:`~polytri.errors.ParseError` naming the line."""

from __future__ import annotations

from dataclasses import replace

import islpy as isl
import pytest

import polytri as pt
from polytri import dtypes
from polytri.ir import CHECKS, Check
from polytri.ir.program import Program
from polytri.ir.textform import parse_program, program_to_text
from polytri.ir.verify import bounds_violations, verify


def _two_statements(shift: int = 0) -> Program:
    """``S0`` writes ``A``, ``S1`` writes ``B`` (out of bounds when ``shift`` > 0)."""
    p = pt.Program("two", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float32")
    p.scalar("alpha", "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = alpha")
        p.assign(f"B[i] = A[i] + {shift}" if shift == 0 else f"B[i + {shift}] = A[i]")
    return p.build()


def _unbounded() -> Program:
    p = pt.Program("unb", params=["N"])
    p.array("A", ("N",), "float64")
    p.statement("S0", "[N] -> { S0[i] : i >= 0 }", "A[0] = 1.0")
    return p.build()


# -- 1. the memo is never shared -------------------------------------------------------------------------
def test_replace_starts_with_an_empty_memo() -> None:
    prog = _two_statements()
    both = prog.writes  # fills the memo
    first = replace(prog, statements=prog.statements[:1])
    assert first._cache == {}
    assert not first.writes.is_equal(both)
    assert first.writes.is_equal(isl.UnionMap("[N] -> { S0[i] -> A[i] : 0 <= i < N }"))
    assert prog.writes.is_equal(both)  # the original's memo is untouched by the copy's analyses
    assert first.domain.is_equal(isl.UnionSet("[N] -> { S0[i] : 0 <= i < N }"))


def test_replace_does_not_reuse_memoized_verifier_results() -> None:
    bad = _two_statements(shift=1)
    assert [v.statement for v in bounds_violations(bad)] == ["S1"]
    fixed = replace(bad, statements=bad.statements[:1])
    assert bounds_violations(fixed) == ()
    verify(fixed)


def test_the_memo_is_not_a_constructor_argument() -> None:
    prog = _two_statements()
    assert not prog.writes.is_empty() and "writes" in prog._cache
    assert replace(prog)._cache == {}
    with pytest.raises(ValueError):
        replace(prog, _cache=prog._cache)  # an init=False field: no one can hand a memo over


def test_equal_programs_compare_and_hash_equal() -> None:
    prog = _two_statements()
    again = parse_program(program_to_text(prog))
    assert not prog.writes.is_empty()  # a filled memo is not part of the value
    assert again == prog and hash(again) == hash(prog)
    assert replace(prog) == prog and hash(replace(prog)) == hash(prog)
    assert len({prog, again, replace(prog)}) == 1


def test_programs_differing_in_statements_differ() -> None:
    prog = _two_statements()
    text = program_to_text(prog)
    changed = parse_program(text.replace("B[i] = A[i] + 0", "B[i] = A[i] + 1"))
    assert [s.name for s in changed.statements] == [s.name for s in prog.statements]
    assert changed != prog and hash(changed) != hash(prog)
    moved = parse_program(text.replace("statement S1 (0, 1)", "statement S1 (0, 2)"))
    assert moved != prog and hash(moved) != hash(prog)
    fewer = replace(prog, statements=prog.statements[:1])
    assert fewer != prog and hash(fewer) != hash(prog)


# -- 2. the verifier: a list of named checks -------------------------------------------------------------
def test_checks_are_named_and_documented() -> None:
    assert [c.name for c in CHECKS] == ["bounded-domains", "in-bounds", "index-arrays"]
    assert all(isinstance(c, Check) and c.doc and callable(c.run) for c in CHECKS)
    with pytest.raises(AttributeError):
        CHECKS[0].name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(("prog", "cls", "name", "words"), [
    (_unbounded, pt.ProgramError, "bounded-domains", ["S0", "unbounded"]),
    (lambda: _two_statements(shift=1), pt.BoundsError, "in-bounds",
     ["S1", "B[i + 1]", "'B'", "out of bounds", "whenever the statement runs"]),
])
def test_a_failing_check_is_named(prog, cls: type, name: str, words: list[str]) -> None:
    with pytest.raises(cls) as info:
        verify(prog())
    msg = str(info.value)
    assert msg.startswith("statement S"), msg  # the culprit first, as before (polytri.testing.fuzz relies on it)
    assert msg.splitlines()[0].endswith(f" [verifier check {name!r}]"), msg
    for w in words:
        assert w in msg, msg


def test_verify_runs_the_given_checks_in_order() -> None:
    ran: list[str] = []
    log = [Check(n, f"records {n}", lambda p, n=n: ran.append(n)) for n in ("first", "second")]
    verify(_two_statements(shift=1), checks=log)  # the bounds check is not among them
    assert ran == ["first", "second"]

    def refuse(p: Program) -> None:
        raise pt.ProgramError(f"{p.name} is refused")

    with pytest.raises(pt.ProgramError, match=r"^two is refused \[verifier check 'refuse'\]$"):
        verify(_two_statements(), checks=[log[0], Check("refuse", "always fails", refuse), log[1]])
    assert ran == ["first", "second", "first"]

    def refuse_with_caret(p: Program) -> None:
        raise pt.ParseError("bad text\n    A[i]\n    ^")

    with pytest.raises(pt.ParseError) as info:
        verify(_two_statements(), checks=[Check("caret", "keeps the caret last", refuse_with_caret)])
    assert str(info.value) == "bad text [verifier check 'caret']\n    A[i]\n    ^"
    verify(_two_statements())  # the default list accepts a good program


# -- 3. the text parser ----------------------------------------------------------------------------------
def _line_of(text: str, start: str) -> int:
    return next(n for n, ln in enumerate(text.splitlines(), 1) if ln.startswith(start))


@pytest.mark.parametrize(("old", "new", "what"), [
    ("array B [N] float32", "array B [N] float33", "array 'B'"),
    ("scalar alpha float64", "scalar alpha complex128", "scalar 'alpha'"),
])
def test_unknown_dtype_is_a_parse_error(old: str, new: str, what: str) -> None:
    text = "# a comment\n\n" + program_to_text(_two_statements()).replace(old, new)
    bad = new.split()[-1]
    with pytest.raises(pt.ParseError) as info:
        parse_program(text)
    msg = str(info.value)
    assert f"line {_line_of(text, new)}:" in msg, msg  # counted in the text as given, comments included
    assert f"unknown dtype {bad!r} of {what}" in msg, msg
    assert f"known: {', '.join(dtypes.ALL)}" in msg, msg
    assert msg.endswith(f"    {new}\n    {' ' * new.index(bad)}{'^' * len(bad)}"), msg


def test_dtype_aliases_are_read_as_canonical_names() -> None:
    prog = _two_statements()
    text = program_to_text(prog).replace("array B [N] float32", "array B [N] f32")
    assert parse_program(text) == prog
    assert parse_program(text).array("B").dtype == "float32"


@pytest.mark.parametrize(("old", "new", "start", "words"), [
    ("0 <= i < N }", "0 <= i < N and }", "statement S0", ["domain of statement S0", "isl set", "syntax error"]),
    ("context [N] -> {  :  }", "context [N] -> { : N >= }", "context", ["context", "isl set"]),
    ("program two [N]", "program two [N M]", "program", ["parameters", "isl"]),
])
def test_isl_syntax_error_is_a_parse_error(old: str, new: str, start: str, words: list[str]) -> None:
    text = program_to_text(_two_statements())
    assert old in text, text
    text = "\n" + text.replace(old, new, 1)
    with pytest.raises(pt.ParseError) as info:
        parse_program(text)
    assert not isinstance(info.value, isl.Error)
    msg = str(info.value)
    assert f"line {_line_of(text, start)}:" in msg, msg
    for w in words:
        assert w in msg, msg
    assert "/isl/" not in msg, msg  # isl's own source location is no use to a reader


def test_body_errors_name_the_line() -> None:
    text = program_to_text(_two_statements()).replace("A[i] = alpha", "A[i] = alpha +")
    with pytest.raises(pt.ParseError) as info:
        parse_program(text)
    assert str(info.value).startswith(f"program text, line {_line_of(text, '  A[i] = alpha +')}: "), info.value


def test_a_built_program_prints_its_canonical_text() -> None:
    prog = _two_statements()
    assert str(prog) == program_to_text(prog) and str(prog).startswith("program ")
    assert parse_program(str(prog)) == prog
