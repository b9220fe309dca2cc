"""The kernel function's C signature, its arguments and views: what every function of a kernel starts with.

The function takes, in order: one pointer per array (declaration order), one value per scalar, one
``int64_t`` per parameter, the requested thread count and the smallest work a parallel region needs to
open.  Inside, each array pointer is re-declared as a pointer to a variable-length array.
"""

from __future__ import annotations

from .. import dtypes
from ..ir.affine import const_value
from ..ir.expr import Expr
from ..ir.program import Program
from .cexpr import C, call, cname, index_expr
from .parallel_plan import MIN_WORK


def signature(program: Program) -> list[str]:
    args = [f"{dtypes.dtype(a.dtype).c_type} *restrict pt_{a.name}" for a in program.arrays]
    for s in program.scalars:
        d = dtypes.dtype(s.dtype)
        args.append(f"{'float' if d.kind == 'f' and d.bits <= 32 else d.c_type} {cname(s.name)}")
    args += [f"int64_t {cname(p)}" for p in program.params]
    args += ["int pt__num_threads", f"double {MIN_WORK}"]
    return args


def arguments(program: Program) -> list[str]:
    """The kernel function's arguments for its arrays, scalars and parameters, passed on as they are to a
    function it calls (an outlined region, a version: :func:`signature`'s names)."""
    return ([f"pt_{a.name}" for a in program.arrays] + [cname(s.name) for s in program.scalars]
            + [cname(p) for p in program.params])


def unused(program: Program, counters: list[str]) -> list[str]:
    """``(void)x;`` for every view, scalar, parameter and counter: a function that leaves one unused
    still compiles with ``-Wall -Wextra -Werror``."""
    names = [a.name for a in program.arrays] + [s.name for s in program.scalars] + list(program.params) + counters
    return [f"(void){cname(n)};" for n in names]


def vla_bound(e: Expr) -> str:
    """C text of an inner extent as a VLA bound: at least 1."""
    v = const_value(e)
    if v is not None:
        return str(max(v, 1))
    return call("pt__max_int64_t", index_expr(e), C("1", 16)).text


def array_views(program: Program) -> list[str]:
    lines = []
    for a in program.arrays:
        t = dtypes.dtype(a.dtype).c_type
        if a.rank == 1:
            lines.append(f"{t} *restrict {cname(a.name)} = pt_{a.name};")
        else:
            # a variable-length array bound must be positive (C11 6.7.6.2): an extent of 0 becomes 1,
            # harmless because an empty array is never accessed (the bounds checks guarantee it)
            dims = "".join(f"[{vla_bound(e)}]" for e in a.shape[1:])
            lines.append(f"{t} (*restrict {cname(a.name)}){dims} = ({t} (*){dims})pt_{a.name};")
    return lines


def slots_entry(program: Program, function: str) -> str:
    """``<function>_slots(a, p, threads, work)``: the function on the arrays' addresses ``a`` and the
    parameters ``p`` in the program's orders, for a caller that runs several kernels in one call
    (:func:`.graph_driver.driver`); none for a program with scalars, whose values have their own types."""
    if program.scalars:
        return ""
    arrays = [f"pt__a[{k}]" for k in range(len(program.arrays))]
    params = [f"pt__p[{k}]" for k in range(len(program.params))]
    return (f"void {function}_slots(void *const *pt__a, const int64_t *pt__p, int pt__num_threads, double {MIN_WORK}) {{\n"
            f"  (void)pt__a; (void)pt__p;\n"
            f"  {function}({', '.join([*arrays, *params, 'pt__num_threads', MIN_WORK])});\n"
            f"}}\n")
