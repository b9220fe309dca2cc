"""The polyhedral IR: programs, arrays, scalars and statements (all immutable).

A statement instance is a point of the statement's iteration domain (an isl set whose tuple is named
after the statement and whose dimensions are named after its iterators).  Each statement writes one
array element and reads the accesses of its right-hand side; both are isl maps from the domain to the
array's index space.  The original execution order is kept as a *position*: at each loop level, the
rank of the statement's enclosing loop (or of the statement itself) among its siblings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import islpy as isl

from .. import dtypes
from ..errors import ProgramError
from .affine import to_isl
from .expr import Access, Expr, accesses
from .indirect import has_indirect, isl_subscripts
from .printer import expr_to_str

_T = TypeVar("_T")


def params_prefix(params: tuple[str, ...]) -> str:
    """The ``[N, M] -> `` prefix of isl notation."""
    return f"[{', '.join(params)}] -> "


@dataclass(frozen=True, slots=True)
class Array:
    """A multi-dimensional array argument, row-major (C order)."""

    name: str
    """Name used in statements and as the keyword argument of a call."""
    shape: tuple[Expr, ...]
    """Extent of each dimension: an affine expression in the parameters."""
    dtype: str
    """Canonical element type name (see :mod:`polytri.dtypes`)."""

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element(self) -> dtypes.DType:
        return dtypes.dtype(self.dtype)

    def extent_isl(self, params: tuple[str, ...]) -> isl.Set:
        """The set of valid indices ``{ A[x] : 0 <= x_d < shape_d }``."""
        xs = [f"x{d}" for d in range(self.rank)]
        cons = [f"0 <= {x} < {to_isl(s, what=f'shape of {self.name}')}" for x, s in zip(xs, self.shape)]
        body = f" : {' and '.join(cons)}" if cons else ""
        return isl.Set(f"{params_prefix(params)}{{ {self.name}[{', '.join(xs)}]{body} }}")


@dataclass(frozen=True, slots=True)
class Scalar:
    """A run-time scalar argument (read-only inside the program)."""

    name: str
    """Name used in statements and as the keyword argument of a call."""
    dtype: str
    """Canonical element type name."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One assignment ``target = value`` executed for every point of ``domain``."""

    name: str
    """``S0``, ``S1``, ... in the order added (or the name given to ``Program.statement``)."""
    domain: isl.Set
    """Iteration domain; tuple named ``name``, dimensions named ``iterators``."""
    iterators: tuple[str, ...]
    """Names of the domain dimensions, outermost first."""
    target: Access
    """The written element."""
    value: Expr
    """The stored value; an update ``A[i] += e`` is kept as ``A[i] = A[i] + e``."""
    position: tuple[int, ...]
    """Rank among siblings at each loop level (``len(iterators) + 1`` entries): the original order."""

    @property
    def reads(self) -> tuple[Access, ...]:
        """Accesses read by the right-hand side, in order, duplicates kept."""
        return tuple(accesses(self.value))

    def access_map(self, acc: Access, params: tuple[str, ...], shape: tuple[Expr, ...] | None = None) -> isl.Map:
        """``{ S[i] -> A[f(i)] }`` restricted to the domain.

        An indirect subscript (:mod:`polytri.ir.indirect`) ranges over its whole dimension, which
        ``shape`` (the array's) gives; :meth:`Program.access_map` passes it."""
        taken = set(params) | set(self.iterators)
        subs, cons = isl_subscripts(acc, shape, taken, what=self.name)
        body = f" : {' and '.join(cons)}" if cons else ""
        m = isl.Map(f"{params_prefix(params)}{{ {self.name}[{', '.join(self.iterators)}] -> "
                    f"{acc.array}[{', '.join(subs)}]{body} }}")
        return m.intersect_domain(self.domain)

    def text(self) -> str:
        """The assignment in the expression language."""
        return f"{expr_to_str(self.target)} = {expr_to_str(self.value)}"


def _statement_key(s: Statement) -> tuple[object, ...]:
    """The parts of a statement that hash consistently with its ``==`` (all but the isl domain)."""
    return (s.name, s.iterators, s.target, s.value, s.position)


