"""The C/OpenMP backend: generated code, pragmas, cache, dumps, explain, zero-copy calls."""

from __future__ import annotations

import math
import os
import re

import islpy as isl
import numpy as np
import pytest

import polytri as pt
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.loop_ast import For, Run, build_loop_ast, walk
from polytri.schedule.schedule import original_schedule
from polytri.suite import build_jacobi_2d

pytestmark = pytest.mark.cc


def jacobi_2d() -> pt.Program:
    return build_jacobi_2d()


def seidel_1d() -> pt.Program:
    p = pt.Program("seidel_1d", params=["T", "N"])
    p.array("A", ("N",), "float64")
    with p.loop("t", 0, "T"):
        with p.loop("i", 1, "N - 1"):
            p.assign("A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3")
    return p


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path / "cache"))


def test_compiled_equals_reference_and_runs_in_place():
    p = jacobi_2d()
    k = pt.compile(p)
    rng = np.random.default_rng(1)
    a, b = rng.random((11, 11)), np.zeros((11, 11))
    a_ref, b_ref = a.copy(), b.copy()
    a_id = id(a)
    k(A=a, B=b, T=3)
    pt.reference(p, A=a_ref, B=b_ref, T=3)
    assert id(a) == a_id
    np.testing.assert_allclose(a, a_ref, rtol=1e-12)
    np.testing.assert_allclose(b, b_ref, rtol=1e-12)


def test_parallel_pragmas_follow_the_dependences():
    k = pt.compile(jacobi_2d(), options={"schedule": "original"})
    src = k.source
    outlined, main = src.split("void pt_jacobi_2d(")[0], src.split("void pt_jacobi_2d(")[1]
    loops = re.findall(r"(#pragma omp [a-z ]+[^\n]*\n\s*)?for \(int64_t (c\d+)", outlined)
    pragmas = {var: (pragma or "").strip() for pragma, var in loops}
    # the time loop carries dependences: it must not be parallel; the i loops are
    assert "c1" not in pragmas and re.search(r"\n  for \(int64_t c1 ", main)
    # the parallel loop lives in its own function (restrict parameters), with an orphaned omp for,
    # called inside the time loop from a parallel region when its work pays for one; otherwise the
    # same loop runs inline on the calling thread.  The test reads the sizes only: computed once, before
    # the time loop (polytri/cpu_codegen/hoist.py)
    assert pragmas["c3"].startswith("#pragma omp for")
    assert re.search(r"\n  const bool pt__test0 = pt__threads > 1 && [^\n]* >= pt__min_parallel_work && "
                     r"pt__region_pays\([^\n]*, pt__threads, pt__min_parallel_work\);\n(.*\n)*"
                     r"  for \(int64_t c1 [^\n]*\n\s*if \(pt__test0\) \{\n"
                     r"\s*#pragma omp parallel num_threads\(pt__threads\)\n\s*pt_jacobi_2d_par0\(pt_A, pt_B, T, N, c1\);\n"
                     r"\s*\} else \{\n\s*for \(int64_t c3 ", main)
    assert pragmas["c5"] == "#pragma omp simd"
    # a Gauss-Seidel sweep has no parallel loop at all
    src = pt.compile(seidel_1d(), options={"schedule": "original"}).source
    assert "#pragma omp" not in src.split("void pt_seidel_1d")[1]


def test_openmp_and_simd_can_be_switched_off():
    k = pt.compile(jacobi_2d(), options={"openmp": False, "simd": False})
    body = k.source.split("void pt_jacobi_2d")[1]
    assert "#pragma omp" not in body
    a, b = np.ones((6, 6)), np.zeros((6, 6))
    a_ref, b_ref = a.copy(), b.copy()
    k(A=a, B=b, T=1)
    pt.reference(jacobi_2d(), A=a_ref, B=b_ref, T=1)
    np.testing.assert_array_equal(b, b_ref)
    assert b[1:-1, 1:-1].min() == pytest.approx(1.0)


def test_schedule_is_the_original_order_as_a_union_map():
    p = jacobi_2d()
    k = pt.compile(p, options={"schedule": "original"})
    assert isinstance(k.schedule, isl.UnionMap)
    assert k.schedule.is_equal(p.schedule.intersect_domain(p.domain))


