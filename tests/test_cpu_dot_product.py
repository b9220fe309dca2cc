"""Contractions of narrow stored values on the CPU's dot-product instructions
(polytri/cpu_codegen/dot_product.py): bfloat16 on AVX-512 BF16, 8-bit integers on AVX-512 VNNI.

The panels hold the stored bfloat16 values in pairs of ``k`` and the micro-kernel sums them with
``vdpbf16ps`` where the building machine has it.  On normal numbers its sums are the float32 loop's bit
for bit (exact products, ``k`` ascending within each pair), so the results must equal the reference's,
not be close to them: at sizes around every block edge (odd ``K`` included), through a transposed
operand, a convolution's padded and batched nest, on one and two threads, with the plain C version of
the kernel (a compiler without the instructions) and without panels (a machine with AMX tiles sums
bfloat16 on them: these tests take its flags away; tests/test_amx.py tests the tiles).  Machines without the
instructions run the float32 micro-kernel: the same equalities hold there.  Integer sums (int32 of uint8
and int8 factors, every pairing) are exact in any order: equal too, with values that make the products
large, through the plain version, and at odd sums."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracles import contraction_reference, integer_contraction, right_panel_packed_by_blocks

import polytri as pt
import polytri.cpu_codegen.dot_product as dot_module
from polytri.cpu_codegen.blocking import cpu_flags, vector_bytes
from polytri.cpu_codegen.contraction import blocking
from polytri.cpu_codegen.dot_product import integer_dot_for
from polytri.dtypes import FLOAT32, dtype
from polytri.ir.builder import to_program

pytestmark = pytest.mark.cc

HAS_BF16_DOT = "avx512_bf16" in cpu_flags() and vector_bytes() == 64
HAS_VNNI = "avx512_vnni" in cpu_flags() and vector_bytes() == 64


@pytest.fixture(autouse=True)
def without_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's flags without AMX: a machine with it sums bfloat16 on tiles, not bit for bit
    (tests/test_amx.py), and these tests keep checking ``vdpbf16ps`` there too."""
    flags = frozenset(f for f in cpu_flags() if not f.startswith("amx"))
    monkeypatch.setattr(dot_module, "cpu_flags", lambda: flags)


def _bf16(rng: np.random.Generator, shape: tuple[int, ...]) -> torch.Tensor:
    """Normal bfloat16 values, between about 1/8 and 8 in magnitude (no subnormal product or sum)."""
    x = rng.standard_normal(shape).astype(np.float32)
    return torch.from_numpy(x + np.where(x < 0, -0.125, 0.125).astype(np.float32)).to(torch.bfloat16)


def _gemm(transposed: bool = False) -> pt.Program:
    p = pt.Program("bfmm", params=["M", "N", "K"])
    p.array("C", ("M", "N"), "float32")
    p.array("A", ("M", "K"), "bfloat16")
    p.array("B", ("N", "K") if transposed else ("K", "N"), "bfloat16")
    b = "B[j, k]" if transposed else "B[k, j]"
    with p.loop("i", 0, "M"), p.loop("k", 0, "K"), p.loop("j", 0, "N"):
        p.assign(f"C[i, j] += float32(A[i, k]) * float32({b})")
    return p


def _conv() -> pt.Program:
    """A 3 x 3 convolution with zero padding over 2 images: a whole-nest contraction with a guard, its
    weights packed once for both images."""
    p = pt.Program("bfconv", params=[])
    p.array("O", (2, 5, 9, 7), "float32")
    p.array("I", (2, 3, 9, 7), "bfloat16")
    p.array("K", (5, 3, 3, 3), "bfloat16")
    with (p.loop("n", 0, 2), p.loop("f", 0, 5), p.loop("c", 0, 3), p.loop("r", 0, 3), p.loop("s", 0, 3),
          p.loop("y", 0, 9), p.loop("x", 0, 7)):
        with p.when("y + r - 1 >= 0"), p.when("y + r - 1 < 9"), p.when("x + s - 1 >= 0"), p.when("x + s - 1 < 7"):
            p.assign("O[n, f, y, x] += float32(K[f, c, r, s]) * float32(I[n, c, y + r - 1, x + s - 1])")
    return p