@dataclass(frozen=True, slots=True)
class Program:
    """A whole loop program: the unit that is analysed, scheduled and compiled."""

    name: str
    """Name of the program (and of the generated function)."""
    params: tuple[str, ...]
    """Symbolic integer sizes, in declaration order."""
    arrays: tuple[Array, ...]
    """Array arguments, in declaration order."""
    scalars: tuple[Scalar, ...]
    """Scalar arguments, in declaration order."""
    statements: tuple[Statement, ...]
    """Statements, in the order they were added."""
    context: isl.Set
    """Constraints assumed on the parameters (a parameter-only set)."""
    _cache: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False, hash=False)
    """Memo of derived objects (not part of the value).  Not an argument of the constructor, so every
    program, ``dataclasses.replace``'s included, starts with its own empty memo."""

    def __str__(self) -> str:
        """The canonical text form (:func:`polytri.ir.textform.parse_program` reads it back)."""
        lines = [f"program {self.name} [{', '.join(self.params)}]", f"context {self.context}"]
        lines += [f"array {a.name} [{', '.join(expr_to_str(e) for e in a.shape)}] {a.dtype}" for a in self.arrays]
        lines += [f"scalar {s.name} {s.dtype}" for s in self.scalars]
        for st in self.statements:
            lines += [f"statement {st.name} ({', '.join(map(str, st.position))}) {st.domain}", f"  {st.text()}"]
        return "\n".join(lines) + "\n"

    def __hash__(self) -> int:
        """Hash of the value, consistent with ``==``.

        The isl sets (domains, context) are left out: ``==`` compares them with ``is_equal``, and isl's
        hash is not the same for every representation of one set."""
        return hash((self.name, self.params, self.arrays, self.scalars,
                     tuple(_statement_key(s) for s in self.statements)))

    # -- lookups -------------------------------------------------------------------------------------
    def array(self, name: str) -> Array:
        for a in self.arrays:
            if a.name == name:
                return a
        raise ProgramError(f"program {self.name!r} has no array {name!r}")

    def scalar(self, name: str) -> Scalar:
        for s in self.scalars:
            if s.name == name:
                return s
        raise ProgramError(f"program {self.name!r} has no scalar {name!r}")

    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise ProgramError(f"program {self.name!r} has no statement {name!r}")

    def readers(self, array: str) -> frozenset[str]:
        """The statements that read ``array``."""
        return frozenset(s.name for s in self.statements if any(a.array == array for a in s.reads))

    @property
    def depth(self) -> int:
        """Deepest loop nesting of any statement."""
        return max((len(s.iterators) for s in self.statements), default=0)

    def access_map(self, st: Statement, acc: Access) -> isl.Map:
        """The access map of ``acc`` (an access of ``st``), indirect subscripts over-approximated."""
        return st.access_map(acc, self.params, self.array(acc.array).shape)

    # -- the polyhedral model as islpy objects ---------------------------------------------------------
    def _memo(self, key: str, make: Callable[[], _T]) -> _T:
        """``make()``, computed once per program and kept under ``key`` (used by analyses elsewhere too,
        e.g. :func:`polytri.ir.verify.bounds_violations`)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @property
    def domain(self) -> isl.UnionSet:
        """Union of all iteration domains."""
        def make() -> isl.UnionSet:
            u = isl.UnionSet.empty(self.context.get_space())
            for s in self.statements:
                u = u.union(isl.UnionSet.from_set(s.domain))
            return u.intersect_params(self.context)
        return self._memo("domain", make)

    @property
    def writes(self) -> isl.UnionMap:
        """Union of the write accesses ``{ S[i] -> A[...] }``."""
        def make() -> isl.UnionMap:
            u = isl.UnionMap.empty(self.context.get_space())
            for s in self.statements:
                u = u.union(isl.UnionMap.from_map(self.access_map(s, s.target)))
            return u.intersect_params(self.context)
        return self._memo("writes", make)

    @property
    def reads(self) -> isl.UnionMap:
        """Union of the read accesses."""
        def make() -> isl.UnionMap:
            u = isl.UnionMap.empty(self.context.get_space())
            for s in self.statements:
                for acc in s.reads:
                    u = u.union(isl.UnionMap.from_map(self.access_map(s, acc)))
            return u.intersect_params(self.context)
        return self._memo("reads", make)

    @property
    def reads_indirectly(self) -> bool:
        """Whether some statement reads through an indirect subscript (:mod:`.indirect`)."""
        return self._memo("reads_indirectly", lambda: any(has_indirect(s.value) for s in self.statements))

    @property
    def schedule(self) -> isl.UnionMap:
        """The original execution order as a map to a ``2d+1``-dimensional time space."""
        def make() -> isl.UnionMap:
            width = 2 * self.depth + 1
            u = isl.UnionMap.empty(self.context.get_space())
            for s in self.statements:
                time: list[str] = []
                for k, it in enumerate(s.iterators):
                    time += [str(s.position[k]), it]
                time.append(str(s.position[len(s.iterators)]))
                time += ["0"] * (width - len(time))
                m = isl.Map(f"{params_prefix(self.params)}{{ {s.name}[{', '.join(s.iterators)}] -> "
                            f"[{', '.join(time)}] }}")
                u = u.union(isl.UnionMap.from_map(m.intersect_domain(s.domain)))
            return u.intersect_params(self.context)
        return self._memo("schedule", make)
