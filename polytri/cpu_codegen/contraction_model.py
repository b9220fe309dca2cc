"""What a contraction nest is (:mod:`.contraction`): the statement, its roles and the instances the packed
code computes, and a one-line description for a kernel's decisions."""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DType
from ..ir.affine import const_value, linear
from ..ir.expr import Access, Expr, var_names
from ..ir.printer import expr_to_str
from ..ir.program import Statement
from ..pipeline.decisions import Decision
from .blocking import vector_bytes
from .dot_product import BF16_PAIRS, S8U8_QUADS, U8S8_QUADS, DotProduct, dot_blocking, stored


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
    """A statement run on each element as soon as its sum is complete (a bias, an activation: see
    :func:`.contraction_fusion.epilogue_iterators`), instead of in a nest of its own that reads the whole
    target again: the micro-kernel sums each register block in a tile of its own, which the epilogue
    reads, and the target is never stored (:func:`.contraction_fusion.keeps_target_local`)."""
    epilogue_at: tuple[tuple[str, Expr], ...] = ()
    """Each iterator of :attr:`epilogue` as an expression of the iterators of the nest's target subscripts
    (one of them, or a function of several where the epilogue reads the target through a view)."""
    dot: DotProduct | None = None
    """The factors are narrow stored values that the micro-kernel sums with this dot-product instruction,
    from panels of the stored values (:mod:`.dot_product`); ``None``: panels of the nest's type."""
    columns: tuple[Expr, Expr] | None = None
    """Of a target whose columns depend on the row (a triangle, :mod:`.row_columns`): ``[lower, upper)`` of
    the columns of row :attr:`a`, in ``a`` and the parameters; ``None``: every row has the columns of
    :attr:`bounds`."""


TRANSPOSE_BLOCK_BYTES = 4096
"""Bytes of the panel of ``R`` written per block of ``k`` when ``R`` is stored along ``k`` (a linear layer's
weight ``W[j, k]``, :func:`transpose_block`)."""

_SIZES = {"uint16_t": 2, "int16_t": 2, "uint8_t": 1, "int8_t": 1}
"""Bytes of the C types of the panels' elements of a dot-product contraction (:mod:`.dot_product`)."""


def right_along_k(c: Contraction) -> bool:
    """Whether ``R`` is one array element whose last subscript moves with the (one) summed iterator and
    not with the columns: stored along ``k``, it is read that way when it is packed.  Of a dot-product
    nest, whose panels hold the stored values, the element under the conversion."""
    e = c.right if c.dot is None else stored(c.right)
    if len(c.k) != 1 or not isinstance(e, Access) or not e.index:
        return False
    last = var_names(e.index[-1], "iter")
    return c.k[0] in last and c.b not in last


LEFT_UNITS = {BF16_PAIRS: (4, True), U8S8_QUADS: (4, False), S8U8_QUADS: (4, False)}
"""The dot products whose left panel holds each row's group of ``k`` as one 32-bit unit of the stored
values' bits: its size, and whether its two halves are exchanged (``vdpbf16ps``'s descending pairs)."""


def left_units(c: Contraction) -> tuple[int, bool] | None:
    """How a whole block of ``L``'s rows is packed a unit at a time (``pt__pack_rows``, :mod:`.row_pack`):
    the unit's bytes and whether its 16-bit halves are exchanged; ``None``: element by element.

    The left panel holds, for each value (or group) of ``k``, the ``MR`` rows' units side by side.  Where
    ``L`` is one array element whose last subscript is ``k`` plus affine terms without ``k`` (no other
    subscript has ``k``; they may divide the row, as a view does), each row's units are consecutive in
    memory: the panel interleaves ``MR`` runs.  The element
    loop stored a 16-bit value at a time with its slot computed (a bfloat16 linear layer 768 -> 192 on 197
    rows: three quarters of the samples of its function outside the micro-kernel were that packing, perf,
    one thread);
    the runs are read a unit at a time and interleaved in vector registers by gcc."""
    e = c.left if c.dot is None else stored(c.left)
    if len(c.k) != 1 or not isinstance(e, Access) or not e.index:
        return None
    k, last = c.k[0], linear(e.index[-1])
    # the other subscripts may be any function of the rows (a view: [i // 128, i % 128, k]), without k
    if any(k in var_names(ix, "iter") for ix in e.index[:-1]) or last is None or last[0].get(k) != 1:
        return None
    if c.dot is None:
        return (c.dtype.itemsize, False) if c.dtype.itemsize in (4, 8) else None
    return LEFT_UNITS.get(c.dot)


