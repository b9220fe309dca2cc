"""The micro-kernel of a dot-product instruction on AMX tiles (:data:`.dot_product.BF16_TILES`).

AMX adds 8 tile registers of up to 16 rows of 64 bytes.  ``TDPBF16PS`` adds to a 16 x 16 float32 tile
``C`` the products of a tile ``A`` of 16 rows of 32 bfloat16 values of ``k`` (one row of the target each,
``k`` contiguous) and a tile ``B`` of 16 rows of 16 pairs of bfloat16 values (one pair of ``k`` for each of
16 columns): 8192 products per instruction, 16 times ``vdpbf16ps``'s.

The register block is 32 x 32: 2 x 2 tiles of ``C``, 2 of ``A`` and 2 of ``B``, the 8 registers.  The
panels keep the stored values: the right one as ``vdpbf16ps``'s, ``[k / 2][column][2]``, so that 16 pairs
of 32 columns are one tile row apart (128 bytes); the left one as runs of 32 values of ``k`` of each row,
``[k / 32][row][32]``, so that one ``A`` tile is 16 consecutive runs (64 bytes apart).  ``k`` is ascending
in both (the order of a row of ``A``), and the panels run on with zeros to a multiple of 32.  Each call
holds its block of ``C`` in the tiles while ``k`` runs.  Each thread loads the tile configuration
(palette 1, every tile 16 rows of 64 bytes) before its calls and releases the tiles after them
(``pt__tiles_open``, ``pt__tiles_close``: :mod:`.packing` prints the calls).

Linux hands the tiles' register state only to a process that asks for it (``arch_prctl``,
``ARCH_REQ_XCOMP_PERM``): the kernel asks once per library, and where the request is refused (or the
compiler does not define ``__AMX_TILE__`` and ``__AMX_BF16__``) it computes the same block with
``vdpbf16ps`` on the same panels (:data:`.dot_product.BF16_TILE_PAIRS`, 4 rows at a time), or plain C.
``-DPT_NO_TILE_PERMISSION`` (a test hook) takes that path as if the request had been refused.

The sums are not the float32 loop's bit for bit: the instruction adds 32 products of each sum per step,
not in the loop's order of ``k``, and treats subnormal inputs and results as zero.
A bfloat16 product stays within the project's rule, twice eager's own error against float32 (eager's
oneDNN uses the tiles too where it has them): ``tests/test_amx.py`` checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .blocking import Blocking
from .dot_product import BF16_TILE_PAIRS, BF16_TILES, DotProduct, dot_micro_kernel

#: Rows of a tile register, bytes of one of its rows, tile registers.
TILE_ROWS, TILE_BYTES, TILES = 16, 64, 8


@dataclass(frozen=True)
class _TileInstruction:
    """How the micro-kernel of a :class:`DotProduct` on tiles is written."""

    intrinsic: str
    """The instruction's intrinsic: ``(c, a, b)``, tile numbers."""
    macros: tuple[str, ...]
    """Defined by the compiler where it has the instructions."""
    fallback: DotProduct
    """The vector instruction on the same panels, for a process refused the tiles."""
    fallback_rows: int
    """Rows of the fallback's register block."""


_TILE_INSTRUCTIONS = {
    BF16_TILES.name: _TileInstruction("_tile_dpbf16ps", ("__AMX_TILE__", "__AMX_BF16__"), BF16_TILE_PAIRS, 4),
}

_COMMON = f"""\
#ifndef PT__TILES_COMMON
#define PT__TILES_COMMON
#if defined(__AMX_TILE__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
/* palette 1; tiles 0 to {TILES - 1}: {TILE_ROWS} rows of {TILE_BYTES} bytes */
static const struct {{
  unsigned char palette, start_row, reserved[14];
  unsigned short colsb[16];
  unsigned char rows[16];
}} pt__tile_config __attribute__((aligned(64))) = {{1, 0, {{0}}, {{{", ".join([str(TILE_BYTES)] * TILES)}}},
                                                   {{{", ".join([str(TILE_ROWS)] * TILES)}}}}};
#endif

/* Whether Linux lets this process use the tiles: asked once (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA);
   before that, a tile instruction raises SIGILL. */
__attribute__((unused)) static int pt__tiles_permitted(void) {{
#if defined(__AMX_TILE__) && !defined(PT_NO_TILE_PERMISSION)  /* the macro: a test hook, as if refused */
  static int state = 0;  /* 0: not asked yet, 1: granted, -1: refused */
  int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
  if (s == 0) {{
    s = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : -1;
    __atomic_store_n(&state, s, __ATOMIC_RELAXED);
  }}
  return s > 0;
#else
  return 0;
#endif
}}

/* The calling thread's tile configuration, loaded before its micro-kernel calls and released after them
   (ldtilecfg is slow: loaded in every call, it took a sizeable share of the micro-kernel's time). */
static void pt__tiles_open(void) {{
#if defined(__AMX_TILE__)
  if (pt__tiles_permitted()) _tile_loadconfig(&pt__tile_config);
#endif
}}

static void pt__tiles_close(void) {{
#if defined(__AMX_TILE__)
  if (pt__tiles_permitted()) _tile_release();
#endif
}}
#endif
"""


