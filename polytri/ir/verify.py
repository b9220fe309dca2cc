"""The verifier: small named checks, separate from the transformations.

``check_bounds``: every access stays inside its array for every parameter value allowed by the
context.  Generated C has no bounds checks, so this proof is what makes it memory-safe; the reference
interpreter relies on it too (numpy would wrap negative indices silently).
"""

from __future__ import annotations

import islpy as isl

from ..errors import BoundsError, ProgramError
from .expr import Access
from .printer import expr_to_str
from .program import Program, Statement


def _example(s: isl.Set) -> str:
    pt = s.sample_point()
    names = []
    for i in range(pt.get_space().dim(isl.dim_type.param)):
        names.append(f"{pt.get_space().get_dim_name(isl.dim_type.param, i)}="
                     f"{pt.get_coordinate_val(isl.dim_type.param, i).to_python()}")
    return ", ".join(names)


def _check_access(program: Program, st: Statement, acc: Access, kind: str) -> None:
    arr = program.array(acc.array)
    touched = st.access_map(acc, program.params).intersect_params(program.context).range()
    extent = arr.extent_isl(program.params)
    outside = touched.subtract(extent)
    if not outside.is_empty():
        raise BoundsError(
            f"statement {st.name} ({st.text()}): the {kind} {expr_to_str(acc)} may fall outside array "
            f"{arr.name!r} of shape ({', '.join(expr_to_str(e) for e in arr.shape)}), for example with "
            f"{_example(outside) or 'any parameters'}; offending indices: {outside}. "
            f"Restrict the loop bounds or add an assumption with Program.assume()")


def check_bounds(program: Program) -> None:
    """Prove with isl that every access of every statement is in bounds; raise :class:`BoundsError`."""
    if program._cache.get("bounds_ok"):
        return
    check_bounded_domains(program)
    for st in program.statements:
        _check_access(program, st, st.target, "write")
        for acc in st.reads:
            _check_access(program, st, acc, "read")
    program._cache["bounds_ok"] = True


def check_bounded_domains(program: Program) -> None:
    """Every iteration domain is finite for each value of the parameters."""
    for st in program.statements:
        if not st.domain.intersect_params(program.context).is_bounded():
            raise ProgramError(f"statement {st.name} ({st.text()}): its iteration domain {st.domain} is "
                               f"unbounded; every iterator needs a lower and an upper bound")


def verify(program: Program) -> None:
    """Run every check of the verifier."""
    check_bounded_domains(program)
    check_bounds(program)
