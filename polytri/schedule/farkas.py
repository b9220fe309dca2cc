"""Farkas linearization of Pluto's constraints, with isl's ``coefficients()``.

The unknowns of one hyperplane search live in one integer space, the *coefficient space*:

    [u_0 .. u_{p-1}, w, (for each statement S: c_S reversed, c_S0)]

where ``phi_S(i) = c_S . i + c_S0`` is the statement's hyperplane and ``u . n + w`` bounds the dependence
distances (n = parameters).  Statement coefficients are stored innermost iterator first, so that the
lexicographic minimum prefers hyperplanes along outer loops (Pluto+ orders them the same way).

For a dependence piece P (a basic map ``S[s] -> T[t]``), isl's ``coefficients()`` of P gives exactly the
affine forms ``c0 + c_n . n + c_s . s + c_t . t`` that are non-negative on all of P (the affine form of
Farkas' lemma).  The validity constraint ``phi_T(t) - phi_S(s) >= 0`` and the bounding constraint
``u . n + w - (phi_T(t) - phi_S(s)) >= 0`` are affine forms whose coefficients are affine in the
unknowns, so each becomes a convex set of unknowns: the preimage of the Farkas set.

Constraints on the unknowns are kept as integer matrices (:class:`Rows`, columns: the constant, then the
unknowns in layout order): the preimage is a product of two matrices, and the scheduler builds each
integer program with one ``from_constraint_matrices`` instead of intersecting hundreds of sets of a
hundred dimensions one by one (deriche: 43 statements, 102 unknowns, 255 dependence pieces).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from ..ir.program import Program

#: An affine function of the unknowns: (constant, {column of an unknown (1-based): coefficient}).
Affine = tuple[int, tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class Layout:
    """Names and order of the unknowns of the hyperplane problem."""

    params: tuple[str, ...]
    """Program parameters (the ``u`` have one entry each)."""
    statements: tuple[tuple[str, int], ...]
    """(statement name, number of iterators), in program order."""

    @staticmethod
    def of(program: Program) -> Layout:
        return Layout(program.params, tuple((s.name, len(s.iterators)) for s in program.statements))

    def u(self, k: int) -> str:
        return f"u{k}"

    def coeff(self, stmt: str, j: int) -> str:
        """Coefficient of iterator ``j`` (0 = outermost) of ``stmt``."""
        return f"{stmt}_c{j}"

    def const(self, stmt: str) -> str:
        return f"{stmt}_k"

    @property
    def names(self) -> tuple[str, ...]:
        return _names(self)

    def column(self, name: str) -> int:
        """The matrix column of unknown ``name`` (column 0 holds the constant)."""
        return _columns(self)[name]

    def space(self) -> str:
        return f"[{', '.join(self.names)}]"

    def isl_space(self) -> isl.Space:
        return _isl_space(self)

    def dims(self, stmt: str) -> int:
        return dict(self.statements)[stmt]


@functools.cache
def _names(layout: Layout) -> tuple[str, ...]:
    out = [layout.u(k) for k in range(len(layout.params))] + ["w"]
    for name, m in layout.statements:
        out += [layout.coeff(name, j) for j in reversed(range(m))] + [layout.const(name)]
    return tuple(out)


@functools.cache
def _columns(layout: Layout) -> dict[str, int]:
    return {n: k + 1 for k, n in enumerate(_names(layout))}


@functools.cache
def _isl_space(layout: Layout) -> isl.Space:
    return isl.BasicSet(f"{{ {layout.space()} }}").get_space()


# -- matrices -----------------------------------------------------------------------------------------
_CTX = isl.DEFAULT_CONTEXT


def matrix(rows: Sequence[Mapping[int, int]], cols: int) -> isl.Mat:
    """The ``len(rows) x cols`` integer matrix with the given entries ({column: value}, zero elsewhere).
    Built row by row and concatenated: isl copies a shared matrix on each element set."""
    zero = isl.Mat.alloc(_CTX, 0, cols).add_zero_rows(1)
    mats = []
    for entries in rows:
        m = zero
        for col, v in entries.items():
            if v:
                # an isl.Val, not a Python int: islpy converts an int by trying overloads, which throws
                # (and catches) a C++ exception that AddressSanitizer's interceptor cannot handle
                m = m.set_element_val(0, col, isl.Val.int_from_si(_CTX, v))
        mats.append(m)
    return _stack(mats, cols)


def _stack(mats: Sequence[isl.Mat], cols: int) -> isl.Mat:
    """The matrices one above the other (pairwise, so that each entry is copied log(n) times)."""
    mats = [m for m in mats if m.rows()]
    if not mats:
        return isl.Mat.alloc(_CTX, 0, cols)
    while len(mats) > 1:
        mats = [mats[k].concat(mats[k + 1]) if k + 1 < len(mats) else mats[k] for k in range(0, len(mats), 2)]
    return mats[0]


@dataclass(frozen=True)
class Rows:
    """Affine constraints on the unknowns of a layout: ``eq . [1, x] = 0`` and ``ineq . [1, x] >= 0``."""

    eq: isl.Mat
    ineq: isl.Mat

    @staticmethod
    def of(layout: Layout, eqs: Sequence[Mapping[int, int]] = (), ineqs: Sequence[Mapping[int, int]] = ()) -> Rows:
        cols = len(layout.names) + 1
        return Rows(matrix(eqs, cols), matrix(ineqs, cols))


def stacked(parts: Sequence[Rows]) -> Rows:
    """All the constraints of ``parts``."""
    cols = parts[0].eq.cols()
    return Rows(_stack([p.eq for p in parts], cols), _stack([p.ineq for p in parts], cols))


_ORDER = (isl.dim_type.cst, isl.dim_type.param, isl.dim_type.set, isl.dim_type.div)


def basic_set(layout: Layout, parts: Sequence[Rows]) -> isl.BasicSet:
    """The integer points of the unknowns' space that satisfy every constraint of ``parts``."""
    rows = stacked(parts)
    return isl.BasicSet.from_constraint_matrices(layout.isl_space(), rows.eq, rows.ineq, *_ORDER)


