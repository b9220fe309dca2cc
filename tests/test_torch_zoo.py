"""The model zoo (polytri.suite.models) through both entry points: every model runs entirely in polytri
kernels (no op left to eager) and equals eager in float32, and in bfloat16 is no further from the
float32 result than twice eager's own bfloat16 error."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

import polytri as pt
from polytri.suite.models import ZOO, build

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("module_kernel_cache", "fresh_dynamo")]


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_runs_in_polytri_kernels_and_equals_eager(name: str) -> None:
    model, x = build(name)
    with torch.no_grad():
        expected = model(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a graph falling back to eager warns
            report = pt.explain(model, x)
        torch.testing.assert_close(report.result, expected, rtol=1e-3, atol=1e-4)
        assert report.kernels and report.fallback_ops == [], str(report)
        torch._dynamo.reset()
        torch.testing.assert_close(pt.jit(model)(x), expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "mobilenet" else n for n in sorted(ZOO)])
def test_zoo_model_in_bfloat16_is_as_close_to_float32_as_eager(name: str) -> None:  # mobilenet: make fuzz (27 s)
    model, x = build(name)
    with torch.no_grad():
        reference = model(x).double()
        model, x = model.to(torch.bfloat16), x.to(torch.bfloat16)
        eager_error = (model(x).double() - reference).abs().max().item()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            report = pt.explain(model, x)
    assert report.result.dtype == torch.bfloat16 and report.fallback_ops == []
    error = (report.result.double() - reference).abs().max().item()
    assert error <= 2 * eager_error + 1e-6, f"{name}: bfloat16 error {error:.3g}, eager's {eager_error:.3g}"


def test_zoo_batch_norm_statistics_are_not_the_identity() -> None:
    """Random-init batch norm in eval mode is the identity and would hide a wrong lowering."""
    model, _ = build("resnet")
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and all(n.running_mean.abs().sum() > 0 and (n.running_var != 1).any() for n in norms)
