"""Recomputation of temporaries (polytri.fusion.inline_producers): exact where isl proves it, refused
with a reason everywhere else."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.fusion import inline_producers
from polytri.ir.builder import to_program
from polytri.suite import KERNELS, copy_args, make_args


def _blur() -> pt.Program:
    return KERNELS["blur"].build()


@pytest.mark.parametrize("target", [pytest.param("cpu", marks=pytest.mark.cc),
                                    pytest.param("nvgpu", marks=pytest.mark.interp)])
def test_blur_is_one_pass_with_the_horizontal_pass_recomputed(target: str) -> None:
    k = KERNELS["blur"]
    prog = _blur()
    kern = pt.compile(prog, target=target, options={"temporaries": ["tmp"]})
    assert [s.name for s in kern.program.statements] == ["S1"]
    assert any("recomputed in S1" in d for d in kern.decisions)
    if target == "nvgpu":
        assert len(kern.kernels) == 1 and "pt_tmp +" not in kern.source.split("def pt_host")[0]
    args = make_args(k, k.small, seed=0)
    want, got = copy_args(args), copy_args(args)
    pt.reference(prog, **want)
    kern(**got)
    np.testing.assert_array_equal(got["out"], want["out"])
    np.testing.assert_array_equal(got["tmp"], args["tmp"])  # never written


def _program(body: list[str], *, extra_write: bool = False) -> pt.Program:
    p = pt.Program("chain", params=["N"])
    p.array("x", ("N + 2",), "float64")
    p.array("t", ("N + 2",), "float64")
    p.array("y", ("N",), "float64")
    with p.loop("i", 0, "N"):
        for text in body:
            p.assign(text)
    if extra_write:
        with p.loop("i", 0, "N"):
            p.assign("x[i] = 0.0")
    return p


def _decisions(p: pt.Program, temps: list[str]) -> tuple[list[str], int]:
    prog = to_program(p)
    out, decisions = inline_producers(prog, temps)
    assert all(d.kind == ("keep" if len(out.statements) == len(prog.statements) else "recompute") for d in decisions)
    return [d.text for d in decisions], len(out.statements)


def test_refusals_name_their_reason() -> None:
    d, n = _decisions(_program(["t[i] = x[i] * 2", "t[i] = t[i] + 1", "y[i] = t[i]"]), ["t"])
    assert n == 3 and "t is written by 2 statements" in d[0]
    d, n = _decisions(_program(["t[i + 1] = x[i] * 2", "y[i] = t[i]"]), ["t"])
    assert n == 2 and "reads elements of t that S0 does not write" in d[0]
    d, n = _decisions(_program(["y[i] = t[i + 1]", "t[i + 1] = x[i] * 2"]), ["t"])
    assert n == 2 and "before S1 writes it" in d[0]
    d, n = _decisions(_program(["t[i] = x[i] * 2", "y[i] = t[i]"], extra_write=True), ["t"])
    assert n == 3 and "reads x, which the program writes" in d[0]
    d, n = _decisions(_program(["t[2 * i] = x[i]", "y[i] = t[2 * i]"]), ["t"])
    assert n == 2 and "not its iterators plus constants" in d[0]


def test_inlined_chain_equals_the_reference_on_the_other_arrays() -> None:
    p = _program(["t[i + 1] = x[i + 1] * x[i] + 1", "y[i] = t[i + 1] * 3"])
    prog, d = inline_producers(to_program(p), ["t"])
    assert len(prog.statements) == 1 and d[0].kind == "recompute" and d[0].data["readers"] == ("S1",)
    x = np.linspace(-1, 1, 9)
    t0, y0 = np.zeros(9), np.zeros(7)
    want = {"x": x.copy(), "t": t0.copy(), "y": y0.copy()}
    pt.reference(p, **want)
    got = {"x": x.copy(), "t": t0.copy(), "y": y0.copy()}
    pt.reference(prog, **got)
    np.testing.assert_array_equal(got["y"], want["y"])


def test_unread_temporary_producer_is_removed() -> None:
    d, n = _decisions(_program(["t[i] = x[i] * 2", "y[i] = x[i]"]), ["t"])
    assert n == 1 and "recomputed in no statement" in d[0]


def test_temporaries_option_names_arrays() -> None:
    with pytest.raises(pt.OptionError, match="'nope', not arrays of program 'blur'; its arrays: img, tmp, out"):
        pt.compile(_blur(), options={"temporaries": ["nope"]})


def _rows() -> pt.Program:
    """A softmax's exponentials: E reads the row maximum m, which the program writes before E."""
    p = pt.Program("rows", params=["N", "M"])
    for name, shape in (("x", ("N", "M")), ("m", ("N",)), ("e", ("N", "M")), ("s", ("N",)), ("y", ("N", "M"))):
        p.array(name, shape, "float64")
    with p.loop("i", 0, "N"):
        p.assign("m[i] = x[i, 0]")
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"):
        p.assign("m[i] = max(m[i], x[i, j])")
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"):
        p.assign("e[i, j] = exp(x[i, j] - m[i])")
    with p.loop("i", 0, "N"):
        p.assign("s[i] = 0.0")
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"):
        p.assign("s[i] += e[i, j]")
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"):
        p.assign("y[i, j] = e[i, j] / s[i]")
    return p


