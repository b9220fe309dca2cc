"""bfloat16 and float16 functions accumulate in float32, as eager PyTorch does (issue 20, part 2).

Eager (ATen, oneDNN) sums, normalizes and multiplies-accumulates 16-bit floats in float32 and rounds once,
at each op's output.  The lowering does the same (``acc_dtype`` in ``polytri/frontend/torch_values.py``):
each case's relative error against the float32 result must be within twice eager's own, and its sums
must run in float32 arrays.  The reductions are long (1024-4096 terms on the cpu) so that a 16-bit
accumulator would show; the nvgpu target runs in Triton's interpreter on smaller sizes, where the check of
the accumulators' type is what a 16-bit accumulator fails.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import polytri as pt
from polytri.ir.expr import Binary, accesses
from polytri.ir.textform import parse_program

TARGETS = [pytest.param("cpu", marks=pytest.mark.cc), pytest.param("nvgpu", marks=pytest.mark.interp)]
DTYPES = [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float16, id="fp16")]


def _mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    return F.linear(torch.relu(F.linear(x, w1, b1)), w2, b2)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1) @ v


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b)


Inputs = Callable[[int], tuple[torch.Tensor, ...]]

#: name -> (function, float32 inputs for a reduction length n).
CASES: dict[str, tuple[Callable[..., torch.Tensor], Inputs]] = {
    "matmul": (lambda a, b: a @ b, lambda n: (torch.randn(16, n), torch.randn(n, 8))),
    "linear_gelu": (lambda x, w, b: F.gelu(F.linear(x, w, b)),
                    lambda n: (torch.randn(16, n), torch.randn(8, n) / n ** 0.5, torch.randn(8))),
    "sum": (lambda a: a.sum(-1), lambda n: (torch.rand(8, n),)),
    "mean": (lambda a: a.mean(0), lambda n: (torch.rand(n, 8),)),
    "softmax": (lambda a: torch.softmax(a, -1), lambda n: (torch.randn(4, n),)),
    "layer_norm": (_layer_norm, lambda n: (torch.randn(4, n) + 2, torch.rand(n) + 0.5, torch.randn(n))),
    "mlp": (_mlp, lambda n: (torch.randn(8, n), torch.randn(32, n) / n ** 0.5, torch.randn(32),
                             torch.randn(8, 32) / 6, torch.randn(8))),
    "attention": (_attention, lambda n: tuple(torch.randn(1, n // 8, n // 8) for _ in range(3))),
}

#: Reduction length per target: long on the cpu, shorter in the interpreter.
LENGTH = {"cpu": 2048, "nvgpu": 512}


def _rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.float() - ref).norm() / ref.norm()).item()


def _accumulator_dtypes(report: Any) -> set[str]:
    """The types of the arrays the kernels' sums accumulate in (statements ``x = x + ...``)."""
    found = set()
    for k in report.kernels:
        program = parse_program(k.program)
        for st in program.statements:
            if isinstance(st.value, Binary) and st.value.op == "+" and st.target in accesses(st.value):
                found.add(str(program.array(st.target.array).dtype))
    return found


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_low_precision_accumulates_in_float32(case: str, target: str, dtype: torch.dtype) -> None:
    fn, make = CASES[case]
    torch.manual_seed(0)
    exact = make(LENGTH[target])
    ref = fn(*exact)
    args = tuple(a.to(dtype) for a in exact)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph falling back to eager would warn
        report = pt.explain(fn, *args, compile_options={"target": target})
    assert report.fallback_ops == []
    out = report.result
    assert out.dtype == dtype
    eager = _rel(fn(*args), ref)
    assert _rel(out, ref) <= 2 * eager + 1e-3, f"polytri {_rel(out, ref):.4f}, eager {eager:.4f}"
    assert _accumulator_dtypes(report) == {"float32"}


@pytest.mark.cc
def test_float32_programs_are_unchanged() -> None:
    """The rule widens 16-bit floats only: float32 sums and products keep their float32 arrays, with no
    cast and no extra statement."""
    x, w = torch.randn(8, 64), torch.randn(64, 16)
    report = pt.explain(lambda x, w: (x @ w).sum(-1), x, w, compile_options={"target": "cpu"})
    assert _accumulator_dtypes(report) == {"float32"}
    assert "float32(" not in report.kernels[0].program
