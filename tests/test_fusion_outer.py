"""Fusion policy ``outer`` (polytri/schedule/pluto.py): the outermost parallel loops shared by all
statements, one nest per strongly connected component below them, contractions in nests of their own;
the statement form of a contraction (polytri/ir/contraction.py); the schedule choice's parallelism
guard (polytri/compiler.py) and the per-nest choice of innermost loops."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import polytri as pt
from polytri.ir import to_program
from polytri.ir.affine import evaluate
from polytri.ir.contraction import contraction_form
from polytri.ir.program import Statement
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.legality import is_legal
from polytri.schedule.loop_ast import build_loop_ast, enclosing_loops
from polytri.schedule.pluto import pluto_schedule
from polytri.suite import build_gemm, build_jacobi_1d, copy_args


def row_softmax() -> pt.Program:
    """Softmax of each row, written as the torch frontend lowers it (without the lanes)."""
    p = pt.Program("row_softmax", params=["N", "M"])
    p.array("X", ("N", "M"))
    p.array("Y", ("N", "M"))
    p.array("E", ("N", "M"))
    p.array("mx", ("N",))
    p.array("s", ("N",))
    with p.loop("i", 0, "N"):
        p.assign("mx[i] = X[i, 0]")
        with p.loop("j", 0, "M"):
            p.assign("mx[i] = max(mx[i], X[i, j])")
        with p.loop("j", 0, "M"):
            p.assign("E[i, j] = exp(X[i, j] - mx[i])")
        p.assign("s[i] = 0.0")
        with p.loop("j", 0, "M"):
            p.assign("s[i] += E[i, j]")
        with p.loop("j", 0, "M"):
            p.assign("Y[i, j] = E[i, j] / s[i]")
    return p


def matmul_bias_relu() -> pt.Program:
    p = pt.Program("mm_bias_relu", params=["N", "M", "K"])
    p.array("A", ("N", "K"))
    p.array("B", ("K", "M"))
    p.array("bias", ("M",))
    p.array("C", ("N", "M"))
    p.array("Y", ("N", "M"))
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"):
        p.assign("C[i, j] = bias[j]")
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"), p.loop("k", 0, "K"):
        p.assign("C[i, j] += A[i, k] * B[k, j]")
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"):
        p.assign("Y[i, j] = max(C[i, j], 0.0)")
    return p


def two_products_around_a_row_sum() -> pt.Program:
    """Attention's shape without the softmax: P = Q K, r = row sums of P, O = P V."""
    p = pt.Program("pv", params=["N", "D"])
    for name, shape in (("Q", ("N", "D")), ("K", ("D", "N")), ("V", ("N", "D")), ("P", ("N", "N")),
                        ("O", ("N", "D")), ("r", ("N",))):
        p.array(name, shape)
    with p.loop("i", 0, "N"), p.loop("j", 0, "N"):
        p.assign("P[i, j] = 0.0")
        with p.loop("k", 0, "D"):
            p.assign("P[i, j] += Q[i, k] * K[k, j]")
    with p.loop("i", 0, "N"):
        p.assign("r[i] = 0.0")
        with p.loop("j", 0, "N"):
            p.assign("r[i] += P[i, j]")
    with p.loop("i", 0, "N"), p.loop("d", 0, "D"):
        p.assign("O[i, d] = 0.0")
        with p.loop("j", 0, "N"):
            p.assign("O[i, d] += P[i, j] * V[j, d]")
    return p


