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

Where the machine also has AMX tiles (``amx_tile`` and ``amx_bf16``), :data:`BF16_TILES` comes first:
``TDPBF16PS`` on 32 x 32 blocks held in tile registers (:mod:`.tiles`), 16 times the products of one
``vdpbf16ps``.  Its sums are not the loop's bit for bit (each step adds 32 products of a sum, not in the
order of ``k``): they stay within the project's rule for bfloat16, twice eager's own error against
float32.  :func:`dot_product` takes the first instruction of :func:`_choose`'s that the machine has, so
a machine with AVX-512 BF16 only keeps ``vdpbf16ps`` and its exact sums.

Integer contractions are exact in any order.  Those of 8-bit stored values summed in int32
(``int32(X[i, k]) * int32(W[k, j])``: the quantized contractions of the PyTorch frontend) use AVX-512
VNNI: ``vpdpbusd`` multiplies 4 unsigned by 4 signed bytes and adds the 4 products to an int32 lane
(uint8 by int8, either way round: 64 products per instruction), ``vpdpwssd`` 2 by 2 signed 16-bit
values, which holds any other pair of 8-bit types once widened as they are packed.  Products and sums
wrap modulo 2^32 like the loops they replace (built with ``-fwrapv``).

On AVX2 machines (32-byte vectors) every pairing of 8-bit types is widened to int16 pairs and summed
with ``vpmaddwd`` and an add (the byte instruction ``vpmaddubsw`` saturates its pairwise sums).

Used where the machine that builds the kernel has the instructions (``amx_tile`` and ``amx_bf16``,
``avx512_bf16``, ``avx512_vnni``, ``avx2`` in its CPU flags; the kernels are built with ``-march=native``;
for the tiles, Linux must also let the process use them: :func:`.blocking.tiles_permitted`, a warning
where it does not).  The C also
carries a plain version of the same sums for a compiler that does not define ``__AVX512BF16__`` or
``__AVX512VNNI__``.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

from ..dtypes import BFLOAT16, FLOAT32, INT8, INT32, UINT8, DType
from ..ir.expr import Access, Cast, Expr
from ..ir.types import Typer
from .blocking import Blocking, blocking, cpu_flags, tiles_permitted, vector_bytes

log = logging.getLogger("polytri.cpu")


@dataclass(frozen=True)
class DotProduct:
    """A dot-product instruction that the micro-kernel sums the packed panels with."""

    name: str
    """Names the micro-kernel: ``pt__ukernel_<name>add``."""
    group: int
    """Consecutive values of ``k`` side by side in each 32-bit element of the right panel, summed into one
    lane (and in each one of the left panel, unless :attr:`left_group`)."""
    left_type: str
    """C type of an element of the left factor's panels: the stored value's bits, or its widening."""
    right_type: str
    """C type of an element of the right factor's panels."""
    descending: bool
    """The instruction adds a lane's products from its last slot to its first: the panels hold ``k`` in
    descending order within a group, so that the sums run with ``k`` ascending."""
    instruction: str
    """For the kernel's decisions."""
    flags: tuple[str, ...]
    """The CPU flags (``/proc/cpuinfo``) the instruction needs."""
    left_group: int = 0
    """Consecutive values of ``k`` of one row side by side in the left panel, when not :attr:`group`: a
    tile instruction reads each row's values of ``k`` as one contiguous run (:mod:`.tiles`)."""
    block: tuple[int, int] | None = None
    """Rows and columns of the register block, where the instruction fixes them (tiles); ``None``: the
    vector machine's (:func:`.blocking.blocking`)."""

    @property
    def lgroup(self) -> int:
        """Consecutive values of ``k`` of one row side by side in the left panel."""
        return self.left_group or self.group

    @property
    def k_step(self) -> int:
        """Values of ``k`` that one step of the micro-kernel sums: the panels run on, with zeros, to a
        multiple of it."""
        return max(self.group, self.lgroup)

    def available(self) -> bool:
        """Whether this machine has the instruction."""
        return all(f in cpu_flags() for f in self.flags)


BF16_PAIRS = DotProduct("bf16x2", 2, "uint16_t", "uint16_t", True, "AVX-512 BF16 vdpbf16ps", ("avx512_bf16",))
BF16_TILES = DotProduct("bf16amx", 2, "uint16_t", "uint16_t", False, "AMX TDPBF16PS", ("amx_tile", "amx_bf16"),
                        left_group=32, block=(32, 32))
