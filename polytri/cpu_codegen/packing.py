"""The C of a packed contraction nest (:mod:`.contraction`): panels, micro-kernel calls and the fallback.

The printed nest, for the calling thread's share of the batch points, rows or columns:

* the bounds of the rows and columns, the boxes of the summed and batch iterators (origins, extents and
  strides, enumerated flat), and the thread's share;
* the panels: ``KC x NC`` of ``R`` and ``MR x KC`` of ``L`` (the thread's scratch buffers, :mod:`.scratch`; with
  :attr:`~.contraction_model.Contraction.pack_l_once`, ``L`` packed once for every batch point when it
  fits), and the run-time check that ``L`` is finite where zero-padded panels are summed;
* for each batch point, each block of ``NC`` columns and ``KC`` sums: ``R`` packed, then for each block
  of ``MR`` rows ``L`` packed and one micro-kernel call per ``NR`` columns (the edge variant on ragged
  blocks), and the epilogue on each block once its sums are complete;
* the fallback, when the panels could not be allocated or ``L`` is not finite: the same sums with ``k``
  in order, in plain loops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..ir.expr import Access, Cast, Expr, Var, substitute, transform, var_names
from ..ir.program import Statement
from .blocking import WHOLE_L_BYTES
from .c_signature import vla_bound
from .cexpr import cname, comment, index_expr
from .contraction_model import Contraction, left_units, transpose_block, transpose_lanes
from .dot_product import dot_blocking, slot, stored
from .row_pack import rows_kernel_name
from .scratch import SLOTS

Env = dict[str, str]
"""The C value of some statement iterators."""


def contraction_lines(c: Contraction, *, value: Callable[[Expr], str], ref: Callable[[Access], str],
                      bind: Callable[[Env, tuple[Expr, ...]], list[str]],
                      assign: Callable[[Env], list[str]], ldc: str, threads: bool,
                      epilogue: Callable[[Env, str | None], list[str]] | None = None) -> list[str]:
    """C statements computing the nest ``c`` (indented by two spaces per level from 0).

    ``value(e)`` prints a factor converted to the nest's type, ``ref(a)`` an array element, ``bind(env,
    exprs)`` the declarations of the statement iterators that ``exprs`` use (``env`` gives the C value of
    the nest's iterators; the others are :attr:`Contraction.fixed`), ``assign(env)`` the statement
    itself, ``epilogue(env, tile)`` :attr:`Contraction.epilogue` (``env`` gives the target's iterators;
    ``tile``: the C variable holding the element summed, for its reads of the target, else ``None``); ``ldc``
    is the distance between two rows of the target.  With ``threads``, the calling
    thread of an OpenMP team computes its share: of the batch points when there are at least as many as
    threads, else of the rows or of the columns."""
    printer = _NestPrinter(c, value=value, ref=ref, bind=bind, assign=assign, epilogue=epilogue, ldc=ldc)
    return printer.print(threads)


def nest_lines(c: Contraction, *, value: Callable[[Expr], str], ref: Callable[[Access], str],
               instance: Callable[[Statement, tuple[Expr, ...]], list[str]], shape: tuple[Expr, ...],
               threads: bool) -> list[str]:
    """:func:`contraction_lines`, where ``instance(st, args)`` prints one instance of a statement, its
    iterators given by ``args``, and ``shape`` is the target array's."""
    st = c.statement

    def bind(env: Env, exprs: tuple[Expr, ...]) -> list[str]:
        used = set().union(*(var_names(e, "iter") for e in exprs))
        return [f"const int64_t {cname(it)} = {env[it] if it in env else index_expr(c.fixed[it]).text};"
                for it in st.iterators if it in used]

    def assign(env: Env) -> list[str]:
        return instance(st, tuple(Var(env[it], "iter") if it in env else c.fixed[it] for it in st.iterators))

    def epilogue(env: Env, tile: str | None) -> list[str]:
        assert c.epilogue is not None
        at = dict(c.epilogue_at)
        e = c.epilogue
        if tile is not None:  # its reads of the target (all of the element just summed) from the tile
            e = replace(e, value=transform(e.value, lambda n: Cast(c.dtype.name, Var(tile, "param"))
                                           if isinstance(n, Access) and n.array == st.target.array else None))
        values: dict[str, Expr] = {it: Var(f"({v})", "iter") for it, v in env.items()}  # inside a function of them
        return instance(e, tuple(Var(env[x.name], "iter") if isinstance(x, Var) else substitute(x, values)
                                 for x in (at[it] for it in c.epilogue.iterators)))

    return contraction_lines(c, value=value, ref=ref, bind=bind, assign=assign,
                             ldc=" * ".join(vla_bound(e) for e in shape[c.row_subscript + 1:]), threads=threads,
                             epilogue=epilogue if c.epilogue is not None else None)


def _matrix(e: Expr, k: str, b: str) -> bool:
    """Whether ``e`` is one array element (converted or not: a bfloat16 weight read as float32) with ``k``
    and ``b`` each alone in a subscript of its own, so that distinct ``(k, b)`` read distinct elements."""
    while isinstance(e, Cast):
        e = e.operand
    if not isinstance(e, Access):
        return False
    alone = [var_names(ix, "iter") for ix in e.index]
    return alone.count({k}) == 1 and alone.count({b}) == 1 and all(
        names in ({k}, {b}) or not names & {k, b} for names in alone)


class _NestPrinter:
    """Prints one packed contraction nest into :attr:`lines`, section by section (see the module
    docstring); the callbacks are those of :func:`contraction_lines`."""

    def __init__(self, c: Contraction, *, value: Callable[[Expr], str], ref: Callable[[Access], str],
                 bind: Callable[[Env, tuple[Expr, ...]], list[str]], assign: Callable[[Env], list[str]],
                 epilogue: Callable[[Env, str | None], list[str]] | None, ldc: str):
        self.c = c
        self.value, self.ref, self.bind, self.assign, self.epilogue, self.ldc = value, ref, bind, assign, epilogue, ldc
        self.b = dot_blocking(c.dtype, c.dot)
        self.t = c.dtype.c_type
        self.kern = f"{c.dtype.name if c.dot is None else c.dot.name}{'add' if c.op == '+' else 'sub'}"
        self.lt, self.rt = (self.t, self.t) if c.dot is None else (c.dot.left_type, c.dot.right_type)
        """C types of the elements of the left and right panels."""
        self.g = 1 if c.dot is None else c.dot.k_step
        """The panels hold whole groups of this many values of ``k`` (:mod:`.dot_product`)."""
        self.gl, self.gr = (1, 1) if c.dot is None else (c.dot.lgroup, c.dot.group)
        """Values of ``k`` side by side in the left and right panels."""
        self.kenv = {it: f"pt__k{j}" for j, it in enumerate(c.k)}
        """The summed iterators, from the flat sum counter's point (:meth:`unflatten`)."""
        self.zenv = {it: f"pt__z{j}" for j, it in enumerate(c.batch)}
        """The batch iterators, from the batch point (:meth:`unflatten`)."""
        self.guard: tuple[Expr, ...] = () if c.guard is None else (c.guard,)
        self.lines: list[str] = []

    # -- helpers -------------------------------------------------------------------------------------
    def out(self, depth: int, *text: str) -> None:
        """Lines at indentation ``depth``."""
        self.lines.extend("  " * depth + x for x in text)

    def scoped(self, depth: int, env: Env, exprs: tuple[Expr, ...], body: list[str]) -> None:
        """``body`` in a block declaring the statement iterators that ``exprs`` use."""
        binds = self.bind(env, exprs)
        if binds:
            self.out(depth, "{")
            self.out(depth + 1, *binds, *body)
            self.out(depth, "}")
        else:
            self.out(depth, *body)

    def bound(self, it: str, i: int) -> str:
        """The lower (``i = 0``) or exclusive upper (``i = 1``) bound of the nest's iterator ``it``."""
        return index_expr(self.c.bounds[it][i]).text

    def panel_value(self, e: Expr) -> str:
        """A factor as the panels hold it: converted to the nest's type, or the stored value's bits."""
        return self.value(e) if self.c.dot is None else self.ref(stored(e))

    def grouped(self, n: str) -> str:
        """``n`` values of ``k`` rounded up to whole groups (:attr:`g`)."""
        return n if self.g == 1 else f"{n}g"

    def at_k(self, kk: str, width: int, pos: str, left: bool) -> str:
        """Index in a panel of ``width`` values per ``k`` of the value of sum index ``kk`` at ``pos``, in the
        ``left`` panel or the right one."""
        if self.c.dot is None:
            return f"{kk} * {width} + {pos}"
        g = self.gl if left else self.gr
        return f"{kk} / {g} * {g * width} + {pos} * {g} + {slot(self.c.dot, kk, g)}"

    def slot_of(self, offset: int) -> int:
        """The slot in its group of the right panel of the ``offset``-th value of ``k`` of the group."""
        assert self.c.dot is not None
        return self.gr - 1 - offset if self.c.dot.descending else offset

    def in_sum(self, kk: str, n: str) -> str:
        """Condition for sum index ``kk`` to be one of ``n``, when the panels run on to whole groups."""
        return "" if self.g == 1 else f"{kk} < {n} && "

    def extents(self, names: tuple[str, ...], prefix: str) -> None:
        """Origins ``<prefix>o<j>``, extents ``<prefix>n<j>`` and strides ``<prefix>s<j>`` of a box
        enumerated with its last iterator fastest, and the number of its points, ``<prefix>n``."""
        for j, it in enumerate(names):
            self.out(1, f"const int64_t {prefix}o{j} = {self.bound(it, 0)}, "
                        f"{prefix}n{j} = pt__max_int64_t(0, {self.bound(it, 1)} - {prefix}o{j});")
        for j in reversed(range(len(names))):
            self.out(1, f"const int64_t {prefix}s{j} = "
                        + (f"{prefix}s{j + 1} * {prefix}n{j + 1};" if j < len(names) - 1 else "1;"))
        self.out(1, f"const int64_t {prefix}n = " + (f"{prefix}s0 * {prefix}n0;" if names else "1;"))

    def unflatten(self, depth: int, names: tuple[str, ...], prefix: str, flat: str) -> None:
        """``<prefix><j>``: the point of number ``flat`` of the box of :meth:`extents`."""
        flat = f"({flat})" if " " in flat else flat
        for j in range(len(names)):
            q = f"{flat} / {prefix}s{j}" if j < len(names) - 1 else flat
            self.out(depth, f"const int64_t {prefix}{j} = {prefix}o{j} + " + (f"{q} % {prefix}n{j};" if j else f"{q};"))

    # -- the sections, in order ----------------------------------------------------------------------
    def print(self, threads: bool) -> list[str]:
        """The whole nest."""
        self.header()
        self.shares(threads)
        self.panels()
        self.whole_left()
        self.finiteness_check()
        self.batch_points()
        self.out(1, "}")
        self.out(0, "}")
        return self.lines

    def header(self) -> None:
        """The opening comment, the bounds of the rows and columns, and the boxes of the sums and batch."""
        c, st, b = self.c, self.c.statement, self.b
        self.out(0, f"{{ {comment(f'{st.name}: {st.text()}: packed contraction, {b.mr} x {b.nr} register blocks')}")
        self.out(1, f"const int64_t pt__a0 = {self.bound(c.a, 0)}, pt__a1 = {self.bound(c.a, 1)};",
                 f"const int64_t pt__bg0 = {self.bound(c.b, 0)}, pt__bg1 = {self.bound(c.b, 1)};")
        self.extents(c.k, "pt__k")
        if self.g > 1:
            self.out(1, f"const int64_t pt__kng = (pt__kn + {self.g - 1}) / {self.g} * {self.g};")
        self.extents(c.batch, "pt__z")

    def shares(self, threads: bool) -> None:
        """The calling thread's batch points, rows ``[pt__lo, pt__hi)`` and columns ``[pt__b0, pt__b1)``;
        opens the block that runs when its share is not empty."""
        c, b = self.c, self.b
        # Without batch points enough for every thread, threads share the rows (each packs all of R) or, when
        # R is a matrix read once (its packing costs its memory traffic: a linear layer's weight) and that
        # makes a thread pack fewer elements, the columns (each packs all of L, once per block of NC columns).
        # A convolution's R is its image read several times from cache: its columns stay with the rows, which
        # keep the target's rows on the thread that the next row-parallel nest gives them to (conv 3x3 16->32
        # on 128x128: 1.00 ms by rows, 1.16 ms by columns; the MLP of benchmarks/torch_cpu.py: 5 to 9 % faster).
        by_cols = (f"!pt__by_batch && pt__nt > 1 && pt__bn / pt__nt + pt__an * ((pt__bn / pt__nt + {b.nc - 1}) / "
                   f"{b.nc}) < pt__bn + pt__an / pt__nt * ((pt__bn + {b.nc - 1}) / {b.nc})"
                   if len(c.k) == 1 and _matrix(c.right, c.k[0], c.b) and c.columns is None else "0")
        # The batch points go to the threads when they share them about as evenly as the blocks of rows: 3
        # heads on 2 threads would leave one thread a third of the work idle (ViT's attention), where 50
        # blocks of rows give each thread half.
        by_batch = ("pt__zn >= pt__nt" if c.columns is not None else
                    "pt__zn >= pt__nt && 8 * ((pt__zn + pt__nt - 1) / pt__nt) * pt__blocks"
                    " <= 9 * ((pt__blocks + pt__nt - 1) / pt__nt) * pt__zn")
        self.out(1, ("const int64_t pt__nt = omp_get_num_threads(), pt__me = omp_get_thread_num();" if threads
                     else "const int64_t pt__nt = 1, pt__me = 0;"),
                 "const int64_t " + ("pt__an = pt__max_int64_t(0, pt__a1 - pt__a0), " if c.columns is None else "")
                 + "pt__bn = pt__max_int64_t(0, pt__bg1 - pt__bg0);",
                 "const int64_t " + (f"pt__blocks = (pt__an + {b.mr - 1}) / {b.mr}, " if c.columns is None else "")
                 + f"pt__bblocks = (pt__bn + {b.nr - 1}) / {b.nr};",
                 f"const int pt__by_batch = {by_batch};  /* threads share the batch points, else rows or columns */",
                 f"const int pt__by_cols = {by_cols};",
                 *(self.rows_by_columns() if c.columns is not None else (
                     "const int64_t pt__lo = pt__by_batch || pt__by_cols ? pt__a0 : "
                     f"pt__a0 + pt__blocks * pt__me / pt__nt * {b.mr};",
                     "const int64_t pt__hi = pt__by_batch || pt__by_cols ? pt__a1 : "
                     f"pt__min_int64_t(pt__a1, pt__a0 + pt__blocks * (pt__me + 1) / pt__nt * {b.mr});")),
                 f"const int64_t pt__b0 = !pt__by_cols ? pt__bg0 : pt__bg0 + pt__bblocks * pt__me / pt__nt * {b.nr};",
                 "const int64_t pt__b1 = !pt__by_cols ? pt__bg1 : "
                 f"pt__min_int64_t(pt__bg1, pt__bg0 + pt__bblocks * (pt__me + 1) / pt__nt * {b.nr});",
                 "const int64_t pt__zlo = pt__by_batch ? pt__zn * pt__me / pt__nt : 0;",
                 "const int64_t pt__zhi = pt__by_batch ? pt__zn * (pt__me + 1) / pt__nt : pt__zn;",
                 "if (pt__lo < pt__hi && pt__kn > 0 && pt__b0 < pt__b1 && pt__zlo < pt__zhi) {")

    def row_range(self, row: str, lo: str, hi: str) -> list[str]:
        """``lo = ...; hi = ...;``: the columns ``[lo, hi)`` of row ``row`` of a triangle
        (:attr:`~.contraction_model.Contraction.columns`) within ``[pt__bg0, pt__bg1)``, the variables declared
        before."""
        c = self.c
        assert c.columns is not None
        binds = self.bind({**self.zenv, c.a: row}, c.columns)
        first, last = (index_expr(e).text for e in c.columns)
        body = [f"{lo} = pt__max_int64_t(pt__bg0, {first});", f"{hi} = pt__min_int64_t(pt__bg1, {last});"]
        return ["{", *("  " + x for x in binds + body), "}"] if binds else body

    def rows_by_columns(self) -> list[str]:
        """The thread's rows ``[pt__lo, pt__hi)`` of a triangle: whole blocks of ``MR`` rows, shared by the
        number of columns they hold (even shares of the rows would give the last thread most of the work)."""
        mr = self.b.mr
        count = ["int64_t pt__cl, pt__ch;", *self.row_range("pt__fa", "pt__cl", "pt__ch"),
                 "pt__work += pt__max_int64_t(0, pt__ch - pt__cl);"]
        return ["int64_t pt__lo = pt__a1, pt__hi = pt__a1, pt__total = 0, pt__work = 0;",
                "for (int64_t pt__fa = pt__a0; pt__fa < pt__a1; pt__fa++) {", *("  " + x for x in count), "}",
                "pt__total = pt__work, pt__work = 0;",
                f"for (int64_t pt__ic = pt__a0; pt__ic < pt__a1; pt__ic += {mr}) {{",
                "  const int64_t pt__owner = pt__total == 0 ? 0 : pt__min_int64_t(pt__nt - 1, pt__work * pt__nt / pt__total);",
                "  if (pt__owner == pt__me && pt__lo == pt__a1) pt__lo = pt__ic;",
                f"  if (pt__owner == pt__me) pt__hi = pt__min_int64_t(pt__a1, pt__ic + {mr});",
                f"  for (int64_t pt__fa = pt__ic; pt__fa < pt__min_int64_t(pt__a1, pt__ic + {mr}); pt__fa++) {{",
                *("    " + x for x in count), "  }", "}"]

    def block_columns(self, depth: int) -> None:
        """Of a triangle, the columns of each row of the block (``pt__cl``, ``pt__ch``), their union
        ``[pt__ul, pt__uh)`` and their intersection ``[pt__il, pt__ih)``; the block is skipped when none of
        its columns is in this panel's."""
        mr = self.b.mr
        self.out(depth, f"int64_t pt__cl[{mr}], pt__ch[{mr}], pt__ul = INT64_MAX, pt__uh = INT64_MIN, "
                        "pt__il = INT64_MIN, pt__ih = INT64_MAX;",
                 "for (int64_t pt__r = 0; pt__r < pt__mr; pt__r++) {")
        self.out(depth + 1, *self.row_range("pt__ic + pt__r", "pt__cl[pt__r]", "pt__ch[pt__r]"),
                 "pt__il = pt__max_int64_t(pt__il, pt__cl[pt__r]), pt__ih = pt__min_int64_t(pt__ih, pt__ch[pt__r]);",
                 "if (pt__cl[pt__r] < pt__ch[pt__r])",
                 "  pt__ul = pt__min_int64_t(pt__ul, pt__cl[pt__r]), pt__uh = pt__max_int64_t(pt__uh, pt__ch[pt__r]);")
        self.out(depth, "}",
                 "if (pt__uh <= pt__jc || pt__ul >= pt__jc + pt__nc) continue;  /* no column of the block here */")

    def panels(self) -> None:
        """The panel buffers of ``R`` and ``L`` (none under the test hook ``PT_NO_PANELS``)."""
        b, lt, rt = self.b, self.lt, self.rt
        self.out(0, "#ifndef PT_NO_PANELS  /* a test hook: -DPT_NO_PANELS runs the fallback below */")
        # R's panel only as large as this nest's blocks need: the thread keeps it (scratch.py)
        kn = "pt__kng" if self.g > 1 else "pt__kn"
        self.out(2, f"{rt} *pt__bp = pt__scratch({SLOTS['right']}, sizeof({rt}) * pt__min_int64_t({b.kc}, {kn}) * "
                    f"pt__min_int64_t({b.nc}, (pt__b1 - pt__b0 + {b.nr - 1}) / {b.nr} * {b.nr}));",
                 f"{lt} *pt__ap = pt__scratch({SLOTS['left']}, sizeof({lt}) * {b.kc * b.mr});")
        self.out(0, "#else")
        self.out(2, f"{rt} *pt__bp = NULL;" if lt != rt else f"{lt} *pt__bp = NULL, *pt__ap = NULL;")
        if lt != rt:
            self.out(2, f"{lt} *pt__ap = NULL;")
        self.out(0, "#endif")
        self.out(2, "int pt__exact = 1;")

    def whole_left(self) -> None:
        """``pt__aw``: the panels of ``L`` for all the thread's rows and sums, packed once for every batch
        point when ``L`` does not change with it and they fit (else ``NULL``)."""
        c, b, t = self.c, self.b, self.lt
        kn = self.grouped("pt__kn")
        if not c.pack_l_once:
            self.out(2, f"{t} *pt__aw = NULL;")
            return
        # L does not change with the batch point: its panels are packed once, for all rows, when they
        # fit in the L2 cache (a convolution's weights), instead of once per batch point
        self.out(2, f"const int64_t pt__wn = (pt__hi - pt__lo + {b.mr - 1}) / {b.mr} * {b.mr} * {kn};",
                 f"{t} *pt__aw = pt__ap && pt__wn <= {WHOLE_L_BYTES // c.dtype.itemsize} ? "
                 f"pt__scratch({SLOTS['whole_left']}, sizeof({t}) * pt__wn) : NULL;",
                 "if (pt__aw)",
                 f"  for (int64_t pt__ic = pt__lo; pt__ic < pt__hi; pt__ic += {b.mr}) {{",
                 f"    const int64_t pt__mr = pt__min_int64_t({b.mr}, pt__hi - pt__ic);")
        self.left_loops(4, "pt__kf", kn, "pt__kf", lambda depth, at: self.scoped(
            depth, {**self.kenv, c.a: "pt__ic + pt__r"}, (c.left,),
            [f"pt__aw[(pt__ic - pt__lo) / {b.mr} * {kn} * {b.mr} + {at}] = "
             f"{self.in_sum('pt__kf', 'pt__kn')}pt__r < pt__mr ? {self.panel_value(c.left)} : 0;"]
            if self.g > 1 else
            [f"pt__aw[((pt__ic - pt__lo) / {b.mr} * pt__kn + pt__kf) * {b.mr} + pt__r] = "
             f"pt__r < pt__mr ? {self.value(c.left)} : 0;"]))
        self.out(3, "}")

    def left_loops(self, depth: int, kk: str, n: str, flat: str, body: Callable[[int, str], None]) -> None:
        """The loops over the rows ``pt__r`` of a block and the sum indices ``kk < n`` (the summed iterators
        from the flat counter ``flat``) that pack a left panel, ``body(depth, at)`` printing the store of
        the value at index ``at`` of the block's panel: rows outermost where the panel holds runs of ``k``
        of each row (tiles: ``L`` and the panel both read and written along ``k``, a run at a time, which
        gcc vectorizes), else ``k`` outermost (the panel written along the rows)."""
        c, b, gl = self.c, self.b, self.gl
        if gl > self.gr:
            self.out(depth, f"for (int64_t pt__r = 0; pt__r < {b.mr}; pt__r++)",
                     f"  for (int64_t pt__kg = 0; pt__kg < {n}; pt__kg += {gl})",
                     f"    for (int64_t pt__kx = 0; pt__kx < {gl}; pt__kx++) {{",
                     f"      const int64_t {kk} = pt__kg + pt__kx;")
            self.unflatten(depth + 3, c.k, "pt__k", flat)
            body(depth + 3, f"pt__kg * {b.mr} + pt__r * {gl} + pt__kx")
            self.out(depth + 2, "}")
        else:
            self.out(depth, f"for (int64_t {kk} = 0; {kk} < {n}; {kk}++) {{")
            self.unflatten(depth + 1, c.k, "pt__k", flat)
            self.out(depth + 1, f"for (int64_t pt__r = 0; pt__r < {b.mr}; pt__r++)")
            body(depth + 2, self.at_k(kk, b.mr, "pt__r", left=True))
            self.out(depth, "}")

    def finiteness_check(self) -> None:
        """With zero-padded panels, ``pt__exact``: whether every value of ``L`` on its box is finite."""
        c = self.c
        if not c.padded or c.dtype.kind != "f":
            return
        self.out(2, "/* the zeros of the padded panels are summed too: exact while every value of L is finite */",
                 "for (int64_t pt__fa = pt__a0; pt__fa < pt__a1; pt__fa++)",
                 "  for (int64_t pt__kf = 0; pt__kf < pt__kn; pt__kf++) {")
        self.unflatten(4, c.k, "pt__k", "pt__kf")
        self.scoped(4, {c.a: "pt__fa", **self.kenv}, (c.left,), [f"pt__exact &= isfinite({self.value(c.left)});"])
        self.out(3, "}")

    def batch_points(self) -> None:
        """The loop over the thread's batch points: the packed sums, else the fallback; frees the panels."""
        c = self.c
        self.out(2, "for (int64_t pt__z = pt__zlo; pt__z < pt__zhi; pt__z++) {")
        self.unflatten(3, c.batch, "pt__z", "pt__z")
        if c.batch_guard is not None:
            self.scoped(3, self.zenv, (c.batch_guard,), [f"if (!({index_expr(c.batch_guard).text})) continue;"])
        self.packed()
        self.fallback()
        self.out(2, "}")  # the panels are the thread's scratch buffers, kept for the next call

    def packed(self) -> None:
        """The packed computation of one batch point: blocks of ``NC`` columns by ``KC`` sums of ``R``
        packed, then the row blocks (:meth:`row_blocks`)."""
        b = self.b
        tiles = self.c.dot is not None and self.c.dot.block is not None
        self.out(3, "if (pt__ap && pt__bp && pt__exact) {")
        if tiles:
            self.out(4, "pt__tiles_open();  /* this thread's tile configuration, for the micro-kernel (tiles.py) */")
        self.out(3, f"  for (int64_t pt__jc = pt__b0; pt__jc < pt__b1; pt__jc += {b.nc}) {{",
                 f"    const int64_t pt__nc = pt__min_int64_t({b.nc}, pt__b1 - pt__jc);",
                 f"    for (int64_t pt__pc = 0; pt__pc < pt__kn; pt__pc += {b.kc}) {{",
                 f"      const int64_t pt__kc = pt__min_int64_t({b.kc}, pt__kn - pt__pc);")
        if self.g > 1:
            self.out(6, f"const int64_t pt__kcg = (pt__kc + {self.g - 1}) / {self.g} * {self.g};")
        self.pack_right()
        self.row_blocks()
        self.out(5, "}")
        self.out(4, "}")
        if tiles:
            self.out(4, "pt__tiles_close();")

    def pack_right(self) -> None:
        """The ``KC x NC`` panel of ``R``, zero outside the columns and the guard."""
        c, b = self.c, self.b
        cond = " && ".join(["pt__jr + pt__q < pt__nc", *(index_expr(g).text for g in self.guard)])
        kc = self.grouped("pt__kc")
        pack_r = [f"pt__bp[pt__jr * {kc} + {self.at_k('pt__kk', b.nr, 'pt__q', left=False)}] = "
                  f"{self.in_sum('pt__kk', 'pt__kc')}{cond} ? {self.panel_value(c.right)} : 0;"]
        renv = {**self.zenv, **self.kenv, c.b: "pt__jc + pt__jr + pt__q"}
        kb = transpose_block(c)
        if kb is not None:
            # R is stored along k (a transposed weight): read it that way, write the panel with a stride, kb
            # values of k at a time (see transpose_block)
            self.out(6, f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr})",
                     f"  for (int64_t pt__kb = 0; pt__kb < {kc}; pt__kb += {kb})")
            self.square_transposes(kb, renv)
            self.out(8, f"for (int64_t pt__q = 0; pt__q < {b.nr}; pt__q++)",
                     f"  for (int64_t pt__kk = pt__kb; pt__kk < pt__min_int64_t(pt__kb + {kb}, {kc}); pt__kk++) {{")
            self.unflatten(10, c.k, "pt__k", "pt__pc + pt__kk")
            self.scoped(10, renv, (c.right, *self.guard), pack_r)
            self.out(9, "}")
        elif self.g > 1:
            # a group of k at a time: each column's values of the group are consecutive in the panel, so
            # the loop along the columns stores whole groups (an element at a time, the stores had a stride);
            # a block of NR columns at a time, the panel written in order (see the loop below)
            self.out(6, f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr})",
                     f"  for (int64_t pt__kk = 0; pt__kk < {kc}; pt__kk += {self.gr})",
                     f"    for (int64_t pt__q = 0; pt__q < {b.nr}; pt__q++) {{")
            for slot_ in range(self.gr):
                self.out(8, "{")
                self.unflatten(9, c.k, "pt__k", f"pt__pc + pt__kk + {slot_}")
                self.scoped(9, renv, (c.right, *self.guard),
                            [f"pt__bp[pt__jr * {kc} + pt__kk * {b.nr} + pt__q * {self.gr} + {self.slot_of(slot_)}] = "
                             f"pt__kk + {slot_} < pt__kc && {cond} ? {self.panel_value(c.right)} : 0;"])
                self.out(8, "}")
            self.out(7, "}")
        else:
            # the panel written in order, a block of NR columns at a time; k outermost, each k stored to
            # every block of the panel, NR * KC elements apart (64 KiB for float32 on AVX-512), all in one
            # set of the L1 cache: GPT-2's weight packing took 9% of the model's samples (perf, one thread)
            self.out(6, f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr})",
                     f"  for (int64_t pt__kk = 0; pt__kk < {kc}; pt__kk++) {{")
            self.unflatten(8, c.k, "pt__k", "pt__pc + pt__kk")
            self.out(8, f"for (int64_t pt__q = 0; pt__q < {b.nr}; pt__q++)")
            self.scoped(9, renv, (c.right, *self.guard), pack_r)
            self.out(7, "}")

    def square_transposes(self, kb: int, renv: Env) -> None:
        """Where :func:`.contraction_model.transpose_lanes` allows it, a whole block of the right panel (``NR``
        columns by ``kb`` values of ``k``) moved in squares (:mod:`.transpose`): the addresses of ``R`` at
        the square's corner and one column and one ``k`` further give its strides; ragged blocks fall
        through to the element loop that follows (after ``else``)."""
        c, b = self.c, self.b
        lanes = transpose_lanes(c)
        right = c.right if c.dot is None else stored(c.right)
        if lanes is None or not isinstance(right, Access):  # transpose_lanes: R is an element stored along k
            return
        g = self.gr if c.dot is not None else 1  # values of k per moved unit
        self.out(8, f"if (pt__kb + {kb} <= pt__kc && pt__jr + {b.nr} <= pt__nc) {{  /* a whole block: squares */",
                 f"  for (int64_t pt__qt = 0; pt__qt < {b.nr}; pt__qt += {lanes})",
                 f"    for (int64_t pt__kt = pt__kb; pt__kt < pt__kb + {kb}; pt__kt += {lanes * g}) {{",
                 f"      const {self.rt} *pt__s[3];")
        for j, (dq, dk) in enumerate(((0, 0), (1, 0), (0, g))):
            self.out(11, "{")
            self.unflatten(12, c.k, "pt__k", f"pt__pc + pt__kt + {dk}")
            self.scoped(12, {**renv, c.b: f"pt__jc + pt__jr + pt__qt + {dq}"}, (right,),
                        [f"pt__s[{j}] = &{self.ref(right)};"])
            self.out(11, "}")
        if c.dot is None:
            self.out(11, f"pt__transpose_{c.dtype.name}(pt__s[0], pt__s[1] - pt__s[0], pt__s[2] - pt__s[0], "
                         f"pt__bp + pt__jr * pt__kc + pt__kt * {b.nr} + pt__qt, {b.nr});")
        else:  # groups of k as float32 units: strides in units, the square's corner in the grouped panel
            swap = "pairs_swapped" if c.dot.descending else "float32"
            self.out(11, f"pt__transpose_{swap}((const float *)pt__s[0], (pt__s[1] - pt__s[0]) / {g}, "
                         f"(pt__s[2] - pt__s[0]) / {g}, (float *)(pt__bp + pt__jr * {self.grouped('pt__kc')} + "
                         f"pt__kt * {b.nr} + pt__qt * {g}), {b.nr});")
        self.out(10, "}")
        self.out(8, "} else")

    def row_blocks(self) -> None:
        """For each block of ``MR`` rows: its panel of ``L`` (unless packed whole), one micro-kernel call
        per ``NR`` columns, and the epilogue once the block's sums are complete."""
        c, b, t = self.c, self.b, self.lt
        self.out(6,
                 f"for (int64_t pt__ic = pt__lo; pt__ic < pt__hi; pt__ic += {b.mr}) {{",
                 f"  const int64_t pt__mr = pt__min_int64_t({b.mr}, pt__hi - pt__ic);")
        if c.columns is not None:
            self.block_columns(7)
        self.out(6,
                 f"  const {t} *pt__apk = pt__aw ? pt__aw + ((pt__ic - pt__lo) / {b.mr} * {self.grouped('pt__kn')} + "
                 f"pt__pc) * {b.mr} : pt__ap;",
                 "  if (!pt__aw) {")
        runs = self.left_runs(8)  # the element loop then goes in its else branch, one level deeper
        self.left_loops(9 if runs else 8, "pt__kk", self.grouped("pt__kc"), "pt__pc + pt__kk", lambda depth, at: self.scoped(
            depth, {**self.zenv, **self.kenv, c.a: "pt__ic + pt__r"}, (c.left,),
            [f"pt__ap[{at}] = {self.in_sum('pt__kk', 'pt__kc')}pt__r < pt__mr ? "
             f"{self.panel_value(c.left)} : 0;"]))
        if runs:
            self.out(8, "}")
        self.out(7, "}")
        if c.epilogue is not None:
            self.out(7, f"{self.t} pt__ct[{b.mr * b.nr}] __attribute__((aligned(64)));  /* a block's sums */")
        self.out(7,
                 f"for (int64_t pt__jr = 0; pt__jr < pt__nc; pt__jr += {b.nr}) {{",
                 f"  const int64_t pt__nr = pt__min_int64_t({b.nr}, pt__nc - pt__jr);")
        self.kernel_calls()
        if self.epilogue is not None:  # one block of k (keeps_target_local): the block's sums are complete
            self.out(8, "for (int64_t pt__r = 0; pt__r < pt__mr; pt__r++)  /* its epilogue, from the tile */",
                     "  for (int64_t pt__q = 0; pt__q < pt__nr; pt__q++) {",
                     f"    const {self.t} pt__cv = pt__ct[pt__r * {b.nr} + pt__q];")
            self.out(10, *self.epilogue({**self.zenv, c.a: "pt__ic + pt__r", c.b: "pt__jc + pt__jr + pt__q"}, "pt__cv"))
            self.out(9, "}")
        self.out(7, "}")
        self.out(6, "}")

    def left_runs(self, depth: int) -> bool:
        """Where :func:`.contraction_model.left_units` allows it, a whole block of rows (and of groups of
        ``k``) packed from their runs along ``k`` by ``pt__pack_rows`` (:mod:`.row_pack`), opening the
        ``else`` that the element loop goes in; ``False`` (nothing printed) elsewhere."""
        c, b = self.c, self.b
        units = left_units(c)
        if units is None:
            return False
        left = c.left if c.dot is None else stored(c.left)
        assert isinstance(left, Access)  # left_units: one array element
        whole = f"pt__mr == {b.mr}" + (f" && pt__kc % {self.gl} == 0" if self.gl > 1 else "")
        self.out(depth, f"if ({whole}) {{  /* whole rows stored along k: their runs interleaved */",
                 f"  const void *pt__rows[{b.mr}];")
        self.unflatten(depth + 1, c.k, "pt__k", "pt__pc")
        for r in range(b.mr):
            self.scoped(depth + 1, {**self.zenv, **self.kenv, c.a: f"pt__ic + {r}"}, (left,),
                        [f"pt__rows[{r}] = &{self.ref(left)};"])
        n = "pt__kc" if self.gl == 1 else f"pt__kc / {self.gl}"
        self.out(depth + 1, f"{rows_kernel_name(b.mr, *units)}(pt__rows, {n}, pt__ap);")
        self.out(depth, "} else {")
        return True

    def kernel_calls(self) -> None:
        """The micro-kernel on a full register block, its edge variant on a ragged one."""
        c, b, t, kern = self.c, self.b, self.t, self.kern
        load = "pt__pc > 0" if c.zero_init else "1"  # the first block of k starts at zero when the nest inits
        st = c.statement
        bp = f"pt__bp + pt__jr * {self.grouped('pt__kc')}"
        ldc = str(b.nr) if c.epilogue is not None else self.ldc
        calls = [f"if (pt__mr == {b.mr} && pt__nr == {b.nr}) "
                 f"pt__ukernel_{kern}(pt__kc, pt__apk, {bp}, pt__c, {ldc}, {load});",
                 f"else pt__uedge_{kern}(pt__kc, pt__apk, {bp}, pt__c, {ldc}, pt__mr, "
                 f"pt__nr, {load});"]
        if c.columns is not None:
            self.out(8, "const int64_t pt__j0 = pt__jc + pt__jr;",
                     "if (pt__j0 >= pt__uh || pt__j0 + pt__nr <= pt__ul) continue;  /* outside the triangle */")
            calls = [
                "if (pt__j0 >= pt__il && pt__j0 + pt__nr <= pt__ih) {  /* inside the triangle */",
                *("  " + x for x in calls),
                "} else {  /* across its edge: in a tile, of which only the triangle's elements are stored */",
                f"  {t} pt__ct[{b.mr * b.nr}];",
                "  for (int64_t pt__r = 0; pt__r < pt__mr; pt__r++)",
                "    for (int64_t pt__q = 0; pt__q < pt__nr; pt__q++)",
                f"      pt__ct[pt__r * {b.nr} + pt__q] = pt__c[pt__r * ({self.ldc}) + pt__q];",
                f"  pt__uedge_{kern}(pt__kc, pt__apk, {bp}, pt__ct, {b.nr}, pt__mr, pt__nr, {load});",
                "  for (int64_t pt__r = 0; pt__r < pt__mr; pt__r++)",
                "    for (int64_t pt__q = 0; pt__q < pt__nr; pt__q++)",
                "      if (pt__j0 + pt__q >= pt__cl[pt__r] && pt__j0 + pt__q < pt__ch[pt__r])",
                f"        pt__c[pt__r * ({self.ldc}) + pt__q] = pt__ct[pt__r * {b.nr} + pt__q];",
                "}"]
        if c.epilogue is not None:  # the block's sums in the tile (one block of k: they start at zero)
            self.out(8, "{", f"  {t} *pt__c = pt__ct;", *("  " + x for x in calls), "}")
            return
        self.scoped(8, {**self.zenv, c.a: "pt__ic", c.b: "pt__jc + pt__jr"}, (st.target,),
                    [f"{t} *pt__c = &{self.ref(st.target)};", *calls])

    def fallback(self) -> None:
        """Without panels, or with a value of ``L`` that is not finite: the statement in plain loops, ``k``
        in order (after the zero init, before the epilogue, when the nest folds them in)."""
        c = self.c
        st = c.statement
        self.out(3, "} else {  /* no memory for the panels, or a value of L that is not finite: the same sums, k in order */",
                 "  for (int64_t pt__fa = pt__lo; pt__fa < pt__hi; pt__fa++) {")
        if c.zero_init:
            self.out(5, "for (int64_t pt__fb = pt__b0; pt__fb < pt__b1; pt__fb++)")
            self.scoped(6, {**self.zenv, c.a: "pt__fa", c.b: "pt__fb"}, (st.target,), [f"{self.ref(st.target)} = 0;"])
        b0, b1 = "pt__b0", "pt__b1"
        if c.columns is not None:
            b0, b1 = "pt__cl", "pt__ch"
            self.out(5, "int64_t pt__cl, pt__ch;", *self.row_range("pt__fa", "pt__cl", "pt__ch"))
        self.out(5, "for (int64_t pt__kf = 0; pt__kf < pt__kn; pt__kf++) {")
        self.unflatten(6, c.k, "pt__k", "pt__kf")
        self.out(6, f"for (int64_t pt__fb = {b0}; pt__fb < {b1}; pt__fb++) {{")
        stmt = self.assign({**self.zenv, **self.kenv, c.a: "pt__fa", c.b: "pt__fb"})
        if self.guard:
            self.scoped(7, {**self.zenv, **self.kenv, c.b: "pt__fb"}, self.guard,
                        [f"if ({index_expr(self.guard[0]).text}) {{", *("  " + x for x in stmt), "}"])
        else:
            self.out(7, *stmt)
        self.out(6, "}")
        self.out(5, "}")
        if self.epilogue is not None:
            self.out(5, "for (int64_t pt__fb = pt__b0; pt__fb < pt__b1; pt__fb++) {")
            self.out(6, *self.epilogue({**self.zenv, c.a: "pt__fa", c.b: "pt__fb"}, None))
            self.out(5, "}")
        self.out(4, "}")
        self.out(3, "}")


__all__ = ["contraction_lines", "nest_lines"]