def _check(prog: pt.Program, params: dict, options: dict | None = None, *, dot: bool = HAS_BF16_DOT):
    rng = np.random.default_rng(3)
    args: dict = dict(params)
    for a in to_program(prog).arrays:
        shape = tuple(e.value if hasattr(e, "value") else params[e.name] for e in a.shape)
        args[a.name] = _bf16(rng, shape) if a.dtype == "bfloat16" else rng.standard_normal(shape).astype(a.dtype)
    want = {k: (v.clone() if isinstance(v, torch.Tensor) else v.copy() if isinstance(v, np.ndarray) else v)
            for k, v in args.items()}
    contraction_reference(prog, **want)
    k = pt.compile(prog, "cpu", options=options)
    assert "packed contraction" in k.source
    assert ("pt__ukernel_bf16x2add" in k.source) == dot, k.source
    assert any("vdpbf16ps" in d for d in k.decisions) == dot, k.decisions
    k(**args)
    target = to_program(prog).arrays[0].name
    np.testing.assert_array_equal(args[target], want[target])


def _edges() -> list[dict]:
    b = blocking(FLOAT32)
    return [dict(M=1, N=1, K=1), dict(M=b.mr - 1, N=b.nr + 1, K=3), dict(M=2 * b.mr + 1, N=b.nr - 1, K=b.kc + 1),
            dict(M=b.mr + 2, N=b.nc + b.nr + 3, K=2 * b.kc - 1)]


@pytest.mark.parametrize("case,threads", [(c, t) for c in range(3) for t in (1, 2)]
                         + [(3, 1), pytest.param(3, 2, marks=pytest.mark.slow)])
def test_bf16_gemm_equals_the_float32_reference_at_block_edges(case: int, threads: int) -> None:
    _check(_gemm(), _edges()[case], {"threads": threads})


@pytest.mark.skipif(not HAS_BF16_DOT, reason="no AVX-512 BF16 on this machine")
def test_the_right_panel_of_groups_is_written_in_order() -> None:
    """R stored along the columns (GPT-2's Conv1D weight): its pairs of k are packed a block of NR columns
    at a time, each block's groups in order, not k outermost (every group stored to every block)."""
    b = blocking(FLOAT32)
    k = pt.compile(_gemm(), "cpu")
    assert right_panel_packed_by_blocks(k.source, b.nr, "for (int64_t pt__kk = 0; pt__kk < pt__kcg; pt__kk += 2)")
    _check(_gemm(), dict(M=b.mr + 1, N=b.nc + b.nr + 1, K=b.kc + 3))


@pytest.mark.parametrize("sizes", [dict(M=7, N=67, K=5), dict(M=9, N=130, K=258)])
def test_operand_stored_along_the_sum(sizes: dict) -> None:
    _check(_gemm(transposed=True), sizes, {"threads": 2})


@pytest.mark.skipif(not HAS_BF16_DOT, reason="no AVX-512 BF16 on this machine")
def test_pairs_of_an_operand_stored_along_the_sum_move_in_squares() -> None:
    """``vdpbf16ps``'s panels hold each pair of k in descending order: a weight stored along k still moves
    in 16 x 16 squares of pairs, whose halves are then exchanged.  The sums are the float32 loop's, bit
    for bit (the test above, whose larger size has whole blocks)."""
    k = pt.compile(_gemm(transposed=True), "cpu")
    [rec] = [d for d in k.decision_records if d.kind == "contraction"]
    assert rec.data["instruction"] == "AVX-512 BF16 vdpbf16ps" and rec.data["transpose_squares"] == 16, rec.text
    assert "pt__transpose_pairs_swapped(" in k.source


def _gemm_left(left: str, a_shape: tuple[str, ...]) -> pt.Program:
    p = pt.Program("bfmm", params=["M", "N", "K", *(["W"] if "W" in a_shape else [])])
    p.array("C", ("M", "N"), "float32")
    p.array("A", a_shape, "bfloat16")
    p.array("B", ("K", "N"), "bfloat16")
    with p.loop("i", 0, "M"), p.loop("k", 0, "K"), p.loop("j", 0, "N"):
        p.assign(f"C[i, j] += float32({left}) * float32(B[k, j])")
    return p