"""AMX: 16 x 16 float32 sums of tiles of 16 rows by 32 values of ``k`` and 16 pairs of ``k`` by 16 columns
(:mod:`.tiles`).  Its panels keep ``k`` ascending within a pair, as the rows of the left tiles do."""
BF16_TILE_PAIRS = DotProduct("bf16x2t", 2, "uint16_t", "uint16_t", False, "AVX-512 BF16 vdpbf16ps",
                             ("avx512_bf16",), left_group=32)
"""``vdpbf16ps`` on the panels of :data:`BF16_TILES`: what the AMX kernel runs where the process may not
use the tiles."""
U8S8_QUADS = DotProduct("u8s8x4", 4, "uint8_t", "int8_t", False, "AVX-512 VNNI vpdpbusd", ("avx512_vnni",))
S8U8_QUADS = DotProduct("s8u8x4", 4, "int8_t", "uint8_t", False, "AVX-512 VNNI vpdpbusd", ("avx512_vnni",))
I16_PAIRS = DotProduct("i16x2", 2, "int16_t", "int16_t", False, "AVX-512 VNNI vpdpwssd", ("avx512_vnni",))
I16_PAIRS_AVX2 = DotProduct("i16x2avx2", 2, "int16_t", "int16_t", False, "AVX2 vpmaddwd", ("avx2",))
"""AVX2 machines (32-byte vectors): any pair of 8-bit types widened to int16 (``vpmaddubsw``, the
unsigned-by-signed byte instruction, saturates its pairwise sums, which the loops do not)."""


def dot_blocking(d: DType, dot: DotProduct | None) -> Blocking:
    """The block sizes of a packed contraction of type ``d`` summed with ``dot`` (``None``: the float
    micro-kernel's)."""
    b = blocking(d, None if dot is None else dot.block)
    assert dot is None or b.kc % dot.k_step == 0
    return b


def _stored_as(e: Expr, typer: Typer, dtype: DType) -> DType | None:
    """The stored type of ``e`` when it is an array element converted to ``dtype``, else ``None``."""
    if not (isinstance(e, Cast) and e.dtype == dtype.name and isinstance(e.operand, Access)):
        return None
    return typer(e.operand).dtype


def _choose(left: DType | None, right: DType | None, dtype: DType) -> tuple[DotProduct, ...]:
    """The instructions for factors stored as ``left`` and ``right`` summed in ``dtype`` on this machine's
    vectors, the best first (whether the machine has them is checked after)."""
    if dtype is FLOAT32:
        return (BF16_TILES, BF16_PAIRS) if left is BFLOAT16 and right is BFLOAT16 and vector_bytes() == 64 else ()
    if dtype is not INT32 or left not in (INT8, UINT8) or right not in (INT8, UINT8):
        return ()
    if vector_bytes() == 32:
        return (I16_PAIRS_AVX2,)
    if left is not right:
        return (U8S8_QUADS if left is UINT8 else S8U8_QUADS,)
    return (I16_PAIRS,)


def _usable(dot: DotProduct) -> bool:
    """Whether this machine has ``dot`` and, for tiles, Linux lets this process use them (refused: a
    warning, once, naming the instruction)."""
    if not dot.available():
        return False
    if dot.block is None or tiles_permitted():
        return True
    if dot.name not in _refused:
        _refused.add(dot.name)
        why = (f"polytri: this CPU has {dot.instruction} but Linux refused this process the AMX tile data "
               "(arch_prctl ARCH_REQ_XCOMP_PERM); its contractions use the next instruction instead")
        log.warning(why)
        warnings.warn(why, stacklevel=2)
    return False


_refused: set[str] = set()
"""The tile instructions whose refusal was reported."""


def _first_usable(dots: tuple[DotProduct, ...]) -> DotProduct | None:
    return next((d for d in dots if _usable(d)), None)


def has_integer_dot() -> bool:
    """Whether this machine sums 8-bit integers with dot-product instructions: AVX-512 VNNI, or AVX2's
    16-bit multiply-add."""
    return (vector_bytes() == 64 and U8S8_QUADS.available()) or (vector_bytes() == 32 and I16_PAIRS_AVX2.available())


def integer_dot_for(left: DType, right: DType) -> DotProduct | None:
    """The instruction this machine sums int32 products of stored ``left`` and ``right`` values with, or
    ``None`` (loops)."""
    return _first_usable(_choose(left, right, INT32)) if has_integer_dot() else None


