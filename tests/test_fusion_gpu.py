"""Cross-operator fusion on the nvgpu target (polytri/codegen_triton/nest_fusion.py): how many launches
each torch function of the fusion issue makes, whether its products stay on ``tl.dot``, and that the
results equal eager through Triton's interpreter; the grouped fusion of nests on hand-written programs."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import polytri as pt
from polytri.ir.textform import parse_program
from polytri.tools.demo import blur_torch

pytestmark = pytest.mark.interp

torch.manual_seed(0)
W1, B1 = torch.randn(64, 32) / 8, torch.randn(64)
W2, B2 = torch.randn(32, 64) / 8, torch.randn(32)
LN_W, LN_B = torch.randn(64), torch.randn(64)
CONV_W, CONV_B = torch.randn(8, 4, 3, 3) / 6, torch.randn(8)

CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "softmax": (lambda x: torch.softmax(x, dim=-1), lambda: (torch.randn(16, 64),)),
    "layer_norm": (lambda x: F.layer_norm(x, (64,), LN_W, LN_B), lambda: (torch.randn(16, 64),)),
    "row_reductions": (lambda x: x.sum(-1) + x.amax(-1), lambda: (torch.randn(16, 64),)),
    "conv_bias_relu": (lambda x: torch.relu(F.conv2d(x, CONV_W, CONV_B, padding=1)), lambda: (torch.randn(1, 4, 16, 16),)),
    "pointwise": (lambda x, y: torch.sigmoid(x * y + 1.0) * torch.tanh(x - y),
                  lambda: (torch.randn(32, 32), torch.randn(32, 32))),
    "blur": (blur_torch, lambda: (torch.rand(3, 20, 24),)),
    "mlp": (lambda x: F.linear(F.gelu(F.linear(x, W1, B1)), W2, B2), lambda: (torch.randn(16, 32),)),
    "attention": (lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) * 0.25, dim=-1) @ v,
                  lambda: tuple(torch.randn(1, 2, 32, 16) for _ in range(3))),
}

#: Launches expected of each case on nvgpu.
LAUNCHES = {"softmax": 1, "layer_norm": 1, "row_reductions": 1, "conv_bias_relu": 1, "pointwise": 1, "blur": 1,
            "mlp": 2, "attention": 1}


def _launches(source: str) -> int:
    return len(re.findall(r"(?m)^def \w+_k\d+\(", source))


def _explain(case: str) -> tuple[Any, tuple[torch.Tensor, ...]]:
    fn, make = CASES[case]
    args = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph in eager would warn
        report = pt.explain(fn, *args, compile_options={"target": "nvgpu"})
    torch.testing.assert_close(report.result, fn(*args), rtol=1e-4, atol=1e-5)
    assert report.fallback_ops == [] and report.errors == []
    return report, args


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_launches_on_nvgpu_equal_eager(case: str) -> None:
    report, _ = _explain(case)
    assert len(report.kernels) == 1 and report.kernels[0].target == "nvgpu"
    assert _launches(report.kernels[0].source) == LAUNCHES[case]


@pytest.mark.parametrize("case", ["mlp", "attention"])
def test_products_stay_on_tl_dot(case: str) -> None:
    """Both products of an MLP and of attention run on tl.dot: the MLP's bias and gelu run in the launch
    of the first product; attention's products run in row-block programs, over chunks of their columns
    (codegen_triton/kgen.py, column_contraction)."""
    report, _ = _explain(case)
    source = report.kernels[0].source
    assert source.count("tl.dot(") == 2
    if case == "mlp":
        kernels = [part for part in source.split("\ndef ") if "tl.dot(" in part]
        assert "erf(" in kernels[0]  # the gelu epilogue shares the first product's launch
        # ... and reads the accumulator: the first product itself (a temporary read nowhere else) is not
        # stored, only its gelu is
        assert "tl.store(pt_t_addmm + " not in kernels[0] and "tl.store(pt_t_addmm_1_a + " in kernels[0]
        assert "temporary t_addmm is read only here, from registers" in kernels[0]


@pytest.mark.slow  # 16 s in the interpreter: make fuzz
def test_the_convolution_runs_on_tl_dot_by_output_channels_and_columns() -> None:
    """Pluto orders the convolution's parallel loops (output channels, rows, columns); reordered (rows,
    channels, columns), each step of its sum is a tl.dot of a weight tile and an input tile
    (codegen_triton/dot_order.py), with a sum block of 16 (the kernel width is 3: dot_k_block)."""
    report, _ = _explain("conv_bias_relu")
    source = report.kernels[0].source
    assert source.count("tl.dot(") == 1, source
    assert "tl.arange(0, 16)[None, :]" in source  # the sum's block
    kernel = pt.compile(parse_program(report.kernels[0].program), target="nvgpu")
    assert any(d.kind == "dot-order" and (d.data["products"], d.data["previous_products"]) == (1, 0)
               for d in kernel.decision_records), kernel.decisions


def test_transposed_operand_is_read_in_place_on_nvgpu() -> None:
    """A transposed weight is loaded through its strides by tl.dot: no copy statement (on the CPU target
    the copy is made unless the packed panels read it)."""
    report, _ = _explain("mlp")
    program = report.kernels[0].program
    assert "_b[" not in program and program.count("statement S") == 6


@pytest.mark.parametrize("arch", ["sm_90", pytest.param("gfx942", marks=pytest.mark.slow)])  # AMD's: make fuzz
def test_fused_kernels_compile_ahead_of_time(arch: str) -> None:
    """The fused launches (a product with its epilogue, a convolution with its init and relu) compile to
    machine code for a real GPU, not only in the interpreter (attention's one launch, in online form:
    tests/test_online_softmax.py)."""
    for case in ("mlp", "conv_bias_relu"):
        report, _ = _explain(case)
        kernel = pt.compile(parse_program(report.kernels[0].program), target="nvgpu" if arch.startswith("sm") else "amdgpu")
        text = kernel.asm(arch)
        assert text.count("// kernel ") == len(kernel.launches) == LAUNCHES[case]


# -- the grouped fusion of nests on hand-written programs ---------------------------------------------

def _two_layers() -> pt.Program:
    """Y = relu(X W + b) V: the second product reads whole rows of the first's result."""
    p = pt.Program("two_layers", params=["N", "K", "H", "M"])
    for name, shape in (("X", ("N", "K")), ("W", ("K", "H")), ("b", ("H",)), ("T", ("N", "H")),
                        ("R", ("N", "H")), ("V", ("H", "M")), ("Y", ("N", "M"))):
        p.array(name, shape)
    with p.loop("i", 0, "N"), p.loop("j", 0, "H"):
        p.assign("T[i, j] = 0.0")
    with p.loop("i", 0, "N"), p.loop("j", 0, "H"), p.loop("k", 0, "K"):
        p.assign("T[i, j] += X[i, k] * W[k, j]")
    with p.loop("i", 0, "N"), p.loop("j", 0, "H"):
        p.assign("R[i, j] = max(T[i, j] + b[j], 0.0)")
    with p.loop("i", 0, "N"), p.loop("m", 0, "M"):
        p.assign("Y[i, m] = 0.0")
    with p.loop("i", 0, "N"), p.loop("m", 0, "M"), p.loop("j", 0, "H"):
        p.assign("Y[i, m] += R[i, j] * V[j, m]")
    return p


