"""The contraction nests of a loop AST, decided before printing (``cpu_codegen/nest_plan.py``)."""

from __future__ import annotations

import contextlib

import numpy as np

import polytri as pt
from polytri.cpu_codegen.nest_plan import kernel_statements, plan_nests
from polytri.ir.builder import to_program
from polytri.ir.printer import expr_to_str
from polytri.ir.types import program_typer
from polytri.schedule.choose import choose_schedule
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.loop_ast import For, outermost_loops


def _linear_relu() -> pt.Program:
    """``Y = max(X @ W + b, 0)`` written as three nests: zero, sum, epilogue (the sum over a constant
    extent: every element gets a term, which the folds need)."""
    p = pt.Program("linear_relu", params=["M", "N"])
    p.array("X", ("M", 16), "float32")
    p.array("W", (16, "N"), "float32")
    p.array("b", ("N",), "float32")
    p.array("C", ("M", "N"), "float32")
    p.array("Y", ("M", "N"), "float32")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"):
        p.assign("C[i, j] = 0.0")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"), p.loop("k", 0, 16):
        p.assign("C[i, j] += X[i, k] * W[k, j]")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"):
        p.assign("Y[i, j] = max(C[i, j] + b[j], 0.0)")
    return p


def _plan(prog: pt.Program, microkernel: bool = True, scratch: frozenset[str] = frozenset({"C"})):
    prog = to_program(prog)
    _, _, ast = choose_schedule(prog, compute_dependences(prog), "original", "smart", False, None)
    return ast, plan_nests(ast, prog, program_typer(prog), microkernel=microkernel, simd=True, scratch=scratch)


def test_the_sum_absorbs_its_zero_init_and_its_epilogue() -> None:
    ast, plan = _plan(_linear_relu())
    init, nest, epilogue = outermost_loops(ast)
    assert set(plan.contractions) == {id(nest)}
    found = plan.contractions[id(nest)]
    assert found.zero_init and found.epilogue is not None and found.epilogue.name == "S2"
    assert plan.absorbed == {id(init), id(epilogue)}


def test_an_epilogue_is_not_absorbed_where_the_product_stores_its_target() -> None:
    """``C`` an array the caller sees: the product stores it, and the epilogue reads it back in a nest of
    its own (faster than on each block); the zero init is still folded in."""
    ast, plan = _plan(_linear_relu(), scratch=frozenset())
    init, nest, _ = outermost_loops(ast)
    found = plan.contractions[id(nest)]
    assert found.zero_init and found.epilogue is None and plan.absorbed == {id(init)}


def test_the_statements_the_kernel_computes_include_an_absorbed_epilogue_alone() -> None:
    """What the schedule keeps from the jam is what the C printer will absorb: the epilogue where its
    product's target is a temporary (the printer's ``scratch``), not where the product stores it."""
    prog = to_program(_linear_relu())
    _, _, ast = choose_schedule(prog, compute_dependences(prog), "original", "smart", False, None)
    typer = program_typer(prog)
    assert kernel_statements(ast, prog, typer, simd=True, scratch=frozenset({"C"})) == {"S0", "S1", "S2"}
    assert kernel_statements(ast, prog, typer, simd=True) == {"S0", "S1"}


def test_no_nest_without_the_micro_kernel_option() -> None:
    _, plan = _plan(_linear_relu(), microkernel=False)
    assert not plan.contractions and not plan.absorbed


def test_a_nest_inside_a_loop_is_found_but_absorbs_nothing() -> None:
    """Below the top level only three-loop nests count, and nothing is folded into them."""
    p = pt.Program("batched", params=["B", "M", "N", "K"])
    p.array("X", ("B", "M", "K"), "float32")
    p.array("W", ("K", "N"), "float32")
    p.array("C", ("B", "M", "N"), "float32")
    with p.loop("n", 0, "B"):
        with p.loop("i", 0, "M"), p.loop("j", 0, "N"):
            p.assign("C[n, i, j] = 0.0")
        with p.loop("i", 0, "M"), p.loop("j", 0, "N"), p.loop("k", 0, "K"):
            p.assign("C[n, i, j] += X[n, i, k] * W[k, j]")
    ast, plan = _plan(p)
    (outer,) = outermost_loops(ast)
    assert len(plan.contractions) == 1 and not plan.absorbed
    (loop_id,) = plan.contractions
    assert loop_id != id(outer) and not plan.contractions[loop_id].zero_init
    assert any(id(n) == loop_id for n in _loops(outer))


