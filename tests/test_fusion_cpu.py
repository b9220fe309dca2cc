"""Cross-operator fusion on the cpu target: each torch function of the fusion issue is one kernel (one C
function), equal to eager, with its products packed and their bias and activation run on each block."""

from __future__ import annotations

import warnings

import pytest
import torch
from test_fusion_gpu import CASES

import polytri as pt

pytestmark = pytest.mark.cc


def _explain(fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph in eager would warn
        report = pt.explain(fn, *args, compile_options={"target": "cpu"})
    torch.testing.assert_close(report.result, fn(*args), rtol=1e-4, atol=1e-5)
    assert report.fallback_ops == [] and report.errors == []
    return report


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_function_of_the_fusion_issue_is_one_kernel(case: str) -> None:
    fn, make = CASES[case]
    (kernel,) = _explain(fn, make()).kernels
    assert kernel.bytes_moved is not None and kernel.unfused_bytes


@pytest.mark.parametrize("case, epilogues", [("mlp", 2), ("conv_bias_relu", 1)])
def test_bias_and_activation_run_on_each_block_of_the_product(case: str, epilogues: int) -> None:
    fn, make = CASES[case]
    (kernel,) = _explain(fn, make()).kernels
    assert kernel.source.count("the block's sums are complete") == epilogues, kernel.source


def test_attention_with_long_rows_stays_one_kernel() -> None:
    """Rows of 256: the reductions run in lanes, 16 statements, the most one program takes
    (torch_plan.MAX_STATEMENTS); one statement more cut it in two."""
    fn, _ = CASES["attention"]
    (kernel,) = _explain(fn, tuple(torch.randn(1, 2, 256, 16) for _ in range(3))).kernels
    assert kernel.source.count("packed contraction") == 2
