"""The GPU targets' schedule choices (polytri/codegen_triton/gpu_schedule.py, dot_order.py, block_fit.py) on
programs shaped like a ViT block's as the torch lowering writes them, at sizes where isl knows every loop's
iterations: which schedule ``auto`` takes, which products reach ``tl.dot``, which blocks the launches get,
and that the kernels still equal the reference in Triton's interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.codegen_triton.block_fit import fitted_sides
from polytri.schedule.choose import choose_schedule
from polytri.schedule.dependences import compute_dependences
from polytri.suite.models import ZOO

pytestmark = pytest.mark.interp

H, T, D = 3, 32, 8        # heads, tokens, head width (a ViT's: 3, 197, 64)


def _attention_tail() -> pt.Program:
    """Attention's product with V then the output projection, the V operand read through a permuted view
    (the CPU's ``auto`` keeps the input order here: Pluto's innermost loop walks it with a stride)."""
    p = pt.Program("attn_tail")
    p.array("P", (H, T, T), "float32")
    p.array("V", (1, H, T, D), "float32")
    p.array("O", (H, T, D), "float32")
    p.array("W", (H * D, H * D), "float32")
    p.array("Y", (T, H * D), "float32")
    with p.loop("h", 0, H), p.loop("i", 0, T), p.loop("d", 0, D):
        p.assign("O[h, i, d] = 0.0")
    with p.loop("h", 0, H), p.loop("i", 0, T), p.loop("j", 0, T), p.loop("d", 0, D):
        p.assign("O[h, i, d] = O[h, i, d] + P[h, i, j] * V[0, h, j, d]")
    with p.loop("i", 0, T), p.loop("c", 0, H * D):
        p.assign("Y[i, c] = 0.0")
    with p.loop("i", 0, T), p.loop("k", 0, H * D), p.loop("c", 0, H * D):
        p.assign(f"Y[i, c] = Y[i, c] + O[k // {D}, i, k % {D}] * W[c, k]")
    return p


def _norm_then_mlp() -> pt.Program:
    """A row's mean subtracted, then two linear layers whose sums Pluto puts at different depths: the
    schedule's dimensions are shared by the nests, one product's sum makes its dimension sequential."""
    p = pt.Program("norm_mlp")
    p.array("x", (T, 16), "float32")
    p.array("mean", (T,), "float32")
    p.array("a", (T, 16), "float32")
    p.array("W1", (32, 16), "float32")
    p.array("h", (T, 32), "float32")
    p.array("W2", (16, 32), "float32")
    p.array("y", (T, 16), "float32")
    with p.loop("i", 0, T):
        p.assign("mean[i] = 0.0")
        with p.loop("r", 0, 16):
            p.assign("mean[i] = mean[i] + x[i, r]")
    with p.loop("i", 0, T), p.loop("j", 0, 16):
        p.assign("a[i, j] = x[i, j] - mean[i] / 16.0")
    with p.loop("i", 0, T), p.loop("n", 0, 32):
        p.assign("h[i, n] = 0.0")
    with p.loop("i", 0, T), p.loop("k", 0, 16), p.loop("n", 0, 32):
        p.assign("h[i, n] = h[i, n] + a[i, k] * W1[n, k]")
    with p.loop("i", 0, T), p.loop("n", 0, 16):
        p.assign("y[i, n] = 0.0")
    with p.loop("i", 0, T), p.loop("k", 0, 32), p.loop("n", 0, 16):
        p.assign("y[i, n] = y[i, n] + h[i, k] * W2[n, k]")
    return p


def _check(prog: pt.Program, kernel) -> None:
    rng = np.random.default_rng(0)
    args = {a.name: rng.standard_normal(tuple(e.value for e in a.shape)).astype(np.float32)
            for a in prog.build().arrays}
    want = {n: v.copy() for n, v in args.items()}
    pt.reference(prog, **want)
    kernel(**args)
    for name in args:
        np.testing.assert_allclose(args[name], want[name], rtol=1e-4, atol=1e-4, err_msg=name)


def _fusion_record(kernel):
    return next(d for d in kernel.decision_records if d.kind == "gpu-fusion")


def test_auto_compares_the_input_order_with_pluto_by_the_launches() -> None:
    prog = _attention_tail()
    built = prog.build()
    _, why, _ = choose_schedule(built, compute_dependences(built), "auto", "smart", False)
    assert why[0].kind == "original-order"    # the CPU's reasons (cache lines) keep the input order
    k = pt.compile(prog, target="nvgpu")
    chosen = _fusion_record(k)
    assert set(chosen.data["grid_loops"]) == {"smart", "none", "original"}
    assert chosen.data["origin"] == "pluto" and chosen.data["products"][chosen.data["fuse"]] == 2
    _check(prog, k)


def test_each_nest_orders_its_own_loops_for_tl_dot() -> None:
    prog = _norm_then_mlp()
    k = pt.compile(prog, target="nvgpu", options={"fuse": "none"})
    nested = [d for d in k.decision_records if d.kind == "dot-order" and "statements" in d.data]
    assert nested, k.decisions
    assert nested[-1].data["products"] == 2 and nested[-1].data["previous_products"] < 2
    _check(prog, k)


def test_block_sides_fit_the_loops_and_spread_over_the_multiprocessors() -> None:
    # 3 x 197 rows in 32 x 32 blocks: 7 programs; fitted to 132 multiprocessors: 198 of 2 x 2
    assert fitted_sides((32, 32), (3, 197), 132) == (2, 2)
    assert fitted_sides((32, 32), (4096, 4096), 132) == (32, 32)      # large loops keep the model's
    assert fitted_sides((32, 32), (3, None), 132) == (32, 32)         # a parameter decides: kept
    assert fitted_sides((32, 32), (3, 197), None) == (32, 32)         # the user's block option: kept
    assert fitted_sides((1024,), (10, 300), 132) == (16,)             # 10 x 19 programs: the outer loop counts
    assert fitted_sides((1024,), (5,), 132) == (4,)                   # halved to 4 lanes at the least


def test_a_softmax_over_few_rows_runs_in_small_blocks_and_equals_the_reference() -> None:
    p = pt.Program("softmax_heads")
    p.array("x", (H, T, T), "float32")
    p.array("m", (H, T), "float32")
    p.array("s", (H, T), "float32")
    p.array("y", (H, T, T), "float32")
    with p.loop("h", 0, H), p.loop("i", 0, T):
        p.assign("m[h, i] = -3.0e38")
        with p.loop("j", 0, T):
            p.assign("m[h, i] = max(m[h, i], x[h, i, j])")
        p.assign("s[h, i] = 0.0")
        with p.loop("j", 0, T):
            p.assign("s[h, i] += exp(x[h, i, j] - m[h, i])")
        with p.loop("j", 0, T):
            p.assign("y[h, i, j] = exp(x[h, i, j] - m[h, i]) / s[h, i]")
    k = pt.compile(p, target="nvgpu")
    sides = [launch.spec.vector for launch in k.launches]
    assert all(np.prod(v) <= 4 for v in sides), sides   # 60 rows over 132 multiprocessors: small blocks
    _check(p, k)


def test_a_bfloat16_nan_propagating_maximum_in_chunks_compiles_for_sm_90() -> None:
    # small blocks give the row's loop chunks of many columns; the chunk's NaN test must keep bfloat16
    # (Triton's compiler rejects an accumulator that changes type in its loop; the interpreter does not)
    p = pt.Program("nanmax_rows")
    p.array("x", (4, 8, 40), "bfloat16")
    p.array("m", (4, 8), "bfloat16")
    with p.loop("i", 0, 4), p.loop("j", 0, 8):
        p.assign("m[i, j] = -1e999")
        with p.loop("r", 0, 40):
            p.assign("m[i, j] = nanmax(m[i, j], x[i, j, r])")
    k = pt.compile(p, target="nvgpu")
    assert ".entry nanmax_rows_k0" in k.asm("sm_90")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_zoo_kernel_compiles_for_sm_90(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's compiler, unlike its interpreter, checks types in loops: every kernel of a zoo model on
    nvgpu, in float32 and bfloat16, compiles ahead of time for sm_90 (the kernels are not run: their
    inputs would be garbage, and only the compilation is checked)."""
    import torch
    import torch._dynamo

    from polytri.codegen_triton.kernel import TritonKernel
    from polytri.suite.models import build
    made: list[TritonKernel] = []
    monkeypatch.setattr(TritonKernel, "__call__", lambda self, **kw: made.append(self))
    for dtype in (torch.float32, torch.bfloat16):
        model, x = build(name)
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(model.to(dtype), backend="polytri", options={"target": "nvgpu"})(x.to(dtype))
    assert made
    for kernel in {id(k): k for k in made}.values():
        assert ".entry" in kernel.asm("sm_90"), kernel.program.name
