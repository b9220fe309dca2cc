"""Repeated blocks are cut alike (polytri/frontend/torch_repeat.py): a cut taken in one repetition of a
graph's repeated stretch is taken at the same place in the others, so the number of distinct kernels does
not grow with the number of blocks, and the results equal eager."""

from __future__ import annotations

import re

import pytest
import torch
import torch.fx as fx
from torch import nn

import polytri as pt
from polytri.frontend.torch_repeat import find_repeats

pytestmark = pytest.mark.cc


class _Block(nn.Module):
    """A transformer-like block: attention and an MLP, each with a norm and a residual (more statements
    than one program holds)."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.n1(x)).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v
        x = x + self.proj(a)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.n2(x))))


class _Small(nn.Module):
    """A block of a few statements: several of them fit one program."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.fc(x)) * 0.5


def _stack(block: type[nn.Module], n: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), *[block() for _ in range(n)], nn.LayerNorm(16)).eval()


def _distinct(model: nn.Module, x: torch.Tensor) -> tuple[int, int, list[str]]:
    with torch.no_grad():
        report = pt.explain(model, x, compile_options={"threads": 1})
        torch.testing.assert_close(report.result, model(x), rtol=1e-4, atol=1e-5)
    names = [re.search(r"program (\w+), target", k.source).group(1) for k in report.kernels]  # type: ignore[union-attr]
    cuts = [d.kind for k in report.kernels for d in k.lowering if d.kind in ("program-cut", "repeated-cut")]
    return len(names), len(set(names)), cuts


@pytest.mark.parametrize("block, counts", [(_Block, (3, 5)), (_Small, (14, 24))])
def test_distinct_kernels_do_not_grow_with_the_blocks(block: type[nn.Module], counts: tuple[int, int]) -> None:
    x = torch.randn(2, 8, 16)
    few, many = (_distinct(_stack(block, n), x) for n in counts)
    assert few[1] == many[1], (few, many)
    assert many[0] > few[0]  # more blocks, more kernels: the same ones again
    assert "repeated-cut" in many[2] and "program-cut" in many[2]


def test_repeats_are_found_with_their_period() -> None:
    def stack(x: torch.Tensor, w: list[torch.Tensor]) -> torch.Tensor:
        for k in range(5):
            x = x + torch.tanh(x @ w[k]) * 0.5
        return torch.relu(x)
    graph = fx.symbolic_trace(stack, concrete_args={"w": [fx.PH] * 5}).graph  # type: ignore[attr-defined]
    calls = [n for n in graph.nodes if n.op == "call_function"]
    (region,) = find_repeats(graph).regions
    # four nodes a block; the first block reads the graph's input, the others the previous block
    assert (region.start, region.end, region.period, region.count) == (4, 20, 4, 4)
    assert find_repeats(graph).images(calls[5]) == [calls[9], calls[13], calls[17]]
    assert find_repeats(graph).images(calls[9], every=2) == [calls[17]]
    assert find_repeats(graph).images(calls[2]) == find_repeats(graph).images(calls[20]) == []
