"""A schedule under construction as rows: one affine function per statement for each time dimension."""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..ir.program import Program, params_prefix


@dataclass(frozen=True)
class Row:
    """One schedule dimension: an affine function per statement."""

    coeffs: dict[str, tuple[int, ...]]
    """Iterator coefficients per statement (all zero for a scalar dimension)."""
    consts: dict[str, int]
    """Constant term per statement."""
    scalar: bool
    """A distribution (cut) dimension rather than a loop."""

    def text(self, stmt: str, iterators: tuple[str, ...]) -> str:
        terms = [(c, it) for c, it in zip(self.coeffs[stmt], iterators) if c]
        s = " + ".join(it if c == 1 else f"{c}*{it}" for c, it in terms)
        k = self.consts[stmt]
        if not s:
            return str(k)
        return f"{s} + {k}" if k > 0 else (f"{s} - {-k}" if k < 0 else s)


def union_map(program: Program, rows: list[Row], only: frozenset[str] | None = None) -> isl.UnionMap:
    """The rows as one union map over the statements' domains (those named in ``only``, if given)."""
    union = isl.UnionMap.empty(program.context.get_space())
    for st in program.statements:
        if only is not None and st.name not in only:
            continue
        dims = [r.text(st.name, st.iterators) for r in rows]
        m = isl.Map(f"{params_prefix(program.params)}{{ {st.name}[{', '.join(st.iterators)}] -> [{', '.join(dims)}] }}")
        union = union.union(isl.UnionMap.from_map(m.intersect_domain(st.domain)))
    return union.intersect_params(program.context)
