"""Kernels shared by segments of the same structure (polytri/frontend/torch_structure.py): the structural
form renames arrays by position, equal structures compile once, and a model whose blocks repeat runs its
blocks on shared kernels with the results of eager."""

from __future__ import annotations

import re

import pytest
import torch

import polytri as pt
from polytri.frontend.torch_structure import StructureCache, structure
from polytri.suite.models import ViT

pytestmark = pytest.mark.cc


def _block(name: str, arrays: tuple[str, str, str], n: int = 16) -> pt.Program:
    x, w, y = arrays
    p = pt.Program(name, params=[])
    p.array(x, (n, n))
    p.array(w, (n,))
    p.array(y, (n, n))
    with p.loop("i", 0, n), p.loop("j", 0, n):
        p.assign(f"{y}[i, j] = {x}[i, j] * {w}[j] + {x}[j, i]")
    return p


def test_equal_structures_have_one_form_and_keep_readable_names() -> None:
    a = structure(_block("fx1_k0", ("t_in_arg4_1", "t_in_arg5_1", "t_add_3")))
    b = structure(_block("fx9_k2", ("t_in_arg40_1", "t_in_arg41_1", "t_add_12")))
    assert str(a.program) == str(b.program)
    assert a.names == {"t_in_arg4_1": "a0_t_in_arg", "t_in_arg5_1": "a1_t_in_arg", "t_add_3": "a2_t_add"}
    assert a.renamed(("t_add_3", "other")) == ("a2_t_add", "other")
    # a report shows the segment's own names, inside generated identifiers too
    assert a.original_text("tl.store(pt_a2_t_add + 1); a2_t_add[i] = pt_loc_a0_t_in_arg[j] + a12_t_x") == \
        "tl.store(pt_t_add_3 + 1); t_add_3[i] = pt_loc_t_in_arg4_1[j] + a12_t_x"
    assert a.original_array("a1_t_in_arg") == "t_in_arg5_1"
    # a name that is a prefix of another is renamed as a whole identifier only
    c = structure(_block("fx1_k0", ("t_x_1", "t_x_10", "t_y_1")))
    assert "t_x" not in str(c.program).replace("a0_t_x", "").replace("a1_t_x", "")
    assert str(structure(_block("fx1_k0", ("t_a", "t_b", "t_c"), n=8)).program) != str(a.program)  # other sizes


def test_the_cache_compiles_each_structure_once() -> None:
    made: list[str] = []
    cache = StructureCache(lambda prog, target, opts: made.append(prog.name) or object())
    first = cache(structure(_block("k0", ("u1", "v1", "w1"))), "cpu", {"threads": 1})
    again = cache(structure(_block("k5", ("u7", "v7", "w7"))), "cpu", {"threads": 1})
    other = cache(structure(_block("k5", ("u7", "v7", "w7"))), "cpu", {"threads": 2})
    assert first is again and other is not first and len(made) == 2


def test_repeated_blocks_share_kernels_and_equal_eager() -> None:
    """A ViT-like model's four encoder blocks: fewer distinct kernels than kernels, same results."""
    torch.manual_seed(0)
    model, x = ViT(depth=4).eval(), torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        report = pt.explain(model, x)
        torch.testing.assert_close(report.result, model(x), rtol=1e-3, atol=1e-4)
    # the report names each kernel's arrays after its own segment; the compiled program is the shared one
    compiled = [re.search(r"program (\w+), target", k.source).group(1) for k in report.kernels]  # type: ignore[union-attr]
    assert len(set(compiled)) < len(compiled), compiled
    assert all("a0_" not in k.source for k in report.kernels)  # no structural names in the report