# -- Farkas -------------------------------------------------------------------------------------------
def _preimage(layout: Layout, piece: isl.BasicMap, forms: Sequence[Affine], *, params: bool) -> Rows:
    """Unknowns for which the affine form whose coefficients are ``forms`` (constant, then the parameters
    when ``params``, then the source's and the target's iterators) is >= 0 on ``piece``.  Without
    ``params`` the form has no parameter term, and it is non-negative on ``piece`` exactly when it is on
    the piece's (rational) projection on the iterators: the Farkas set of that projection has fewer
    dimensions and is far cheaper to compute (heat-3d's 7-point dependence: 17 ms against 590 ms), and it
    is exactly the section of the whole Farkas set where the parameters' coefficients are 0.  The
    scheduler asks again for the same pieces at each band (the dependences not yet carried), so the
    Farkas sets are kept, by the piece's text (isl objects are not hashable by value)."""
    eq, ineq = _farkas(str(piece), params)
    sub = _substitution(layout, tuple(forms))
    return Rows(eq.product(sub), ineq.product(sub))


@functools.lru_cache(maxsize=4096)
def _farkas(piece_text: str, params: bool) -> tuple[isl.Mat, isl.Mat]:
    """The constraints of the integer points of the Farkas set of a piece, columns ``[1, c_cst, c_n (when
    ``params``), c_s, c_t]``."""
    wrapped = isl.BasicMap(piece_text).remove_divs().wrap()
    if not params:
        text = str(wrapped)
        brace = text.index("{")
        rational = isl.BasicSet(f"{text[:brace + 1]} rat:{text[brace + 1:]}")  # projected without rounding
        wrapped = rational.project_out(isl.dim_type.param, 0, rational.dim(isl.dim_type.param))
    farkas = wrapped.coefficients().flatten()
    # the rational set's constraints, read as constraints on integer unknowns (Pluto's coefficients are
    # integers); copied as matrices: a convolution's 10-dimensional box has a thousand of them
    return farkas.equalities_matrix(*_ORDER), farkas.inequalities_matrix(*_ORDER)


