"""Tests of the sizes of a call printed once where their function starts (polytri/cpu_codegen/hoist.py)."""

from __future__ import annotations

import re

import numpy as np

import polytri as pt
from polytri.cpu_codegen.hoist import Hoisted, reads_only
from polytri.suite.stencils import build_jacobi_1d


def test_a_test_is_hoisted_when_its_words_are_the_functions_own() -> None:
    fixed = frozenset({"N", "pt__threads", "pt__min_parallel_work"})
    assert reads_only("pt__threads > 1 && (double)(pt__max_int64_t(0, N - 2)) * 1e3 >= pt__min_parallel_work", fixed)
    assert not reads_only("pt__region_pays((double)(N), (double)(c0 + 1), pt__threads, 0.0)", fixed)
    assert not reads_only("M >= 2", fixed)
    h = Hoisted(1, fixed)
    assert h.test("N >= 2") == "pt__test0"
    assert h.test("c1 >= 2") == "c1 >= 2"
    assert h.test("N >= 2") == "pt__test0"   # the same test, one constant
    assert h.test("N >= 3") == "pt__test1"
    lines = ["{", "  body;", "}"]
    h.splice(lines)
    assert lines == ["{", "  const bool pt__test0 = N >= 2;", "  const bool pt__test1 = N >= 3;", "  body;", "}"]


def test_region_tests_leave_the_time_loop_unless_they_read_its_counter() -> None:
    """jacobi-1d's input order tests its two regions on the sizes alone: once, before the time loop; its
    time tiles' wavefront tests each wavefront's tile count, which reads the wavefront's counter."""
    k = pt.compile(build_jacobi_1d())
    tiled = k.source.split("static void pt_jacobi_1d_v0(")[1].split("\n}\n")[0]
    plain = k.source.split("static void pt_jacobi_1d_v1(")[1].split("\n}\n")[0]
    assert re.search(r"const bool pt__test0 = pt__threads > 1 && [^\n]*;\n(.*\n)*  for \(int64_t c1 ", plain)
    assert plain.count("if (pt__test0) {") == 2 and "pt__region_pays" not in plain.split("for (int64_t c1")[1]
    assert "const bool" not in tiled and re.search(r"for \(int64_t c0 [^\n]*\n\s*if \(pt__threads > 1 ", tiled)
    for threads in (1, 2):
        a, b = np.linspace(0.0, 1.0, 40), np.zeros(40)
        want_a, want_b = a.copy(), b.copy()
        pt.reference(build_jacobi_1d(), A=want_a, B=want_b, T=5, N=40)
        pt.compile(build_jacobi_1d(), options={"threads": threads, "min_parallel_work": 0})(A=a, B=b, T=5, N=40)
        np.testing.assert_allclose(a, want_a, rtol=1e-12)
        np.testing.assert_allclose(b, want_b, rtol=1e-12)


def test_a_streamed_stores_test_is_computed_once_in_the_region_too() -> None:
    """The blur's vertical pass streams its rows out where the image outgrows the last-level cache: the
    test reads the sizes only, so the function that runs the region's blocks computes it once too, and
    so is the test of its ring of rows (``cpu_codegen/row_ring.py``)."""
    from polytri.suite.stencils import build_blur
    src = pt.compile(build_blur()).source
    region = src.split("static void pt_blur_par0(")[1].split("\n}\n")[0]
    tests = [line for line in region.splitlines() if "pt__stream_pays(" in line]
    assert tests and all(re.match(r"  const bool pt__test\d+ = pt__stream_pays\(", line) for line in tests)
    assert re.search(r"\n *if \(pt__test\d+\) \{\n", region) and "if (pt__stream_pays(" not in region
