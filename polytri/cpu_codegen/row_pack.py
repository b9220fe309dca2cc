"""Left panels packed from rows stored along ``k``, a unit at a time.

A block of the left panel holds, for each value of ``k`` (or each group of values summed together by a
dot-product instruction), the ``MR`` rows' values side by side.  Where ``L``'s rows are stored along ``k``
(:func:`.contraction_model.left_units`), that block interleaves ``MR`` contiguous runs: ``pt__pack_rows``
reads each run a unit at a time (an element, or a group's 32 bits) and writes the units in the panel's
order, which gcc vectorizes as interleaving stores.  The panel is the same as the element loop's: the
units are moved, with the halves of a bfloat16 pair exchanged where the instruction wants them in
descending order.
"""

from __future__ import annotations

INT_OF_BYTES = {4: "uint32_t", 8: "uint64_t"}


def rows_kernel_name(mr: int, unit: int, swapped: bool) -> str:
    """The helper's name for ``mr`` rows of ``unit``-byte units (halves exchanged if ``swapped``)."""
    return f"pt__pack_rows{mr}_u{unit * 8}{'s' if swapped else ''}"


def rows_kernel(mr: int, unit: int, swapped: bool) -> str:
    """``<name>(rows, n, dst)``: unit ``r + p * mr`` of ``dst`` is unit ``p`` of row ``r``, for ``r < mr`` and
    ``p < n`` (``rows``: the rows' addresses)."""
    t = INT_OF_BYTES[unit]
    half = unit * 4
    swap = f"      u = (u >> {half}) | (u << {half});\n" if swapped else ""
    what = ", the halves of each exchanged" if swapped else ""
    return (f"/* {mr} rows of {unit}-byte units interleaved into a left panel{what} */\n"
            f"static inline void {rows_kernel_name(mr, unit, swapped)}(const void *const *rows, int64_t n, "
            f"void *restrict dst) {{\n"
            f"  {t} *restrict d = dst;\n"
            f"  for (int64_t p = 0; p < n; p++) {{\n"
            f"    #pragma GCC unroll {mr}\n"
            f"    for (int r = 0; r < {mr}; r++) {{\n"
            f"      {t} u;\n"
            f"      __builtin_memcpy(&u, (const char *)rows[r] + {unit} * p, {unit});\n"
            f"{swap}"
            f"      d[p * {mr} + r] = u;\n"
            f"    }}\n"
            f"  }}\n"
            f"}}\n")


__all__ = ["rows_kernel", "rows_kernel_name"]
