"""Loop counters divided by constants in subscripts become loops of their own (polytri.ir.split_divisions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polytri as pt
from polytri.ir.split_divisions import split_divisions
from polytri.ir.subscripts import divides
from polytri.ir.textform import parse_program

HEAD = "program t []\ncontext {  :  }\narray b [8, 128, 64] float32\narray a [256, 256] float32\n"
RELAYOUT = ("statement S0 (0, 0, 0) { S0[i0, i1] : 0 <= i0 <= 255 and 0 <= i1 <= 255 }\n"
            "  a[i0, i1] = b[4 * (i0 // 128) + i1 // 64, i0 % 128, i1 % 64]\n")


def _divides(prog: pt.Program, name: str) -> bool:
    st = prog.statement(name)
    return any(divides(e) for acc in (st.target, *st.reads) for e in acc.index)


def _run(prog: pt.Program, b: np.ndarray) -> np.ndarray:
    a = np.zeros((256, 256), np.float32)
    pt.compile(prog)(a=a, b=b)
    return a


def test_a_relayout_reads_its_source_with_affine_subscripts_and_moves_the_same_values() -> None:
    prog = parse_program(HEAD + RELAYOUT)
    split = split_divisions(prog)
    st = split.statement("S0")
    assert st.iterators == ("i0h", "i0l", "i1h", "i1l") and not _divides(split, "S0")
    assert str(st.target.index[0]) != str(prog.statement("S0").target.index[0])
    b = np.random.default_rng(0).random((8, 128, 64), dtype=np.float32)
    want = b.reshape(2, 4, 128, 64).transpose(0, 2, 1, 3).reshape(256, 256)
    np.testing.assert_array_equal(_run(split, b), want)
    np.testing.assert_array_equal(_run(prog, b), want)


LEFT_ALONE = {
    "it shares its loop": (
        "statement S0 (0, 0, 0) { S0[i0, i1] : 0 <= i0 <= 255 and 0 <= i1 <= 255 }\n"
        "  a[i0, i1] = b[4 * (i0 // 128) + i1 // 64, i0 % 128, i1 % 64]\n"
        "statement S1 (0, 0, 1) { S1[i0, i1] : 0 <= i0 <= 255 and 0 <= i1 <= 255 }\n"
        "  a[i0, i1] = a[i0, i1] + 1.0\n"),
    "an update (a product through a reshape: the micro-kernel's form)": (
        "statement S0 (0, 0, 0, 0) { S0[i0, i1, i2] : 0 <= i0 <= 255 and 0 <= i1 <= 63 and 0 <= i2 <= 255 }\n"
        "  a[i0, i2] = a[i0, i2] + b[i0 // 32, i0 % 32, i1] * a[i1, i2 // 2]\n"),
    "its innermost loop is not divided": (
        "statement S0 (0, 0, 0) { S0[i0, i1] : 0 <= i0 <= 255 and 0 <= i1 <= 63 }\n"
        "  a[i0, i1] = b[i0 // 32, i0 % 32, i1]\n"),
    "its counter is divided by two constants": (
        "statement S0 (0, 0) { S0[i0] : 0 <= i0 <= 255 }\n"
        "  a[i0 // 2, i0 % 4] = 1.0\n"),
}


@pytest.mark.parametrize("why", list(LEFT_ALONE))
def test_a_statement_is_left_alone_where(why: str) -> None:
    prog = parse_program(HEAD + LEFT_ALONE[why])
    assert split_divisions(prog) is prog


def test_a_ragged_extent_is_split_with_its_last_quotient_partial() -> None:
    ragged = ("statement S0 (0, 0, 0) { S0[i0, i1] : 0 <= i0 <= 255 and 0 <= i1 <= 9 }\n"
              "  a[i0, i1] = b[i1 // 4, i1 % 4, i0 % 64]\n")
    prog = parse_program(HEAD + ragged)
    split = split_divisions(prog)
    assert not _divides(split, "S0") and split.statement("S0").domain.count_val().to_python() == 10 * 256
    b = np.random.default_rng(1).random((8, 128, 64), dtype=np.float32)
    np.testing.assert_array_equal(_run(split, b), _run(prog, b))


def test_the_attention_output_relayout_through_torch_equals_eager() -> None:
    """(batch, heads, tokens, width) -> (batch, tokens, heads * width) in bfloat16, as a transformer's
    attention output is moved (here from a product, so that the relayout is a statement of its own): its
    loop over ``heads * width`` is split in the compiled kernel, and the values are eager's."""
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(2, 4, 16, 16, generator=gen).to(torch.bfloat16)
    v = torch.randn(2, 4, 16, 8, generator=gen).to(torch.bfloat16)

    def f(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return (p @ v).permute(0, 2, 1, 3).reshape(2, 16, 32) * 2
    report = pt.explain(f, p, v, compile_options={"cache": False})
    torch.testing.assert_close(report.result, f(p, v), rtol=0, atol=0)
    [kernel] = report.kernels
    # the relayout's counter i2 over heads * width became i2h (heads) and i2l (width)
    assert "t_bmm[4 * i0 + i2h, i1, i2l]" in kernel.source and "i2 % 8" not in kernel.source


def test_a_symbolic_extent_is_split_into_a_parametric_outer_loop() -> None:
    prog = parse_program("program t [N]\ncontext [N] -> {  : N >= 1 }\narray b [N, 64] float32\n"
                         "array a [64 * N] float32\n"
                         "statement S0 (0, 0) [N] -> { S0[i0] : 0 <= i0 < 64 * N }\n"
                         "  a[i0] = b[i0 // 64, i0 % 64] + 1.0\n")
    split = split_divisions(prog)
    assert not _divides(split, "S0") and split.statement("S0").iterators == ("i0h", "i0l")
    b = np.random.default_rng(2).random((3, 64), dtype=np.float32)
    got = np.zeros(192, np.float32)
    pt.compile(split)(a=got, b=b, N=3)
    np.testing.assert_array_equal(got, b.reshape(-1) + np.float32(1.0))
