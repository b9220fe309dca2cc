"""On a GPU (``make test-gpu``): every suite kernel, the matrix-unit contractions and the torch backend run on
CUDA tensors and equal the reference.  Skipped where torch sees no GPU; the interpreter tests cover the same
kernels on every machine."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from oracles import assert_suite_arrays_match

import polytri as pt
from polytri.codegen_triton.kernel import TritonKernel
from polytri.suite import KERNELS, copy_args, make_args
from polytri.suite.models import ZOO, build

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU")]

TARGET = "amdgpu" if getattr(torch.version, "hip", None) else "nvgpu"


@functools.cache
def _compiled(name: str) -> TritonKernel:
    return pt.compile(KERNELS[name].build(), target=TARGET)


def _check_suite(name: str, params: dict[str, int]) -> None:
    """As the interpreter tests compare (exp, sqrt and pow of the GPU's libraries differ from numpy's by a
    few ulps, inside those bounds at the suite's sizes: 85 of 85 passed on an H200)."""
    args = make_args(KERNELS[name], params, seed=3)
    want = copy_args(args)
    pt.reference(KERNELS[name].build(), **want)
    got = {n: (torch.from_numpy(v.copy()).cuda() if isinstance(v, np.ndarray) else v) for n, v in args.items()}
    _compiled(name)(**got)
    torch.cuda.synchronize()
    assert_suite_arrays_match(name, params, args, got, want)


@pytest.mark.parametrize("name", list(KERNELS))
def test_suite_kernel_on_the_gpu_matches_reference(name: str) -> None:
    _check_suite(name, KERNELS[name].small)


@pytest.mark.parametrize("name", list(KERNELS))
def test_parameters_smaller_than_one_block_on_the_gpu(name: str) -> None:
    _check_suite(name, KERNELS[name].tiny)


def _matmul(dtype: str, acc: str) -> pt.Program:
    p = pt.Program(f"mm_{dtype}", params=["M", "N", "K"])
    p.array("A", ("M", "K"), dtype)
    p.array("B", ("K", "N"), dtype)
    p.array("C", ("M", "N"), acc)
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"):
        p.assign("C[i, j] = 0")
        with p.loop("k", 0, "K"):
            p.assign(f"C[i, j] += {acc}(A[i, k]) * {acc}(B[k, j])")
    return p


@pytest.mark.parametrize("dtype, acc", [("float16", "float32"), ("bfloat16", "float32"), ("int8", "int32"),
                                        ("float32", "float32")])
@pytest.mark.parametrize("m, n, k", [(300, 200, 100), (37, 21, 70), (256, 256, 512)])
def test_contraction_on_the_matrix_units(dtype: str, acc: str, m: int, n: int, k: int) -> None:
    """tl.dot with fp32 (int32) accumulation, against the product of the same operands in float64."""
    kernel = pt.compile(_matmul(dtype, acc), target=TARGET)
    assert "tl.dot(" in kernel.source
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    if dtype == "int8":
        a = torch.randint(-128, 128, (m, k), device="cuda", generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), device="cuda", generator=g, dtype=torch.int8)
    else:
        a = torch.randn(m, k, device="cuda", generator=g).to(getattr(torch, dtype))
        b = torch.randn(k, n, device="cuda", generator=g).to(getattr(torch, dtype))
    c = torch.full((m, n), 7, device="cuda", dtype=getattr(torch, acc))  # poisoned: every element is written
    kernel(A=a, B=b, C=c)
    want = a.double() @ b.double()
    if dtype == "int8":
        assert torch.equal(c.double(), want)
    else:
        # operands are exact in fp32; ieee fp32 accumulation over K terms
        torch.testing.assert_close(c.double(), want, rtol=1e-5, atol=1e-4 * k ** 0.5)


@contextmanager
def _no_fallback() -> Iterator[None]:
    """Fails when polytri warns (a graph that fails on the GPU runs in eager after a warning: the result
    would still equal eager's)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    ours = [str(w.message) for w in caught if "polytri" in str(w.message)]
    assert not ours, ours


def test_torch_compile_on_cuda_tensors_equals_eager() -> None:
    """A small MLP with a softmax head, compiled through the backend on CUDA tensors (target nvgpu)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.LayerNorm(96),
                                torch.nn.Linear(96, 10), torch.nn.Softmax(dim=-1)).cuda().eval()
    x = torch.randn(33, 64, device="cuda")
    from polytri.frontend.torch_backend import polytri_backend
    with torch.no_grad(), _no_fallback():
        want = model(x)
        got = torch.compile(model, backend=polytri_backend)(x)
    assert got.device == x.device
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_jit_on_cuda_tensors_equals_eager() -> None:
    @pt.jit
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a @ b + 1.0).sum(dim=1)

    a = torch.randn(40, 24, device="cuda")
    b = torch.randn(24, 56, device="cuda")
    with _no_fallback():
        got = f(a, b)
    torch.testing.assert_close(got, torch.relu(a @ b + 1.0).sum(dim=1), rtol=1e-4, atol=1e-4)


@pytest.fixture
def ieee_fp32() -> Iterator[None]:
    """cuBLAS and cuDNN in ieee float32 (cuDNN's convolutions default to tf32), so that eager is a float32
    reference."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _zoo_on_gpu(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    model, x = build(name)
    return model.cuda(), x.cuda()


@pytest.mark.usefixtures("module_kernel_cache", "fresh_dynamo", "ieee_fp32")
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_on_the_gpu_runs_in_polytri_kernels_and_equals_eager(name: str) -> None:
    model, x = _zoo_on_gpu(name)
    with torch.no_grad():
        expected = model(x)
        with _no_fallback():
            report = pt.explain(model, x)
    assert report.result.device == x.device
    torch.testing.assert_close(report.result, expected, rtol=1e-3, atol=1e-4)
    assert report.kernels and report.fallback_ops == [], str(report)


@pytest.mark.usefixtures("module_kernel_cache", "fresh_dynamo", "ieee_fp32")
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_on_the_gpu_in_bfloat16_is_as_close_to_float32_as_eager(name: str) -> None:
    model, x = _zoo_on_gpu(name)
    with torch.no_grad():
        reference = model(x).double()
        model, x = model.to(torch.bfloat16), x.to(torch.bfloat16)
        eager_error = (model(x).double() - reference).abs().max().item()
        with _no_fallback():
            report = pt.explain(model, x)
    assert report.result.dtype == torch.bfloat16 and report.fallback_ops == []
    error = (report.result.double() - reference).abs().max().item()
    assert error <= 2 * eager_error + 1e-6, f"{name}: bfloat16 error {error:.3g}, eager's {eager_error:.3g}"