@pytest.mark.skipif(not HAS_BF16_DOT, reason="no AVX-512 BF16 on this machine")
@pytest.mark.parametrize("left,a_shape,unit", [("A[i, k]", ("M", "K"), 4), ("A[k, i]", ("K", "M"), None),
                                               ("A[i, 2 * k + 1]", ("M", "W"), None),
                                               ("A[i // 4, i % 4, k]", ("M", 4, "K"), 4)])
def test_left_rows_stored_along_the_sum_are_packed_from_their_runs(left: str, a_shape: tuple[str, ...],
                                                                   unit: int | None) -> None:
    """Rows of ``L`` whose values of ``k`` are consecutive: a whole block of rows is packed a pair of k at
    a time, its halves exchanged (the decision names the 4-byte unit), also where the row is read through a
    view (``[i // 4, i % 4, k]``: the rows of a batch of sequences); stored across the rows or with
    every other value of ``k`` (rows of ``W = 2 K + 2`` values), element by element.  The sums are the float32 loop's bit for bit, with
    whole blocks of rows and pairs, a ragged block of rows, and an odd number of sums in a block."""
    prog = _gemm_left(left, a_shape)
    [rec] = [d for d in pt.compile(prog, "cpu").decision_records if d.kind == "contraction"]
    assert rec.data["left_unit"] == unit, rec.text
    for sizes in (dict(M=8, N=64, K=258), dict(M=9, N=70, K=255)):
        _check(prog, {**sizes, "W": 2 * sizes["K"] + 2} if "W" in a_shape else sizes)


@pytest.mark.parametrize("threads", [1, 2])
def test_padded_batched_convolution(threads: int) -> None:
    _check(_conv(), {}, {"threads": threads})


def test_plain_c_version_of_the_kernel() -> None:
    """A compiler that does not define ``__AVX512BF16__`` builds the kernel's plain version: same sums."""
    _check(_gemm(), dict(M=9, N=70, K=11), {"cflags": "-mno-avx512bf16"})
    _check(_conv(), {}, {"cflags": "-mno-avx512bf16"})


def test_fallback_without_panels_and_the_float_kernel_without_simd() -> None:
    _check(_gemm(), dict(M=9, N=70, K=11), {"cflags": "-DPT_NO_PANELS"})
    _check(_gemm(), dict(M=9, N=70, K=11), {"simd": False}, dot=False)


def test_strict_warnings() -> None:
    _check(_gemm(), dict(M=5, N=3, K=4), {"cflags": "-Wall -Wextra -Werror"})
    _check(_gemm(), dict(M=5, N=3, K=4), {"cflags": "-Wall -Wextra -Werror -mno-avx512bf16"})


def _int_gemm(left: str, right: str, transposed: bool = False) -> pt.Program:
    p = pt.Program("i8mm", params=["M", "N", "K"])
    p.array("C", ("M", "N"), "int32")
    p.array("A", ("M", "K"), left)
    p.array("B", ("N", "K") if transposed else ("K", "N"), right)
    b = "B[j, k]" if transposed else "B[k, j]"
    with p.loop("i", 0, "M"), p.loop("k", 0, "K"), p.loop("j", 0, "N"):
        p.assign(f"C[i, j] += int32(A[i, k]) * int32({b})")
    return p


