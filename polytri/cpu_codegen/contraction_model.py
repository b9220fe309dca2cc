"""What a contraction nest is (:mod:`.contraction`): the statement, its roles and the instances the packed
code computes, and a one-line description for a kernel's decisions."""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DType
from ..ir.affine import const_value
from ..ir.expr import Expr
from ..ir.program import Statement
from ..pipeline.decisions import Decision
from .dot_product import DotProduct, dot_blocking


@dataclass(frozen=True)
class Contraction:
    """A contraction nest: one statement of contraction form and the instances the packed code computes."""

    statement: Statement
    a: str
    """Iterator of the target's rows."""
    b: str
    """Iterator of the target's columns (its last subscript)."""
    k: tuple[str, ...]
    """The summed iterators, in the statement's order: the sum runs over them lexicographically."""
    batch: tuple[str, ...]
    """Other iterators that the packed code loops over itself (a whole-domain nest); the enclosing loops
    fix the rest (:attr:`fixed`)."""
    bounds: dict[str, tuple[Expr, Expr]]
    """``[lower, upper)`` of ``a``, ``b``, each of ``k`` and each of ``batch``: expressions in the
    parameters and the counters of enclosing loops."""
    fixed: dict[str, Expr]
    """The statement's other iterators, as expressions of the enclosing loops' counters."""
    guard: Expr | None
    """Condition on ``batch``, ``k`` and ``b`` for a point of the bounds' box to be an instance (``None``:
    every point is; the rows ``a`` never need one)."""
    batch_guard: Expr | None
    """Condition on ``batch`` alone."""
    padded: bool
    """Some points of the box are not instances: the panels hold zeros there, whose products with ``L``
    are added too, which is exact only while ``L`` is finite (checked at run time)."""
    pack_l_once: bool
    """``L`` does not depend on the batch iterators and is in bounds on its whole box of rows and sums:
    its panels may be packed once for every batch point."""
    left: Expr
    """The factor of ``(a, k)``, in the statement's iterators."""
    right: Expr
    """The factor of ``(k, b)``, in the statement's iterators."""
    op: str
    """``+`` or ``-``."""
    dtype: DType
    """float32 or float64; int32 with an integer :attr:`dot`."""
    row_subscript: int
    """Position of ``a``'s subscript in the target (the rows' stride is the product of later extents)."""
    zero_init: bool = False
    """The nest also sets every element it computes to zero before its sum (an init statement folded in,
    see :func:`.contraction_fusion.zero_init_fuses`): the first block of ``k`` starts its registers at
    zero instead of loading the target."""
    epilogue: Statement | None = None
    """A statement run on each element as soon as its sum is complete, on each register block while it
    is in cache (a bias, an activation: see :func:`.contraction_fusion.epilogue_iterators`), instead of
    in a nest of its own that reads the whole target again."""
    epilogue_at: tuple[tuple[str, str], ...] = ()
    """Each iterator of :attr:`epilogue` and the iterator of the nest's target subscript it equals."""
    dot: DotProduct | None = None
    """The factors are narrow stored values that the micro-kernel sums with this dot-product instruction,
    from panels of the stored values (:mod:`.dot_product`); ``None``: panels of the nest's type."""


def few_columns(c: Contraction) -> bool:
    """Whether the nest has a static number of columns under a quarter of a register block's: packed,
    each block would be mostly empty (an integer product of a few rows, written with its target
    transposed, whose loops sum along ``k`` with the same dot-product instructions, unpacked)."""
    lo, hi = (const_value(e) for e in c.bounds[c.b])
    return lo is not None and hi is not None and hi - lo < dot_blocking(c.dtype, c.dot).nr // 4


def describe(c: Contraction) -> Decision:
    """The record of a packed nest for a kernel's decisions (kind ``contraction``; its data name the
    register block and the dot-product instruction, ``None`` for the float micro-kernel)."""
    b = dot_blocking(c.dtype, c.dot)
    batch = f", looping over {', '.join(c.batch)}" if c.batch else ""
    pad = ", zero-padded panels" if c.padded else ""
    init = ", its zero init folded in" if c.zero_init else ""
    epi = f", {c.epilogue.name} run on each block as its sums complete" if c.epilogue is not None else ""
    dot = "" if c.dot is None else f" summing the stored values {c.dot.k_step} at a time with {c.dot.instruction}"
    text = (f"contraction {c.statement.name} (rows {c.a}, columns {c.b}, sum over {', '.join(c.k)}{batch}, "
            f"{c.dtype.name}): packed {b.kc} x {b.nc} and {b.mr} x {b.kc} panels, {b.mr} x {b.nr} register-"
            f"blocked micro-kernel{dot}{pad}{init}{epi}")
    return Decision("codegen", "contraction", c.statement.name, text,
                    {"block": (b.mr, b.nr), "kc": b.kc, "nc": b.nc,
                     "instruction": None if c.dot is None else c.dot.instruction})


__all__ = ["Contraction", "describe", "few_columns"]
