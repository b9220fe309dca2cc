"""The register-blocked micro-kernel of the packed contraction (:mod:`.contraction`), as static C functions.

``pt__ukernel_<type><add|sub>`` computes an ``MR x NR`` block of the target from a packed ``MR``-row panel
of the left factor and a packed ``NR``-column panel of the right one; ``pt__uedge_<type><add|sub>`` does
the same on the valid corner of a block at the target's ragged edge, through a full-size tile.
"""

from __future__ import annotations

from ..dtypes import DType
from .blocking import Blocking, vector_bytes
from .dot_product import DotProduct, dot_blocking, dot_micro_kernel
from .tiles import tile_micro_kernel


def micro_kernel(d: DType, op: str, simd: bool, fma: bool = False, dot: DotProduct | None = None) -> str:
    """The register-blocked micro-kernel and its edge variant for type ``d`` and sum operator ``op``, as
    static C functions named ``pt__ukernel_<type><add|sub>`` and ``pt__uedge_<type><add|sub>``.

    With ``simd`` the block is written with GCC's vector types, one vector per ``lanes`` columns, and each
    row of the right panel is loaded into registers once per ``k``: left to itself, gcc folds the loads
    into the multiplications and loads every vector ``MR`` times (20 loads per 16 products on AVX-512;
    the empty ``asm`` pins the loaded vectors in registers).  Measured here against ``torch.mm`` in one
    process (3 interleaved rounds of 15 calls each, medians, two runs): float32 gemm 256x1024x512 went from
    0.77x torch's speed to 0.78-0.85x, 256x512x1024 from 0.77x to 0.85-0.91x, 1024³ from 0.70x to
    0.88-0.98x; 6 rows instead of 4 measured no better.  Each lane still rounds the product and then the
    sum, as the scalar loop does, unless ``fma``: then gcc may fuse them (``fp-contract=fast`` on these two
    functions only), one rounding per step as BLAS libraries compute.

    With ``dot`` (:mod:`.dot_product`), the kernel sums panels of narrow stored values with that
    instruction instead (on tiles: :mod:`.tiles`)."""
    b = dot_blocking(d, dot)
    if dot is not None:
        assert op == "+"
        kernel = tile_micro_kernel if dot.block is not None else dot_micro_kernel
        return kernel(dot, d.c_type, b) + _edge_kernel(d, b, f"{dot.name}add", "", (dot.left_type, dot.right_type))
    name = f"{d.name}{'add' if op == '+' else 'sub'}"
    attr = '__attribute__((optimize("fp-contract=fast")))\n' if fma else ""
    if not simd:
        return _kernel_head(d, op, b, f"ukernel_{name}", attr) + _scalar_body(d, op, b) + _edge_kernel(d, b, name, attr)
    lanes = _lanes(d)
    nv = b.nr // lanes
    parts = "".join(_kernel_head(d, op, b, f"ukpart{j}_{name}", attr, j * lanes) + _simd_body(d, op, b, j)
                    for j in range(1, nv))
    return (parts + _kernel_head(d, op, b, f"ukernel_{name}", attr) + _simd_body(d, op, b, nv)
            + _edge_kernel(d, b, name, attr, parts=True))


def _lanes(d: DType) -> int:
    """Elements of type ``d`` per vector register."""
    return vector_bytes() // d.itemsize


def _kernel_head(d: DType, op: str, b: Blocking, fname: str, attr: str, width: int | None = None) -> str:
    """The comment and signature of ``pt__<fname>``, up to its opening brace; ``width``: the block's
    first columns only (an edge's), of a full-width panel."""
    t = d.c_type
    cols = f"the first {width} columns of an {b.mr} x {b.nr} block" if width else f"an {b.mr} x {b.nr} block"
    return f"""\
/* C[r][q] {op}= sum over k of ap[k][r] * bp[k][q]: {cols} held in registers while k runs;
   ap is a packed {b.mr}-row panel of the left factor, bp a packed {b.nr}-column panel of the right one.
   With load == 0 the block starts at zero instead of C's values (C = 0 {op} ...). */
{attr}static void pt__{fname}(int64_t kc, const {t} *restrict ap, const {t} *restrict bp, {t} *restrict c,
                               int64_t ldc, int load) {{
"""