def _loops(n):
    from polytri.schedule.loop_ast import walk
    return [m for m in walk(n) if isinstance(m, For)]


def _product_then(epilogue: str, y_shape: tuple[int, ...], loops: tuple[tuple[str, int], ...]) -> pt.Program:
    """``C = 0``, ``C += X @ W`` (32 x 8 by 4 summed) then ``epilogue`` over ``loops``, writing ``Y`` of
    ``y_shape``."""
    p = pt.Program("viewed", params=[])
    p.array("X", (32, 4), "float32")
    p.array("W", (4, 8), "float32")
    p.array("bias", (8,), "float32")
    p.array("C", (32, 8), "float32")
    p.array("Y", y_shape, "float32")
    with p.loop("i", 0, 32), p.loop("j", 0, 8):
        p.assign("C[i, j] = 0.0")
    with p.loop("i", 0, 32), p.loop("j", 0, 8), p.loop("k", 0, 4):
        p.assign("C[i, j] += X[i, k] * W[k, j]")
    with contextlib.ExitStack() as stack:
        for name, extent in loops:
            stack.enter_context(p.loop(name, 0, extent))
        p.assign(epilogue)
    return p


def _epilogue_of(prog: pt.Program):
    _, plan = _plan(prog)
    (found,) = plan.contractions.values()
    return found.epilogue, dict(found.epilogue_at)


def test_an_epilogue_reading_the_product_through_a_view_runs_on_each_block() -> None:
    """A statement over (batch, token, column) reading the product's rows as ``16 * n + t`` (a linear
    layer's result viewed back as a batch of sequences) is folded in, its counters functions of the row
    (isl inverts the view on the statement's domain), and the kernel computes what the reference does."""
    prog = _product_then("Y[n, t, j] = max(C[16 * n + t, j] + bias[j], 0.0)", (2, 16, 8),
                         (("n", 2), ("t", 16), ("j", 8)))
    epilogue, at = _epilogue_of(prog)
    assert epilogue is not None and epilogue.name == "S2"
    assert {it: expr_to_str(e) for it, e in at.items()} == {"n": "i // 16", "t": "i % 16", "j": "j"}
    k = pt.compile(prog, options={"temporaries": "C"})
    assert "its epilogue, from the tile" in k.source
    rng = np.random.default_rng(3)
    args = {"X": rng.random((32, 4), dtype=np.float32), "W": rng.random((4, 8), dtype=np.float32),
            "bias": rng.random(8, dtype=np.float32) - 0.5, "C": np.zeros((32, 8), np.float32),
            "Y": np.zeros((2, 16, 8), np.float32)}
    want = {n: a.copy() for n, a in args.items()}
    k(**args)
    pt.reference(prog, **want)
    np.testing.assert_array_equal(args["Y"], want["Y"])


def test_a_view_that_does_not_map_the_statement_one_to_one_onto_the_product_is_not_folded() -> None:
    """Rows ``8 * n + t`` with ``t < 16`` overlap (two instances read one element), a write of one
    element from many instances depends on their order, rows ``2 * r`` leave half the product unread:
    each statement stays a nest of its own."""
    overlapping = _product_then("Y[n, t, j] = C[8 * n + t, j]", (3, 16, 8), (("n", 3), ("t", 16), ("j", 8)))
    one_element = _product_then("Y[0, 0, j] = C[i, j]", (1, 1, 8), (("i", 32), ("j", 8)))
    half = _product_then("Y[0, r, j] = C[2 * r, j]", (1, 16, 8), (("r", 16), ("j", 8)))
    for prog in (overlapping, one_element, half):
        assert _epilogue_of(prog) == (None, {})


def test_an_epilogue_that_divides_the_column_stays_a_nest_of_its_own() -> None:
    """Columns put back in rows of an image (``C[i, 4 * a + b]`` over ``(i, a, b)``: a convolution's pixels)
    would be divided in the epilogue's vector loop, its stores scattered: not folded (the rows may be
    divided, the columns not)."""
    prog = _product_then("Y[i, a, b] = C[i, 4 * a + b]", (32, 2, 4), (("i", 32), ("a", 2), ("b", 4)))
    assert _epilogue_of(prog) == (None, {})
    rows = _product_then("Y[n, t, j] = C[16 * n + t, j]", (2, 16, 8), (("n", 2), ("t", 16), ("j", 8)))
    assert _epilogue_of(rows)[0] is not None
