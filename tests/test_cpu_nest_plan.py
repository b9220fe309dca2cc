"""The contraction nests of a loop AST, decided before printing (``cpu_codegen/nest_plan.py``)."""

from __future__ import annotations

import polytri as pt
from polytri.cpu_codegen.nest_plan import plan_nests
from polytri.ir.builder import to_program
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


def _plan(prog: pt.Program, microkernel: bool = True):
    prog = to_program(prog)
    _, _, ast = choose_schedule(prog, compute_dependences(prog), "original", "smart", False, None)
    return ast, plan_nests(ast, prog, program_typer(prog), microkernel=microkernel, simd=True)


def test_the_sum_absorbs_its_zero_init_and_its_epilogue() -> None:
    ast, plan = _plan(_linear_relu())
    init, nest, epilogue = outermost_loops(ast)
    assert set(plan.contractions) == {id(nest)}
    found = plan.contractions[id(nest)]
    assert found.zero_init and found.epilogue is not None and found.epilogue.name == "S2"
    assert plan.absorbed == {id(init), id(epilogue)}


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
