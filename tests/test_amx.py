"""bfloat16 contractions on AMX tiles (polytri/cpu_codegen/tiles.py): ``TDPBF16PS`` where the building
machine has ``amx_tile`` and ``amx_bf16``, ``vdpbf16ps`` where it has ``avx512_bf16`` only.

A tile instruction adds 32 products of each sum per step, not in the loop's order of ``k``: the results
are not the float32 loop's bit for bit, and must stay within the project's rule for bfloat16, no further
from the exact sums than twice the float32 loop's own error (the reference's) or torch's float32 product
of the same values, whichever is larger.  Through the PyTorch frontend (bfloat16 results) the rule is
eager's: twice eager's own bfloat16 error against the float32 model.  Sizes have ragged edges in every
dimension (37 x 45 x 70) or span several register blocks, ``KC`` blocks and threads.  The paths a process
without the tiles takes (refused by Linux, a compiler without AMX, without AVX-512 BF16 either) run on
any AVX-512 machine, the choice of the instruction on any machine (forced CPU flags)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import polytri as pt
import polytri.cpu_codegen.blocking as blocking_module
import polytri.cpu_codegen.dot_product as dot_module
from polytri.cpu_codegen.blocking import cpu_flags, tiles_permitted, vector_bytes
from polytri.cpu_codegen.dot_product import BF16_PAIRS, BF16_TILES, DotProduct, dot_product
from polytri.dtypes import FLOAT32
from polytri.ir.builder import to_program
from polytri.ir.contraction import contraction_form
from polytri.ir.types import program_typer

pytestmark = pytest.mark.cc

HAS_TILES = BF16_TILES.available() and vector_bytes() == 64 and tiles_permitted()
needs_tiles = pytest.mark.skipif(not HAS_TILES, reason="needs AMX bfloat16 tiles (amx_tile and amx_bf16 in "
                                 "/proc/cpuinfo, and Linux's permission for this process)")
needs_avx512 = pytest.mark.skipif(vector_bytes() != 64, reason="the tile kernel's panels need 64-byte vectors")


def _gemm(along_k: bool = False) -> pt.Program:
    """``C = A B``; ``along_k``: ``C = A B^T`` with ``B`` stored as a linear layer's weight, ``B[j, k]``,
    read along ``k``."""
    p = pt.Program("amxmm_t" if along_k else "amxmm", params=["M", "N", "K"])
    p.array("C", ("M", "N"), "float32")
    p.array("A", ("M", "K"), "bfloat16")
    p.array("B", ("N", "K") if along_k else ("K", "N"), "bfloat16")
    with p.loop("i", 0, "M"), p.loop("k", 0, "K"), p.loop("j", 0, "N"):
        p.assign(f"C[i, j] += float32(A[i, k]) * float32({'B[j, k]' if along_k else 'B[k, j]'})")
    return p


def _conv() -> pt.Program:
    """A 3 x 3 convolution with zero padding over 2 images, 5 -> 37 channels: a whole-nest contraction with
    a guard (45 summed values), its weights packed once for both images."""
    p = pt.Program("amxconv", params=[])
    p.array("O", (2, 37, 9, 7), "float32")
    p.array("I", (2, 5, 9, 7), "bfloat16")
    p.array("W", (37, 5, 3, 3), "bfloat16")
    with (p.loop("n", 0, 2), p.loop("f", 0, 37), p.loop("c", 0, 5), p.loop("r", 0, 3), p.loop("s", 0, 3),
          p.loop("y", 0, 9), p.loop("x", 0, 7)):
        with p.when("y + r - 1 >= 0"), p.when("y + r - 1 < 9"), p.when("x + s - 1 >= 0"), p.when("x + s - 1 < 7"):
            p.assign("O[n, f, y, x] += float32(W[f, c, r, s]) * float32(I[n, c, y + r - 1, x + s - 1])")
    return p


def _error(x: torch.Tensor, exact: torch.Tensor) -> float:
    return ((x.double() - exact).abs().max() / exact.abs().max()).item()


Terms = Callable[[dict], Iterator[torch.Tensor]]
"""The products a contraction adds to its target, one tensor of the target's shape per value of the summed
iterators, in the loop's order."""