def test_nests_fuse_in_groups_that_keep_the_grid() -> None:
    """Initialization, product and epilogue of the first layer share a launch, and the second layer's
    initialization joins it; the second product gets a launch of its own (it reads whole rows of R).
    Both products stay on tl.dot; the result equals the reference."""
    prog = _two_layers()
    kernel = pt.compile(prog, target="nvgpu")
    assert len(kernel.launches) == 2
    assert kernel.source.count("tl.dot(") == 2
    fused = [d for d in kernel.decision_records if d.kind == "gpu-nest-fusion"]
    assert fused and len(fused[-1].data["grid_loops"]) == 2, kernel.decisions   # 2 launches
    sizes = {"N": 12, "K": 8, "H": 20, "M": 6}
    shapes = {"X": ("N", "K"), "W": ("K", "H"), "b": ("H",), "T": ("N", "H"), "R": ("N", "H"), "V": ("H", "M"),
              "Y": ("N", "M")}
    rng = np.random.default_rng(1)
    args = {name: rng.standard_normal([sizes[e] for e in shape]) for name, shape in shapes.items()}
    want = {k: v.copy() for k, v in args.items()}
    pt.reference(prog, **want, **sizes)
    kernel(**args, **sizes)
    np.testing.assert_allclose(args["Y"], want["Y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["softmax", "row_reductions", "amin"])
def test_row_maxima_are_chunked_and_propagate_nan(case: str) -> None:
    """torch's amax / amin (a NaN-propagating select) reduce chunks of a row with tl.max / tl.min plus a
    NaN test, not one column at a time; a NaN anywhere in a row gives NaN, as in eager."""
    fn = CASES[case][0] if case in CASES else (lambda x: x.amin(-1))
    x = torch.randn(8, 64)
    x[2, 5] = float("nan")
    x[3, 63] = float("nan")
    x[4, :] = float("-inf")
    report = pt.explain(fn, x, compile_options={"target": "nvgpu"})
    torch.testing.assert_close(report.result, fn(x), equal_nan=True)
    source = report.kernels[0].source
    assert "(reduction over" in source and ("tl.max(tl.where(" in source or "tl.min(tl.where(" in source)
    assert 'float("nan")' in source


def test_the_report_shows_the_rewrites_across_statements() -> None:
    """pt.explain lists the online softmax of attention and the recomputed exponentials of a softmax."""
    report, _ = _explain("attention")
    assert any(r.startswith("online softmax: max reduction") for r in report.kernels[0].rewrites)
    assert "    online softmax: max reduction" in str(report)
    report, _ = _explain("softmax")
    assert any("recomputed in" in r and "exp(" in r for r in report.kernels[0].rewrites), report.kernels[0].rewrites


def test_a_product_outside_the_online_form_keeps_its_two_dimensional_tiles() -> None:
    """softmax(a @ b) has no sum consuming the softmax: its product stays in a launch of 2-D tiles (rows by
    columns, the most programs) rather than fusing below the rows with the softmax, which would leave one
    program per block of rows looping over the columns."""
    a, b = torch.randn(64, 32), torch.randn(32, 128)
    report = pt.explain(lambda a, b: torch.softmax(a @ b, -1), a, b, compile_options={"target": "nvgpu"})
    torch.testing.assert_close(report.result, torch.softmax(a @ b, -1), rtol=1e-4, atol=1e-5)
    source = report.kernels[0].source
    product = next(part for part in source.split("\ndef ") if "tl.dot(" in part)
    assert "tl.program_id(1) * 64 + tl.arange(0, 64)[:, None]" in product  # rows ...
    assert "tl.program_id(0) * 64 + tl.arange(0, 64)[None, :]" in product  # ... by columns of the grid