def _simd_body(d: DType, op: str, b: Blocking, nv: int) -> str:
    """The micro-kernel's body with GCC's vector types: one vector per ``lanes`` columns for the first
    ``nv`` vectors of the panel, each row of the right panel loaded into registers once per ``k`` (and
    pinned there by an empty ``asm``)."""
    t = d.c_type
    lanes = _lanes(d)
    vt = f"pt__v{d.name}"
    pin = "#if defined(__x86_64__)\n      __asm__(\"\" : \"+v\"(bv[v]));\n#endif\n"
    return f"""\
  typedef {t} {vt} __attribute__((vector_size({vector_bytes()})));
  {vt} acc[{b.mr}][{nv}];
  for (int r = 0; r < {b.mr}; r++)
    for (int v = 0; v < {nv}; v++) {{
      acc[r][v] = ({vt}){{0}};
      if (load) __builtin_memcpy(&acc[r][v], c + r * ldc + v * {lanes}, sizeof({vt}));
    }}
  for (int64_t k = 0; k < kc; k++) {{
    {vt} bv[{nv}];
    for (int v = 0; v < {nv}; v++) {{
      __builtin_memcpy(&bv[v], bp + k * {b.nr} + v * {lanes}, sizeof({vt}));
{pin}    }}
    #pragma GCC unroll {b.mr}
    for (int r = 0; r < {b.mr}; r++) {{
      const {t} av = ap[k * {b.mr} + r];
      for (int v = 0; v < {nv}; v++) acc[r][v] = acc[r][v] {op} av * bv[v];
    }}
  }}
  for (int r = 0; r < {b.mr}; r++)
    for (int v = 0; v < {nv}; v++) __builtin_memcpy(c + r * ldc + v * {lanes}, &acc[r][v], sizeof({vt}));
}}
"""


def _scalar_body(d: DType, op: str, b: Blocking) -> str:
    """The micro-kernel's body as scalar loops (left to the compiler's vectorizer)."""
    t = d.c_type
    return f"""\
  {t} acc[{b.mr}][{b.nr}];
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) acc[r][q] = load ? c[r * ldc + q] : 0;
  for (int64_t k = 0; k < kc; k++) {{
    #pragma GCC unroll {b.mr}
    for (int r = 0; r < {b.mr}; r++) {{
      const {t} av = ap[k * {b.mr} + r];
      for (int q = 0; q < {b.nr}; q++) acc[r][q] = acc[r][q] {op} av * bp[k * {b.nr} + q];
    }}
  }}
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) c[r * ldc + q] = acc[r][q];
}}
"""


def _edge_kernel(d: DType, b: Blocking, name: str, attr: str, panels: tuple[str, str] | None = None,
                 parts: bool = False) -> str:
    """``pt__uedge_<name>``: the micro-kernel on the valid ``mr x nr`` corner of a block, through a tile;
    ``panels`` are the C types of the left and right panels' elements when they are not the target's.
    With ``parts`` (the vector kernels of :func:`_simd_body`), a corner of fewer vectors runs the kernel of
    its own width (``pt__ukpart<j>_<name>``): the last 4 columns of a row of 196 ran a whole 64-column block."""
    t = d.c_type
    lt, rt = panels or (t, t)
    full = f"pt__ukernel_{name}(kc, ap, bp, tile, {b.nr}, 1);"
    lanes = _lanes(d)
    nv = b.nr // lanes
    if parts and nv > 1:
        cases = " ".join(f"case {j}: pt__ukpart{j}_{name}(kc, ap, bp, tile, {b.nr}, 1); break;" for j in range(1, nv))
        full = f"switch ((nr + {lanes - 1}) / {lanes}) {{ {cases} default: {full} }}"
    return f"""\
/* The same on the valid mr x nr corner of a block at the target's ragged edge. */
{attr}static void pt__uedge_{name}(int64_t kc, const {lt} *restrict ap, const {rt} *restrict bp, {t} *restrict c,
                             int64_t ldc, int64_t mr, int64_t nr, int load) {{
  {t} tile[{b.mr} * {b.nr}] = {{0}};
  for (int64_t r = 0; r < mr && load; r++)
    for (int64_t q = 0; q < nr; q++) tile[r * {b.nr} + q] = c[r * ldc + q];
  {full}
  for (int64_t r = 0; r < mr; r++)
    for (int64_t q = 0; q < nr; q++) c[r * ldc + q] = tile[r * {b.nr} + q];
}}
"""


__all__ = ["micro_kernel"]
