"""Square transposes in vector registers, for packing a right operand stored along ``k``.

A linear layer's weight ``W[j, k]`` is read along ``k`` while its panel holds rows of ``k``
(:func:`.contraction_model.transpose_block`; where the squares apply:
:func:`.contraction_model.transpose_lanes`).  Element by element, that packing is one scalar load and
one scalar store per value: on a float32 layer 256 -> 1024 on 256 rows it was about a sixth of the
kernel's time (profiled, one thread).  ``pt__transpose_<type>`` moves a ``lanes x lanes`` square instead:
``lanes`` vector loads of runs of ``k``, ``log2(lanes)`` rounds of two-vector shuffles (each round swaps
the off-diagonal halves of every square of twice its distance), and ``lanes`` vector stores of panel rows.
The values are moved, never computed: the panel is the same as the scalar loop's.
"""

from __future__ import annotations

from ..dtypes import DType
from .blocking import vector_bytes

INT_OF_SIZE = {4: "int32_t", 8: "int64_t"}
"""The C integer type of each float size: the shuffles' index vectors."""


def transpose_kernel(d: DType, lanes: int, simd: bool) -> str:
    """``pt__transpose_<type>(src, lds, ldk, dst, ldd)``: ``dst[k * ldd + q] = src[q * lds + k * ldk]`` for
    ``q, k < lanes``; in vector registers where ``ldk`` is 1 (and ``simd``), else element by element."""
    t, name = d.c_type, d.name
    loop = (f"  for (int q = 0; q < {lanes}; q++)\n"
            f"    for (int k = 0; k < {lanes}; k++) dst[k * ldd + q] = src[q * lds + k * ldk];\n")
    head = (f"/* dst[k * ldd + q] = src[q * lds + k * ldk] for q, k < {lanes} (a square of a packed panel) */\n"
            f"static inline void pt__transpose_{name}(const {t} *restrict src, int64_t lds, int64_t ldk, "
            f"{t} *restrict dst, int64_t ldd) {{\n")
    if not simd:
        return head + loop + "}\n"
    rounds = []
    dist = lanes // 2
    while dist:
        lo = [j if not j & dist else lanes + j - dist for j in range(lanes)]
        hi = [j + dist if not j & dist else lanes + j for j in range(lanes)]
        rounds.append(f"  {{\n    const pt__vi lo = {{{', '.join(map(str, lo))}}}, hi = {{{', '.join(map(str, hi))}}};\n"
                      f"    #pragma GCC unroll {lanes}\n"
                      f"    for (int i = 0; i < {lanes}; i++)\n"
                      f"      if (!(i & {dist})) {{\n"
                      f"        const pt__vt a = r[i], b = r[i + {dist}];\n"
                      f"        r[i] = __builtin_shuffle(a, b, lo);\n"
                      f"        r[i + {dist}] = __builtin_shuffle(a, b, hi);\n"
                      f"      }}\n  }}\n")
        dist //= 2
    return (head
            + f"  typedef {t} pt__vt __attribute__((vector_size({vector_bytes()})));\n"
            + f"  typedef {INT_OF_SIZE[d.itemsize]} pt__vi __attribute__((vector_size({vector_bytes()})));\n"
            + "  if (ldk != 1) {\n" + "".join("  " + x + "\n" for x in loop.splitlines()) + "    return;\n  }\n"
            + f"  pt__vt r[{lanes}];\n"
            + f"  #pragma GCC unroll {lanes}\n"
            + f"  for (int q = 0; q < {lanes}; q++) __builtin_memcpy(&r[q], src + q * lds, sizeof(pt__vt));\n"
            + "".join(rounds)
            + f"  #pragma GCC unroll {lanes}\n"
            + f"  for (int k = 0; k < {lanes}; k++) __builtin_memcpy(dst + k * ldd, &r[k], sizeof(pt__vt));\n"
            + "}\n")


def swapped_pairs_kernel(lanes: int) -> str:
    """``pt__transpose_pairs_swapped``: :func:`transpose_kernel`'s float32 square of 32-bit units, each unit's
    two 16-bit halves then exchanged: the pairs of ``k`` of a panel that holds them in descending order
    (``vdpbf16ps``'s, :data:`.dot_product.BF16_PAIRS`), moved from a weight's rows in ascending order."""
    return (f"/* pt__transpose_float32, then the two halves of each 32-bit unit exchanged (pairs of k, descending) */\n"
            f"static inline void pt__transpose_pairs_swapped(const float *restrict src, int64_t lds, int64_t ldk, "
            f"float *restrict dst, int64_t ldd) {{\n"
            f"  pt__transpose_float32(src, lds, ldk, dst, ldd);\n"
            f"  for (int k = 0; k < {lanes}; k++)\n"
            f"    for (int q = 0; q < {lanes}; q++) {{\n"
            f"      uint32_t u;\n"
            f"      __builtin_memcpy(&u, dst + k * ldd + q, 4);\n"
            f"      u = (u >> 16) | (u << 16);\n"
            f"      __builtin_memcpy(dst + k * ldd + q, &u, 4);\n"
            f"    }}\n"
            f"}}\n")


__all__ = ["INT_OF_SIZE", "swapped_pairs_kernel", "transpose_kernel"]