def _check_ir(prog: pt.Program, params: dict, options: dict, *, kernel: str, terms: Terms,
              torch_f32: Callable[[dict], torch.Tensor]) -> Any:
    """Compiles ``prog`` (packed with ``pt__ukernel_<kernel>``), runs it, and checks the rule against the
    float32 loop (its ``terms`` added in order: bfloat16 products are exact in float32) and ``torch_f32``
    (torch's float32 computation of the same values)."""
    g = torch.Generator().manual_seed(7)
    args: dict = dict(params)
    for a in to_program(prog).arrays:
        shape = tuple(e.value if hasattr(e, "value") else params[e.name] for e in a.shape)
        args[a.name] = torch.randn(shape, generator=g).to(getattr(torch, a.dtype))
    target = to_program(prog).arrays[0].name
    double = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    single = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    exact = double[target] + torch_f32(double)
    loop = single[target].clone()
    for term in terms(single):
        loop += term
    eager = single[target] + torch_f32(single)
    k = pt.compile(prog, "cpu", options=options)
    assert f"pt__ukernel_{kernel}add(" in k.source
    k(**args)
    bound = 2 * max(_error(loop, exact), _error(eager, exact))
    assert _error(args[target], exact) <= bound, (_error(args[target], exact), bound)
    return k


def _mm(a: dict) -> torch.Tensor:
    return a["A"] @ a["B"]


def _mm_terms(a: dict) -> Iterator[torch.Tensor]:
    return (a["A"][:, k, None] * a["B"][None, k, :] for k in range(a["K"]))


def _conv_f32(a: dict) -> torch.Tensor:
    return F.conv2d(a["I"], a["W"], padding=1)


def _conv_terms(a: dict) -> Iterator[torch.Tensor]:
    image = F.pad(a["I"], (1, 1, 1, 1))  # the guard's zeros: adding them changes no sum
    return (a["W"][None, :, c, r, s, None, None] * image[:, None, c, r:r + 9, s:s + 7]
            for c in range(5) for r in range(3) for s in range(3))


@needs_tiles
@pytest.mark.parametrize("sizes,threads", [((37, 45, 70), 1), ((37, 45, 70), 2), ((70, 100, 600), 2)])
def test_ir_product_on_tiles(sizes: tuple[int, int, int], threads: int) -> None:
    """Ragged in every dimension; then 3 x 4 register blocks, 3 blocks of KC (the last ragged), 2 threads."""
    m, n, k = sizes
    kern = _check_ir(_gemm(), dict(M=m, N=n, K=k), {"threads": threads}, kernel="bf16amx", terms=_mm_terms,
                     torch_f32=_mm)
    records = [r for r in kern.decision_records if r.kind == "contraction"]
    assert [r.data["instruction"] for r in records] == ["AMX TDPBF16PS"] and records[0].data["block"] == (32, 32)
    assert any("summing the stored values 32 at a time with AMX TDPBF16PS" in d for d in kern.decisions)


@needs_tiles
@pytest.mark.parametrize("threads", [1, 2])
def test_padded_batched_convolution_on_tiles(threads: int) -> None:
    _check_ir(_conv(), {}, {"threads": threads}, kernel="bf16amx", terms=_conv_terms, torch_f32=_conv_f32)


@needs_avx512
@pytest.mark.parametrize("cflags", ["-DPT_NO_TILE_PERMISSION -Wall -Wextra -Werror",
                                    "-mno-amx-tile -mno-amx-bf16 -Wall -Wextra -Werror",
                                    "-mno-amx-tile -mno-amx-bf16 -mno-avx512bf16", "-DPT_NO_PANELS"])
def test_without_the_tiles_the_same_panels_give_the_same_rule(tiles_chosen: None, cflags: str) -> None:
    """A process refused the tiles (the test hook), a compiler without AMX: ``vdpbf16ps`` on the tiles'
    panels; without AVX-512 BF16 either: plain C; without panels: the fallback loops."""
    _check_ir(_gemm(), dict(M=37, N=45, K=70), {"cflags": cflags}, kernel="bf16amx", terms=_mm_terms, torch_f32=_mm)
    if "PANELS" not in cflags:
        _check_ir(_conv(), {}, {"cflags": cflags, "threads": 2}, kernel="bf16amx", terms=_conv_terms,
                  torch_f32=_conv_f32)


