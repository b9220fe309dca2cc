"""The online softmax (polytri/fusion/online_softmax.py): attention written as three passes over its rows
is rewritten into one pass over column blocks with rescaling; the rewrite is checked against the
reference interpreter, its refusals name their reason, and on nvgpu the result is one launch with both
products on tl.dot."""

from __future__ import annotations

import contextlib
import importlib
import re

import islpy as isl
import numpy as np
import pytest

import polytri as pt
from polytri.fusion.online_softmax import online_softmax
from polytri.ir.builder import to_program
from polytri.ir.verify import verify

TEMPS = ("S", "E", "P")
SHAPES = {"Q": ("N", "K"), "Kt": ("N", "K"), "V": ("N", "D"), "S": ("N", "N"), "M": ("N",), "E": ("N", "N"),
          "L": ("N",), "P": ("N", "N"), "O": ("N", "D")}


OUTPUT = ((("d",), "O[i, d] = 0.0"), (("d", "j"), "O[i, d] += P[i, j] * V[j, d]"))


def _attention(seed: str = "S[i, 0] * 0.5", extra_reader: bool = False, p: pt.Program | None = None,
               suffix: str = "", queries: str = "Q", output: tuple = OUTPUT, out_shape: tuple = ("N", "D")
               ) -> pt.Program:
    """softmax(Q Kt^T / 2) V, one statement per pass, as the torch frontend writes it (max first); with a
    ``suffix``, a chain of its own arrays added to ``p``; ``output``: the nests of O."""
    if p is None:
        p = pt.Program("attention", params=["N", "K", "D"])
        for name, shape in {**SHAPES, "O": out_shape}.items():
            p.array(name, shape)
    if suffix:
        for name in ("S", "M", "E", "L", "P", "O"):
            p.array(name + suffix, SHAPES[name])
    if extra_reader:
        p.array("X", ("N", "N"))
    nests = [(("j",), "S[i, j] = 0.0"), (("j", "k"), "S[i, j] += QUERIES[i, k] * Kt[j, k]"), ((), f"M[i] = {seed}"),
             (("j",), "M[i] = max(M[i], S[i, j] * 0.5)"), (("j",), "E[i, j] = exp(S[i, j] * 0.5 - M[i])"),
             ((), "L[i] = 0.0"), (("j",), "L[i] += E[i, j]"), (("j",), "P[i, j] = E[i, j] * (1.0 / L[i])"),
             *output]
    if extra_reader:
        nests.append((("j",), "X[i, j] = E[i, j]"))
    bounds = {"j": "N", "k": "K", "d": "D"}
    for loops, text in nests:
        for name in ("S", "M", "E", "L", "P", "O"):
            text = re.sub(rf"\b{name}\[", f"{name}{suffix}[", text)
        text = text.replace("QUERIES", queries)
        with contextlib.ExitStack() as stack:
            stack.enter_context(p.loop("i", 0, "N"))
            for it in loops:
                stack.enter_context(p.loop(it, 0, bounds[it]))
            p.assign(text)
    return p


