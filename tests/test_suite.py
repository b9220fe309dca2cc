"""The PolyBench-style suite (polytri/suite.py): every kernel compiled for the CPU agrees with the reference."""

from __future__ import annotations

import functools

import islpy as isl
import numpy as np
import pytest

import polytri as pt
from polytri.cpu_codegen.kernel import CpuKernel
from polytri.suite import CATEGORIES, KERNELS, Kernel, copy_args, make_args

OPTIONS = [pytest.param({"threads": 1}, id="t1"), pytest.param({"threads": 2}, id="t2")]
MAX_INSTANCES = 20_000


@functools.cache
def _program(name: str) -> pt.Program:
    return KERNELS[name].build()


@functools.cache
def _compiled(name: str, threads: int) -> CpuKernel:
    """On several threads every parallel loop opens its region, however small the sizes (the work
    model would run the tests' small loops on one thread, the code path of ``threads=1``)."""
    opts = {"threads": threads, "min_parallel_work": 0} if threads > 1 else {"threads": threads}
    return pt.compile(_program(name), target="cpu", options=opts)


def _instances(k: Kernel, params: dict[str, int]) -> int:
    """Number of statement instances (what the pure-Python reference executes)."""
    sets: list[isl.Set] = []
    _program(k.name).domain.foreach_set(sets.append)
    total = 0
    for s in sets:
        for i in range(s.dim(isl.dim_type.param)):
            value = params[s.get_dim_name(isl.dim_type.param, i)]
            s = s.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(s.get_ctx(), value))
        total += s.count_val().to_python()
    return total


def _check(k: Kernel, params: dict[str, int], threads: int, seed: int = 0) -> dict:
    """Compare the compiled kernel with the reference on the same inputs; return the inputs."""
    args = make_args(k, params, seed=seed)
    want, got = copy_args(args), copy_args(args)
    pt.reference(_program(k.name), **want)
    _compiled(k.name, threads)(**got)
    arrays = [n for n, v in args.items() if isinstance(v, np.ndarray)]
    assert arrays
    for n in arrays:
        f32 = args[n].dtype == np.float32
        np.testing.assert_allclose(got[n], want[n], rtol=1e-4 if f32 else 1e-5, atol=1e-5 if f32 else 1e-9,
                                   err_msg=f"{k.name}: array {n!r} differs from the reference with {params}")
        assert np.all(np.isfinite(want[n])), f"{k.name}: the reference produced non-finite values in {n!r}"
    return args


@pytest.mark.cc
@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_matches_reference(name: str, options: dict) -> None:
    k = KERNELS[name]
    args = _check(k, k.small, options["threads"])
    got = copy_args(args)
    _compiled(name, options["threads"])(**got)
    assert any(not np.array_equal(got[n], v) for n, v in args.items() if isinstance(v, np.ndarray)), \
        f"{name}: the kernel changed nothing"


@pytest.mark.cc
@pytest.mark.parametrize("name", list(KERNELS))
def test_other_sizes_match_reference(name: str) -> None:
    """Other shapes and seed for the same build: nothing may depend on the particular small sizes."""
    k = KERNELS[name]
    params = {q: v + (1 if q == "T" else 2) for q, v in k.small.items()}
    assert _instances(k, params) < MAX_INSTANCES
    _check(k, params, threads=2, seed=7)


@pytest.mark.cc
@pytest.mark.parametrize("name", list(KERNELS))
def test_tiny_parameters_match_reference(name: str) -> None:
    """Sizes of 1 or 2 and a single time step: empty and one-trip loops, off-by-one bounds."""
    k = KERNELS[name]
    assert set(k.tiny) == set(k.small)
    assert min(k.tiny.values()) <= 2
    _check(k, k.tiny, threads=2, seed=1)


@pytest.mark.cc
@pytest.mark.parametrize("name", [n for n, k in KERNELS.items() if "T" in k.small])
def test_zero_time_steps_leave_arrays_unchanged(name: str) -> None:
    k = KERNELS[name]
    params = dict(k.small, T=0)  # fdtd_2d's fict then has extent 0
    args = make_args(k, params)
    got = copy_args(args)
    _compiled(name, 2)(**got)
    for n, v in args.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(got[n], v)


def test_suite_spans_the_categories() -> None:
    assert len(KERNELS) >= 18
    cats = {k.category for k in KERNELS.values()}
    assert cats == set(CATEGORIES)
    for c in CATEGORIES:
        assert sum(k.category == c for k in KERNELS.values()) >= 2, c
    for name in ("gemm", "2mm", "atax", "bicg", "mvt", "gesummv", "syrk", "syr2k", "trmm", "trisolv", "lu",
                 "cholesky", "jacobi_1d", "jacobi_2d", "seidel_2d", "heat_3d", "fdtd_2d", "covariance",
                 "correlation", "blur"):
        assert name in KERNELS, name


