"""Scalar factors and float32 conversions of 16-bit matrix-product operands moved onto the product
(polytri/frontend/torch_product_factors.py): the graph rewrite itself, and attention in bfloat16 through
``pt.jit`` no further from float32 than twice eager's error."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import polytri as pt
from polytri.frontend.torch_product_factors import move_product_factors

aten = torch.ops.aten


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Attention's scores as torch decomposes them for the CPU: both factors converted and scaled."""
    s = 0.125 ** 0.5
    a = (q.float() * s).expand(1, 3, 7, 8).reshape(3, 7, 8)
    b = (k.float().permute(0, 1, 3, 2) * s).expand(1, 3, 8, 7).reshape(3, 8, 7)
    return torch.bmm(a, b)


def _inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, 3, 7, 8, generator=g).to(dtype) for _ in range(2))  # type: ignore[return-value]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_product_reads_the_16_bit_values_and_the_scales_multiply_its_result(dtype: torch.dtype) -> None:
    q, k = _inputs(dtype)
    gm = make_fx(_scores, tracing_mode="fake")(q, k)
    assert move_product_factors(gm.graph) == 1
    gm.recompile()
    (bmm,) = [n for n in gm.graph.nodes if n.target == aten.bmm.default]
    for arg in bmm.args:  # each factor is the float32 conversion of 16-bit views
        assert arg.target == aten._to_copy.default and arg.args[0].meta["val"].dtype == dtype
    (mul,) = bmm.users
    assert mul.target == aten.mul.Scalar and mul.args[1] == pytest.approx(0.125)
    assert not any(n.target == aten.mul.Scalar and n is not mul for n in gm.graph.nodes)
    # the same scores: products of 16-bit values are exact in float32, only the scales' roundings differ
    torch.testing.assert_close(gm(q, k), _scores(q, k), rtol=1e-6, atol=1e-6)


def test_products_of_float32_values_or_of_one_converted_factor_are_left_alone() -> None:
    q, k = _inputs(torch.float32)
    gm = make_fx(_scores, tracing_mode="fake")(q, k)
    assert move_product_factors(gm.graph) == 0

    def mixed(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.bmm(q.float().reshape(3, 7, 8) * 2.0, k.reshape(3, 8, 7))
    gm = make_fx(mixed, tracing_mode="fake")(_inputs(torch.bfloat16)[0], torch.randn(1, 3, 8, 7))
    assert move_product_factors(gm.graph) == 0


def test_a_view_torch_refuses_leaves_the_graph_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    from polytri.frontend import torch_product_factors as tpf
    gm = make_fx(_scores, tracing_mode="fake")(*_inputs(torch.bfloat16))
    before = [(n.name, n.target, n.args) for n in gm.graph.nodes]
    real, calls = tpf._call, []

    def refuse_the_third(*args, **kwargs):  # the first two new nodes are made, then a view fails
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("view size is not compatible with input tensor's size and stride")
        return real(*args, **kwargs)
    monkeypatch.setattr(tpf, "_call", refuse_the_third)
    assert move_product_factors(gm.graph) == 0
    assert [(n.name, n.target, n.args) for n in gm.graph.nodes] == before


@pytest.mark.cc
def test_attention_in_bfloat16_is_as_close_to_float32_as_eager() -> None:
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 37, 16, generator=g) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v)
    low = [x.to(torch.bfloat16) for x in (q, k, v)]
    eager_error = (F.scaled_dot_product_attention(*low).float() - want).abs().max().item()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a graph falling back to eager warns
        got = pt.jit(F.scaled_dot_product_attention)(*low)
    assert got.dtype == torch.bfloat16
    assert (got.float() - want).abs().max().item() <= 2 * eager_error