def test_settled_inputs_allow_a_producer_reading_a_finished_array() -> None:
    """With settled_inputs (the GPU targets), the exponentials of a finished row maximum are recomputed in
    the sum and the normalization; without it, or where the maximum changes after them, they are not."""
    prog = to_program(_rows())
    same, d = inline_producers(prog, ["e"])
    assert same is prog and d[0].kind == "keep" and "reads m, which the program writes" in d[0].text
    out, d = inline_producers(prog, ["e"], settled_inputs=True)
    assert len(out.statements) == 5 and d[0].data["readers"] == ("S4", "S5"), d
    args = {"x": np.random.default_rng(0).standard_normal((4, 6))}
    want = {**{k: np.zeros(s) for k, s in (("m", 4), ("e", (4, 6)), ("s", 4), ("y", (4, 6)))}, **args}
    got = {k: v.copy() for k, v in want.items()}
    pt.reference(prog, **want)
    pt.reference(out, **got)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-15)
    late = _rows()
    with late.loop("i", 0, "N"):
        late.assign("m[i] = 0.0")  # the maximum changes after the exponentials read it
    same, d = inline_producers(to_program(late), ["e"], settled_inputs=True)
    assert len(same.statements) == 7 and "reads m, which the program writes after or while it runs" in d[0].text, d


def test_a_cost_model_refuses_a_recomputation_per_broadcast_use() -> None:
    """y[i, j] reads t[i] at every j: recomputed there, t's producer would run once per column."""
    p = pt.Program("bcast", params=["N", "M"])
    for name, shape in (("x", ("N",)), ("t", ("N",)), ("y", ("N", "M"))):
        p.array(name, shape, "float64")
    with p.loop("i", 0, "N"):
        p.assign("t[i] = exp(x[i])")
    with p.loop("i", 0, "N"), p.loop("j", 0, "M"):
        p.assign("y[i, j] = t[i] * 2.0")
    prog = to_program(p)
    out, d = inline_producers(prog, ["t"], balance=8.0)
    assert out is prog and "reads each element of t at several of its instances" in d[0].text, d
    out, d = inline_producers(prog, ["t"])
    assert len(out.statements) == 1 and "recomputed in S1" in d[0].text  # without a cost model: no such limit


def test_a_recomputation_must_pay_for_the_traffic_it_saves() -> None:
    """Five reads of a producer of 4 operations add 16 per element: worth the 16 bytes of float64 traffic
    saved at 8 operations per byte, not at 0.5."""
    p = _program(["t[i + 1] = x[i] + x[i + 1] + x[i + 2] + x[i] * x[i + 1]",
                  "y[i] = t[i + 1] * t[i + 1] + t[i + 1] - t[i + 1] * t[i + 1]"])
    prog = to_program(p)
    out, d = inline_producers(prog, ["t"], balance=8.0)
    assert len(out.statements) == 1 and "16 more operation(s) per element against 16 bytes" in d[0].text, d
    out, d = inline_producers(prog, ["t"], balance=0.5)
    assert out is prog and "recomputing S0 does not pay: 16 more operation(s)" in d[0].text, d
