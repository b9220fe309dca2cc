"""The default tiles where a loop's reuse exceeds the L2 cache at the sizes of the call
(:mod:`polytri.schedule.reuse`): both versions are compiled, the kernel picks one when it runs."""

from __future__ import annotations

import pytest

import polytri as pt
from polytri.ir.affine import evaluate
from polytri.ir.builder import to_program
from polytri.schedule import choose
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.loop_ast import If, build_loop_ast
from polytri.schedule.reuse import loop_reuse, reuse_exceeding
from polytri.schedule.schedule import original_schedule
from polytri.suite import KERNELS

pytestmark = pytest.mark.cc


def _auto(name: str):
    prog = to_program(KERNELS[name].build())
    return prog, choose.choose_schedule(prog, compute_dependences(prog), "auto", "smart", None, None,
                                        vector_loops=True)


def test_syrk_is_tiled_above_the_cache_only() -> None:
    prog, (sched, decisions, ast) = _auto("syrk")
    assert isinstance(ast, If) and sched.origin == "pluto" and sched.alternative is not None
    assert (sched.alternative.origin, sched.alternative.condition) == ("pluto+tiled", "size")
    assert sched.label == "pluto/pluto+tiled by size"
    assert any(d.kind == "tile" for d in sched.alternative.decisions)
    (why,) = [d for d in decisions if d.kind == "tile-by-size"]
    assert why.data["tiled"] == "pluto+tiled" and why.data["l2"] == choose.cache_sizes()[2]
    found = reuse_exceeding(prog, ast.orelse, choose.cache_sizes()[2])
    assert found is not None and found[0] == ast.cond   # the kernel's test is this machine's L2
    reuse = found[1]
    assert why.data["reuse"] == tuple(reuse)
    assert not _exceeds(reuse, {"M": 200, "N": 240}, 2 << 20)   # MEDIUM: A fits in a 2 MiB L2
    assert _exceeds(reuse, {"M": 1000, "N": 1200}, 2 << 20)     # LARGE: it does not


def _exceeds(reuse, env: dict[str, int], cache: int) -> bool:
    return any(evaluate(r.footprint, env) > cache for r in reuse)


@pytest.mark.parametrize("name", ["gesummv", "gemm"])
def test_row_sweeps_and_packed_contractions_are_not_versioned(name: str) -> None:
    # gesummv rereads x for every i, but one iteration of i sweeps two rows and x only: a row fits the
    # cache; gemm's micro-kernel packs its operands in panels of its own
    prog, (sched, _, ast) = _auto(name)
    assert not isinstance(ast, If) and sched.alternative is None
    if name == "gesummv":
        assert loop_reuse(prog, ast) == []


@pytest.mark.parametrize("name", ["syrk", "trmm", "covariance"])
def test_the_tiled_version_is_right(name: str, monkeypatch: pytest.MonkeyPatch, suite_kernel_agrees) -> None:
    # a 64-byte "cache" makes the tiled version run at test sizes
    monkeypatch.setattr(choose, "cache_sizes", lambda: {1: 64, 2: 64, 3: 64})
    kern = KERNELS[name]
    k = pt.compile(kern.build(), options={"threads": 2})
    alt = k.schedule_info.alternative
    assert alt is not None and (alt.origin, alt.condition) == ("pluto+tiled", "size"), k.schedule_info.label
    suite_kernel_agrees(k, name, {"T": 4, "N": 23, "M": 19})


@pytest.mark.parametrize("n,kept", [(32, False), (1024, True)])
def test_a_constant_footprint_that_fits_is_no_test(n: int, kept: bool) -> None:
    """A graph captured with static shapes: the footprint is a number, and one that fits the cache is not
    a version to compile (its test would be false at every call)."""
    p = pt.Program("sweeps", params=[])
    p.array("A", (n, n), "float32")
    p.array("B", (n, n), "float32")
    with p.loop("t", 0, 8), p.loop("i", 0, n), p.loop("j", 0, n):
        p.assign("B[i, j] = B[i, j] + A[i, j] * A[j, i]")
    prog = to_program(p)
    deps = compute_dependences(prog)
    ast = build_loop_ast(prog, original_schedule(prog, deps), deps)
    assert loop_reuse(prog, ast)   # t rereads A and B: 2 n^2 floats
    found = reuse_exceeding(prog, ast, 2 << 20)
    assert (found is not None) == kept


def test_each_schedule_of_a_versioned_kernel_is_a_function_of_its_own() -> None:
    """gcc optimizes each version as it would alone (floyd-warshall's untiled loops ran 1.2x slower
    inside the function that also held its tiled version); strict warnings hold."""
    k = pt.compile(KERNELS["syrk"].build(), options={"cflags": "-Wall -Wextra -Werror"})
    assert k.schedule_info.alternative is not None
    src = k.source
    main = src[src.rindex("\nvoid pt_syrk("):]
    assert "static void pt_syrk_v0(" in src and "static void pt_syrk_v1(" in src
    assert "pt_syrk_v0(" in main and "pt_syrk_v1(" in main and "for (" not in main