def integer_dot(left: Expr, right: Expr, typer: Typer) -> bool:
    """Whether an int32 contraction of ``left`` and ``right`` sums 8-bit stored values that this
    machine's instructions sum (the packed contraction takes int32 nests only then)."""
    stored_left, stored_right = _stored_as(left, typer, INT32), _stored_as(right, typer, INT32)
    return stored_left is not None and stored_right is not None and integer_dot_for(stored_left, stored_right) is not None


def dot_product(left: Expr, right: Expr, *, dtype: DType, op: str, typer: Typer, simd: bool) -> DotProduct | None:
    """The dot-product instruction for a contraction of factors ``left`` and ``right`` summed in
    ``dtype`` with ``op``, on this machine, or ``None`` (the micro-kernel of ``dtype``): the first of
    :func:`_choose`'s that the machine has (AMX tiles before ``vdpbf16ps``)."""
    if not simd or op != "+" or vector_bytes() not in (32, 64):
        return None
    return _first_usable(_choose(_stored_as(left, typer, dtype), _stored_as(right, typer, dtype), dtype))


def stored(e: Expr) -> Access:
    """The stored element of a factor that :func:`dot_product` accepted."""
    assert isinstance(e, Cast) and isinstance(e.operand, Access)
    return e.operand


def slot(dot: DotProduct, k: str, group: int | None = None) -> str:
    """C expression: the slot of sum index ``k`` within its group (of ``group`` values: default
    :attr:`DotProduct.group`)."""
    g = dot.group if group is None else group
    return f"({g - 1} - {k} % {g})" if dot.descending else f"{k} % {g}"


@dataclass(frozen=True)
class _Intrinsics:
    """How the micro-kernel of a :class:`DotProduct` is written with AVX-512 or AVX2 intrinsics."""

    macro: str
    """Defined by the compiler where it has the instruction."""
    acc: str
    """Vector type of an accumulator and of a panel vector."""
    load: str
    """An accumulator's load from the address ``{}``."""
    store: str
    """An accumulator's store of ``{1}`` to the address ``{0}``."""
    zero: str
    step: str
    """The accumulation: ``acc``, the broadcast left value ``av`` and the right vector ``bv``."""
    operand: str
    """Vector type of the instruction's operands (``av``, ``bv``)."""
    value: str
    """Plain C: a stored value (the ``{}``) as a factor of the sum's terms."""
    bytes: int = 64
    """Vector width."""

    @property
    def lanes(self) -> int:
        """32-bit lanes of a vector."""
        return self.bytes // 4

    def vector_load(self, address: str) -> str:
        """A panel vector's load (as :attr:`operand`)."""
        if self.bytes == 64:
            return f"({self.operand})_mm512_loadu_si512({address})"
        return f"_mm256_loadu_si256((const __m256i *)({address}))"

    def broadcast(self, word: str) -> str:
        """A 32-bit word in every lane (as :attr:`operand`)."""
        return f"({self.operand})_mm{self.bytes * 8}_set1_epi32({word})"


_INT512 = ("__m512i", "_mm512_loadu_si512({})", "_mm512_storeu_si512({}, {})", "_mm512_setzero_si512()")
_BF16 = _Intrinsics("__AVX512BF16__", "__m512", "_mm512_loadu_ps({})", "_mm512_storeu_ps({}, {})", "_mm512_setzero_ps()",
                    "_mm512_dpbf16_ps(acc, av, bv)", "__m512bh", "pt__bf16_to_f32({})")
_INTRINSICS = {
    BF16_PAIRS.name: _BF16,
    BF16_TILE_PAIRS.name: _BF16,
    U8S8_QUADS.name: _Intrinsics("__AVX512VNNI__", *_INT512, "_mm512_dpbusd_epi32(acc, av, bv)", "__m512i",
                                 "(int32_t){}"),
    S8U8_QUADS.name: _Intrinsics("__AVX512VNNI__", *_INT512, "_mm512_dpbusd_epi32(acc, bv, av)", "__m512i",
                                 "(int32_t){}"),
    I16_PAIRS.name: _Intrinsics("__AVX512VNNI__", *_INT512, "_mm512_dpwssd_epi32(acc, av, bv)", "__m512i",
                                "(int32_t){}"),
    I16_PAIRS_AVX2.name: _Intrinsics("__AVX2__", "__m256i", "_mm256_loadu_si256((const __m256i *)({}))",
                                     "_mm256_storeu_si256((__m256i *)({}), {})", "_mm256_setzero_si256()",
                                     "_mm256_add_epi32(acc, _mm256_madd_epi16(av, bv))", "__m256i", "(int32_t){}",
                                     bytes=32),
}


