"""Direct construction of programs: ``pt.Program`` (see docs/guide.md).

The builder is the one mutable object of the IR: it collects declarations and statements, checks each
as it arrives (names, ranks, affinity, types), and freezes into an immutable
:class:`polytri.ir.program.Program` on demand.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import islpy as isl

from .. import dtypes
from ..dtypes import VType
from ..errors import ProgramError, TypeCheckError, public
from .affine import condition_to_isl, to_isl
from .expr import Binary, Const, Expr, accesses
from .indirect import check_subscript
from .names import check_identifier
from .parse import AUG_OPS, NameKind, Scope, parse_assign, parse_expr
from .printer import expr_to_str
from .program import Array, Program, Scalar, Statement, params_prefix
from .textform import program_to_text
from .types import Typer, check_literals, infer

ShapeEntry = int | str
Bound = int | str


@dataclass
class _Frame:
    """An open ``with p.loop(...)`` or ``with p.when(...)`` block."""

    var: str | None
    """Iterator of a loop; ``None`` for a guard."""
    constraint: str
    """isl constraint text the block adds to the statements inside it."""
    negated: bool = False
    """For a guard: the statements run where ``constraint`` does not hold."""
    index: int = 0
    """Rank of this loop among its siblings (its entry in the statements' positions)."""
    children: int = 0
    """Statements and loops opened so far directly inside this loop."""


@dataclass
class _State:
    params: tuple[str, ...]
    arrays: dict[str, Array] = field(default_factory=dict)
    scalars: dict[str, Scalar] = field(default_factory=dict)
    statements: list[Statement] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    stack: list[_Frame] = field(default_factory=list)
    top_children: int = 0


class ProgramBuilder:
    """Builds a :class:`~polytri.ir.program.Program`; exported as ``polytri.Program``."""

    def __init__(self, name: str, params: Sequence[str] = ()):
        check_identifier(name, "program")
        if isinstance(params, str):
            params = [p.strip() for p in params.split(",") if p.strip()]
        for p in params:
            check_identifier(p, "parameter")
        if len(set(params)) != len(params):
            raise ProgramError(f"program {name!r}: duplicate parameter names in {list(params)}")
        self.name = name
        self._s = _State(tuple(params))
        self._frozen: Program | None = None

    # -- declarations ----------------------------------------------------------------------------------
    def _names(self) -> dict[str, NameKind]:
        names: dict[str, NameKind] = {p: "param" for p in self._s.params}
        names.update({a: "array" for a in self._s.arrays})
        names.update({s: "scalar" for s in self._s.scalars})
        names.update({f.var: "iter" for f in self._s.stack if f.var is not None})
        return names

    def _declare(self, name: str, what: str) -> None:
        check_identifier(name, what)
        if name in self._names():
            raise ProgramError(f"program {self.name!r}: {what} {name!r} clashes with the "
                               f"{self._names()[name]} of the same name")
        self._frozen = None

    @public
    def array(self, name: str, shape: Sequence[ShapeEntry], dtype: str = "float64") -> Array:
        """Declare an array; shape entries are ints, parameter names or affine strings in parameters."""
        self._declare(name, "array")
        if isinstance(shape, (int, str)):
            shape = (shape,)
        if len(shape) == 0:
            raise ProgramError(f"array {name!r}: arrays need at least one dimension (use shape (1,))")
        scope = Scope({p: "param" for p in self._s.params})
        dims: list[Expr] = []
        for d, entry in enumerate(shape):
            e = Const(entry) if isinstance(entry, int) else parse_expr(str(entry), scope, what=f"shape of array {name!r}")
            to_isl(e, what=f"array {name!r}: dimension {d} of the shape")
            if isinstance(entry, int) and entry < 0:
                raise ProgramError(f"array {name!r}: dimension {d} has negative extent {entry}")
            dims.append(e)
        arr = Array(name, tuple(dims), dtypes.dtype(dtype).name)
        self._s.arrays[name] = arr
        return arr

    @public
    def scalar(self, name: str, dtype: str = "float64") -> Scalar:
        """Declare a run-time scalar argument."""
        self._declare(name, "scalar")
        sc = Scalar(name, dtypes.dtype(dtype).name)
        self._s.scalars[name] = sc
        return sc

    @public
    def assume(self, constraint: str) -> None:
        """Add an affine constraint on the parameters (``"M <= N"``) to the program's context."""
        scope = Scope({p: "param" for p in self._s.params})
        text = condition_to_isl(parse_expr(constraint, scope, what="assumption"), what=f"assumption {constraint!r}")
        self._s.context.append(text)
        self._frozen = None

    # -- loops and guards ----------------------------------------------------------------------------
    def _bound(self, value: Bound, var: str, which: str) -> str:
        what = f"{which} bound of loop {var!r}"
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ProgramError(f"{what}: expected an int or an affine string, got {value!r}")
        # arrays and scalars are in scope so that using one gives a precise "not affine" error
        e = Const(value) if isinstance(value, int) else parse_expr(value, Scope(self._names()), what=what)
        return to_isl(e, what=what, allow_minmax=True)

    @public
    def loop(self, var: str, lo: Bound, hi: Bound) -> AbstractContextManager[str]:
        """Open a loop ``for var in [lo, hi)``; bounds are affine in parameters and enclosing iterators.
        Checked when called, so an error points at the ``with`` line, without polytri's frames."""
        check_identifier(var, "iterator")
        if var in self._names():
            raise ProgramError(f"loop iterator {var!r} clashes with the {self._names()[var]} of the same name")
        lo_s, hi_s = self._bound(lo, var, "lower"), self._bound(hi, var, "upper")
        frame = _Frame(var, f"{lo_s} <= {var} < {hi_s}", index=self._claim_position())
        return self._open(frame, var)

    @public
    def when(self, condition: str, *, negate: bool = False) -> AbstractContextManager[None]:
        """Guard the statements inside by an affine condition (or its negation)."""
        scope = Scope(self._names())
        e = parse_expr(condition, scope, what="condition")
        frame = _Frame(None, condition_to_isl(e, what=f"condition {condition!r}"), negated=negate)
        return self._open(frame, None)

    @contextmanager
    def _open(self, frame: _Frame, value: Any) -> Iterator[Any]:
        self._s.stack.append(frame)
        try:
            yield value
        finally:
            self._s.stack.pop()

    def _loops(self) -> list[_Frame]:
        return [f for f in self._s.stack if f.var is not None]

    def _claim_position(self, *, commit: bool = True) -> int:
        """Rank of the next child of the innermost open loop (taken unless ``commit`` is false)."""
        loops = self._loops()
        rank = loops[-1].children if loops else self._s.top_children
        if commit:
            if loops:
                loops[-1].children += 1
            else:
                self._s.top_children += 1
        return rank

    # -- statements ----------------------------------------------------------------------------------
    def _next_name(self) -> str:
        name = f"S{len(self._s.statements)}"
        if any(s.name == name for s in self._s.statements):
            raise ProgramError(f"program {self.name!r}: statement name {name!r} is already taken by an explicit statement")
        return name

    @public
    def assign(self, text: str) -> str:
        """Add ``A[...] = expr`` (or ``+=``, ``-=``, ``*=``, ``/=``) inside the open loops; returns its name."""
        name = self._next_name()
        loops = self._loops()
        iters = tuple(f.var for f in loops if f.var is not None)
        positive = [f.constraint for f in self._s.stack if not f.negated]
        body = f" : {' and '.join(positive)}" if positive else ""
        dom = isl.Set(f"{params_prefix(self._s.params)}{{ {name}[{', '.join(iters)}]{body} }}")
        for f in self._s.stack:
            if f.negated:
                cut = isl.Set(f"{params_prefix(self._s.params)}{{ {name}[{', '.join(iters)}] : {f.constraint} }}")
                dom = dom.subtract(cut)
        position = tuple(f.index for f in loops) + (self._claim_position(commit=False),)
        stmt = self._make_statement(name, dom, iters, position, text)
        self._claim_position()  # only once the statement is accepted: a rejected one leaves no trace
        self._add(stmt)
        return name

    @public
    def statement(self, name: str, domain: str | isl.Set, body: str) -> str:
        """Add a statement with an explicit isl iteration domain, after everything added so far."""
        check_identifier(name, "statement")
        if self._s.stack:
            raise ProgramError(f"statement {name!r}: explicit-domain statements must be added outside loops")
        if any(s.name == name for s in self._s.statements):
            raise ProgramError(f"program {self.name!r}: duplicate statement name {name!r}")
        try:
            dom = domain if isinstance(domain, isl.Set) else isl.Set(domain)
        except isl.Error as exc:
            raise ProgramError(f"statement {name!r}: cannot parse the domain {domain!r}: {exc}") from None
        if dom.get_tuple_name() != name:
            raise ProgramError(f"statement {name!r}: the domain's tuple is named {dom.get_tuple_name()!r}, expected {name!r}")
        for i in range(dom.dim(isl.dim_type.param)):
            pname = dom.get_dim_name(isl.dim_type.param, i)
            if pname not in self._s.params:
                raise ProgramError(f"statement {name!r}: the domain uses {pname!r}, which is not a parameter "
                                   f"of program {self.name!r} (parameters: {list(self._s.params)})")
        iters = tuple(dom.get_dim_name(isl.dim_type.set, i) or "" for i in range(dom.dim(isl.dim_type.set)))
        for it in iters:
            if not it:
                raise ProgramError(f"statement {name!r}: every dimension of the domain needs a name")
            check_identifier(it, "iterator")
            if it in self._names():
                raise ProgramError(f"statement {name!r}: iterator {it!r} clashes with the {self._names()[it]} of the same name")
        full = isl.Set(f"{params_prefix(self._s.params)}{{ {name}[{', '.join(iters)}] }}")
        dom = dom.align_params(full.get_space()).intersect(full)
        position = (self._claim_position(commit=False),) + (0,) * len(iters)
        stmt = self._make_statement(name, dom, iters, position, body, extra_iters=iters)
        self._claim_position()
        self._add(stmt)
        return name

    def _make_statement(self, name: str, dom: isl.Set, iters: tuple[str, ...], position: tuple[int, ...],
                        text: str, extra_iters: tuple[str, ...] = ()) -> Statement:
        names = self._names()
        names.update({it: "iter" for it in extra_iters})
        what = f"statement {name} ({text.strip()!r})"
        parsed = parse_assign(text, Scope(names), what=what)
        target = parsed.target
        value: Expr = parsed.value
        if parsed.op != "=":
            value = Binary(AUG_OPS[parsed.op], target, value)
        typer = Typer(lambda a: self._s.arrays[a].element, lambda s: dtypes.dtype(self._s.scalars[s].dtype))
        for acc in accesses(value) + [target]:
            arr = self._s.arrays[acc.array]
            if len(acc.index) != arr.rank:
                raise TypeCheckError(f"{what}: array {acc.array!r} has rank {arr.rank} but is subscripted with "
                                     f"{len(acc.index)} index(es) in {expr_to_str(acc)}")
            for d, ix in enumerate(acc.index):
                where = f"{what}: subscript {d} of {acc.array!r}"
                if acc is target:  # writes are affine
                    to_isl(ix, what=where)
                else:
                    check_subscript(ix, lambda a: self._s.arrays[a].element, typer, what=where)
        try:
            infer(value, lambda a: self._s.arrays[a].element, lambda s: dtypes.dtype(self._s.scalars[s].dtype))
            check_literals(VType(self._s.arrays[target.array].element), (value,), value)
        except TypeCheckError as exc:
            raise TypeCheckError(f"{what}: {exc}") from None
        return Statement(name, dom.set_tuple_name(name), iters, target, value, position)

    def _add(self, stmt: Statement) -> None:
        self._s.statements.append(stmt)
        self._frozen = None

    # -- freezing and introspection ------------------------------------------------------------------
    def build(self) -> Program:
        """The immutable program built so far (cached until the next change)."""
        if self._frozen is None:
            ctx_text = " and ".join(self._s.context)
            ctx = isl.Set(f"{params_prefix(self._s.params)}{{ : {ctx_text} }}" if ctx_text
                          else f"{params_prefix(self._s.params)}{{ : }}")
            self._frozen = Program(self.name, self._s.params, tuple(self._s.arrays.values()),
                                   tuple(self._s.scalars.values()), tuple(self._s.statements), ctx)
        return self._frozen

    @property
    def params(self) -> tuple[str, ...]:
        return self._s.params

    @property
    def domain(self) -> isl.UnionSet:
        return self.build().domain

    @property
    def reads(self) -> isl.UnionMap:
        return self.build().reads

    @property
    def writes(self) -> isl.UnionMap:
        return self.build().writes

    @property
    def schedule(self) -> isl.UnionMap:
        return self.build().schedule

    @property
    def arrays(self) -> tuple[Array, ...]:
        return tuple(self._s.arrays.values())

    @property
    def scalars(self) -> tuple[Scalar, ...]:
        return tuple(self._s.scalars.values())

    @property
    def statements(self) -> tuple[Statement, ...]:
        return tuple(self._s.statements)

    def __str__(self) -> str:
        return program_to_text(self.build())

    def __repr__(self) -> str:
        return f"<polytri.Program {self.name!r}: {len(self._s.statements)} statement(s)>"


def to_program(p: object) -> Program:
    """Accept a frozen program, a builder, or a ``@pt.kernel`` object."""
    if isinstance(p, Program):
        return p
    if isinstance(p, ProgramBuilder):
        return p.build()
    prog = getattr(p, "program", None)
    if isinstance(prog, Program):
        return prog
    raise ProgramError(f"expected a polytri Program (or @pt.kernel), got {type(p).__name__}")

