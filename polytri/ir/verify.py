"""The verifier: small named checks, separate from the transformations.

:data:`CHECKS` lists them in the order :func:`verify` runs them; each is a :class:`Check` with a name, a
one-line description and a function that raises a :class:`~polytri.errors.PolytriError` on a bad program.
The first line of a failing check's error ends with ``[verifier check 'NAME']``.  A pass can run a
subset, or add its own checks: ``verify(program, checks=(*CHECKS, Check("mine", "...", my_check)))``.

``check_bounded_domains``: every iteration domain is finite for each parameter value.

``check_bounds``: every access of every statement is compared by isl with its array's extent, for every
parameter value allowed by the context (parameters are sizes: never negative).  An indirect subscript
(:mod:`polytri.ir.indirect`) ranges over its whole dimension, so this proves its index array's read in
bounds; the values read are checked at call time, before anything runs
(:func:`polytri.runtime.index_check.check_index_values`).  An access that leaves
its array *whenever its statement runs at all* is a :class:`BoundsError` at compile time.  One that
leaves it only for some parameter values is recorded as a :class:`BoundsViolation`: the set of those
values is checked at call time by :func:`polytri.runtime.args.bind`, before anything runs.  Generated C has no
bounds checks, so the two together are what make it memory-safe; the reference interpreter relies on
them too (numpy would wrap negative indices silently).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import islpy as isl

from ..errors import BoundsError, ParameterBoundsError, PolytriError, ProgramError
from .expr import Access
from .indirect import index_reads, is_indirect
from .islutil import fix_params
from .printer import expr_to_str
from .program import Program, Statement, params_prefix


@dataclass(frozen=True)
class BoundsViolation:
    """An access that leaves its array for some (not necessarily all) parameter values."""

    statement: str
    """Name of the statement (``S0``...)."""
    text: str
    """The statement in the expression language."""
    kind: str
    """``"read"`` or ``"write"``."""
    subscript: str
    """The access as written, e.g. ``A[i + 1]``."""
    array: str
    """Name of the accessed array."""
    shape: str
    """The array's declared shape, e.g. ``(N, N)``."""
    params: isl.Set
    """Parameter values (within the context) for which some instance of the access is out of bounds."""
    always: bool
    """The access is out of bounds for every parameter value for which its statement runs."""
    instances: isl.Map
    """The out-of-bounds instances: statement instance -> element outside the array."""
    iterators: tuple[str, ...]
    """The statement's iterators."""

    def example(self, params: dict[str, int] | None = None) -> str:
        """One out-of-bounds instance (for the given parameter values), e.g. ``N=1: i=0 reads A[0, 1]``."""
        bad = self.instances
        if params is not None:
            bad = bad.intersect_params(fix_params(isl.Set.universe(bad.get_space().params()), params))
        return _example(self.iterators, self.array, self.kind, bad)

    def describe(self) -> str:
        """The culprit: statement, access and array."""
        return (f"statement {self.statement} ({self.text}): the {self.kind} {self.subscript} is out of bounds "
                f"of array {self.array!r} of shape {self.shape}")


def analysis_context(program: Program) -> isl.Set:
    """The parameter values a call may bind: the program's context with every parameter ``>= 0``."""
    def make() -> isl.Set:
        if not program.params:
            return program.context
        cons = " and ".join(f"{p} >= 0" for p in program.params)
        nonneg = isl.Set(f"{params_prefix(program.params)}{{ : {cons} }}")
        return program.context.intersect(nonneg.align_params(program.context.get_space()))
    return program._memo("analysis_context", make)


def _point_text(pt: isl.Point, kind: isl.dim_type) -> list[str]:
    space = pt.get_space()
    return [f"{space.get_dim_name(kind, i)}={pt.get_coordinate_val(kind, i).to_python()}"
            for i in range(space.dim(kind))]


def _example(iterators: tuple[str, ...], array: str, kind: str, bad: isl.Map) -> str:
    """``N=1: i=0 reads A[0, 1]`` for one point of ``bad`` (instance -> out-of-bounds element)."""
    pt = bad.wrap().sample_point()
    if pt.is_void():
        return "?"
    space = pt.get_space()
    coords = [pt.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(space.dim(isl.dim_type.set))]
    n = len(iterators)
    its = ", ".join(f"{it}={v}" for it, v in zip(iterators, coords[:n]))
    params = ", ".join(_point_text(pt, isl.dim_type.param))
    verb = "reads" if kind == "read" else "writes"
    where = f"{params}: " if params else ""
    return f"{where}{its + ' ' if its else ''}{verb} {array}[{', '.join(map(str, coords[n:]))}]"


