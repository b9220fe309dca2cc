"""Quantized graphs: the quantize/dequantize ops of PyTorch 2 export quantization lower to polytri's kernels
and equal the ops' own results; a PT2E-quantized model (when torchao is installed) runs with no op in
eager and equals the quantized model run in eager."""

from __future__ import annotations

import pathlib
import warnings
from typing import Any

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 (registers the quantized_decomposed ops)

import polytri as pt
from polytri.cpu_codegen.dot_product import has_integer_dot, integer_dot_for
from polytri.dtypes import INT8, UINT8

pytestmark = pytest.mark.cc

qd = torch.ops.quantized_decomposed


def _check(fn: Any, *args: torch.Tensor) -> pt.frontend.torch_explain.ExplainReport:
    report = pt.explain(fn, *args, compile_options={"target": "cpu"})
    assert report.fallback_ops == [], str(report)
    expected = fn(*args)
    assert report.result.dtype == expected.dtype
    torch.testing.assert_close(report.result, expected, rtol=0, atol=0)
    return report


@pytest.mark.parametrize(("dtype", "qmin", "qmax", "zp"), [(torch.uint8, 0, 255, 122), (torch.int8, -128, 127, -3)])
def test_quantize_per_tensor_rounds_and_clamps_as_the_op(dtype: torch.dtype, qmin: int, qmax: int, zp: int) -> None:
    scale = 0.0371
    x = torch.randn(6, 40) * 3
    x[0, :8] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 100.0, -100.0, 0.0]) * scale  # ties and the clamps
    _check(lambda t: qd.quantize_per_tensor.default(t * 1, scale, zp, qmin, qmax, dtype), x)


def test_dequantize_per_tensor_and_channel_as_the_ops() -> None:
    q = torch.randint(0, 256, (4, 6, 5), dtype=torch.uint8)
    w = torch.randint(-128, 128, (6, 5), dtype=torch.int8)
    scales = torch.rand(6) * 0.1 + 0.01
    zps = torch.randint(-3, 4, (6,))

    def f(q: torch.Tensor, w: torch.Tensor, scales: torch.Tensor, zps: torch.Tensor) -> torch.Tensor:
        x = qd.dequantize_per_tensor.default(q, 0.023, 131, 0, 255, torch.uint8)
        return x + qd.dequantize_per_channel.default(w, scales, zps, 0, -128, 127, torch.int8)
    _check(f, q, w, scales, zps)


def test_quantize_per_channel_as_the_op() -> None:
    x = torch.randn(5, 7) * 4
    scales = torch.rand(7) * 0.05 + 0.01
    zps = torch.randint(-5, 5, (7,))
    _check(lambda t, s, z: qd.quantize_per_channel.default(t * 1, s, z, 1, -128, 127, torch.int8), x, scales, zps)


@pytest.mark.parametrize(("stride", "zero", "size"), [pytest.param(1, 131, 9, marks=pytest.mark.slow), (2, 131, 9),
                                                     (1, 0, 64), pytest.param(2, 7, 64, marks=pytest.mark.slow)])
def test_integer_contractions(stride: int, zero: int, size: int) -> None:
    """A convolution and a linear layer of dequantized tensors run as integer sums (int32) scaled once:
    equal to eager's float computation within float32 rounding; padding (the implicit GEMM's copy filled
    with the zero point, or the row nest's guard) adds nothing."""
    torch.manual_seed(stride + zero + size)
    w = torch.randint(-127, 128, (8, 3, 3, 3), dtype=torch.int8)
    wscale, wzero = torch.rand(8) * 0.01 + 0.001, torch.zeros(8, dtype=torch.int64)
    out = (size - 1) // stride + 1
    lw = torch.randint(-127, 128, (5, 8 * out * out), dtype=torch.int8)
    bias = torch.randn(8)

    def f(x: torch.Tensor, w: torch.Tensor, wscale: torch.Tensor, wzero: torch.Tensor, bias: torch.Tensor,
          lw: torch.Tensor) -> torch.Tensor:
        xq = qd.quantize_per_tensor.default(x, 0.02, zero, 0, 255, torch.uint8)
        xd = qd.dequantize_per_tensor.default(xq, 0.02, zero, 0, 255, torch.uint8)
        wd = qd.dequantize_per_channel.default(w, wscale, wzero, 0, -128, 127, torch.int8)
        y = torch.relu(torch.nn.functional.conv2d(xd, wd, bias, stride=stride, padding=1))
        yd = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(y, 0.05, 3, -128, 127, torch.int8),
                                              0.05, 3, -128, 127, torch.int8)
        ld = qd.dequantize_per_tensor.default(lw, 0.003, 0, -127, 127, torch.int8)
        return torch.nn.functional.linear(yd.flatten(1), ld)

    args = (torch.randn(2, 3, size, size), w, wscale, wzero, bias, lw)
    report = pt.explain(f, *args, compile_options={"target": "cpu"})
    assert report.fallback_ops == [], str(report)
    integer = [r for k in report.kernels for r in k.rewrites if "accumulated in int32" in r]
    assert len(integer) == 2, str(report)
    expected = f(*args)
    torch.testing.assert_close(report.result, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))


