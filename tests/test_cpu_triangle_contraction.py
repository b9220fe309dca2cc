"""Contractions whose columns depend on the row (syrk's lower triangle ``j <= i``) on the packed micro-kernel
(polytri/cpu_codegen/row_columns.py): register blocks inside the triangle, outside it and across its edge,
rows shared among threads by their columns, the fallback loops; every element bit for bit the loops'."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytri as pt
from polytri.cpu_codegen.contraction import Contraction, find_domain_contraction
from polytri.ir.builder import to_program
from polytri.ir.printer import expr_to_str
from polytri.ir.types import program_typer

pytestmark = pytest.mark.cc


def _triangle(lower: str, upper: str, dtype: str = "float64") -> pt.Program:
    """``C[i, j] += alpha * A[i, k] * B[j, k]`` for ``lower <= j < upper`` (in ``i``) in the box
    ``0 <= j < N``."""
    p = pt.Program("tri", params=["M", "N"])
    p.array("C", ("N", "N"), dtype)
    p.array("A", ("N", "M"), dtype)
    p.array("B", ("N", "M"), dtype)
    p.scalar("alpha", dtype)
    with p.loop("i", 0, "N"), p.loop("k", 0, "M"), p.loop("j", 0, "N"):
        with p.when(f"j >= {lower}"), p.when(f"j < {upper}"):
            p.assign("C[i, j] += alpha * A[i, k] * B[j, k]")
    return p


def _found(prog: pt.Program) -> Contraction | None:
    p = to_program(prog)
    return find_domain_contraction(p.statements[0], p, program_typer(p))


def _columns(prog: pt.Program) -> tuple[str, str] | None:
    found = _found(prog)
    assert found is not None
    return None if found.columns is None else (expr_to_str(found.columns[0]), expr_to_str(found.columns[1]))


def _loops(args: dict, lower: str, upper: str) -> np.ndarray:
    """The statement's instances as numpy runs them: for each ``k`` in order, ``C + (alpha * A) * B`` on the
    elements of the triangle (the reference's operations, elementwise)."""
    c, a, b, n = args["C"].copy(), args["A"], args["B"], args["N"]
    i, j = np.indices((n, n))
    inside = (j >= eval(lower, {"i": i, "N": n})) & (j < eval(upper, {"i": i, "N": n}))  # noqa: S307 (our text)
    for k in range(args["M"]):
        c = np.where(inside, c + (c.dtype.type(args["alpha"]) * a[:, k])[:, None] * b[None, :, k], c)
    return c


def _check(prog: pt.Program, lower: str, upper: str, sizes: dict[str, int], options: dict) -> pt.Kernel:
    """The kernel's ``C`` equals the loops' bit for bit; at small sizes :func:`pt.reference` is the oracle, at
    the others (several panels of columns and of sums) :func:`_loops`, checked against it at the small
    ones."""
    rng = np.random.default_rng(3)
    n, m = sizes["N"], sizes["M"]
    dtype = to_program(prog).arrays[0].dtype
    args = {"C": rng.standard_normal((n, n)).astype(dtype), "A": rng.standard_normal((n, m)).astype(dtype),
            "B": rng.standard_normal((n, m)).astype(dtype), "alpha": 1.5, **sizes}
    want = _loops(args, lower, upper)
    if n * n * m <= 10**5:
        ref = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        pt.reference(prog, **ref)
        np.testing.assert_array_equal(ref["C"], want)
    k = pt.compile(prog, "cpu", options=options)
    k(**args)
    np.testing.assert_array_equal(args["C"], want)  # every sum over k in order: equal, not close
    return k


def test_the_columns_of_each_row_are_read_from_the_domain() -> None:
    def at(columns: tuple[str, str] | None, i: int, n: int = 50) -> tuple[int, int]:
        assert columns is not None
        return eval(columns[0], {"i": i, "N": n}), eval(columns[1], {"i": i, "N": n})  # noqa: S307 (our text)
    assert [at(_columns(_triangle("0", "i + 1")), i) for i in (0, 7)] == [(0, 1), (0, 8)]
    assert [at(_columns(_triangle("i", "N")), i) for i in (0, 7)] == [(0, 50), (7, 50)]
    assert at(_columns(_triangle("0", "i - 5")), 9) == (0, 4)  # rows 0 to 5 have none: not among the rows
    assert _found(_triangle("i - 3", "i + 5")) is None  # a band: its domain is not one convex piece here
    p = pt.Program("box", params=["M", "N"])
    p.array("C", ("N", "N"))
    p.array("A", ("N", "M"))
    with p.loop("i", 0, "N"), p.loop("k", 0, "M"), p.loop("j", 0, "N"):
        p.assign("C[i, j] += A[i, k] * A[j, k]")
    assert _columns(p) is None


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("lower", "upper"), [("0", "i + 1"), ("i", "N"), ("0", "i - 5"), ("2 * i", "N"), ("0", "N - i")])
def test_triangles_and_bands_equal_the_loops(lower: str, upper: str, threads: int) -> None:
    prog = _triangle(lower, upper)
    for sizes in ({"N": 37, "M": 19}, {"N": 3, "M": 2}, {"N": 300, "M": 290}):  # 256 x 256 panels: two each
        k = _check(prog, lower, upper, sizes, {"threads": threads})
    record = [d for d in k.decision_records if d.kind == "contraction"]
    assert record and record[0].data["columns"] is not None


def test_float32_and_the_fallback_loops_equal_the_loops() -> None:
    prog = _triangle("0", "i + 1", "float32")
    _check(prog, "0", "i + 1", {"N": 67, "M": 33}, {"threads": 2})
    _check(prog, "0", "i + 1", {"N": 41, "M": 33}, {"threads": 2, "cflags": ("-DPT_NO_PANELS",)})


def test_syrk_runs_its_sums_on_the_micro_kernel_untiled() -> None:
    from polytri.suite import KERNELS
    k = pt.compile(KERNELS["syrk"].build(), "cpu", options={"cflags": "-Wall -Wextra -Werror"})
    assert any(d.kind == "contraction" and d.subject == "S1" for d in k.decision_records)
    assert not any(d.kind == "tile-by-size" for d in k.decision_records)  # the micro-kernel blocks for the caches


_BOUND = st.tuples(st.sampled_from([0, 1, 2]), st.integers(-6, 6)).map(lambda t: f"{t[0]} * i + {t[1]}")
_FROM_N = st.integers(0, 6).map(lambda c: f"N - i - {c}")


def _random_triangle_equals_the_loops(lower: str, upper: str, n: int, m: int, threads: int) -> None:
    # packed where isl gives one piece per bound, the loops otherwise: equal to them either way
    _check(_triangle(lower, upper), lower, upper, {"N": n, "M": m}, {"threads": threads})


@settings(max_examples=8)
@given(_BOUND, st.one_of(_BOUND, _FROM_N), st.integers(1, 90), st.integers(1, 40), st.integers(1, 3))
def test_random_triangles_equal_the_loops(lower: str, upper: str, n: int, m: int, threads: int) -> None:
    _random_triangle_equals_the_loops(lower, upper, n, m, threads)


@pytest.mark.slow
@settings(max_examples=150)
@given(_BOUND, st.one_of(_BOUND, _FROM_N), st.integers(1, 300), st.integers(1, 300), st.integers(1, 3))
def test_random_triangles_fuzz(lower: str, upper: str, n: int, m: int, threads: int) -> None:
    _random_triangle_equals_the_loops(lower, upper, n, m, threads)
