"""The canonical text form of a program, and its parser: ``parse_program(program_to_text(p)) == p``.

    program NAME [P1, P2]
    context <isl parameter set>
    array A [N, N + 1] float64
    scalar alpha float64
    statement S0 (0, 1, 0) <isl domain>
      B[i, j] = <expression>

Sets are in isl notation, bodies in polytri's expression language; blank lines and ``#`` comments are
ignored by the parser.  Dtypes are those of :mod:`polytri.dtypes` (an alias such as ``f32`` is read as
its canonical name).  Every error of the parser names the line it is on, counted in the text as given.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import islpy as isl

from .. import dtypes
from ..errors import ParseError, PolytriError, TypeCheckError, caret
from .expr import Binary, Expr
from .names import check_identifier
from .parse import NameKind, Scope, parse_assign, parse_expr
from .program import Array, Program, Scalar, Statement


def program_to_text(p: Program) -> str:
    """Canonical text of a program (``str(p)``)."""
    return str(p)


_HEADER = re.compile(r"program\s+(\w+)\s*\[([^\]]*)\]$")
_CONTEXT = re.compile(r"context\s+(.+)$")
_ARRAY = re.compile(r"array\s+(\w+)\s*\[(.*)\]\s*(\w+)$")
_SCALAR = re.compile(r"scalar\s+(\w+)\s+(\w+)$")
_STMT = re.compile(r"statement\s+(\w+)\s*\(([\d,\s]*)\)\s*(.+)$")
_WHERE = "program text, line"


@dataclass(frozen=True)
class _Line:
    """One significant line of the program text."""

    number: int
    """1-based, counted in the text as given (blank and comment lines included)."""
    text: str
    """The line without trailing white space."""

    @property
    def indent(self) -> int:
        """Columns of leading white space: where the stripped text starts."""
        return len(self.text) - len(self.text.lstrip())

    def fail(self, why: str, column: int | None = None, width: int = 1) -> ParseError:
        """A :class:`ParseError` naming this line, with a caret under ``column`` when given."""
        return ParseError(f"{_WHERE} {self.number}: {why}\n{caret(self.text, column, width=width)}")

    def column(self, m: re.Match[str], group: int) -> int:
        """Column of a group of a match against the stripped line."""
        return self.indent + m.start(group)

    def span(self, m: re.Match[str], group: int) -> tuple[int, int]:
        """Column and width of a group of a match against the stripped line."""
        return self.column(m, group), len(m.group(group))


def _lines(text: str) -> list[_Line]:
    """The lines that are neither blank nor ``#`` comments."""
    return [_Line(n, ln.rstrip()) for n, ln in enumerate(text.splitlines(), 1)
            if ln.strip() and not ln.lstrip().startswith("#")]


@contextmanager
def _located(line: _Line) -> Iterator[None]:
    """Errors raised while reading ``line`` name it: same class, message prefixed with the line."""
    try:
        yield
    except PolytriError as exc:
        if str(exc).startswith(_WHERE):
            raise
        located = type(exc)(f"{_WHERE} {line.number}: {exc}")
        raise located.with_traceback(exc.__traceback__) from None


def _isl_reason(exc: isl.Error) -> str:
    """isl's complaint without the call and isl's source location, e.g. ``syntax error``."""
    reason = str(exc).split(" failed: ", 1)[-1]
    return re.sub(r" in \S+:\d+$", "", reason).strip() or "rejected"


def _isl_set(line: _Line, text: str, what: str, span: tuple[int, int]) -> isl.Set:
    """``isl.Set(text)``; isl's error becomes a :class:`ParseError` naming ``line`` and ``what``, with a
    caret under ``span`` (column, width) of the line."""
    try:
        return isl.Set(text)
    except isl.Error as exc:
        raise line.fail(f"cannot parse {what} as an isl set (isl: {_isl_reason(exc)})", *span) from None


def _dtype(line: _Line, m: re.Match[str], group: int, what: str) -> str:
    """The canonical name of the dtype in ``group`` (aliases allowed); an unknown one is a ParseError."""
    given = m.group(group)
    try:
        return dtypes.dtype(given).name
    except TypeCheckError:
        raise line.fail(f"unknown dtype {given!r} of {what}; known: {', '.join(dtypes.ALL)}",
                        *line.span(m, group)) from None


