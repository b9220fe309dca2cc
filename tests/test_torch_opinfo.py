"""Every lowered ATen op against eager on PyTorch's own OpInfo samples (float32, CPU).

For each op the first few small samples are compiled with the polytri backend; each result must equal
eager, and at least one sample must run entirely in polytri kernels (no eager fallback), so a handler
that silently declines fails here.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

pytest.importorskip("expecttest")  # torch's OpInfo database imports it

import torch
import torch._dynamo  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import polytri as pt  # noqa: E402

pytestmark = pytest.mark.cc

#: OpInfo names (with variant) of the ops polytri lowers.
OPS = [
    "add", "sub", "rsub", "mul", "div.no_rounding_mode", "div.floor_rounding", "div.trunc_rounding", "neg", "exp",
    "log", "sqrt", "rsqrt", "tanh", "sigmoid", "reciprocal", "erf", "floor", "ceil", "abs", "nn.functional.relu",
    "nn.functional.gelu", "nn.functional.silu", "nn.functional.hardtanh", "maximum", "minimum", "where", "clamp",
    "clamp_min", "clamp_max", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
    "logical_xor", "isnan", "isinf", "square", "masked_fill", "remainder",
    "sum", "mean", "amax", "amin", "var", "std", "softmax", "log_softmax", "nn.functional.softmin",
    "mm", "bmm", "addmm", "mv", "nn.functional.linear", "matmul", "nn.functional.conv2d", "nn.functional.layer_norm",
    "view", "reshape", "permute", "transpose", "t", "expand", "squeeze", "unsqueeze", "narrow", "select", "cat",
    "nn.functional.pad.constant", "split", "clone", "full_like", "zeros_like", "ones_like",
    "nn.functional.max_pool2d", "nn.functional.batch_norm", "any", "all", "cumsum",
    "gather", "index_select", "nn.functional.embedding",
]
SAMPLES_PER_OP = 2
MAX_NUMEL = 4096

_DB = {o.name + (f".{o.variant_test_name}" if o.variant_test_name else ""): o for o in op_db}


@pytest.fixture(autouse=True, scope="module")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYTRI_CACHE_DIR", str(tmp_path_factory.mktemp("torch_opinfo_cache")))
    old = torch._dynamo.config.cache_size_limit
    torch._dynamo.config.cache_size_limit = 64
    yield
    torch._dynamo.config.cache_size_limit = old
    mp.undo()


def _tensors(x: Any) -> list[Any]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tensors(item)]
    return []


def _rebuild(x: Any, it: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return next(it)
    if isinstance(x, (list, tuple)):
        return type(x)(_rebuild(item, it) for item in x)
    return x


def _eligible(sample: Any) -> bool:
    ts = _tensors([sample.input, list(sample.args), list(sample.kwargs.values())])
    return bool(ts) and all(t.dtype == torch.float32 or t.dtype == torch.bool or t.dtype == torch.int64 for t in ts) \
        and all(t.numel() <= MAX_NUMEL for t in ts)


@pytest.mark.parametrize("name", OPS)
def test_op_matches_eager(name: str) -> None:
    op = _DB[name]
    samples = [s for s in op.sample_inputs("cpu", torch.float32) if _eligible(s)][:SAMPLES_PER_OP]
    assert samples, f"no usable OpInfo sample for {name}"
    lowered = 0
    for s in samples:
        structure = [s.input, list(s.args), dict(s.kwargs)]
        flat = _tensors([s.input, list(s.args), list(s.kwargs.values())])

        def fn(*ts: Any, structure: list[Any] = structure) -> Any:
            it = iter(ts)
            inp, args = _rebuild(structure[0], it), _rebuild(structure[1], it)
            kwargs = {k: _rebuild(v, it) for k, v in structure[2].items()}
            return op.op(inp, *args, **kwargs)

        expected = fn(*flat)
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = pt.explain(fn, *flat)
        torch.testing.assert_close(report.result, expected, rtol=1e-4, atol=1e-5, equal_nan=True,
                                   msg=lambda m, s=s: f"{name}, sample {s}: {m}")
        if report.kernels and not report.fallback_ops and not report.errors:
            lowered += 1
    assert lowered > 0, f"{name}: no sample ran entirely in polytri kernels; last report:\n{report}"
