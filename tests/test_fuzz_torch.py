"""Fuzzing the PyTorch frontend (issue 8, item 6): random graphs of supported ops, compiled by polytri,
must equal eager and must run in polytri kernels (a silent fallback to eager would hide a bug).

``make test`` runs a few examples; ``make fuzz`` (marker ``slow``) many more.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, note, settings
from hypothesis import strategies as st

import polytri as pt

UNARY = {
    "exp": lambda x: torch.exp(torch.clamp(x, -5, 5)),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "neg": torch.neg,
    "abs": torch.abs,
    "square": lambda x: x * x,
    "gelu": torch.nn.functional.gelu,
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": lambda x, y: x / (1.5 + torch.abs(y)),
    "maximum": torch.maximum,
    "where": lambda x, y: torch.where(x > y, x, y * 0.5),
}
ROW = {  # (M, N) -> (M, N), through a reduction over rows
    "softmax": lambda x: torch.softmax(x, dim=1),
    "center": lambda x: x - x.mean(dim=1, keepdim=True),
    "rowmax": lambda x: x - x.amax(dim=1, keepdim=True),
    "matmul": lambda x: x @ x.transpose(0, 1)[:, : x.shape[1]] if x.shape[0] >= x.shape[1] else x,
}


@dataclass(frozen=True)
class Graph:
    """A straight-line program over values v0 (input a), v1 (input b), ..."""

    steps: tuple[tuple[str, str, tuple[int, ...]], ...]
    """(kind, op, operand indices) per step; each step's result is the next value."""
    shape: tuple[int, int]

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        values = [a, b]
        for kind, op, args in self.steps:
            fn = {"unary": UNARY, "binary": BINARY, "row": ROW}[kind][op]
            values.append(fn(*(values[i] for i in args)))
        return values[-1] + 0.5 * values[len(values) // 2]

    def code(self) -> str:
        return "; ".join(f"v{k + 2} = {op}({', '.join(f'v{i}' for i in args)})"
                         for k, (kind, op, args) in enumerate(self.steps))


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    shape = (draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    steps = []
    for k in range(draw(st.integers(1, 5))):
        n = k + 2
        kind = draw(st.sampled_from(["unary", "binary", "binary", "row"]))
        if kind == "unary":
            steps.append((kind, draw(st.sampled_from(sorted(UNARY))), (draw(st.integers(0, n - 1)),)))
        elif kind == "binary":
            steps.append((kind, draw(st.sampled_from(sorted(BINARY))),
                          (draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)))))
        else:
            steps.append((kind, draw(st.sampled_from(sorted(ROW))), (draw(st.integers(0, n - 1)),)))
    return Graph(tuple(steps), shape)


def _check(g: Graph, seed: int) -> None:
    note(g.code())
    note(f"shape {g.shape}")
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randn(*g.shape, generator=gen), torch.randn(*g.shape, generator=gen)
    torch._dynamo.reset()
    report = pt.explain(g, a, b, compile_options={"target": "cpu"})
    assert report.kernels, f"no polytri kernel for {g.code()}"
    assert not report.fallback_ops, f"ops left to eager: {report.fallback_ops}"
    torch.testing.assert_close(pt.jit(g)(a, b), g(a, b), rtol=1e-4, atol=1e-5)


@pytest.mark.cc
@settings(max_examples=10)
@given(graphs(), st.integers(0, 2**16))
def test_random_torch_graphs_equal_eager(g: Graph, seed: int) -> None:
    _check(g, seed)


@pytest.mark.cc
@pytest.mark.slow
@settings(max_examples=400)
@given(graphs(), st.integers(0, 2**16))
def test_random_torch_graphs_fuzz(g: Graph, seed: int) -> None:
    _check(g, seed)
