"""Subscripts with divisions that are affine on their domain, written without them (polytri.ir.subscripts)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import polytri as pt
from polytri.ir.expr import Access
from polytri.ir.printer import expr_to_str
from polytri.ir.subscripts import divides, simplify_subscripts
from polytri.ir.textform import parse_program

HEAD = "program t []\ncontext {  :  }\narray b [2, 128, 64] float32\narray a [256, 64] float32\n"


def _subscripts(prog: pt.Program, name: str) -> list[str]:
    st = prog.statement(name)
    return [", ".join(expr_to_str(e) for e in acc.index) for acc in (st.target, *st.reads)]


def _divides(prog: pt.Program, name: str) -> bool:
    st = prog.statement(name)
    return any(divides(e) for acc in (st.target, *st.reads) for e in acc.index)


def _same_elements(p: pt.Program, q: pt.Program) -> bool:
    """Whether every statement of ``p`` and ``q`` writes and reads the same elements at each instance."""
    for s, t in zip(p.statements, q.statements):
        for x, y in zip((s.target, *s.reads), (t.target, *t.reads)):
            if not s.access_map(x, p.params).is_equal(t.access_map(y, q.params)):
                return False
    return True


@pytest.mark.cc
def test_a_view_of_a_view_reads_its_source_at_the_counters() -> None:
    prog = parse_program(HEAD + "statement S0 (0, 0, 0) { S0[i0, i1] : 0 <= i0 <= 255 and 0 <= i1 <= 63 }\n"
                         "  a[128 * (i0 // 128) + i0 % 128, i1] = b[i0 // 128, i0 % 128, i1] * 2\n")
    out = simplify_subscripts(prog)
    assert _subscripts(out, "S0") == ["i0, i1", "i0 // 128, i0 % 128, i1"]  # the split of i0 stays: it divides
    assert _same_elements(prog, out)
    b = np.random.default_rng(0).random((2, 128, 64), dtype=np.float32)
    a = np.zeros((256, 64), np.float32)
    pt.compile(prog)(a=a, b=b)
    np.testing.assert_array_equal(a, 2 * b.reshape(256, 64))


def test_a_division_is_simplified_on_the_domain_only_where_it_is_affine_there() -> None:
    prog = parse_program(HEAD + "statement S0 (0, 0, 0) { S0[i0, i1] : 0 <= i0 <= 127 and 0 <= i1 <= 63 }\n"
                         "  a[i0, i1] = b[i0 // 128, (i0 + 128) % 128, i1] + b[(i0 + 1) // 2, 0, i1 // 64 + 1]\n")
    out = simplify_subscripts(prog)
    assert _subscripts(out, "S0") == ["i0, i1", "0, i0, i1", "(i0 + 1) // 2, 0, 1"]
    assert _same_elements(prog, out)


def test_a_program_without_divisions_or_with_an_indirect_subscript_is_kept() -> None:
    plain = parse_program(HEAD + "statement S0 (0, 0, 0) { S0[i0, i1] : 0 <= i0 <= 255 and 0 <= i1 <= 63 }\n"
                          "  a[i0, i1] = a[i0, i1] + 1\n")
    assert simplify_subscripts(plain) is plain
    p = pt.Program("gather", params=[])
    p.array("idx", (4,), "int64")
    p.array("src", (256, 8), "float32")
    p.array("dst", (4, 8), "float32")
    with p.loop("i", 0, 4), p.loop("j", 0, 8):
        p.assign("dst[i, j] = src[idx[i] + 128 * (j // 8), j % 8 + j]")
    prog = p.build()
    out = simplify_subscripts(prog)
    read = next(r for r in out.statement("S0").reads if r.array == "src")
    assert isinstance(read, Access) and expr_to_str(read.index[0]) == "idx[i] + 128 * (j // 8)"  # indirect: kept
    assert expr_to_str(read.index[1]) == "2 * j"


@pytest.mark.cc
def test_a_product_read_back_through_a_view_gets_its_elementwise_epilogue() -> None:
    """A GELU after a transformer's MLP product read the product's result at ``[128 * (i // 128) + i % 128, j]``:
    written as ``[i, j]``, it runs on each register block as the nest completes it (the product a
    temporary, zeroed by its own nest: summed in tiles)."""
    text = ("program mlp []\ncontext {  :  }\narray x [256, 32] float32\narray w [32, 64] float32\n"
            "array h [256, 64] float32\narray y [256, 64] float32\n"
            "statement S0 (0, 0, 0) { S0[i, j] : 0 <= i <= 255 and 0 <= j <= 63 }\n"
            "  h[i, j] = 0\n"
            "statement S1 (1, 0, 0, 0) { S1[i, j, k] : 0 <= i <= 255 and 0 <= j <= 63 and 0 <= k <= 31 }\n"
            "  h[i, j] = h[i, j] + x[i, k] * w[k, j]\n"
            "statement S2 (2, 0, 0) { S2[i, j] : 0 <= i <= 255 and 0 <= j <= 63 }\n"
            "  y[i, j] = h[128 * (i // 128) + i % 128, j] * 0.5 + 1\n")
    prog = parse_program(text)
    assert _divides(prog, "S2")
    k = pt.compile(prog, options={"temporaries": "h"})
    assert any("S2 run on each block as its sums complete" in d for d in k.decisions), k.decisions
    rng = np.random.default_rng(1)
    x, w = rng.random((256, 32), dtype=np.float32), rng.random((32, 64), dtype=np.float32)
    h, y = np.zeros((256, 64), np.float32), np.zeros((256, 64), np.float32)
    k(x=x, w=w, h=h, y=y)
    want = {"x": x, "w": w, "h": np.zeros((256, 64), np.float32), "y": np.zeros((256, 64), np.float32)}
    pt.reference(prog, **want)
    np.testing.assert_array_equal(y, want["y"])


@pytest.mark.cc
def test_a_transformer_mlp_runs_bias_and_gelu_on_each_block_of_both_products() -> None:
    """The first layer's result, seen as (batch, tokens, width) and back for the GELU, is read at
    ``[16 * (i // 16) + i % 16, j]``: written as ``[i, j]``, the bias and GELU run on each block of the first
    product.  The second product's bias writes (batch, tokens, width) from two counters, reading the
    product at ``[16 * b + t, j]``: it runs on each block too, its counters from the row (``b = i // 16``,
    ``t = i % 16``)."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)).eval()
    x = torch.randn(2, 16, 32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a graph in eager would warn
        report = pt.explain(mlp, x, compile_options={"target": "cpu"})
        torch.testing.assert_close(report.result, mlp(x), rtol=1e-4, atol=1e-5)
    (kernel,) = report.kernels
    assert kernel.source.count("its epilogue, from the tile") == 2, kernel.source