def _quantized(model: torch.nn.Module, x: torch.Tensor) -> torch.nn.Module:
    """``model`` through PT2E post-training quantization with the X86 Inductor quantizer."""
    pytest.importorskip("torchao")
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    return convert_pt2e(prepared)


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.conv(x))).flatten(1))


def test_a_quantized_cnn_runs_in_polytri() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    model = _quantized(SmallCNN().eval(), x)
    with torch.no_grad():
        expected = model(x)
        report = pt.explain(model, x, compile_options={"target": "cpu"})
    assert report.fallback_ops == [], str(report)
    assert sum("uint8 x int8 contraction" in r for k in report.kernels for r in k.rewrites) == 2, str(report)
    step = 0.05 * expected.abs().max()  # far below the output's quantization step
    torch.testing.assert_close(report.result, expected, rtol=0, atol=float(step))


def test_every_contraction_of_a_deeper_quantized_cnn_is_integer() -> None:
    """Programs are cut where values are narrowest (before a dequantization) and weight dequantizations move
    next to their convolution: every contraction of a four-block CNN reads integers, not only those that
    happened to share a program with their dequantized inputs."""
    torch.manual_seed(1)
    layers: list[torch.nn.Module] = []
    for cin, cout, stride in ((3, 16, 2), (16, 32, 1), (32, 32, 2), (32, 64, 1)):
        layers += [torch.nn.Conv2d(cin, cout, 3, stride, 1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]
    body = torch.nn.Sequential(*layers).eval()
    x = torch.randn(1, 3, 32, 32)
    model = _quantized(body, x)
    with torch.no_grad():
        expected = model(x)
        report = pt.explain(model, x, compile_options={"target": "cpu"})
    assert report.fallback_ops == [], str(report)
    assert sum("accumulated in int32" in r for k in report.kernels for r in k.rewrites) == 4, str(report)
    torch.testing.assert_close(report.result, expected, rtol=0, atol=float(0.05 * expected.abs().max()))


def _xnnpack_mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    """A 64-128-16 MLP through the XNNPACK quantizer's flow (int8 activations, per-tensor weights, a
    quantized output), and an input."""
    pytest.importorskip("torchao")
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 16)).eval()
    x = torch.randn(4, 64)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=False))
    prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    prepared(x)
    quantized = convert_pt2e(prepared)
    return quantized, x


def test_a_quantized_mlp_with_quantized_output() -> None:
    """The XNNPACK quantizer's flow (int8 activations, per-tensor weights, a quantized output): int8 x int8
    contractions, and the output equal to eager's quantized model exactly."""
    quantized, x = _xnnpack_mlp()
    with torch.no_grad():
        expected = quantized(x)
        report = pt.explain(quantized, x, compile_options={"target": "cpu"})
    assert report.fallback_ops == [], str(report)
    assert sum("int8 x int8 contraction" in r for k in report.kernels for r in k.rewrites) == 2, str(report)
    torch.testing.assert_close(report.result, expected, rtol=0, atol=0)


@pytest.mark.interp
def test_an_int8_mlp_on_nvgpu_uses_tl_dot() -> None:
    """On a Triton target the int8 x int8 sums of the XNNPACK flow are ``tl.dot`` on int8 with int32
    accumulation (the weights are read as stored); in the interpreter, equal to eager's quantized model
    exactly.  (A cast of a product of two literal scales used to be ``(a * b).to(...)`` on a Python float:
    the kernel failed and the graph ran in eager.)"""
    quantized, x = _xnnpack_mlp()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = quantized(x)
        report = pt.explain(quantized, x, compile_options={"target": "nvgpu"})
    assert not [w for w in caught if "eager" in str(w.message)], [str(w.message) for w in caught]
    assert "tl.dot" in "".join(str(k.source) for k in report.kernels)
    torch.testing.assert_close(report.result, expected, rtol=0, atol=0)


def test_a_quantized_model_exports(tmp_path: pathlib.Path) -> None:
    """pt.export of a quantized model: the planner's reordering of the graph (weight dequantizations moved
    next to their convolutions) is the same at export and at load, so the loaded graph finds its kernels."""
    torch.manual_seed(2)
    x = torch.randn(2, 3, 8, 8)
    model = _quantized(SmallCNN().eval(), x)
    run = pt.load(pt.export(model, (x,), tmp_path / "int8-cnn"))
    with torch.no_grad():
        torch.testing.assert_close(run(x), model(x), rtol=0, atol=1e-5)