def test_loop_ast_scans_every_statement_once_per_iteration():
    prog = jacobi_2d().build()
    sched = original_schedule(prog, compute_dependences(prog))  # the input order, whatever compile picks
    ast = build_loop_ast(prog, sched)
    runs = [n for n in walk(ast) if isinstance(n, Run)]
    assert sorted(r.statement for r in runs) == ["S0", "S1"]
    fors = [n for n in walk(ast) if isinstance(n, For)]
    assert [f.dim for f in fors] == [1, 3, 5, 3, 5]
    assert [f.parallel for f in fors] == [False, True, True, True, True]


def test_cache_hit_and_cache_dir(tmp_path):
    p = jacobi_2d()
    k1 = pt.compile(p)
    assert str(k1.library).startswith(str(tmp_path / "cache"))
    mtime = os.path.getmtime(k1.library)
    k2 = pt.compile(p)
    assert k2.library == k1.library
    assert os.path.getmtime(k2.library) == mtime
    other = pt.compile(p, options={"cflags": ["-O2"]})
    assert other.library != k1.library


def test_threads_option_gives_same_result():
    p = jacobi_2d()
    rng = np.random.default_rng(2)
    a = rng.random((13, 13))
    results = []
    for threads in (1, 2):
        aa, bb = a.copy(), np.zeros_like(a)
        pt.compile(p, options={"threads": threads})(A=aa, B=bb, T=4)
        results.append(aa)
    np.testing.assert_array_equal(results[0], results[1])


def test_dump_writes_every_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYTRI_DUMP", str(tmp_path / "dump"))
    pt.compile(jacobi_2d())
    names = sorted(os.listdir(tmp_path / "dump"))
    assert names == sorted(f"jacobi_2d.{s}" for s in
                           ("ir.txt", "dependences.txt", "schedule.txt", "loop_ast.txt", "kernel.c"))
    text = (tmp_path / "dump" / "jacobi_2d.ir.txt").read_text()
    assert "statement S0" in text


def test_explain_reports_dependences_schedule_and_parallel_loops():
    report = pt.compile(jacobi_2d(), options={"schedule": "original"}).explain()
    for needle in ("S0: B[i, j] = 0.2 *", "flow", "anti", "output", "schedule (original)",
                   "loop c1 (time dimension 1) over S0, S1: carries a dependence",
                   "loop c3 (time dimension 3) over S0: parallel"):
        assert needle in report


def test_torch_tensors_zero_copy():
    torch = pytest.importorskip("torch")
    p = jacobi_2d()
    a = torch.rand(9, 9, dtype=torch.float64)
    b = torch.zeros(9, 9, dtype=torch.float64)
    a_np, b_np = a.numpy().copy(), b.numpy().copy()
    ptr = a.data_ptr()
    pt.compile(p)(A=a, B=b, T=2)
    pt.reference(p, A=a_np, B=b_np, T=2)
    assert a.data_ptr() == ptr
    np.testing.assert_allclose(a.numpy(), a_np, rtol=1e-12)


def test_broken_c_compiler_is_a_compilation_error(tmp_path):
    with pytest.raises(pt.CompilationError, match="cannot be run"):
        pt.compile(jacobi_2d(), options={"cc": str(tmp_path / "no-such-cc")})


def test_bad_flag_reports_compiler_output():
    with pytest.raises(pt.CompilationError, match="building generated C failed"):
        pt.compile(jacobi_2d(), options={"cflags": ["-fno-such-flag-polytri"]})


def test_background_build_is_waited_for_and_its_failure_raises_on_waiting(tmp_path, monkeypatch):
    """Under builds_in_background the kernel comes back before its library; the first call (or
    wait_built) waits for it; a failed build raises CompilationError there, and the disk cache keeps the
    kernel only once built."""
    from concurrent.futures import Future

    from polytri.cpu_codegen.build import builds_in_background
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path))
    with builds_in_background():
        k = pt.compile(jacobi_2d(), options={"cflags": ["-DPT_BACKGROUND_TEST"]})
        bad = pt.compile(jacobi_2d(), options={"cflags": ["-fno-such-flag-polytri"]})
    kept: list[bool] = []
    k.after_build(lambda: kept.append(True))
    assert isinstance(k._library, Future) and kept == []  # queued until the kernel waits for its library
    a, b = np.random.default_rng(0).random((2, 6, 6))
    ref_a, ref_b = a.copy(), b.copy()
    k(A=a, B=b, N=6, T=2)
    pt.reference(jacobi_2d(), A=ref_a, B=ref_b, N=6, T=2)
    np.testing.assert_allclose(a, ref_a, rtol=1e-12)
    assert kept == [True] and k.library.exists()
    with pytest.raises(pt.CompilationError, match="building generated C failed"):
        bad.wait_built()