@pytest.fixture
def tiles_chosen(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The code generator's choices for a machine with AMX, whatever this one has (its code runs
    without the tiles where the kernel cannot use them)."""
    monkeypatch.setattr(dot_module, "cpu_flags", lambda: cpu_flags() | {"amx_tile", "amx_bf16", "avx512_bf16"})
    monkeypatch.setattr(dot_module, "tiles_permitted", lambda: True)
    yield


def _choice(flags: set[str], permitted: bool, monkeypatch: pytest.MonkeyPatch) -> DotProduct | None:
    """The instruction :func:`dot_product` picks for a bfloat16 product on a machine with ``flags``."""
    monkeypatch.setattr(blocking_module, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(dot_module, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(dot_module, "tiles_permitted", lambda: permitted)
    vector_bytes.cache_clear()
    try:
        prog = to_program(_gemm())
        st = prog.statements[0]
        form = contraction_form(st)
        assert form is not None
        return dot_product(form.left, form.right, dtype=FLOAT32, op="+", typer=program_typer(prog), simd=True)
    finally:
        monkeypatch.undo()
        vector_bytes.cache_clear()


def test_the_choice_of_instruction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles where the machine has AMX and Linux permits them, ``vdpbf16ps`` with AVX-512 BF16 only, or
    where the tiles are refused (with a warning naming them), else no dot-product instruction."""
    avx512 = {"avx", "avx2", "avx512f", "avx512_bf16"}
    assert _choice(avx512 | {"amx_tile", "amx_bf16"}, True, monkeypatch) is BF16_TILES
    assert _choice(avx512, True, monkeypatch) is BF16_PAIRS
    assert _choice(avx512 | {"amx_tile"}, True, monkeypatch) is BF16_PAIRS  # int8 tiles only
    dot_module._refused.clear()
    with pytest.warns(UserWarning, match="AMX TDPBF16PS but Linux refused"):
        assert _choice(avx512 | {"amx_tile", "amx_bf16"}, False, monkeypatch) is BF16_PAIRS
    assert _choice({"avx", "avx2", "amx_tile", "amx_bf16"}, True, monkeypatch) is None  # 32-byte vectors


# -- through the PyTorch frontend ----------------------------------------------------------------------
def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w, b)


def _conv2d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.conv2d(x, w, padding=1)


TORCH_CASES: dict[str, tuple[Callable[..., torch.Tensor], Callable[[torch.Generator], tuple[torch.Tensor, ...]]]] = {
    "matmul": (lambda a, b: a @ b, lambda g: (torch.randn(37, 70, generator=g), torch.randn(70, 45, generator=g))),
    "matmul_blocks": (lambda a, b: a @ b,
                      lambda g: (torch.randn(70, 600, generator=g), torch.randn(600, 100, generator=g) / 8)),
    "linear": (_linear, lambda g: (torch.randn(37, 70, generator=g), torch.randn(45, 70, generator=g) / 8,
                                   torch.randn(45, generator=g))),
    "conv2d": (_conv2d, lambda g: (torch.randn(2, 5, 9, 7, generator=g), torch.randn(37, 5, 3, 3, generator=g))),
}


@needs_tiles
@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_torch_bfloat16_on_tiles_is_as_close_to_float32_as_eager(case: str) -> None:
    fn, make = TORCH_CASES[case]
    exact = make(torch.Generator().manual_seed(3))
    reference = fn(*exact).double()
    args = tuple(a.to(torch.bfloat16) for a in exact)
    eager_error = (fn(*args).double() - reference).abs().max().item()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph falling back to eager would warn
        report = pt.explain(fn, *args)
    assert report.result.dtype == torch.bfloat16 and report.fallback_ops == []
    assert any("pt__ukernel_bf16amxadd(" in k.source for k in report.kernels), [k.name for k in report.kernels]
    error = (report.result.double() - reference).abs().max().item()
    assert error <= 2 * eager_error + 1e-6, f"{case}: bfloat16 error {error:.3g}, eager's {eager_error:.3g}"


@needs_tiles
@pytest.mark.parametrize("sizes", [(37, 70, 200), (33, 64, 128)])
def test_weight_stored_along_the_sum_moves_to_the_tile_panels_in_squares(sizes: tuple[int, int, int]) -> None:
    """Its pairs of ``k`` move in 16 x 16 squares of 32-bit units (packed pair by pair, a bfloat16 linear
    layer 192 -> 768 on 197 rows took 0.451 ms a call, 0.274 ms in squares: one thread, docs/cpu.md);
    whole blocks and ragged ones."""
    m, n, kk = sizes
    k = _check_ir(_gemm(along_k=True), dict(M=m, N=n, K=kk), {"threads": 1}, kernel="bf16amx",
                  terms=lambda a: (a["A"][:, q, None] * a["B"][None, :, q] for q in range(a["K"])),
                  torch_f32=lambda a: a["A"] @ a["B"].T)
    [rec] = [d for d in k.decision_records if d.kind == "contraction"]
    assert rec.data["transpose_squares"] == 16, rec.text