def transpose_block(c: Contraction) -> int | None:
    """Values of ``k`` per block of the packing of an ``R`` stored along ``k`` (``None`` for any other):
    as many panel rows as fill :data:`TRANSPOSE_BLOCK_BYTES`, in whole groups of :attr:`Contraction.dot`
    (each value of ``k`` finds its own place in the panel: any blocks give the same panel).

    Read along ``k``, each value of ``k`` stores to its own panel row, ``NR`` elements after the last.
    Column by column over a whole ``KC``, those are 256 rows of 256 bytes for float32 on AVX-512, which
    fall in a quarter of the L1 cache's sets, more lines than its ways hold: every store missed L1, and
    packing the weight of a linear layer 768 -> 192 on 197 rows took about as long as its micro-kernel
    calls (profiled, one thread).  A block of 4 KiB is 64 consecutive lines, one per set."""
    if not right_along_k(c):
        return None
    g = 1 if c.dot is None else c.dot.group
    size = c.dtype.itemsize if c.dot is None else _SIZES.get(c.dot.right_type, c.dtype.itemsize)
    per_k = dot_blocking(c.dtype, c.dot).nr * size
    return max(g, max(1, TRANSPOSE_BLOCK_BYTES // per_k) // g * g)


def transpose_lanes(c: Contraction) -> int | None:
    """The side of the squares in which the packing of ``c``'s right operand moves its values in vector
    registers (:mod:`.transpose`; ``None``: element by element): a vector's lanes, for a float nest (no
    dot-product panels, no guard on the instances) whose right operand is stored along ``k``, in blocks
    of whole squares.  The operand has the nest's type (:func:`.contraction.find_contraction`), so its
    values are moved unconverted.  The panels of a bfloat16 dot-product nest hold each pair of values of
    ``k`` together: the squares move pairs, as float32 values whose bits they keep (``vdpbf16ps``'s panels,
    whose pairs are in descending order, then exchange each pair's halves).  The 8-bit integer panels are
    left to the element loop: some widen the stored values."""
    kb = transpose_block(c)
    if kb is None or c.guard is not None:
        return None
    if c.dot is not None:  # a pair of bfloat16 values of k moves as one 32-bit unit
        lanes = vector_bytes() // 4
        pairs = c.dot.right_type == "uint16_t" and c.dot.group == 2  # descending: halves swapped after
        return lanes if pairs and kb % (lanes * 2) == 0 else None
    if c.dtype.itemsize not in (4, 8):
        return None
    lanes = vector_bytes() // c.dtype.itemsize
    return lanes if lanes >= 2 and kb % lanes == 0 else None


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
    if c.columns is not None:
        init += (f", columns {expr_to_str(c.columns[0])} <= {c.b} < {expr_to_str(c.columns[1])} of each row "
                 "(blocks across the edge in a tile)")
    epi = (f", {c.epilogue.name} run on each block as its sums complete (each block summed in a tile, "
           f"{c.statement.target.array} never stored)" if c.epilogue is not None else "")
    dot = "" if c.dot is None else f" summing the stored values {c.dot.k_step} at a time with {c.dot.instruction}"
    kb = transpose_block(c)
    lanes = transpose_lanes(c)
    along = "" if kb is None else f", R read along {c.k[0]} and packed {kb} values of {c.k[0]} at a time"
    along += "" if lanes is None else f" in {lanes} x {lanes} squares"
    units = left_units(c)
    along += "" if units is None else f", L's rows packed from their runs along {c.k[0]}, {units[0]} bytes at a time"
    text = (f"contraction {c.statement.name} (rows {c.a}, columns {c.b}, sum over {', '.join(c.k)}{batch}, "
            f"{c.dtype.name}): packed {b.kc} x {b.nc} and {b.mr} x {b.kc} panels, {b.mr} x {b.nr} register-"
            f"blocked micro-kernel{dot}{pad}{init}{epi}{along}")
    return Decision("codegen", "contraction", c.statement.name, text,
                    {"block": (b.mr, b.nr), "kc": b.kc, "nc": b.nc,
                     "instruction": None if c.dot is None else c.dot.instruction, "transpose_block": kb,
                     "transpose_squares": lanes, "left_unit": None if units is None else units[0],
                     "columns": None if c.columns is None else tuple(expr_to_str(e) for e in c.columns)})


__all__ = ["LEFT_UNITS", "TRANSPOSE_BLOCK_BYTES", "Contraction", "describe", "few_columns", "left_units", "right_along_k", "transpose_block",
           "transpose_lanes"]