def _tile_body(dot: DotProduct, x: _TileInstruction, t: str, b: Blocking) -> list[str]:
    """The tile computation of an ``MR x NR`` block: ``C`` tiles first, then ``A``'s, then ``B``'s."""
    rt, ct = b.mr // TILE_ROWS, b.nr // TILE_ROWS
    assert rt * ct + rt + ct <= TILES and dot.lgroup * 2 == TILE_BYTES and TILE_ROWS * dot.group == dot.lgroup
    c_tile = [[i * ct + j for j in range(ct)] for i in range(rt)]
    a_tile, b_tile = [rt * ct + i for i in range(rt)], [rt * ct + rt + j for j in range(ct)]
    c_at = [[f"c + {i * TILE_ROWS} * ldc + {j * TILE_ROWS}" for j in range(ct)] for i in range(rt)]
    step, g = dot.lgroup, dot.group
    lines = [f"const long ldb = (long)(ldc * sizeof({t}));", "if (load) {"]
    lines += [f"  _tile_loadd({c_tile[i][j]}, {c_at[i][j]}, ldb);" for i in range(rt) for j in range(ct)]
    lines += ["} else {", *(f"  _tile_zero({c_tile[i][j]});" for i in range(rt) for j in range(ct)), "}",
              f"for (int64_t p = 0; p < (kc + {step - 1}) / {step}; p++) {{"]
    lines += [f"  _tile_loadd({a_tile[i]}, ap + p * {step * b.mr} + {i * TILE_ROWS * step}, {step * 2});  "
              f"/* rows {i * TILE_ROWS} to {i * TILE_ROWS + TILE_ROWS - 1}, {step} values of k each */" for i in range(rt)]
    lines += [f"  _tile_loadd({b_tile[j]}, bp + p * {step * b.nr} + {j * TILE_ROWS * g}, {b.nr * g * 2});  "
              f"/* {TILE_ROWS} pairs of k, columns {j * TILE_ROWS} to {j * TILE_ROWS + TILE_ROWS - 1} */" for j in range(ct)]
    lines += [f"  {x.intrinsic}({c_tile[i][j]}, {a_tile[i]}, {b_tile[j]});" for i in range(rt) for j in range(ct)]
    lines += ["}", *(f"_tile_stored({c_tile[i][j]}, {c_at[i][j]}, ldb);" for i in range(rt) for j in range(ct))]
    return lines


def tile_micro_kernel(dot: DotProduct, t: str, b: Blocking) -> str:
    """``pt__ukernel_<dot>add`` for an instruction on tiles (same signature as the vector kernels), with
    the fallback kernel it calls where the process may not use the tiles."""
    x = _TILE_INSTRUCTIONS[dot.name]
    sub = Blocking(x.fallback_rows, b.nr, b.kc, b.nc)
    cond = " && ".join(f"defined({m})" for m in x.macros)
    body = "\n".join("    " + line for line in _tile_body(dot, x, t, b))
    return f"""\
{dot_micro_kernel(x.fallback, t, sub, panel_rows=b.mr)}
{_COMMON}
/* C[r][q] += sum over k of L[r][k] * R[k][q] with {dot.instruction}: a {b.mr} x {b.nr} block held in tiles;
   ap holds runs of {dot.lgroup} values of k of each of {b.mr} rows, bp {b.nr} columns as pairs of k (k ascending).
   Past kc, the panels run on with zeros to a multiple of {dot.k_step}.  With load == 0 the block starts at zero.
   The calling thread has loaded the tile configuration (pt__tiles_open). */
static void pt__ukernel_{dot.name}add(int64_t kc, const {dot.left_type} *restrict ap, const {dot.right_type} *restrict bp,
                                  {t} *restrict c, int64_t ldc, int load) {{
#if {cond}
  if (pt__tiles_permitted()) {{
{body}
    return;
  }}
#endif
  /* no tiles: {x.fallback.instruction} on the same panels, {x.fallback_rows} rows at a time */
  for (int r = 0; r < {b.mr}; r += {x.fallback_rows})
    pt__ukernel_{x.fallback.name}add(kc, ap + r * {dot.lgroup}, bp, c + r * ldc, ldc, load);
}}
"""


__all__ = ["TILES", "TILE_BYTES", "TILE_ROWS", "tile_micro_kernel"]