class _Reader:
    """The declarations read so far by one :func:`parse_program` call (mutable while it runs)."""

    def __init__(self, header: _Line) -> None:
        m = _HEADER.match(header.text.strip())
        if not m:
            raise header.fail("expected 'program NAME [PARAMS]'")
        self.name = m.group(1)
        self.params = tuple(x.strip() for x in m.group(2).split(",") if x.strip())
        self.context = _isl_set(header, f"[{', '.join(self.params)}] -> {{ : }}",
                                f"the parameters [{m.group(2)}]", header.span(m, 2))
        self.arrays: list[Array] = []
        self.scalars: list[Scalar] = []
        self.statements: list[Statement] = []
        self.names: dict[str, NameKind] = {p: "param" for p in self.params}

    def read(self, lines: list[_Line], n: int) -> int:
        """Read the declaration starting at ``lines[n]``; return the index of the next one."""
        line = lines[n]
        text = line.text.strip()
        with _located(line):
            if m := _CONTEXT.match(text):
                self.context = _isl_set(line, m.group(1), "the context", line.span(m, 1))
            elif m := _ARRAY.match(text):
                self.array(line, m)
            elif m := _SCALAR.match(text):
                self.scalar(line, m)
            elif m := _STMT.match(text):
                if n + 1 >= len(lines):
                    raise line.fail("statement without a body line")
                self.statement(line, m, lines[n + 1])
                return n + 2
            else:
                raise line.fail("expected a context, array, scalar or statement line")
        return n + 1

    def array(self, line: _Line, m: re.Match[str]) -> None:
        """``array NAME [SHAPE] DTYPE``."""
        name = m.group(1)
        shape_scope = Scope({p: "param" for p in self.params})
        shape = tuple(parse_expr(x, shape_scope, what=f"shape of {name}") for x in m.group(2).split(",") if x.strip())
        self.arrays.append(Array(name, shape, _dtype(line, m, 3, f"array {name!r}")))
        self.names[name] = "array"

    def scalar(self, line: _Line, m: re.Match[str]) -> None:
        """``scalar NAME DTYPE``."""
        name = m.group(1)
        self.scalars.append(Scalar(name, _dtype(line, m, 2, f"scalar {name!r}")))
        self.names[name] = "scalar"

    def statement(self, line: _Line, m: re.Match[str], body: _Line) -> None:
        """``statement NAME (POSITION) DOMAIN`` and its body line."""
        sname = m.group(1)
        check_identifier(sname, "statement")
        position = tuple(int(x) for x in m.group(2).split(",") if x.strip())
        dom = _isl_set(line, m.group(3), f"the domain of statement {sname}", line.span(m, 3))
        iters = tuple(str(dom.get_dim_name(isl.dim_type.set, i)) for i in range(dom.dim(isl.dim_type.set)))
        scope = Scope({**self.names, **{it: "iter" for it in iters}})
        with _located(body):
            parsed = parse_assign(body.text, scope, what=f"statement {sname}")
        value: Expr = parsed.value
        if parsed.op != "=":
            value = Binary(parsed.op[0], parsed.target, parsed.value)
        self.statements.append(Statement(sname, dom, iters, parsed.target, value, position))

    def program(self) -> Program:
        """The program read."""
        return Program(self.name, self.params, tuple(self.arrays), tuple(self.scalars), tuple(self.statements),
                       self.context)


def parse_program(text: str) -> Program:
    """Parse the canonical text form back into a :class:`Program`.

    Every error is a :class:`~polytri.errors.PolytriError` (a :class:`ParseError` for text that is not
    in the form: an unknown dtype, a set isl cannot read...) whose message starts with
    ``program text, line N:``, N counted in ``text`` as given."""
    lines = _lines(text)
    if not lines:
        raise ParseError("empty program text")
    reader = _Reader(lines[0])
    n = 1
    while n < len(lines):
        n = reader.read(lines, n)
    return reader.program()
