"""Gemm-like contractions on the CPU: packed panels and a register-blocked micro-kernel, as generated C.

A *contraction nest* is three perfectly nested loops, in any order, with rectangular bounds (no bound
uses another of the three counters), around one statement of contraction form
(:mod:`polytri.ir.contraction`)

    T[..., a, b] = T[..., a, b] + L * R        (or ``-``; or ``L * R + T[...]``)

where ``a`` and ``b`` are exactly the counters of two of the loops, the third counter ``k`` is summed
over, and the target, ``L``, ``R`` and the sum all have one type, float32 or float64.  The only dependences among its instances are then those of the sum over ``k`` for
each ``(a, b)``, so any order that keeps every sum's ``k`` ascending computes the same values bit for
bit (``-ffp-contract=off``: no fused multiply-add here or in the loops it replaces).

The nest is computed the way BLIS computes a gemm: blocks of ``KC`` values of ``k`` by ``NC`` columns of
``R`` are packed into a contiguous buffer, ``MR`` rows of ``L`` into another, and a micro-kernel keeps an
``MR x NR`` block of the target in registers while it runs over the ``KC`` values of ``k``.  Packing
makes every access of the micro-kernel contiguous whatever the layout of ``L`` and ``R`` (a transposed
operand, an expression such as ``alpha * A[i, k]``); ragged edges are zero-padded in the panels and
computed through a small tile, so only valid elements of the target are read or written.  Threads
share the rows ``a``; each packs its own panels.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..dtypes import FLOAT32, FLOAT64, DType
from ..ir.contraction import contraction_form
from ..ir.expr import Access, Expr, Var, var_names
from ..ir.program import Program, Statement
from ..ir.types import Typer
from ..loop_ast import Block, For, Node, Run, loop_upper
from .cexpr import comment, index_expr

log = logging.getLogger("polytri.cpu")


@functools.cache
def vector_bytes() -> int:
    """Width of the widest vector registers of this machine (the code is built with -march=native)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    if "avx512f" in flags:
        return 64
    return 32 if "avx2" in flags or "avx" in flags else 16


@dataclass(frozen=True)
class Blocking:
    """Block sizes of the packed contraction, in elements."""

    mr: int
    """Rows of the register block."""
    nr: int
    """Columns of the register block (whole vectors)."""
    kc: int
    """Values of ``k`` per packed block (a ``KC x NR`` panel of ``R`` stays in L1)."""
    nc: int
    """Columns per packed block of ``R`` (``KC x NC`` elements: half of a 1 MiB L2)."""


