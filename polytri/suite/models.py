"""A small zoo of PyTorch models written here: the shapes of the networks users bring, at sizes a test
or a benchmark can afford.

- :class:`ResNet`: ResNet-like; convolutions, batch norm, ReLU, max pooling, residual adds, a
  downsampling shortcut, global average pooling and a linear head.
- :class:`MobileNet`: MobileNetV3-like; inverted residuals with depthwise convolutions, squeeze-and-
  excitation, hardswish and hardsigmoid.
- :class:`ViT`: ViT-like; a strided patch convolution, a class token, position embeddings, pre-norm
  transformer blocks with ``scaled_dot_product_attention`` and a GELU MLP.
- :class:`MLP`: three linear layers with GELU.

:data:`TRANSFORMERS` adds two models of the optional ``transformers`` package, built from configurations
(:mod:`polytri.suite.models_hf`): ``bert`` and ``gpt2``, called with token ids and an attention mask.

:func:`build_call` makes one, in eval mode, with deterministic random weights and norms that are not the
identity (random-init batch norm is the identity in eval mode, and random-init layer norm has unit scale
and no shift: either would hide a wrong lowering), and the arguments of a call at its size; :func:`build`
does the same for the models of one input and returns that input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import models_hf as hf


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection (a 1x1 shortcut when the shape
    changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.a, self.b = _conv_bn(cin, cout, 3, stride), _conv_bn(cout, cout, 3)
        self.short = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.b(F.relu(self.a(x))) + self.short(x))


class ResNet(nn.Module):
    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, width, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2),
                                    BasicBlock(2 * width, 4 * width, 2))
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, squeeze: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise (k x k), squeeze-and-excite, project (1x1); a residual when shapes allow."""

    def __init__(self, cin: int, expand: int, cout: int, k: int, stride: int, se: bool) -> None:
        super().__init__()
        self.expand = _conv_bn(cin, expand, 1) if expand != cin else None
        self.dw = _conv_bn(expand, expand, k, stride, groups=expand)
        self.se = SqueezeExcite(expand, max(8, expand // 4)) if se else nn.Identity()
        self.project = _conv_bn(expand, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(self.expand(x)) if self.expand is not None else x
        y = self.project(self.se(F.hardswish(self.dw(y))))
        return x + y if self.residual else y


class MobileNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 16, 3, 2)
        self.blocks = nn.Sequential(InvertedResidual(16, 16, 16, 3, 2, True), InvertedResidual(16, 64, 24, 3, 2, False),
                                    InvertedResidual(24, 72, 24, 3, 1, False), InvertedResidual(24, 96, 40, 5, 2, True))
        self.last = _conv_bn(40, 128, 1)
        self.head = nn.Sequential(nn.Linear(128, 256), nn.Hardswish(), nn.Linear(256, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(self.last(self.blocks(F.hardswish(self.stem(x)))))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class EncoderBlock(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=-1))
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, image: int = 32, patch: int = 8, d: int = 64, depth: int = 2, heads: int = 4,
                 classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        self.blocks = nn.Sequential(*(EncoderBlock(d, heads) for _ in range(depth)))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(p.shape[0], -1, -1), p], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class MLP(nn.Module):
    def __init__(self, d_in: int = 512, hidden: int = 1024, classes: int = 10) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(d_in, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l3(F.gelu(self.l2(F.gelu(self.l1(x)))))


Inputs = Callable[[tuple[int, ...], torch.Generator], tuple[torch.Tensor, ...]]
"""The arguments of a model's call at an input shape, drawn from a generator."""


def _normal(shape: tuple[int, ...], gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    return (torch.randn(shape, generator=gen),)


def _nontrivial_norms(model: nn.Module, gen: torch.Generator) -> None:
    for mod in model.modules():
        if isinstance(mod, nn.BatchNorm2d):
            c = mod.num_features
            assert mod.running_mean is not None and mod.running_var is not None  # track_running_stats
            mod.running_mean.copy_(torch.rand(c, generator=gen) - 0.5)
            mod.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
            mod.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
            mod.bias.data.copy_(torch.rand(c, generator=gen) - 0.5)


@dataclass(frozen=True)
class Spec:
    """A zoo model and its input, at a test size and a benchmark size."""

    make: Callable[[], nn.Module]
    test_input: tuple[int, ...]
    bench_input: tuple[int, ...]
    make_bench: Callable[[], nn.Module] | None = None
    """The benchmark's model when it differs from the test's (a larger configuration)."""
    inputs: Inputs = _normal
    """The call's arguments at the input shape (default: one tensor of normal values)."""
    prepare: Callable[[nn.Module, torch.Generator], None] = _nontrivial_norms
    """Sets the norms' statistics and affine parameters to values that are not the identity."""


ZOO: dict[str, Spec] = {
    "resnet": Spec(ResNet, (1, 3, 32, 32), (1, 3, 112, 112)),
    "mobilenet": Spec(MobileNet, (1, 3, 32, 32), (1, 3, 224, 224)),
    "vit": Spec(lambda: ViT(image=32, patch=8, d=32), (2, 3, 32, 32), (1, 3, 224, 224),
                make_bench=lambda: ViT(image=224, patch=16, d=192, depth=4, heads=3)),
    "mlp": Spec(lambda: MLP(64, 128), (4, 64), (4, 512), make_bench=MLP),
}
"""The models written here (no package beyond torch)."""

TRANSFORMERS: dict[str, Spec] = {
    "bert": Spec(lambda: hf.bert(hf.TEST_SIZE), (2, 16), (2, 128), make_bench=lambda: hf.bert(hf.BENCH_SIZE),
                 inputs=hf.token_inputs, prepare=hf.nontrivial_layer_norms),
    "gpt2": Spec(lambda: hf.gpt2(hf.TEST_SIZE), (2, 16), (2, 128), make_bench=lambda: hf.gpt2(hf.BENCH_SIZE),
                 inputs=hf.token_inputs, prepare=hf.nontrivial_layer_norms),
}
"""The models of the optional ``transformers`` package (building one without it is an ImportError)."""

MODELS: dict[str, Spec] = {**ZOO, **TRANSFORMERS}
"""Every model of the zoo."""


def build_call(name: str, *, bench: bool = False, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Model ``name`` of :data:`MODELS` in eval mode and the arguments of a call (the benchmark's size if
    ``bench``)."""
    spec = MODELS[name]
    torch.manual_seed(seed)
    model = (spec.make_bench if bench and spec.make_bench is not None else spec.make)()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        spec.prepare(model, gen)
    return model.eval(), spec.inputs(spec.bench_input if bench else spec.test_input, gen)


def build(name: str, *, bench: bool = False, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """Model ``name`` of :data:`ZOO` (one input) in eval mode and an input for it (the benchmark's size if
    ``bench``)."""
    model, args = build_call(name, bench=bench, seed=seed)
    if len(args) != 1:
        raise ValueError(f"zoo model {name!r} takes {len(args)} inputs: use build_call")
    return model, args[0]


def to_dtype(args: tuple[torch.Tensor, ...], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """The floating-point arguments converted to ``dtype`` (token ids and masks kept as they are)."""
    return tuple(a.to(dtype) if a.is_floating_point() else a for a in args)