def dot_micro_kernel(dot: DotProduct, t: str, b: Blocking, panel_rows: int | None = None) -> str:
    """``pt__ukernel_<dot>add``: an ``MR x NR`` block of the target (C type ``t``) plus the sums of the
    panels (``ap``: ``MR`` rows, ``bp``: ``NR`` columns, each a group of ``dot.group`` values of ``k``
    per 32 bits), with the instruction where the compiler has it, else plain C in the same order.

    With a :attr:`DotProduct.left_group`, each row of ``ap`` is a run of that many values of ``k`` and
    the runs of ``panel_rows`` rows follow each other; the kernel computes the block of the first ``MR``
    of them (the caller offsets ``ap`` and ``c`` for the others)."""
    x = _INTRINSICS[dot.name]
    g, lg, rows, lanes = dot.group, dot.lgroup, panel_rows or b.mr, x.lanes
    assert lg == g or not dot.descending
    nv = b.nr // lanes
    order = ("(k + 1 in the first slot, k in the second: the instruction adds the second slot's product "
             "first, so every sum runs with k ascending)" if dot.descending else "(k ascending)")
    slot_c = f"{g - 1} - k % {g}" if dot.descending else f"k % {g}"
    left = f"ap[k / {lg} * {lg * rows} + r * {lg} + {'h' if lg == g else f'k % {lg}'}]"
    term = " * ".join(x.value.format(e) for e in (left, f"bp[k / {g} * {g * b.nr} + q * {g} + h]"))
    pair = (f"ap + p * {g * rows} + r * {g}" if lg == g else
            f"ap + p * {g} / {lg} * {lg * rows} + r * {lg} + p * {g} % {lg}")
    layout = (f"ap holds {b.mr} rows and bp {b.nr} columns, each as groups of {g} values of k {order}" if lg == g else
              f"ap holds runs of {lg} values of k of each row ({rows} rows a run), bp {b.nr} columns as "
              f"groups of {g} values of k {order}")
    unroll = "#pragma GCC unroll"
    return f"""\
/* C[r][q] += sum over k of L[r][k] * R[k][q] with {dot.instruction}: an {b.mr} x {b.nr} block held in registers;
   {layout}.
   Past kc, the panels' last group holds zeros.  With load == 0 the block starts at zero. */
#if defined({x.macro})
#include <immintrin.h>
#endif
static void pt__ukernel_{dot.name}add(int64_t kc, const {dot.left_type} *restrict ap, const {dot.right_type} *restrict bp,
                                  {t} *restrict c, int64_t ldc, int load) {{
#if defined({x.macro})
  const int64_t np = (kc + {g - 1}) / {g};
  {x.acc} acc[{b.mr}][{nv}];
  {unroll} {b.mr}
  for (int r = 0; r < {b.mr}; r++)
    {unroll} {nv}
    for (int v = 0; v < {nv}; v++) acc[r][v] = load ? {x.load.format(f"c + r * ldc + v * {lanes}")} : {x.zero};
  for (int64_t p = 0; p < np; p++) {{
    {x.operand} bv[{nv}];
    {unroll} {nv}
    for (int v = 0; v < {nv}; v++) bv[v] = {x.vector_load(f"bp + p * {g * b.nr} + v * {g * lanes}")};
    {unroll} {b.mr}
    for (int r = 0; r < {b.mr}; r++) {{
      int32_t w;
      __builtin_memcpy(&w, {pair}, sizeof w);
      const {x.operand} av = {x.broadcast("w")};
      {unroll} {nv}
      for (int v = 0; v < {nv}; v++) acc[r][v] = {x.step.replace("acc", "acc[r][v]", 1).replace("bv", "bv[v]")};
    }}
  }}
  {unroll} {b.mr}
  for (int r = 0; r < {b.mr}; r++)
    {unroll} {nv}
    for (int v = 0; v < {nv}; v++) {x.store.format(f"c + r * ldc + v * {lanes}", "acc[r][v]")};
#else
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) {{
      {t} s = load ? c[r * ldc + q] : 0;
      for (int64_t k = 0; k < kc; k++) {{
        const int64_t h = {slot_c};
        s = s + {term};
      }}
      c[r * ldc + q] = s;
    }}
#endif
}}
"""


__all__ = ["BF16_PAIRS", "BF16_TILES", "BF16_TILE_PAIRS", "I16_PAIRS", "I16_PAIRS_AVX2", "S8U8_QUADS", "U8S8_QUADS", "DotProduct", "dot_blocking", "dot_micro_kernel", "dot_product",
           "has_integer_dot", "integer_dot", "integer_dot_for", "slot", "stored"]