def blocking(d: DType) -> Blocking:
    """The register block fills the vector registers: with AVX-512's 32 registers, 4 rows of 4 vectors
    (16 accumulators; a hand-written float32 gemm 1024³ ran at 155 GFLOP/s with it against 138 with 8 x 2,
    one quiet run here); with 16 registers, 6 rows of 2 vectors (12 accumulators, the shape BLIS uses on
    Haswell; no such machine was measured)."""
    lanes = vector_bytes() // d.itemsize
    mr, nr = (4, 4 * lanes) if vector_bytes() == 64 else (6, 2 * lanes)
    kc = 256
    return Blocking(mr, nr, kc, (512 << 10) // (kc * d.itemsize))


@dataclass(frozen=True)
class Contraction:
    """A contraction nest found in the loop AST."""

    statement: Statement
    run: Run
    """The statement's instance inside the nest."""
    loops: dict[str, For]
    """The three loops by role: ``a`` (target rows), ``k`` (the sum), ``b`` (target columns)."""
    iterators: dict[str, str]
    """The statement iterator each role's counter stands for."""
    left: Expr
    """The factor of ``(a, k)``, in the statement's iterators."""
    right: Expr
    """The factor of ``(k, b)``, in the statement's iterators."""
    op: str
    """``+`` or ``-``."""
    dtype: DType
    """float32 or float64."""


def _chain(n: For) -> tuple[list[For], Run] | None:
    """Three perfectly nested loops from ``n`` down to one statement, or ``None``."""
    loops = [n]
    body: Node = n.body
    while True:
        while isinstance(body, Block) and len(body.body) == 1:
            body = body.body[0]
        if isinstance(body, For) and len(loops) < 3:
            loops.append(body)
            body = body.body
            continue
        break
    if len(loops) != 3 or not isinstance(body, Run):
        return None
    return loops, body


def find_contraction(n: For, program: Program, typer: Typer) -> Contraction | None:
    """The contraction nest rooted at ``n``, or ``None``."""
    found = _chain(n)
    if found is None:
        return None
    loops, run = found
    counters = {lp.var for lp in loops}
    for lp in loops:
        if lp.step != 1 or loop_upper(lp) is None:
            return None
        if (var_names(lp.lower, "iter") | var_names(lp.cond, "iter")) & (counters - {lp.var}):
            return None  # a triangle: not a box
    st = program.statement(run.statement)
    by_counter: dict[str, str] = {}
    for it, arg in zip(st.iterators, run.args):
        if isinstance(arg, Var) and arg.kind == "iter" and arg.name in counters:
            by_counter[arg.name] = it
        elif var_names(arg, "iter") & counters:
            return None  # an iterator that is not plainly one counter (a skewed nest)
    if len(by_counter) != 3:
        return None
    form = contraction_form(st)
    names = {v: k for k, v in by_counter.items()}  # iterator -> counter
    if form is None or form.a not in names or form.b not in names:
        return None
    it_a, it_b = form.a, form.b
    it_k = next(it for it in names if it not in (it_a, it_b))
    if it_k not in form.summed:
        return None
    left, right, op, target, value = form.left, form.right, form.op, st.target, st.value
    d = typer(target).dtype
    if d not in (FLOAT32, FLOAT64) or any(typer(e).dtype is not d for e in (value, value.lhs, value.rhs,
                                                                            left, right)):
        return None
    roles = {"a": names[it_a], "k": names[it_k], "b": names[it_b]}
    by_var = {lp.var: lp for lp in loops}
    return Contraction(st, run, {r: by_var[c] for r, c in roles.items()}, {"a": it_a, "k": it_k, "b": it_b},
                       left, right, op, d)


def describe(c: Contraction) -> str:
    """One line for a kernel's decisions."""
    b = blocking(c.dtype)
    it = c.iterators
    return (f"contraction {c.statement.name} (rows {it['a']}, columns {it['b']}, sum over {it['k']}, "
            f"{c.dtype.name}): packed {b.kc} x {b.nc} and {b.mr} x {b.kc} panels, {b.mr} x {b.nr} register-"
            f"blocked micro-kernel")


# -- C -------------------------------------------------------------------------------------------------
def micro_kernel(d: DType, op: str, simd: bool) -> str:
    """The register-blocked micro-kernel and its edge variant for type ``d`` and sum operator ``op``, as
    static C functions named ``pt__ukernel_<type><add|sub>`` and ``pt__uedge_<type><add|sub>``."""
    b = blocking(d)
    t = d.c_type
    name = f"{d.name}{'add' if op == '+' else 'sub'}"
    vec = "    #pragma omp simd\n" if simd else ""
    return f"""\
/* C[r][q] {op}= sum over k of ap[k][r] * bp[k][q]: an {b.mr} x {b.nr} block held in registers while k runs;
   ap is a packed {b.mr}-row panel of the left factor, bp a packed {b.nr}-column panel of the right one. */
static void pt__ukernel_{name}(int64_t kc, const {t} *restrict ap, const {t} *restrict bp, {t} *restrict c,
                               int64_t ldc) {{
  {t} acc[{b.mr}][{b.nr}];
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) acc[r][q] = c[r * ldc + q];
  for (int64_t k = 0; k < kc; k++) {{
    #pragma GCC unroll {b.mr}
    for (int r = 0; r < {b.mr}; r++) {{
      const {t} av = ap[k * {b.mr} + r];
{vec}    for (int q = 0; q < {b.nr}; q++) acc[r][q] = acc[r][q] {op} av * bp[k * {b.nr} + q];
    }}
  }}
  for (int r = 0; r < {b.mr}; r++)
    for (int q = 0; q < {b.nr}; q++) c[r * ldc + q] = acc[r][q];
}}
/* The same on the valid mr x nr corner of a block at the target's ragged edge. */
static void pt__uedge_{name}(int64_t kc, const {t} *restrict ap, const {t} *restrict bp, {t} *restrict c,
                             int64_t ldc, int64_t mr, int64_t nr) {{
  {t} tile[{b.mr} * {b.nr}] = {{0}};
  for (int64_t r = 0; r < mr; r++)
    for (int64_t q = 0; q < nr; q++) tile[r * {b.nr} + q] = c[r * ldc + q];
  pt__ukernel_{name}(kc, ap, bp, tile, {b.nr});
  for (int64_t r = 0; r < mr; r++)
    for (int64_t q = 0; q < nr; q++) c[r * ldc + q] = tile[r * {b.nr} + q];
}}
"""


def contraction_lines(c: Contraction, *, value: Callable[[Expr], str], ref: Callable[[Access], str],
                      bind: Callable[[dict[str, str], Expr], list[str]], assign: Callable[[dict[str, str]], list[str]],
                      ldc: str, threads: bool) -> list[str]:
    """C statements computing the nest ``c`` (indented by two spaces per level from 0).

    ``value(e)`` prints a factor converted to the nest's type, ``ref(a)`` an array element, ``bind(env,
    e)`` the declarations of the statement iterators that ``e`` uses (``env`` gives the C value of the
    nest's iterators; the others keep their scheduled values), ``assign(env)`` the statement itself;
    ``ldc`` is the distance between two rows of the target.  With ``threads``, the calling thread of an
    OpenMP team computes its share of the rows."""
    b = blocking(c.dtype)
    t = c.dtype.c_type
    it = c.iterators
    kern = f"{c.dtype.name}{'add' if c.op == '+' else 'sub'}"
    lo = {r: index_expr(c.loops[r].lower).text for r in "akb"}
    hi = {r: index_expr(loop_upper(c.loops[r])).text for r in "akb"}  # type: ignore[arg-type]
    st = c.statement
    lines = [f"{{ {comment(f'{st.name}: {st.text()}: packed contraction, {b.mr} x {b.nr} register blocks')}"]

    def block(depth: int, env: dict[str, str], e: Expr, body: list[str]) -> None:
        binds = bind(env, e)
        if binds:
            lines.append("  " * depth + "{")
            lines.extend("  " * (depth + 1) + x for x in binds + body)
            lines.append("  " * depth + "}")
        else:
            lines.extend("  " * depth + x for x in body)

    lines += [f"  const int64_t pt__a0 = {lo['a']}, pt__a1 = {hi['a']};",
              f"  const int64_t pt__k0 = {lo['k']}, pt__k1 = {hi['k']};",
              f"  const int64_t pt__b0 = {lo['b']}, pt__b1 = {hi['b']};",
              ("  const int64_t pt__nt = omp_get_num_threads(), pt__me = omp_get_thread_num();" if threads
               else "  const int64_t pt__nt = 1, pt__me = 0;"),
              f"  const int64_t pt__blocks = pt__a1 > pt__a0 ? (pt__a1 - pt__a0 + {b.mr - 1}) / {b.mr} : 0;",
              f"  const int64_t pt__lo = pt__a0 + pt__blocks * pt__me / pt__nt * {b.mr};",
              f"  const int64_t pt__hi = pt__min_int64_t(pt__a1, pt__a0 + pt__blocks * (pt__me + 1) / pt__nt * {b.mr});",
              "  if (pt__lo < pt__hi && pt__k0 < pt__k1 && pt__b0 < pt__b1) {",
              "#ifndef PT_NO_PANELS  /* a test hook: -DPT_NO_PANELS runs the fallback below */",
              f"    {t} *pt__bp = aligned_alloc(64, sizeof({t}) * {b.kc * b.nc});",
              f"    {t} *pt__ap = aligned_alloc(64, sizeof({t}) * {b.kc * b.mr});",
              "#else",
              f"    {t} *pt__bp = NULL, *pt__ap = NULL;",
              "#endif",
              "    if (pt__ap && pt__bp) {",
              f"      for (int64_t pt__jc = pt__b0; pt__jc < pt__b1; pt__jc += {b.nc}) {{",
              f"        const int64_t pt__nc = pt__min_int64_t({b.nc}, pt__b1 - pt__jc);",
              f"        for (int64_t pt__pc = pt__k0; pt__pc < pt__k1; pt__pc += {b.kc}) {{",
              f"          const int64_t pt__kc = pt__min_int64_t({b.kc}, pt__k1 - pt__pc);",
              f"          for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr})",
              "            for (int64_t pt__kk = 0; pt__kk < pt__kc; pt__kk++)",
              f"              for (int64_t pt__q = 0; pt__q < {b.nr}; pt__q++)"]
    block(8, {it["k"]: "pt__pc + pt__kk", it["b"]: "pt__jc + pt__jr + pt__q"}, c.right,
          [f"pt__bp[pt__jr * pt__kc + pt__kk * {b.nr} + pt__q] = pt__jr + pt__q < pt__nc ? {value(c.right)} : 0;"])
    lines += [f"          for (int64_t pt__ic = pt__lo; pt__ic < pt__hi; pt__ic += {b.mr}) {{",
              f"            const int64_t pt__mr = pt__min_int64_t({b.mr}, pt__hi - pt__ic);",
              "            for (int64_t pt__kk = 0; pt__kk < pt__kc; pt__kk++)",
              f"              for (int64_t pt__r = 0; pt__r < {b.mr}; pt__r++)"]
    block(8, {it["a"]: "pt__ic + pt__r", it["k"]: "pt__pc + pt__kk"}, c.left,
          [f"pt__ap[pt__kk * {b.mr} + pt__r] = pt__r < pt__mr ? {value(c.left)} : 0;"])
    lines += [f"            for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr}) {{",
              f"              const int64_t pt__nr = pt__min_int64_t({b.nr}, pt__nc - pt__jr);"]
    block(7, {it["a"]: "pt__ic", it["b"]: "pt__jc + pt__jr"}, st.target,
          [f"{t} *pt__c = &{ref(st.target)};",
           f"if (pt__mr == {b.mr} && pt__nr == {b.nr}) "
           f"pt__ukernel_{kern}(pt__kc, pt__ap, pt__bp + pt__jr * pt__kc, pt__c, {ldc});",
           f"else pt__uedge_{kern}(pt__kc, pt__ap, pt__bp + pt__jr * pt__kc, pt__c, {ldc}, pt__mr, pt__nr);"])
    lines += ["            }", "          }", "        }", "      }",
              "    } else {  /* no memory for the panels: the same sums in the scheduled order, on these rows */",
              "      for (int64_t pt__fa = pt__lo; pt__fa < pt__hi; pt__fa++)",
              "        for (int64_t pt__fk = pt__k0; pt__fk < pt__k1; pt__fk++)",
              "          for (int64_t pt__fb = pt__b0; pt__fb < pt__b1; pt__fb++) {"]
    lines += ["            " + x for x in assign({it["a"]: "pt__fa", it["k"]: "pt__fk", it["b"]: "pt__fb"})]
    lines += ["          }", "    }", "    free(pt__ap);", "    free(pt__bp);", "  }", "}"]
    return lines


__all__ = ["Blocking", "Contraction", "blocking", "contraction_lines", "describe",
           "find_contraction", "micro_kernel", "vector_bytes"]
