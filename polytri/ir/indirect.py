"""Indirect subscripts: array reads whose subscript is a value read from an integer index array.

``out[i, j] = W[ids[i], j]`` reads ``W`` at a row that only the data says.  A subscript is *indirect*
when it reads an array; everything else about it is as for affine subscripts: it is an integer
expression of iterators, parameters and scalars, and every array it reads (an *index array*) is read at
affine subscripts, so those reads are ordinary accesses with their own dependences and bounds proof
(``where(ids[i] < 0, ids[i] + N, ids[i])`` is an indirect subscript; ``A[B[C[i]]]`` is not).

Only reads may be indirect, and an index array must not be written by the program, so that its values
are known before the program runs.  The polyhedral model over-approximates: an indirect dimension
ranges over the whole extent of its array dimension (``0 <= x < size``) in the access map, so a
schedule proved legal with the approximation is legal for every value of the indices.  The values
themselves are checked when a kernel is called, before anything runs
(:func:`polytri.runtime.index_check.check_index_values`).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import dtypes
from ..errors import NotAffineError, ProgramError, TypeCheckError
from .affine import to_isl
from .expr import Access, Expr, walk
from .printer import expr_to_str


def is_indirect_subscript(e: Expr) -> bool:
    """Whether the subscript ``e`` reads an array."""
    return any(isinstance(n, Access) for n in walk(e))


def indirect_dims(acc: Access) -> tuple[int, ...]:
    """The dimensions of ``acc`` whose subscript is indirect."""
    return tuple(d for d, e in enumerate(acc.index) if is_indirect_subscript(e))


def is_indirect(acc: Access) -> bool:
    """Whether some subscript of ``acc`` reads an array."""
    return any(is_indirect_subscript(e) for e in acc.index)


def has_indirect(e: Expr) -> bool:
    """Whether the expression ``e`` contains an indirect access."""
    return any(isinstance(n, Access) and is_indirect(n) for n in walk(e))


def index_reads(acc: Access) -> tuple[Access, ...]:
    """The reads of index arrays in the subscripts of ``acc``, in order."""
    return tuple(n for e in acc.index for n in walk(e) if isinstance(n, Access))


def check_subscript(e: Expr, array_dtype: Callable[[str], dtypes.DType], type_of: Callable[[Expr], dtypes.VType],
                    *, what: str) -> None:
    """Raise unless ``e`` is affine or a well-formed indirect subscript (see the module's docstring)."""
    if not is_indirect_subscript(e):
        to_isl(e, what=what)
        return
    for n in walk(e):
        if not isinstance(n, Access):
            continue
        if array_dtype(n.array).kind not in ("i", "u"):
            raise TypeCheckError(f"{what}: index array {n.array!r} has dtype {array_dtype(n.array)}; an "
                                 f"indirect subscript reads integer arrays only")
        for k, sub in enumerate(n.index):
            if is_indirect_subscript(sub):
                raise NotAffineError(f"{what}: {expr_to_str(e)} reads index array {n.array!r} at the indirect "
                                     f"subscript {expr_to_str(sub)}; index arrays are read at affine subscripts")
            to_isl(sub, what=f"{what}: subscript {k} of index array {n.array!r}")
    t = type_of(e)
    if t.dtype.kind not in ("i", "u"):
        raise TypeCheckError(f"{what}: the indirect subscript {expr_to_str(e)} has type {t.dtype}, not an integer")


def isl_subscripts(acc: Access, shape: tuple[Expr, ...] | None, taken: set[str],
                   *, what: str) -> tuple[list[str], list[str]]:
    """The isl text of each subscript of ``acc`` and the constraints of its indirect ones.

    An indirect subscript becomes a fresh variable bounded by the extent of its dimension (the
    over-approximation); ``shape`` (the array's) is needed for that.  ``taken`` holds the names in use."""
    subs: list[str] = []
    cons: list[str] = []
    for d, e in enumerate(acc.index):
        if not is_indirect_subscript(e):
            subs.append(to_isl(e, what=f"{what}: subscript {d} of {acc.array}"))
            continue
        if shape is None:
            raise ProgramError(f"{what}: {expr_to_str(acc)} has an indirect subscript; its access map needs the "
                               f"shape of array {acc.array!r}")
        name = f"x{d}"
        while name in taken:
            name = "_" + name
        taken.add(name)
        subs.append(name)
        cons.append(f"0 <= {name} < {to_isl(shape[d], what=f'shape of {acc.array}')}")
    return subs, cons