def run_both(p: pt.Program, sizes: dict[str, int], options: dict) -> pt.CpuKernel:
    """Compile ``p`` with ``options`` (no fallback allowed) and compare with ``pt.reference``."""
    prog = to_program(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = pt.compile(p, options=options)
    rng = np.random.default_rng(0)
    args = {a.name: rng.uniform(-1, 1, tuple(evaluate(e, sizes) for e in a.shape)).astype(a.dtype) for a in prog.arrays}
    args.update(sizes)  # parameters and scalars
    want, got = copy_args(args), copy_args(args)
    pt.reference(p, **want)
    k(**got)
    for a in prog.arrays:
        np.testing.assert_allclose(got[a.name], want[a.name], rtol=1e-5, atol=1e-6, err_msg=a.name)
    return k


# -- the policy -----------------------------------------------------------------------------------------
def test_rows_of_a_softmax_share_one_parallel_loop_with_a_nest_per_pass_below() -> None:
    prog = to_program(row_softmax())
    deps = compute_dependences(prog)
    s = pluto_schedule(prog, deps, fuse="outer")
    assert is_legal(s.map, deps)
    assert not s.scalar[0] and s.parallel[0] and set(s.rows[0].values()) == {"i"}, s.rows
    nest = s.rows[1]
    assert s.scalar[1], s.rows
    # a nest per dependent pass (max, exp, sum, normalize); the two inits depend on nothing: one nest
    assert len({nest[n] for n in ("S1", "S2", "S4", "S5")}) == 4 and nest["S0"] == nest["S3"], s.rows
    assert nest["S0"] not in {nest[n] for n in ("S1", "S2", "S4", "S5")}, s.rows
    shared = [d for d in s.decisions if d.kind == "shared-parallel"]
    assert len(shared) == 1 and shared[0].data["loops"] == 1 and shared[0].data["dims"] == (0,), s.decisions
    assert shared[0].data["statements"] == tuple(st.name for st in prog.statements), s.decisions


def row_sum_and_max() -> pt.Program:
    """Two reductions of the same rows, then their sum (the fusion issue's row reductions)."""
    p = pt.Program("row_sum_max", params=["N", "M"])
    p.array("X", ("N", "M"))
    p.array("s", ("N",))
    p.array("mx", ("N",))
    p.array("Y", ("N",))
    with p.loop("i", 0, "N"):
        p.assign("s[i] = 0.0")
        with p.loop("j", 0, "M"):
            p.assign("s[i] += X[i, j]")
        p.assign("mx[i] = X[i, 0]")
        with p.loop("j", 0, "M"):
            p.assign("mx[i] = max(mx[i], X[i, j])")
        p.assign("Y[i] = s[i] + mx[i]")
    return p


def test_independent_reductions_of_a_row_share_one_pass() -> None:
    prog = to_program(row_sum_and_max())
    s = pluto_schedule(prog, compute_dependences(prog), fuse="outer")
    assert is_legal(s.map, compute_dependences(prog))
    nest = s.rows[1]
    assert s.scalar[1], s.rows
    assert nest["S1"] == nest["S3"] and nest["S0"] == nest["S2"], s.rows  # the sums and the maxes together
    assert len({nest["S0"], nest["S1"], nest["S4"]}) == 3, s.rows  # inits, then the pass, then the result
    assert any(d.kind == "fusion-cut" and d.data["reason"] == "outer-below-shared" for d in s.decisions), s.decisions


@pytest.mark.cc
def test_one_pass_row_reductions_equal_the_reference() -> None:
    k = run_both(row_sum_and_max(), {"N": 5, "M": 37}, {"fuse": "outer", "schedule": "pluto"})
    body = k.source[k.source.index("#pragma omp for"):k.source.index("void pt_row_sum_max(")]
    assert body.count("for (int64_t") == 2, body  # the rows, and one loop over each row for both reductions
    inner = body[body.index("for (int64_t c2"):]
    assert "S1:" in inner and "S3:" in inner, body


@pytest.mark.cc
def test_outer_fusion_runs_a_softmax_in_one_parallel_loop_and_equals_the_reference() -> None:
    k = run_both(row_softmax(), {"N": 5, "M": 37}, {"fuse": "outer", "schedule": "pluto"})
    assert k.source.count("#pragma omp for") == 1, k.source
    smart = pt.compile(row_softmax(), options={"fuse": "smart", "schedule": "pluto"})
    assert smart.source.count("#pragma omp for") > 1  # what 'outer' improves on


@pytest.mark.cc
def test_a_contraction_keeps_its_own_nest_and_its_packed_micro_kernel() -> None:
    k = run_both(matmul_bias_relu(), {"N": 9, "M": 70, "K": 13}, {"fuse": "outer", "schedule": "pluto"})
    text = "\n".join(k.decisions)
    assert any(d.kind == "fusion-cut" and d.data["reason"] == "outer-contraction" for d in k.decision_records), text
    assert any(d.startswith("contraction S1") for d in k.decisions), text


def test_without_a_shared_parallel_loop_outer_is_smart() -> None:
    prog = to_program(build_jacobi_1d())
    deps = compute_dependences(prog)
    outer = pluto_schedule(prog, deps, fuse="outer")
    smart = pluto_schedule(prog, deps, fuse="smart")
    assert outer.map.is_equal(smart.map)
    assert any(d.kind == "no-shared-parallel" for d in outer.decisions), outer.decisions


@pytest.mark.cc
def test_each_nest_chooses_its_own_innermost_loop() -> None:
    """The row sum's reduction must not keep the products' sums innermost: each product's innermost loop
    is its parallel, stride-1 column loop, and both are packed."""
    prog = to_program(two_products_around_a_row_sum())
    s = pluto_schedule(prog, compute_dependences(prog), fuse="outer")
    loops = [r for r, scalar in zip(s.rows, s.scalar) if not scalar]
    innermost = {st: next(r[st] for r in reversed(loops) if r[st] != "0") for st in ("S1", "S5")}
    assert innermost == {"S1": "j", "S5": "d"}, s.rows
    k = run_both(two_products_around_a_row_sum(), {"N": 19, "D": 6}, {"fuse": "outer", "schedule": "pluto"})
    assert sum(d.startswith("contraction ") for d in k.decisions) == 2, k.decisions


@pytest.mark.cc
def test_gemm_under_outer_is_still_packed() -> None:
    k = run_both(build_gemm(), {"NI": 7, "NJ": 66, "NK": 5, "alpha": np.float32(1.5), "beta": np.float32(0.5)},
                 {"fuse": "outer"})
    assert any(d.startswith("contraction ") for d in k.decisions), k.decisions


def test_unknown_policy_lists_outer() -> None:
    with pytest.raises(pt.OptionError, match="outer"):
        pt.compile(row_softmax(), options={"fuse": "rows"})


# -- the schedule choice's parallelism guard -------------------------------------------------------------
@pytest.mark.cc
def test_fusing_a_nest_of_batches_into_one_loop_is_not_a_loss_of_parallelism() -> None:
    """Statements on a 4 x 4 batch and one on the same batch flattened to 16 share one loop of 16
    iterations: fewer parallel loops than the input order, but the outermost is still parallel."""
    p = pt.Program("flat", params=[])
    p.array("X", (4, 4, 8))
    p.array("Y", (4, 4, 8))
    p.array("Z", (16, 8))
    with p.loop("a", 0, 4), p.loop("b", 0, 4), p.loop("j", 0, 8):
        p.assign("Y[a, b, j] = X[a, b, j] * 2.0")
    with p.loop("f", 0, 16), p.loop("j", 0, 8):
        p.assign("Z[f, j] = Y[f // 4, f % 4, j] + 1.0")
    k = run_both(p, {}, {"fuse": "outer"})
    assert k.schedule_info.origin.startswith("pluto"), k.decisions
    assert k.source.count("#pragma omp for") == 1, k.source


# -- the statement form of a contraction -----------------------------------------------------------------
def _statement(text: str) -> Statement:
    p = pt.Program("one", params=[])
    for name, rank in (("T", 3), ("L", 3), ("R", 3), ("U", 2), ("V", 2)):
        p.array(name, (4,) * rank)
    with p.loop("b", 0, 4), p.loop("i", 0, 4), p.loop("j", 0, 4), p.loop("k", 0, 4):
        p.assign(text)
    return to_program(p).statements[0]


@pytest.mark.parametrize("text, roles", [
    ("T[b, i, j] = T[b, i, j] + L[b, i, k] * R[b, k, j]", ("i", {"k"}, "j", "+")),
    ("T[b, i, j] = T[b, i, j] - R[b, k, j] * L[b, i, k]", ("i", {"k"}, "j", "-")),
    ("T[b, i, j] = L[b, i, k] * R[b, k, j] + T[b, i, j]", ("i", {"k"}, "j", "+")),
    ("T[0, i, j] = T[0, i, j] + 2.0 * U[i, k] * V[k, j]", ("i", {"k"}, "j", "+")),
])
def test_contraction_form_finds_the_roles(text: str, roles: tuple) -> None:
    form = contraction_form(_statement(text))
    assert form is not None
    assert (form.a, set(form.summed), form.b, form.op) == roles


@pytest.mark.parametrize("text", [
    "T[b, i, j] = L[b, i, k] * R[b, k, j]",                       # no accumulation
    "T[b, i, j] = T[b, i, j] + L[b, i, j] * R[b, k, j]",          # L depends on the column
    "T[b, i, j] = T[b, i, j] + T[b, i, k] * R[b, k, j]",          # reads the target's array
    "T[b, i, j] = T[b, i, j] + L[b, i, b] * R[b, b, j]",          # nothing summed
    "T[b, i, j] = T[b, i, j] * L[b, i, k]",                       # not a sum of products
])
def test_contraction_form_rejects(text: str) -> None:
    assert contraction_form(_statement(text)) is None


# -- loops around statements ------------------------------------------------------------------------------
def test_enclosing_loops_lists_parallel_flags_outermost_first() -> None:
    prog = to_program(row_softmax())
    deps = compute_dependences(prog)
    s = pluto_schedule(prog, deps, fuse="outer")
    loops = enclosing_loops(build_loop_ast(prog, s, deps))
    assert loops["S0"] == [(True,)]            # mx[i] = X[i, 0]: only the row loop
    assert loops["S1"] == [(True, False)]      # the running maximum carries its loop
    assert loops["S2"] == [(True, True)]       # exp: parallel inside the row


def _batch_of_four_product() -> pt.Program:
    """Sums over ``k`` for 4 rows and 96 columns, a weight row read for each (not of contraction form,
    as a product in vector lanes is not), after a copy of the 4 rows (a widening): the only parallel loop
    that every statement has is the batch of 4."""
    p = pt.Program("skinny", params=[])
    p.array("x", (4, 64), "float32")
    p.array("w", (96, 64), "float32")
    p.array("xw", (4, 64), "float32")
    p.array("y", (96, 4), "float32")
    with p.loop("b", 0, 4), p.loop("k", 0, 64):
        p.assign("xw[b, k] = 2.0 * x[b, k]")
    with p.loop("j", 0, 96), p.loop("b", 0, 4):
        p.assign("y[j, b] = 0.0")
        with p.loop("k", 0, 64):
            p.assign("y[j, b] += xw[b, k] * w[j, k] + 1.0")
    return p


def test_a_shared_parallel_loop_of_a_few_iterations_is_not_fused_for() -> None:
    """'outer' would share the batch of 4 rows and stream the whole weight once per row below it."""
    prog = to_program(_batch_of_four_product())
    outer = pluto_schedule(prog, compute_dependences(prog), fuse="outer")
    short = [d for d in outer.decisions if d.kind == "short-shared-parallel"]
    assert short and short[0].data["most"] == 4, outer.decisions
    assert not any(d.kind == "shared-parallel" for d in outer.decisions)
    assert is_legal(outer.map, compute_dependences(prog))
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((96, 64)).astype(np.float32)
    k = pt.compile(prog, options={"fuse": "outer", "schedule": "pluto"})
    got = {"x": x, "w": w, "xw": np.zeros((4, 64), np.float32), "y": np.zeros((96, 4), np.float32)}
    want = copy_args(got)
    k(**got)
    pt.reference(prog, **want)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)