def _violation(program: Program, st: Statement, acc: Access, kind: str) -> BoundsViolation | None:
    arr = program.array(acc.array)
    ctx = analysis_context(program)
    access = program.access_map(st, acc).intersect_params(ctx)
    extent = arr.extent_isl(program.params)
    bad = access.subtract_range(extent)
    if bad.is_empty():
        return None
    bad_params = bad.domain().params()
    runs = st.domain.intersect_params(ctx).params()
    return BoundsViolation(st.name, st.text(), kind, expr_to_str(acc), arr.name,
                           f"({', '.join(expr_to_str(e) for e in arr.shape)})", bad_params,
                           runs.is_subset(bad_params), bad, st.iterators)


def bounds_violations(program: Program) -> tuple[BoundsViolation, ...]:
    """Every access that may leave its array, with the parameter values for which it does (memoized)."""
    def make() -> tuple[BoundsViolation, ...]:
        check_bounded_domains(program)
        found = []
        for st in program.statements:
            for acc, kind in [(st.target, "write")] + [(a, "read") for a in st.reads]:
                v = _violation(program, st, acc, kind)
                if v is not None:
                    found.append(v)
        return tuple(found)
    return program._memo("bounds_violations", make)


def check_bounds(program: Program) -> None:
    """Raise :class:`BoundsError` for an access that is out of bounds whenever its statement runs.

    Accesses out of bounds only for some parameter values are left to the call-time check of
    :func:`polytri.runtime.args.bind` (see :func:`bounds_violations`)."""
    for v in bounds_violations(program):
        if v.always:
            raise BoundsError(
                f"{v.describe()} whenever the statement runs, for example {v.example()}. "
                f"Restrict the loop bounds, or change the subscript or the array's shape")


def check_call_bounds(program: Program, params: dict[str, int]) -> None:
    """Raise :class:`~polytri.errors.ParameterBoundsError` when ``params`` make an access leave its
    array (the run-time half of :func:`check_bounds`)."""
    for v in bounds_violations(program):
        if not fix_params(v.params, params).is_empty():
            values = ", ".join(f"{k}={params[k]}" for k in program.params)
            if v.always:  # no size at which the statement runs is in bounds: the program must change
                advice = ("it leaves the array at every size at which the statement runs. Nothing was run. "
                          "Restrict the loop bounds, or change the subscript or the array's shape")
            else:
                advice = (f"it leaves the array for the parameter values {v.params}. Nothing was run. Pass other "
                          f"sizes, or constrain the parameters with Program.assume()")
            raise ParameterBoundsError(
                f"{program.name}: with {values}, {v.describe()}, for example {v.example(params)}; {advice}")


def check_bounded_domains(program: Program) -> None:
    """Every iteration domain is finite for each value of the parameters."""
    for st in program.statements:
        if not st.domain.intersect_params(program.context).is_bounded():
            raise ProgramError(f"statement {st.name} ({st.text()}): its iteration domain {st.domain} is "
                               f"unbounded; every iterator needs a lower and an upper bound")


def check_index_arrays(program: Program) -> None:
    """Writes are affine, and no index array (an array read in an indirect subscript) is written by the
    program: its values must be known, and checked, before the program runs."""
    written = {st.target.array: st for st in program.statements}
    for st in program.statements:
        if is_indirect(st.target):
            raise ProgramError(f"statement {st.name} ({st.text()}): the write {expr_to_str(st.target)} has an "
                               f"indirect subscript; only reads may be indirect")
        for acc in st.reads:
            for idx in index_reads(acc):
                if idx.array in written:
                    w = written[idx.array]
                    raise ProgramError(f"statement {st.name} ({st.text()}): index array {idx.array!r} of "
                                       f"{expr_to_str(acc)} is written by statement {w.name} ({w.text()}); index "
                                       f"arrays must be inputs of the program")


@dataclass(frozen=True)
class Check:
    """One named check of the verifier."""

    name: str
    """Short kebab-case name, quoted in the error of a failing check."""
    doc: str
    """What the check requires of a program, in one sentence."""
    run: Callable[[Program], None]
    """Raises a :class:`~polytri.errors.PolytriError` when the program fails the check."""


#: The checks of :func:`verify`, in the order they run.
CHECKS: tuple[Check, ...] = (
    Check("bounded-domains", "every iteration domain is finite for each parameter value", check_bounded_domains),
    Check("in-bounds", "no access leaves its array whenever its statement runs (the rest is checked at call time)",
          check_bounds),
    Check("index-arrays", "writes are affine, and the arrays read in indirect subscripts are not written",
          check_index_arrays),
)


def run_check(check: Check, program: Program) -> None:
    """Run one check; its error is re-raised, same class, with `` [verifier check 'NAME']`` at the end of
    the message's first line (the message still starts with the culprit, as callers expect)."""
    try:
        check.run(program)
    except PolytriError as exc:
        first, newline, rest = str(exc).partition("\n")
        named = type(exc)(f"{first} [verifier check {check.name!r}]{newline}{rest}")
        raise named.with_traceback(exc.__traceback__) from None


def verify(program: Program, checks: Sequence[Check] | None = None) -> None:
    """Run ``checks`` (default: every check of :data:`CHECKS`) in order; the first failure is raised."""
    for check in CHECKS if checks is None else checks:
        run_check(check, program)
