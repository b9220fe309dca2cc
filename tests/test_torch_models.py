"""Small models through the polytri backend equal eager: an MLP, a CNN block, a transformer block, the blur."""

from __future__ import annotations

import pathlib
import warnings
from typing import Any

import pytest
import torch
import torch._dynamo  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import polytri as pt  # noqa: E402
from polytri.tools.demo import blur_torch  # noqa: E402

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True)
def _fresh(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(F.gelu(self.l1(x)))


class CNNBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, groups=2, dilation=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.c2(torch.relu(self.c1(x)))).mean((2, 3))


class TransformerBlock(nn.Module):
    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.f1, self.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=-1))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // h) ** 0.5, dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.f2(F.gelu(self.f1(self.ln2(x)), approximate="tanh"))


@pytest.mark.parametrize("model, shape", [(MLP, (4, 16)), (CNNBlock, (2, 3, 8, 8)), (TransformerBlock, (2, 5, 16))],
                         ids=["mlp", "cnn", "transformer"])
def test_model_equals_eager_in_polytri_kernels(model: type[nn.Module], shape: tuple[int, ...]) -> None:
    m = model().eval()
    x = torch.randn(shape)
    with torch.no_grad():
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a graph falling back to eager warns
            report = pt.explain(m, x)
        torch.testing.assert_close(report.result, m(x), rtol=1e-4, atol=1e-5)
    assert report.kernels and report.fallback_ops == []


def test_training_forward_and_gradients_equal_eager() -> None:
    m, m2 = MLP(), MLP()
    m2.load_state_dict(m.state_dict())
    x = torch.randn(3, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = pt.jit(m2)(x)
        out.sum().backward()
    ref = m(x)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    for p, p2 in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p2.grad, p.grad)


def test_blur_is_one_fused_statement_and_equals_eager() -> None:
    img = torch.rand(3, 40, 36)
    report = pt.explain(blur_torch, img)
    torch.testing.assert_close(report.result, blur_torch(img))
    assert report.fallback_ops == []
    assert ["convolution", "convolution_1"] in report.fusion_groups
    assert report.kernels[0].program.count("statement S") == 1


@pytest.mark.interp
@pytest.mark.parametrize("case", ["mlp", pytest.param("transformer", marks=pytest.mark.slow), "blur"])  # 17 s
def test_models_on_the_nvgpu_target_through_the_interpreter(case: str) -> None:
    fn: Any
    if case == "mlp":
        fn, x = MLP().eval(), torch.randn(4, 16)
    elif case == "transformer":
        fn, x = TransformerBlock().eval(), torch.randn(2, 5, 16)
    else:
        fn, x = blur_torch, torch.rand(3, 12, 12)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        report = pt.explain(fn, x, compile_options={"target": "nvgpu"})
        torch.testing.assert_close(report.result, fn(x), rtol=1e-4, atol=1e-5)
    assert report.kernels and all(k.target == "nvgpu" for k in report.kernels)
    assert report.fallback_ops == []