def test_float_exp_is_within_one_ulp_everywhere_without_glibc_vector_expf():
    """float32 exp is the prelude's pt__expf: vectorized straight-line code (glibc's vector expf calls its
    scalar expf lane by lane for |x| > 87.3, the masked scores of a causal softmax), within 1 ulp of exp
    in float64 over [-110, 90], 0 far below, infinity above 88.73, NaN kept."""
    p = pt.Program("fexp", params=["N"])
    p.array("X", ("N",), "float32")
    p.array("Y", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("Y[i] = exp(X[i])")
    special = [np.nan, np.inf, -np.inf, -3.4e38, 3.4e38, 0.0, -0.0, 1e-45, 88.72, 88.73, -87.34, -103.97, -104.0]
    x = np.concatenate([np.linspace(-110, 90, 200_001), special]).astype(np.float32)
    k = pt.compile(p)
    y = np.zeros_like(x)
    k(X=x, Y=y, N=x.size)
    want = np.exp(x.astype(np.float64))
    finite = np.isfinite(want) & (want <= np.finfo(np.float32).max)
    ulp = np.spacing(want[finite].astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(y[finite] - want[finite]) <= ulp)
    assert np.all(np.isposinf(y[~finite & ~np.isnan(x)])) and np.isnan(y[np.isnan(x)]).all()
    lib = open(k.library, "rb").read()
    assert b"expf" not in lib  # neither glibc's vector nor its scalar expf is called


def test_float_erf_is_within_three_ulp_without_glibc_erff():
    """float32 erf is the prelude's pt__erff (vectorized straight-line code, faster than glibc's vector
    erff): within 3 ulp of erf in float64 (2.78 at most over every float, checked when it was fitted), odd,
    exactly 1 from 3.92 on, NaN kept; a coefficient of either branch changed in its fourth digit fails
    it."""
    p = pt.Program("ferf", params=["N"])
    p.array("X", ("N",), "float32")
    p.array("Y", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("Y[i] = erf(X[i])")
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 1e-38, 0.99999994, 1.0, 3.9199998, 3.92, 4.0, 1e30]
    x = np.concatenate([np.linspace(-6, 6, 400_001), special]).astype(np.float32)
    k = pt.compile(p)
    y = np.zeros_like(x)
    k(X=x, Y=y, N=x.size)
    want = np.vectorize(math.erf)(x.astype(np.float64))
    ok = ~np.isnan(x)
    ulp = np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(y[ok] - want[ok]) <= 3 * ulp)
    neg = np.zeros_like(x)
    k(X=-x, Y=neg, N=x.size)
    assert np.array_equal(y[ok], -neg[ok])
    assert np.all(y[np.abs(x) >= 3.92] == np.sign(x[np.abs(x) >= 3.92])) and np.isnan(y[~ok]).all()
    assert b"erff" not in open(k.library, "rb").read()  # neither glibc's vector nor its scalar erff


def test_vector_math_functions_in_vectorized_loops():
    """With glibc's libmvec, exp/tanh/erf in a vectorized loop call the SIMD versions (named _ZGV...),
    within a few ulp of the reference; option simd=False keeps the scalar functions."""
    from polytri.cpu_codegen.build import vector_math_flags
    p = pt.Program("vmath", params=["N"])
    p.array("X", ("N",), "float32")
    p.array("Y", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("Y[i] = exp(X[i]) * tanh(X[i]) + erf(X[i])")
    x = np.linspace(-4, 4, 1001).astype(np.float32)
    want = np.zeros_like(x)
    pt.reference(p, X=x, Y=want, N=x.size)
    for simd in (True, False):
        k = pt.compile(p, options={"simd": simd})
        got = np.zeros_like(x)
        k(X=x, Y=got, N=x.size)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
        vector = b"_ZGV" in open(k.library, "rb").read()
        assert vector == (simd and bool(vector_math_flags(k.options["cc"])))
