"""The scheduler's integer programs stay small (issue 23: every suite kernel compiles within 2 s).

No timing here: isl counts the operations of each ``lexmin``, and the scheduler gives each one a budget
(``pluto.MAX_OPERATIONS``).  adi's hyperplane problems needed about 20500 operations each before their
implicit equalities were made explicit, about 3000 after; validity's Farkas sets come from the pieces
projected on their iterators, which must be exactly the sets the whole pieces give.
"""

from __future__ import annotations

import random

import islpy as isl
import pytest
import sympy

from polytri.ir.builder import to_program
from polytri.schedule import farkas, pluto
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.int_rank import nullspace
from polytri.suite import KERNELS


def test_adi_hyperplanes_fit_a_small_ilp_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    prog = to_program(KERNELS["adi"].build())
    deps = compute_dependences(prog)
    roomy = pluto.pluto_schedule(prog, deps)
    monkeypatch.setattr(pluto, "MAX_OPERATIONS", 6000)  # the code before needed 20500 on one lexmin
    tight = pluto.pluto_schedule(prog, deps)
    assert tight.rows == roomy.rows and len(tight.rows) >= 4


def _validity_from_whole_piece(layout: farkas.Layout, piece: isl.BasicMap, strict: bool) -> isl.BasicSet:
    """The validity set computed the direct way: the Farkas set of the whole piece (parameters included),
    with a zero coefficient for each parameter."""
    src, dst = piece.get_tuple_name(isl.dim_type.in_), piece.get_tuple_name(isl.dim_type.out)
    forms = [f"{layout.const(dst)} - {layout.const(src)}" + (" - 1" if strict else "")]
    forms += ["0"] * len(layout.params)
    forms += [f"-{layout.coeff(src, j)}" for j in range(piece.dim(isl.dim_type.in_))]
    forms += [layout.coeff(dst, j) for j in range(piece.dim(isl.dim_type.out))]
    rational = piece.remove_divs().wrap().coefficients().flatten()
    whole = isl.BasicSet.from_constraint_matrices(
        rational.get_space(), *(getattr(rational, f"{k}_matrix")(*farkas._ORDER) for k in ("equalities", "inequalities")),
        *farkas._ORDER)
    targets = [f"f{k}" for k in range(len(forms))]
    eqs = " and ".join(f"{t} = {f}" for t, f in zip(targets, forms))
    m = isl.BasicMap(f"{{ {layout.space()} -> [{', '.join(targets)}] : {eqs} }}")
    return m.intersect_range(whole).domain()


@pytest.mark.parametrize("name", ["ludcmp", "fdtd_2d", "durbin"])
def test_validity_from_projected_pieces_is_exact(name: str) -> None:
    prog = to_program(KERNELS[name].build())
    layout = farkas.Layout.of(prog)
    pieces = farkas.aligned_pieces(compute_dependences(prog).all, prog.params)
    assert pieces
    for piece in pieces:
        for strict in (False, True):
            ours = farkas.basic_set(layout, [farkas.validity(layout, piece, strict=strict)])
            assert ours.is_equal(_validity_from_whole_piece(layout, piece, strict)), (str(piece), strict)


def test_nullspace_is_sympys_basis() -> None:
    rng = random.Random(23)
    for _ in range(300):
        width = rng.randint(1, 5)
        rows = [[rng.choice([0, 0, 1, -1, 2, 3, -2]) for _ in range(width)] for _ in range(rng.randint(1, 4))]
        expected = [[sympy.Rational(x) for x in v] for v in sympy.Matrix(rows).nullspace()]
        assert nullspace(rows) == expected, rows