def test_weights_scaled_along_another_axis_stay_in_float() -> None:
    """A weight quantized per channel along its input dimension has no one scale per output channel: the
    contraction stays in float (on dequantized values), and equals eager."""
    torch.manual_seed(3)
    w = torch.randint(-127, 128, (6, 4, 3, 3), dtype=torch.int8)
    lw = torch.randint(-127, 128, (5, 6), dtype=torch.int8)
    conv_scales, lin_scales = torch.rand(4) * 0.01 + 0.001, torch.rand(6) * 0.01 + 0.001

    def f(x: torch.Tensor, w: torch.Tensor, cs: torch.Tensor, lw: torch.Tensor, ls: torch.Tensor) -> torch.Tensor:
        xd = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(x, 0.02, 5, 0, 255, torch.uint8),
                                              0.02, 5, 0, 255, torch.uint8)
        wd = qd.dequantize_per_channel.default(w, cs, None, 1, -128, 127, torch.int8)
        y = torch.nn.functional.conv2d(xd, wd, padding=1).mean((2, 3))
        yq = qd.quantize_per_tensor.default(y, 0.05, 0, 0, 255, torch.uint8)
        yd = qd.dequantize_per_tensor.default(yq, 0.05, 0, 0, 255, torch.uint8)
        return torch.nn.functional.linear(yd, qd.dequantize_per_channel.default(lw, ls, None, 1, -128, 127, torch.int8))

    args = (torch.randn(2, 4, 6, 6), w, conv_scales, lw, lin_scales)
    report = pt.explain(f, *args, compile_options={"target": "cpu"})
    assert report.fallback_ops == [], str(report)
    assert not any("int32" in r for k in report.kernels for r in k.rewrites), str(report)
    expected = f(*args)
    torch.testing.assert_close(report.result, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))


@pytest.mark.parametrize(("groups", "xzero", "xtype"), [(1, 131, torch.uint8),
                                                         pytest.param(1, 0, torch.uint8, marks=pytest.mark.slow),
                                                         (2, 9, torch.uint8), (1, -5, torch.int8)])
def test_weight_zero_points_that_are_not_zero(groups: int, xzero: int, xtype: torch.dtype) -> None:
    """Per-channel weight zero points other than 0: the sums read the weights as stored and subtract
    ``zw[c]`` times the activations' sums (per row of a linear layer, per window of a convolution), or keep
    them in the weights (a grouped convolution); equal to eager's float computation within float32
    rounding.  On a machine with AVX-512 VNNI the contractions run on its 8-bit dot products."""
    torch.manual_seed(groups + xzero)
    qmin, qmax = (0, 255) if xtype == torch.uint8 else (-128, 127)
    w = torch.randint(-127, 128, (8, 6 // groups, 3, 3), dtype=torch.int8)
    wscale, wzero = torch.rand(8) * 0.01 + 0.001, torch.randint(-4, 5, (8,))
    lw = torch.randint(-127, 128, (5, 8 * 9 * 9), dtype=torch.int8)
    lscale, lzero = torch.rand(5) * 0.001 + 0.001, torch.randint(-3, 4, (5,))

    def f(x: torch.Tensor, w: torch.Tensor, wscale: torch.Tensor, wzero: torch.Tensor, lw: torch.Tensor,
          lscale: torch.Tensor, lzero: torch.Tensor) -> torch.Tensor:
        xd = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(x, 0.02, xzero, qmin, qmax, xtype),
                                              0.02, xzero, qmin, qmax, xtype)
        wd = qd.dequantize_per_channel.default(w, wscale, wzero, 0, -128, 127, torch.int8)
        y = torch.relu(torch.nn.functional.conv2d(xd, wd, None, padding=1, groups=groups))
        yd = qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(y, 0.05, 3, 0, 255, torch.uint8),
                                              0.05, 3, 0, 255, torch.uint8)
        ld = qd.dequantize_per_channel.default(lw, lscale, lzero, 0, -128, 127, torch.int8)
        return torch.nn.functional.linear(yd.flatten(1), ld)

    args = (torch.randn(2, 6, 9, 9), w, wscale, wzero, lw, lscale, lzero)
    report = pt.explain(f, *args, compile_options={"target": "cpu"})
    assert report.fallback_ops == [], str(report)
    assert len([r for k in report.kernels for r in k.rewrites if "accumulated in int32" in r]) == 2, str(report)
    if has_integer_dot():
        source = "".join(str(k.source) for k in report.kernels)
        # the convolution: int8 weights (left) by uint8 activations in quads, or int8 by int8 in int16 pairs
        # (AVX2: int16 pairs for both); a grouped one keeps the zero points in its int32 weights, summed
        # without dot products (and the linear layer's two rows are plain sums along k, which gcc
        # vectorizes with the same instructions)
        dot = integer_dot_for(INT8, UINT8 if xtype == torch.uint8 else INT8)
        assert dot is not None and (f"pt__ukernel_{dot.name}add" in source) == (groups == 1)
    expected = f(*args)
    torch.testing.assert_close(report.result, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))