@pytest.mark.parametrize("name", list(KERNELS))
def test_registry_entries_are_consistent(name: str) -> None:
    k = KERNELS[name]
    p = k.build()
    assert isinstance(p, pt.Program)
    assert k.name == name and k.category in CATEGORIES
    assert set(k.small) == set(p.params), "small must give every parameter"
    # small sizes: odd, not all equal, cheap enough for the pure-Python reference
    sizes = [v for q, v in k.small.items() if q != "T"]
    assert any(v % 2 == 1 for v in sizes) and (len(set(sizes)) > 1 or len(sizes) == 1)
    if "T" in k.small:
        assert 3 <= k.small["T"] <= 5
    assert 0 < _instances(k, k.small) < MAX_INSTANCES
    assert k.flops(k.small) > 0
    assert k.flops({q: 2 * v for q, v in k.small.items()}) > k.flops(k.small)
    args = make_args(k, k.small)
    for a in p.build().arrays:
        assert args[a.name].dtype == np.dtype(a.dtype)
    for s in p.build().scalars:
        assert s.name in args
    again, other = make_args(k, k.small, seed=0), make_args(k, k.small, seed=1)
    for a in p.build().arrays:
        np.testing.assert_array_equal(again[a.name], args[a.name])  # deterministic for a seed
    assert any(not np.array_equal(other[a.name], args[a.name]) for a in p.build().arrays)


def test_dtypes_and_conditioning() -> None:
    assert KERNELS["gemm"].build().build().array("C").dtype == "float32"
    assert {a.dtype for a in KERNELS["blur"].build().build().arrays} == {"float32"}
    assert KERNELS["lu"].build().build().array("A").dtype == "float64"
    a = make_args("cholesky", KERNELS["cholesky"].small)["A"]
    np.testing.assert_allclose(a, a.T)
    assert np.linalg.eigvalsh(a).min() > 0
    a = make_args("lu", KERNELS["lu"].small)["A"]
    assert np.all(2 * np.abs(np.diag(a)) > np.abs(a).sum(axis=1))
    assert "T" in make_args("jacobi_2d", KERNELS["jacobi_2d"].small)
    assert "N" not in make_args("jacobi_2d", KERNELS["jacobi_2d"].small)


@pytest.mark.cc
def test_factorizations_are_correct() -> None:
    """The solvers compute what they claim, not only what the reference computes."""
    n = KERNELS["cholesky"].small["N"]
    args = make_args("cholesky", {"N": n})
    a0 = args["A"].copy()
    _compiled("cholesky", 1)(**args)
    low = np.tril(args["A"])
    np.testing.assert_allclose(low @ low.T, a0, rtol=1e-10, atol=1e-10)
    args = make_args("ludcmp", {"N": n})
    a0, b = args["A"].copy(), args["b"].copy()
    _compiled("ludcmp", 1)(**args)
    np.testing.assert_allclose(a0 @ args["x"], b, rtol=1e-9, atol=1e-9)
    args = make_args("trisolv", {"N": n})
    _compiled("trisolv", 1)(**args)
    np.testing.assert_allclose(np.tril(args["L"]) @ args["x"], args["b"], rtol=1e-9, atol=1e-9)
    q = KERNELS["correlation"].small
    args = make_args("correlation", q)
    data = args["data"].copy()
    _compiled("correlation", 2)(**args)
    with np.errstate(all="ignore"):  # the constant column has zero variance
        expect = np.corrcoef(data, rowvar=False)
    ok = np.std(data, axis=0) > 0.1
    np.testing.assert_allclose(args["corr"][np.ix_(ok, ok)], expect[np.ix_(ok, ok)], rtol=1e-9, atol=1e-12)
    assert not ok.all()  # the constant column went through the where() guard
    k = KERNELS["blur"]
    args = make_args(k, k.small)
    img = args["img"].astype(np.float64)
    _compiled("blur", 2)(**args)
    w = np.array([1, 4, 6, 4, 1]) / 16
    h = sum(w[t] * img[:, :, t:img.shape[2] - 4 + t] for t in range(5))
    v = sum(w[t] * h[:, t:h.shape[1] - 4 + t, :] for t in range(5))
    np.testing.assert_allclose(args["out"], v, rtol=1e-5, atol=1e-6)


@pytest.mark.cc
@pytest.mark.parametrize("name", list(KERNELS))
def test_pluto_schedule_matches_reference(name: str) -> None:
    """Every kernel through the scheduler (not the 'auto' choice): no fallback, proved legal, correct."""
    import warnings

    k = KERNELS[name]
    args = make_args(k, k.small)
    want, got = copy_args(args), copy_args(args)
    pt.reference(_program(name), **want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to the original order would warn
        kern = pt.compile(_program(name), options={"schedule": "pluto", "threads": 2})
    assert kern.schedule_info.origin == "pluto"
    kern(**got)
    for n, v in args.items():
        if isinstance(v, np.ndarray):
            f32 = v.dtype == np.float32
            np.testing.assert_allclose(got[n], want[n], rtol=1e-4 if f32 else 1e-5, atol=1e-5 if f32 else 1e-9)
