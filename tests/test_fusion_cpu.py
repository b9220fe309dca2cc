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


@pytest.mark.parametrize("case, epilogues", [("mlp", 2), ("conv_bias_relu", 0)])
def test_bias_and_activation_run_on_each_block_of_the_product(case: str, epilogues: int) -> None:
    """The MLP's bias and GELU, and its second bias, run on each block of their products, summed in tiles.
    The convolution starts its sums at the bias, not at zero: it stores its target, and the relu reads it
    back in a nest of its own."""
    fn, make = CASES[case]
    # rows of 64 pixels fill the register blocks: the convolution keeps its loops over rows and columns
    args = (torch.randn(1, 4, 6, 64),) if case == "conv_bias_relu" else make()
    (kernel,) = _explain(fn, args).kernels
    assert kernel.source.count("its epilogue, from the tile") == epilogues, kernel.source


@pytest.mark.parametrize("stride", [1, 2])
def test_convolution_of_small_images_is_a_product_over_flattened_pixels(stride: int) -> None:
    """Rows of a quarter of a register block's columns (16 pixels with AVX-512's 64): the pixels of an
    image are the product's columns, read from a padded copy (stride 1) or from the windows copied out (a
    stride)."""
    from polytri.cpu_codegen.blocking import blocking
    from polytri.dtypes import FLOAT32
    width = max(4, blocking(FLOAT32).nr // 4)
    w, b = torch.randn(8, 4, 3, 3), torch.randn(8)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.nn.functional.conv2d(x, w, b, stride=stride, padding=1))
    (kernel,) = _explain(fn, (torch.randn(2, 4, 16, stride * width),)).kernels
    assert kernel.source.count("packed contraction") == 1
    assert ("_windows" if stride > 1 else "_padded") in kernel.program


def test_attention_with_long_rows_stays_one_kernel() -> None:
    """Rows of 256: the reductions run in lanes, 16 statements, the most one program takes
    (torch_plan.MAX_STATEMENTS); one statement more cut it in two."""
    fn, _ = CASES["attention"]
    (kernel,) = _explain(fn, tuple(torch.randn(1, 2, 256, 16) for _ in range(3))).kernels
    assert kernel.source.count("packed contraction") == 2
