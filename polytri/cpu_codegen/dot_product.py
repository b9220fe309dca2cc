"""Contractions of narrow stored values on the CPU's dot-product instructions.

A packed contraction (:mod:`.contraction`) whose two factors are bfloat16 array elements converted to
float32 (``float32(A[i, k]) * float32(B[k, j])``: what the PyTorch frontend writes for a bfloat16 matrix
product or convolution) can sum them with AVX-512 BF16's ``vdpbf16ps``: each instruction multiplies 16
pairs of bfloat16 values of one operand by 16 pairs of the other and adds both products of a pair to a
float32 lane, twice the products of a float32 fused multiply-add.  The panels then hold the stored 16-bit
values, two consecutive values of ``k`` side by side (half the bytes of float32 panels), instead of their
conversions.

The sums are the float32 loop's, bit for bit, on normal numbers: the product of two bfloat16 values is
exact in float32 (8-bit significands), so a fused and an unfused multiply-add round alike, and the
instruction adds the product of a pair's second slot before the first one's (Intel's definition of
``vdpbf16ps``), so the panels put ``k + 1`` in the first slot and ``k`` in the second: every sum still
runs with ``k`` ascending.  What differs: the instruction treats subnormal inputs and results as zero
(values below 1.2e-38 in magnitude).

Used where the machine that builds the kernel has the instructions (``avx512_bf16`` in its CPU flags; the
kernels are built with ``-march=native``), with AVX-512's 64-byte vectors.  The C also carries a plain
version of the same sums for a compiler that does not define ``__AVX512BF16__``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import BFLOAT16, FLOAT32
from ..ir.expr import Access, Cast, Expr
from ..ir.program import Program
from .blocking import Blocking, cpu_flags, vector_bytes


@dataclass(frozen=True)
class DotProduct:
    """A dot-product instruction that the micro-kernel sums the packed panels with."""

    name: str
    """Names the micro-kernel: ``pt__ukernel_<name>add``."""
    group: int
    """Consecutive values of ``k`` summed by one instruction in each lane (side by side in the panels)."""
    panel_type: str
    """C type of a panel element: the stored value's bits."""
    descending: bool
    """The instruction adds a lane's products from its last slot to its first: the panels hold ``k`` in
    descending order within a group, so that the sums run with ``k`` ascending."""
    instruction: str
    """For the kernel's decisions."""


BF16_PAIRS = DotProduct("bf16x2", 2, "uint16_t", True, "AVX-512 BF16 vdpbf16ps")


def _stored_bf16(e: Expr, program: Program) -> bool:
    """Whether ``e`` is a bfloat16 array element converted to float32."""
    return (isinstance(e, Cast) and e.dtype == FLOAT32.name and isinstance(e.operand, Access)
            and program.array(e.operand.array).dtype == BFLOAT16.name)


def dot_product(left: Expr, right: Expr, *, dtype: str, op: str, program: Program, simd: bool) -> DotProduct | None:
    """The dot-product instruction for a contraction of factors ``left`` and ``right`` summed in
    ``dtype`` with ``op``, on this machine, or ``None`` (the float micro-kernel)."""
    if not simd or op != "+" or dtype != FLOAT32.name or vector_bytes() != 64 or "avx512_bf16" not in cpu_flags():
        return None
    if _stored_bf16(left, program) and _stored_bf16(right, program):
        return BF16_PAIRS
    return None


def stored(e: Expr) -> Access:
    """The stored element of a factor that :func:`dot_product` accepted."""
    assert isinstance(e, Cast) and isinstance(e.operand, Access)
    return e.operand


def slot(dot: DotProduct, k: str) -> str:
    """C expression: the slot of sum index ``k`` within its group."""
    return f"({dot.group - 1} - {k} % {dot.group})" if dot.descending else f"{k} % {dot.group}"


def bf16_micro_kernel(b: Blocking) -> str:
    """``pt__ukernel_bf16x2add``: an ``MR x NR`` float32 block of the target plus the sums of pairs of
    bfloat16 panels (``ap``: ``MR`` rows, ``bp``: ``NR`` columns, each a pair of values of ``k`` per
    32 bits), with ``vdpbf16ps`` where the compiler has it, else plain float32 arithmetic in the same
    order."""
    lanes = 16
    nv = b.nr // lanes
    return f"""\
/* C[r][q] += sum over k of L[r][k] * R[k][q], L and R bfloat16, C float32: an {b.mr} x {b.nr} block held in
   registers; ap holds {b.mr} rows and bp {b.nr} columns, each as pairs of k (k + 1 in the first slot, k in the
   second: vdpbf16ps adds the second slot's product first, so every sum runs with k ascending).  kc may be
   odd: the panels' last pair is then zero in its first slot.  With load == 0 the block starts at zero. */
#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif
static void pt__ukernel_bf16x2add(int64_t kc, const uint16_t *restrict ap, const uint16_t *restrict bp,
                                  float *restrict c, int64_t ldc, int load) {{
#if defined(__AVX512BF16__)
  const int64_t np = (kc + 1) / 2;
  __m512 acc[{b.mr}][{nv}];
  #pragma GCC unroll {b.mr}
  for (int r = 0; r < {b.mr}; r++)
    #pragma GCC unroll {nv}
    for (int v = 0; v < {nv}; v++) acc[r][v] = load ? _mm512_loadu_ps(c + r * ldc + v * {lanes}) : _mm512_setzero_ps();
  for (int64_t p = 0; p < np; p++) {{
    __m512bh bv[{nv}];
    #pragma GCC unroll {nv}
    for (int v = 0; v < {nv}; v++) bv[v] = (__m512bh)_mm512_loadu_si512(bp + p * {2 * b.nr} + v * {2 * lanes});
    #pragma GCC unroll {b.mr}
    for (int r = 0; r < {b.mr}; r++) {{
      int32_t w;
      __builtin_memcpy(&w, ap + p * {2 * b.mr} + r * 2, sizeof w);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(w);
      #pragma GCC unroll {nv}
      for (int v = 0; v < {nv}; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }}
  }}
  #pragma GCC unroll {b.mr}
  for (int r = 0; r < {b.mr}; r++)
    #pragma GCC unroll {nv}
    for (int v = 0; v < {nv}; v++) _mm512_storeu_ps(c + r * ldc + v * {lanes}, acc[r][v]);
#else
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) {{
      float s = load ? c[r * ldc + q] : 0;
      for (int64_t k = 0; k < kc; k++) {{
        const int64_t p = k / 2, h = 1 - k % 2;
        s = s + pt__bf16_to_f32(ap[p * {2 * b.mr} + r * 2 + h]) * pt__bf16_to_f32(bp[p * {2 * b.nr} + q * 2 + h]);
      }}
      c[r * ldc + q] = s;
    }}
#endif
}}
"""


__all__ = ["BF16_PAIRS", "DotProduct", "bf16_micro_kernel", "dot_product", "slot", "stored"]