def _args(n: int, k: int = 5, d: int = 3, extra: bool = False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(n)
    sizes = {"N": n, "K": k, "D": d}
    shapes = dict(SHAPES, **({"X": ("N", "N")} if extra else {}))
    return {name: rng.standard_normal([sizes[e] for e in shape]) for name, shape in shapes.items()}


@pytest.mark.parametrize("n", [1, 3, 4, 9])
def test_the_online_form_equals_the_three_passes(n: int) -> None:
    """Blocks of 4 columns: one block, exactly one, and a partial last block; M and L end as before."""
    prog = to_program(_attention())
    online, decisions = online_softmax(prog, TEMPS, block=4)
    assert online is not prog and decisions[-1].kind == "online-softmax", decisions
    verify(online)  # every access in bounds: the blocks fit the storage they reuse
    assert {st.target.array for st in online.statements} == {"S", "M", "E", "L", "P", "O"}
    want, got = _args(n), _args(n)
    pt.reference(prog, **want, K=5, D=3)
    pt.reference(online, **got, K=5, D=3)
    for name in ("O", "M", "L"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=name)


def test_each_chain_of_a_program_is_rewritten() -> None:
    """Two attentions in a row (the second's queries are the first's output): both chains are put in
    online form, and the program still equals the original."""
    prog = to_program(_attention(p=_attention(), suffix="2", queries="O"))  # K = D below
    online, decisions = online_softmax(prog, TEMPS + ("S2", "E2", "P2"), block=4)
    assert sum(d.kind == "online-softmax" for d in decisions) == 2, decisions
    extra = {name + "2": np.zeros((9, 9) if SHAPES[name] == ("N", "N") else (9,) if SHAPES[name] == ("N",)
                                  else (9, 3)) for name in ("S", "M", "E", "L", "P", "O")}
    want, got = {**_args(9, k=3), **extra}, {**_args(9, k=3), **extra}
    got = {k: v.copy() for k, v in got.items()}
    pt.reference(prog, **want, K=3, D=3)
    pt.reference(online, **got, K=3, D=3)
    np.testing.assert_allclose(got["O2"], want["O2"], rtol=1e-12, atol=1e-12)


def test_rescaling_statements_run_from_the_second_block() -> None:
    prog = to_program(_attention())
    online, _ = online_softmax(prog, TEMPS, block=4)
    text = {st.name: st.text() for st in online.statements}
    rescales = [name for name in text if name.endswith("_rescale")]
    assert len(rescales) == 2 and all("exp(M[i] - P[i, 0])" in text[name] for name in rescales), text
    for name in rescales:
        st = online.statement(name)
        later = isl.Set(f"[N, K, D] -> {{ {name}[{', '.join(st.iterators)}] : jb >= 1 }}")
        assert st.domain.is_subset(later) and not st.domain.is_empty()


@pytest.mark.parametrize("temps, why", [
    (("S", "E"), "P is not a temporary"),
    (("E", "P"), "S is not a temporary"),
])
def test_arrays_the_caller_keeps_are_not_rewritten(temps: tuple[str, ...], why: str) -> None:
    prog = to_program(_attention())
    online, decisions = online_softmax(prog, temps, block=4)
    assert online is prog
    assert any(why in d.text for d in decisions), decisions


def test_a_second_reader_of_the_exponentials_stops_the_rewrite() -> None:
    prog = to_program(_attention(extra_reader=True))
    online, decisions = online_softmax(prog, TEMPS, block=4)
    assert online is prog
    assert any("is not read by exactly one sum and one other statement" in d.text for d in decisions), decisions


def test_a_maximum_seeded_otherwise_is_not_rewritten() -> None:
    prog = to_program(_attention(seed="-1000.0"))
    online, decisions = online_softmax(prog, TEMPS, block=4)
    assert online is prog
    assert any("does not seed the maximum with the first column" in d.text for d in decisions), decisions


@pytest.mark.interp
def test_attention_is_one_launch_on_nvgpu_with_both_products_on_tl_dot() -> None:
    """Blocks of 16 columns (the tl.dot tile's side): 40 columns are three blocks, the last partial."""
    prog = _attention()
    kernel = pt.compile(prog, target="nvgpu", options={"temporaries": TEMPS, "dot_block": (16, 16, 16)})
    assert len(kernel.launches) == 1
    assert kernel.source.count("tl.dot(") == 2
    assert any("online softmax" in d and "blocks of 16 columns" in d for d in kernel.decisions), kernel.decisions
    args, want = _args(40, k=8, d=16), _args(40, k=8, d=16)
    pt.reference(prog, **want, K=8, D=16)
    kernel(**args, K=8, D=16)
    np.testing.assert_allclose(args["O"], want["O"], rtol=1e-5, atol=1e-6)


def test_the_cpu_target_keeps_the_three_passes() -> None:
    kernel = pt.compile(_attention(), target="cpu", options={"temporaries": TEMPS})
    assert not any("online softmax" in d for d in kernel.decisions)


@pytest.mark.parametrize("target, arch", [("nvgpu", "sm_90"), ("amdgpu", "gfx942")])
def test_the_online_kernel_compiles_ahead_of_time(target: str, arch: str) -> None:
    """The one launch of the online form compiles to machine code, not only in the interpreter."""
    kernel = pt.compile(_attention(), target=target, options={"temporaries": TEMPS})
    assert any("online softmax" in d for d in kernel.decisions)
    assert kernel.asm(arch).count("// kernel ") == len(kernel.launches) == 1


def test_an_internal_error_of_the_rewrite_leaves_the_program_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("polytri.fusion.online_softmax")  # the package exports the function

    def broken(*args: object) -> None:
        raise RuntimeError("boom")
    monkeypatch.setattr(module, "_rewrite", broken)
    with pytest.warns(UserWarning, match="internal error in the online softmax of attention"):
        kernel = pt.compile(_attention(), target="nvgpu", options={"temporaries": TEMPS})
    assert any(d.kind == "internal-error" and d.data["error"] == "RuntimeError" for d in kernel.decision_records)
    assert not any(st.name.endswith(("_seed", "_rescale", "_carry", "_scale")) for st in kernel.program.statements)


@pytest.mark.parametrize("option", [{"fuse": "none"}, {"schedule": "original"}])
def test_a_scheduling_option_keeps_the_program_s_own_loops(option: dict[str, str]) -> None:
    kernel = pt.compile(_attention(), target="nvgpu", options={"temporaries": TEMPS, **option})
    assert not any("online softmax" in d for d in kernel.decisions)


def test_an_output_indexed_by_the_softmax_columns_is_not_rewritten() -> None:
    """O[i, j] += P[i, j] * V[j, d] sums over d, not over the softmax's columns: no online form."""
    prog = to_program(_attention(output=((("j",), "O[i, j] = 0.0"), (("j", "d"), "O[i, j] += P[i, j] * V[j, d]")),
                                 out_shape=("N", "N")))
    online, decisions = online_softmax(prog, TEMPS, block=4)
    assert online is prog, decisions
    assert any("O is not indexed by the rows and its own columns" in d.text for d in decisions), decisions
