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
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import islpy as isl

from ..ir.program import Program


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
        out = [self.u(k) for k in range(len(self.params))] + ["w"]
        for name, m in self.statements:
            out += [self.coeff(name, j) for j in reversed(range(m))] + [self.const(name)]
        return tuple(out)

    def space(self) -> str:
        return f"[{', '.join(self.names)}]"

    def dims(self, stmt: str) -> int:
        return dict(self.statements)[stmt]


def _affine_sum(terms: list[tuple[int, str]]) -> str:
    parts = [f"{c}*{n}" if c != 1 else n for c, n in terms if c]
    return " + ".join(parts) if parts else "0"


def _preimage(layout: Layout, piece: isl.BasicMap, forms: list[str]) -> isl.BasicSet:
    """Unknowns for which the affine form whose coefficients are ``forms`` is >= 0 on ``piece``.  The
    scheduler asks again for the same pieces at each band (the dependences not yet carried), so the
    answers are kept, by the piece's text (isl objects are not hashable by value)."""
    return _preimage_cached(layout, str(piece), tuple(forms))


@functools.lru_cache(maxsize=4096)
def _preimage_cached(layout: Layout, piece_text: str, forms: tuple[str, ...]) -> isl.BasicSet:
    wrapped = isl.BasicMap(piece_text).remove_divs().wrap()
    farkas = _integral(wrapped.coefficients().flatten())
    targets = [f"f{k}" for k in range(len(forms))]
    eqs = " and ".join(f"{t} = {f}" for t, f in zip(targets, forms))
    m = isl.BasicMap(f"{{ {layout.space()} -> [{', '.join(targets)}] : {eqs} }}")
    return m.intersect_range(farkas).domain()


_ORDER = (isl.dim_type.cst, isl.dim_type.param, isl.dim_type.set, isl.dim_type.div)


def _integral(rational: isl.BasicSet) -> isl.BasicSet:
    """The integer points of a rational set: the same constraints without the rational flag.  Pluto wants
    integer unknowns; ``coefficients()`` answers a rational set, with one constraint per vertex and ray of
    the piece (a thousand for a convolution's 10-dimensional box), so the constraints are copied as
    matrices, not printed and parsed again: for 60 pieces of 192 constraints each, 2.7 ms against 274 ms."""
    return isl.BasicSet.from_constraint_matrices(rational.get_space(), rational.equalities_matrix(*_ORDER),
                                                 rational.inequalities_matrix(*_ORDER), *_ORDER)


def _piece_dims(piece: isl.BasicMap) -> tuple[str, str, int, int]:
    src = piece.get_tuple_name(isl.dim_type.in_)
    dst = piece.get_tuple_name(isl.dim_type.out)
    return src, dst, piece.dim(isl.dim_type.in_), piece.dim(isl.dim_type.out)


def validity(layout: Layout, piece: isl.BasicMap, *, strict: bool = False) -> isl.BasicSet:
    """Unknowns with ``phi_T(t) - phi_S(s) >= 0`` on the dependence piece ``S[s] -> T[t]`` (``>= 1`` with
    ``strict``: the hyperplane carries the whole piece)."""
    src, dst, ns, nt = _piece_dims(piece)
    forms = [_affine_sum([(1, layout.const(dst)), (-1, layout.const(src))] + ([(-1, "1")] if strict else []))]
    forms += ["0"] * len(layout.params)
    forms += [_affine_sum([(-1, layout.coeff(src, j))]) for j in range(ns)]
    forms += [layout.coeff(dst, j) for j in range(nt)]
    return _preimage(layout, piece, forms)


def bounding(layout: Layout, piece: isl.BasicMap) -> isl.BasicSet:
    """Unknowns with ``u . n + w - (phi_T(t) - phi_S(s)) >= 0`` on the dependence piece, for
    non-negative parameters (sizes): a parameter that the piece leaves unbounded below would otherwise
    force its ``u`` to zero for every dependence.  This is only a cost; validity stays exact."""
    src, dst, ns, nt = _piece_dims(piece)
    if layout.params:
        nonneg = " and ".join(f"{p} >= 0" for p in layout.params)
        piece = piece.intersect_params(isl.BasicSet(f"[{', '.join(layout.params)}] -> {{ : {nonneg} }}"))
    forms = [_affine_sum([(1, "w"), (-1, layout.const(dst)), (1, layout.const(src))])]
    forms += [layout.u(k) for k in range(len(layout.params))]
    forms += [layout.coeff(src, j) for j in range(ns)]
    forms += [_affine_sum([(-1, layout.coeff(dst, j))]) for j in range(nt)]
    return _preimage(layout, piece, forms)


def aligned_pieces(deps: isl.UnionMap, params: tuple[str, ...]) -> list[isl.BasicMap]:
    """The convex pieces of ``deps``, with the program's parameters in program order."""
    space = isl.Set(f"[{', '.join(params)}] -> {{ : }}").get_space()
    pieces: list[isl.BasicMap] = []
    deps.foreach_map(lambda m: m.align_params(space).coalesce().foreach_basic_map(pieces.append))
    return pieces
