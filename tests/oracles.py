"""Test oracles faster than ``pt.reference`` for the shapes the block-edge tests run: the contraction one is
checked against it bit for bit on small cases (tests/test_cpu_microkernel.py); the integer one is exact
arithmetic, and the small cases of tests/test_cpu_dot_product.py still run ``pt.reference`` itself."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

import polytri as pt
from polytri.dtypes import dtype
from polytri.ir.builder import to_program
from polytri.ir.expr import Access, Var, walk
from polytri.ir.islutil import fix_params
from polytri.ir.types import program_typer
from polytri.reference import _statement_function, _working_copy, _write_back
from polytri.runtime.args import bind


def contraction_reference(program: Any, **kwargs: Any) -> None:
    """What ``pt.reference`` computes, in place, for a program of one statement over a box whose target
    ``C[i, j, ...]`` is indexed by distinct loop counters and read only at that same element (a contraction ``C[i, j] op= f(A[i, k], B[k, j])``, any loop order): the reference's own
    statement function runs once per point of the sum loops (those the target's subscripts leave out, in
    their loop order) over every output element at once, with numpy's broadcasting.  Each element sees the
    same operations in the same order as in the instance-by-instance run, which takes minutes at the
    block-edge sizes of the micro-kernel tests.  Any other program, and one whose conversions take scalars
    only (to integer types), runs in ``pt.reference`` itself."""
    prog = to_program(program)
    st = prog.statements[0] if len(prog.statements) == 1 else None
    out = [e.name for e in st.target.index if isinstance(e, Var)] if st is not None else []
    if (st is None or len(out) != len(st.target.index) or len(set(out)) != len(out)
            or any(isinstance(a, Access) and a.array == st.target.array and a.index != st.target.index
                   for a in walk(st.value))):
        pt.reference(program, **kwargs)
        return
    bound = bind(prog, kwargs)
    dom = fix_params(st.domain.intersect_params(prog.context), bound.params)
    if dom.is_empty() or not dom.is_box():
        pt.reference(program, **kwargs)
        return
    extent: dict[str, range] = {}
    for d, name in enumerate(st.iterators):
        lo, hi = dom.dim_min_val(d).to_python(), dom.dim_max_val(d).to_python()
        extent[name] = range(lo, hi + 1)
    sums = [name for name in st.iterators if name not in out]
    shape = [len(extent[name]) for name in out]
    grid = {name: np.asarray(extent[name]).reshape([-1 if k == d else 1 for k in range(len(out))])
            for d, name in enumerate(out)}
    fn = _statement_function(st, prog, program_typer(prog))
    dts = {a.name: dtype(a.dtype) for a in prog.arrays}
    work = {name: _working_copy(x, dts[name]) for name, x in bound.arrays.items()}
    call = [work[a.name] for a in prog.arrays] + [bound.scalars[s.name] for s in prog.scalars] + \
        [bound.params[p] for p in prog.params]
    points = []
    for values in itertools.product(*(extent[name] for name in sums)):
        at = dict(zip(sums, values), **grid)
        points.append(tuple(at[name] for name in st.iterators))
    if all(n > 0 for n in shape):
        try:
            with np.errstate(all="ignore"):
                fn(points, *call)
        except TypeError:   # a conversion written for scalars only (the integer casts): the slow way
            pt.reference(program, **kwargs)
            return
    for name, x in bound.arrays.items():
        _write_back(x, work[name], dts[name])


def integer_contraction(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``c + a @ b`` in int32 arithmetic modulo 2**32 (what ``C[i, j] += int32(A[i, k]) * int32(B[k, j])``
    computes in any order): exact products and sums in int64 (no overflow below 2**63), then wrapped."""
    return (c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


def assert_suite_arrays_match(name: str, params: dict, args: dict[str, Any], got: dict[str, Any],
                              want: dict[str, Any]) -> None:
    """Every array of the suite kernel ``name``'s arguments ``args``: ``got`` (numpy arrays, or tensors on
    any device) equals the reference's ``want`` within the suite's tolerances (float32 1e-4, float64 1e-9)."""
    arrays = [n for n, v in args.items() if isinstance(v, np.ndarray)]
    assert arrays
    for n in arrays:
        g = got[n].cpu().numpy() if hasattr(got[n], "cpu") else got[n]
        f32 = args[n].dtype == np.float32
        np.testing.assert_allclose(g, want[n], rtol=1e-4 if f32 else 1e-9, atol=1e-5 if f32 else 1e-12,
                                   err_msg=f"{name}: array {n!r} differs from the reference with {params}")


def equal_to_reference(prog: pt.Program, args: dict[str, Any], options: dict[str, Any]) -> Any:
    """The kernel of ``prog`` compiled for the cpu with ``options``, after checking that one call on a copy
    of ``args`` leaves every array bit for bit as ``pt.reference`` does on another copy."""
    from polytri.suite import copy_args

    want, got = copy_args(args), copy_args(args)
    pt.reference(prog, **want)
    k = pt.compile(prog, "cpu", options=options)
    k(**got)
    for name, value in args.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{to_program(prog).name}: {name}")
    return k


def right_panel_packed_by_blocks(source: str, nr: int, kk_loop: str) -> bool:
    """Whether the C ``source`` packs a right panel a block of ``nr`` columns at a time: its loop over the
    blocks directly encloses ``kk_loop``, the loop over the block's values of ``k``."""
    outer = f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {nr})"
    return outer in source and source[source.index(outer) + len(outer):].lstrip().startswith(kk_loop)
