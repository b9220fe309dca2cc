"""The canonical text form of a program, and its parser: ``parse_program(program_to_text(p)) == p``.

    program NAME [P1, P2]
    context <isl parameter set>
    array A [N, N + 1] float64
    scalar alpha float64
    statement S0 (0, 1, 0) <isl domain>
      B[i, j] = <expression>

Sets are in isl notation, bodies in polytri's expression language; blank lines and ``#`` comments are
ignored by the parser.
"""

from __future__ import annotations

import re

import islpy as isl

from ..errors import ParseError
from .builder import check_identifier
from .expr import Binary, Expr
from .parse import NameKind, Scope, parse_assign, parse_expr
from .printer import expr_to_str
from .program import Array, Program, Scalar, Statement


def program_to_text(p: Program) -> str:
    """Canonical text of a program."""
    lines = [f"program {p.name} [{', '.join(p.params)}]", f"context {p.context}"]
    for a in p.arrays:
        lines.append(f"array {a.name} [{', '.join(expr_to_str(e) for e in a.shape)}] {a.dtype}")
    for s in p.scalars:
        lines.append(f"scalar {s.name} {s.dtype}")
    for st in p.statements:
        lines.append(f"statement {st.name} ({', '.join(map(str, st.position))}) {st.domain}")
        lines.append(f"  {st.text()}")
    return "\n".join(lines) + "\n"


_HEADER = re.compile(r"program\s+(\w+)\s*\[([^\]]*)\]$")
_ARRAY = re.compile(r"array\s+(\w+)\s*\[(.*)\]\s*(\w+)$")
_SCALAR = re.compile(r"scalar\s+(\w+)\s+(\w+)$")
_STMT = re.compile(r"statement\s+(\w+)\s*\(([\d,\s]*)\)\s*(.+)$")


def parse_program(text: str) -> Program:
    """Parse the canonical text form back into a :class:`Program`."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise ParseError("empty program text")

    def fail(n: int, why: str) -> ParseError:
        return ParseError(f"program text, line {n + 1}: {why}\n    {lines[n]}")

    m = _HEADER.match(lines[0].strip())
    if not m:
        raise fail(0, "expected 'program NAME [PARAMS]'")
    name = m.group(1)
    params = tuple(x.strip() for x in m.group(2).split(",") if x.strip())
    context = isl.Set(f"[{', '.join(params)}] -> {{ : }}")
    arrays: list[Array] = []
    scalars: list[Scalar] = []
    statements: list[Statement] = []
    names: dict[str, NameKind] = {p: "param" for p in params}
    n = 1
    while n < len(lines):
        line = lines[n].strip()
        if line.startswith("context "):
            context = isl.Set(line[len("context "):])
        elif (ma := _ARRAY.match(line)):
            shape_scope = Scope({p: "param" for p in params})
            shape = tuple(parse_expr(x, shape_scope, what=f"shape of {ma.group(1)}")
                          for x in ma.group(2).split(",") if x.strip())
            arrays.append(Array(ma.group(1), shape, ma.group(3)))
            names[ma.group(1)] = "array"
        elif (ms := _SCALAR.match(line)):
            scalars.append(Scalar(ms.group(1), ms.group(2)))
            names[ms.group(1)] = "scalar"
        elif (mt := _STMT.match(line)):
            if n + 1 >= len(lines):
                raise fail(n, "statement without a body line")
            sname = mt.group(1)
            check_identifier(sname, "statement")
            position = tuple(int(x) for x in mt.group(2).split(",") if x.strip())
            dom = isl.Set(mt.group(3))
            iters = tuple(str(dom.get_dim_name(isl.dim_type.set, i)) for i in range(dom.dim(isl.dim_type.set)))
            scope = Scope({**names, **{it: "iter" for it in iters}})
            parsed = parse_assign(lines[n + 1], scope, what=f"statement {sname}")
            value: Expr = parsed.value
            if parsed.op != "=":
                value = Binary(parsed.op[0], parsed.target, parsed.value)
            statements.append(Statement(sname, dom, iters, parsed.target, value, position))
            n += 1
        else:
            raise fail(n, "expected a context, array, scalar or statement line")
        n += 1
    return Program(name, params, tuple(arrays), tuple(scalars), tuple(statements), context)