@functools.lru_cache(maxsize=4096)
def _substitution(layout: Layout, forms: tuple[Affine, ...]) -> isl.Mat:
    """The matrix mapping ``[1, unknowns]`` to ``[1, forms]``."""
    rows: list[dict[int, int]] = [{0: 1}]
    rows += [{0: const, **dict(terms)} for const, terms in forms]
    return matrix(rows, len(layout.names) + 1)


def _piece_dims(piece: isl.BasicMap) -> tuple[str, str, int, int]:
    src = piece.get_tuple_name(isl.dim_type.in_)
    dst = piece.get_tuple_name(isl.dim_type.out)
    return src, dst, piece.dim(isl.dim_type.in_), piece.dim(isl.dim_type.out)


def _sum(layout: Layout, const: int, *terms: tuple[int, str]) -> Affine:
    cols: dict[int, int] = {}
    for c, name in terms:
        cols[layout.column(name)] = cols.get(layout.column(name), 0) + c
    return const, tuple(sorted((k, c) for k, c in cols.items() if c))


def validity(layout: Layout, piece: isl.BasicMap, *, strict: bool = False) -> Rows:
    """Unknowns with ``phi_T(t) - phi_S(s) >= 0`` on the dependence piece ``S[s] -> T[t]`` (``>= 1`` with
    ``strict``: the hyperplane carries the whole piece)."""
    src, dst, ns, nt = _piece_dims(piece)
    forms = [_sum(layout, -1 if strict else 0, (1, layout.const(dst)), (-1, layout.const(src)))]
    forms += [_sum(layout, 0, (-1, layout.coeff(src, j))) for j in range(ns)]
    forms += [_sum(layout, 0, (1, layout.coeff(dst, j))) for j in range(nt)]
    return _preimage(layout, piece, forms, params=False)


def bounding(layout: Layout, piece: isl.BasicMap) -> Rows:
    """Unknowns with ``u . n + w - (phi_T(t) - phi_S(s)) >= 0`` on the dependence piece, for
    non-negative parameters (sizes): a parameter that the piece leaves unbounded below would otherwise
    force its ``u`` to zero for every dependence.  This is only a cost; validity stays exact."""
    src, dst, ns, nt = _piece_dims(piece)
    if layout.params:
        nonneg = " and ".join(f"{p} >= 0" for p in layout.params)
        piece = piece.intersect_params(isl.BasicSet(f"[{', '.join(layout.params)}] -> {{ : {nonneg} }}"))
    forms = [_sum(layout, 0, (1, "w"), (-1, layout.const(dst)), (1, layout.const(src)))]
    forms += [_sum(layout, 0, (1, layout.u(k))) for k in range(len(layout.params))]
    forms += [_sum(layout, 0, (1, layout.coeff(src, j))) for j in range(ns)]
    forms += [_sum(layout, 0, (-1, layout.coeff(dst, j))) for j in range(nt)]
    return _preimage(layout, piece, forms, params=True)


def aligned_pieces(deps: isl.UnionMap, params: tuple[str, ...]) -> list[isl.BasicMap]:
    """The convex pieces of ``deps``, with the program's parameters in program order."""
    space = isl.Set(f"[{', '.join(params)}] -> {{ : }}").get_space()
    pieces: list[isl.BasicMap] = []
    deps.foreach_map(lambda m: m.align_params(space).coalesce().foreach_basic_map(pieces.append))
    return pieces