def _int_check(prog: pt.Program, params: dict, options: dict | None = None, *, kernel: str) -> None:
    """The integer gemm equals the reference; packed with ``kernel`` on an AVX-512 VNNI machine, with
    AVX2's on an AVX2 one (:func:`machine_kernel`), else in loops."""
    rng = np.random.default_rng(5)
    args: dict = dict(params)
    for a in to_program(prog).arrays:
        shape = tuple(params[e.name] for e in a.shape)
        lo, hi = {"uint8": (0, 256), "int8": (-128, 128), "int32": (-1000, 1000)}[a.dtype]
        args[a.name] = rng.integers(lo, hi, shape).astype(a.dtype)
    if params["M"] * params["N"] * params["K"] <= 20000:
        want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        pt.reference(prog, **want)
        expected = want["C"]
    else:   # the block-edge sizes: minutes in the reference's interpreter
        b = args["B"].T if to_program(prog).array("B").shape[0].name == "N" else args["B"]
        expected = integer_contraction(args["C"], args["A"], b)
    k = pt.compile(prog, "cpu", options=options)
    types = [dtype(a.dtype) for a in to_program(prog).arrays[1:]]
    dot = integer_dot_for(types[0], types[1])  # this machine's: VNNI's, AVX2's, or none (loops)
    assert dot is None or dot.name == kernel or not HAS_VNNI
    assert ("packed contraction" in k.source) == (dot is not None)
    assert dot is None or f"pt__ukernel_{dot.name}add" in k.source
    k(**args)
    np.testing.assert_array_equal(args["C"], expected)


PAIRS = [("uint8", "int8", "u8s8x4"), ("int8", "uint8", "s8u8x4"), ("int8", "int8", "i16x2"),
         ("uint8", "uint8", "i16x2")]


# the largest case (3, past a block of every level) costs 25-45 s a pair on a 2-core machine: the default
# run keeps it for the first pair, `make fuzz` (marker slow) runs it for the others
_INT_CASES = [pytest.param(left, right, kernel, case, marks=[pytest.mark.slow] if case == 3 and k else [])
              for k, (left, right, kernel) in enumerate(PAIRS) for case in range(4)]


@pytest.mark.parametrize("left,right,kernel,case", _INT_CASES)
def test_8bit_integer_gemm_equals_the_reference(left: str, right: str, kernel: str, case: int) -> None:
    _int_check(_int_gemm(left, right), _edges()[case], {"threads": 1 + case % 2}, kernel=kernel)


@pytest.mark.parametrize("left,right,kernel", PAIRS[:3])
def test_8bit_integer_transposed_plain_and_strict(left: str, right: str, kernel: str) -> None:
    _int_check(_int_gemm(left, right, transposed=True), dict(M=9, N=130, K=259), {"threads": 2}, kernel=kernel)
    _int_check(_int_gemm(left, right), dict(M=9, N=70, K=11), {"cflags": "-mno-avx512vnni -Wall -Wextra -Werror"},
               kernel=kernel)
    _int_check(_int_gemm(left, right), dict(M=9, N=70, K=11), {"cflags": "-DPT_NO_PANELS"}, kernel=kernel)


@pytest.fixture
def avx2_only(monkeypatch: pytest.MonkeyPatch):
    """This machine's flags without AVX-512: the code generator's choices for an AVX2 machine (32-byte
    vectors), whose code this machine runs too."""
    import polytri.cpu_codegen.blocking as blocking_module
    flags = frozenset(f for f in cpu_flags() if not f.startswith("avx512"))
    if "avx2" not in flags:
        pytest.skip("needs AVX2")
    for module in (blocking_module, dot_module):
        monkeypatch.setattr(module, "cpu_flags", lambda: flags)
    vector_bytes.cache_clear()
    yield
    monkeypatch.undo()
    vector_bytes.cache_clear()


@pytest.mark.parametrize("left,right", [("uint8", "int8"), pytest.param("int8", "int8", marks=pytest.mark.slow),
                                        pytest.param("uint8", "uint8", marks=pytest.mark.slow)])
def test_avx2_machines_sum_8bit_integers_with_vpmaddwd(avx2_only: None, left: str, right: str) -> None:
    """On AVX2 every pairing is widened to int16 pairs and summed with ``vpmaddwd`` (6 x 16 blocks), also
    at the block edges, transposed, and in the plain version."""
    assert vector_bytes() == 32 and blocking(FLOAT32).mr == 6
    for case in range(4):
        _int_check(_int_gemm(left, right), _edges()[case], {"threads": 1 + case % 2}, kernel="i16x2avx2")
    _int_check(_int_gemm(left, right, transposed=True), dict(M=9, N=40, K=259), {}, kernel="i16x2avx2")
    _int_check(_int_gemm(left, right), dict(M=9, N=70, K=11), {"cflags": "-mno-avx2 -Wall -Wextra -Werror"},
               kernel="i16x2avx2")
