"""Index maps composed from a consumer's index texts: a view or a flattened convolution output read at
``i + 1`` (through a slice) must multiply the whole text, not its first term (``6 * (i0 + 1)``, not
``6 * i0 + 1``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import polytri as pt

pytestmark = pytest.mark.cc


def test_slice_of_a_merging_reshape() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).reshape(2, 6)[1:, :] + 1
    x = torch.arange(12.0).reshape(4, 3)
    torch.testing.assert_close(pt.jit(f, compile_options={"target": "cpu"})(x), f(x))


def test_slice_of_a_strided_padded_convolution() -> None:
    def f(img: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.conv2d(img, w, stride=2, padding=2)[:, :, 1:5, 1:5]
    img, w = torch.linspace(0, 1, 2 * 3 * 8 * 8).reshape(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    torch.testing.assert_close(pt.jit(f, compile_options={"target": "cpu"})(img, w), f(img, w))
