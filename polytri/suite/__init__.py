"""A suite of PolyBench-style kernels written with the builder API.

Each kernel is a function ``build_<name>() -> polytri.Program`` whose loop structure mirrors
PolyBench/C 4.2 (plus a separable 5-tap image blur).  :data:`KERNELS` registers them with a category,
small parameter values for tests, tiny ones for edge cases and an approximate flop count for benchmarks;
:func:`make_args` creates well-conditioned inputs usable by both ``pt.reference`` and compiled kernels::

    from polytri.suite import KERNELS, make_args
    k = KERNELS["gemm"]
    args = make_args(k, k.small)
    pt.compile(k.build())(**args)

Scalar temporaries of PolyBench (``w``, ``nrm``, ``temp2``...) live in arrays, since statements only
assign array elements; loops that PolyBench runs downwards are written with a reversed iterator
(``i = N - 1 - ii``).  Parameter names follow PolyBench, with ``T`` for ``TSTEPS``/``TMAX``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import polytri as pt

from ..ir.affine import evaluate
from ..ir.builder import to_program
from ..ir.expr import Var, walk
from ..ir.program import Program
from .datamining import (
    build_correlation,
    build_covariance,
)
from .linalg import (
    build_2mm,
    build_3mm,
    build_atax,
    build_bicg,
    build_cholesky,
    build_doitgen,
    build_durbin,
    build_gemm,
    build_gemver,
    build_gesummv,
    build_gramschmidt,
    build_lu,
    build_ludcmp,
    build_mvt,
    build_symm,
    build_syr2k,
    build_syrk,
    build_trisolv,
    build_trmm,
)
from .medley import build_deriche, build_floyd_warshall, build_nussinov
from .stencils import (
    build_adi,
    build_blur,
    build_fdtd_2d,
    build_heat_3d,
    build_jacobi_1d,
    build_jacobi_2d,
    build_seidel_2d,
)

#: The categories of the suite.
CATEGORIES = ("linear-algebra", "solver", "stencil", "datamining", "medley")


# ---------------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------------
Params = dict[str, int]


@dataclass(frozen=True)
class Kernel:
    """A kernel of the suite."""

    name: str
    """Registry key (PolyBench's name, with ``_`` for ``-``)."""
    build: Callable[[], pt.Program]
    """Builds a fresh program."""
    category: str
    """One of :data:`CATEGORIES`."""
    small: Params
    """Small, odd, unequal parameter values for tests (a few thousand instances at most)."""
    flops: Callable[[Params], float]
    """Approximate floating-point operation count for given parameter values (for benchmarks)."""
    tiny: Params = field(default_factory=dict)
    """Degenerate parameter values (sizes 1 or 2, one time step) that still satisfy the assumptions."""


def _k(name: str, build: Callable[[], pt.Program], category: str, small: Params, tiny: Params,
       flops: Callable[[Params], float]) -> Kernel:
    return Kernel(name, build, category, small, flops, tiny)


_LIST = [
    # linear algebra
    _k("gemm", build_gemm, "linear-algebra", dict(NI=13, NJ=11, NK=9), dict(NI=1, NJ=2, NK=1),
       lambda q: 2.0 * q["NI"] * q["NJ"] * q["NK"] + q["NI"] * q["NJ"]),
    _k("2mm", build_2mm, "linear-algebra", dict(NI=9, NJ=11, NK=7, NL=13), dict(NI=1, NJ=2, NK=1, NL=2),
       lambda q: 3.0 * q["NI"] * q["NJ"] * q["NK"] + q["NI"] * q["NL"] * (2.0 * q["NJ"] + 1)),
    _k("3mm", build_3mm, "linear-algebra", dict(NI=9, NJ=11, NK=7, NL=13, NM=5), dict(NI=2, NJ=1, NK=2, NL=1, NM=2),
       lambda q: 2.0 * (q["NI"] * q["NJ"] * q["NK"] + q["NJ"] * q["NL"] * q["NM"] + q["NI"] * q["NL"] * q["NJ"])),
    _k("atax", build_atax, "linear-algebra", dict(M=13, N=11), dict(M=1, N=2),
       lambda q: 4.0 * q["M"] * q["N"]),
    _k("bicg", build_bicg, "linear-algebra", dict(M=11, N=13), dict(M=2, N=1),
       lambda q: 4.0 * q["M"] * q["N"]),
    _k("mvt", build_mvt, "linear-algebra", dict(N=15), dict(N=1),
       lambda q: 4.0 * q["N"] ** 2),
    _k("gemver", build_gemver, "linear-algebra", dict(N=13), dict(N=1),
       lambda q: 10.0 * q["N"] ** 2 + q["N"]),
    _k("gesummv", build_gesummv, "linear-algebra", dict(N=13), dict(N=1),
       lambda q: 4.0 * q["N"] ** 2 + 3.0 * q["N"]),
    _k("syrk", build_syrk, "linear-algebra", dict(M=11, N=13), dict(M=1, N=2),
       lambda q: q["N"] * (q["N"] + 1) / 2 * (3.0 * q["M"] + 1)),
    _k("syr2k", build_syr2k, "linear-algebra", dict(M=11, N=13), dict(M=2, N=1),
       lambda q: q["N"] * (q["N"] + 1) / 2 * (6.0 * q["M"] + 1)),
    _k("trmm", build_trmm, "linear-algebra", dict(M=13, N=11), dict(M=2, N=1),
       lambda q: q["M"] * (q["M"] - 1) / 2 * 2.0 * q["N"] + q["M"] * q["N"]),
    _k("symm", build_symm, "linear-algebra", dict(M=13, N=11), dict(M=2, N=1),
       lambda q: q["M"] * (q["M"] - 1) / 2 * 5.0 * q["N"] + 6.0 * q["M"] * q["N"]),
    _k("doitgen", build_doitgen, "linear-algebra", dict(NR=5, NQ=7, NP=9), dict(NR=1, NQ=2, NP=1),
       lambda q: 2.0 * q["NR"] * q["NQ"] * q["NP"] ** 2),
    # solvers and factorizations
    _k("trisolv", build_trisolv, "solver", dict(N=15), dict(N=1),
       lambda q: q["N"] ** 2 + q["N"]),
    _k("lu", build_lu, "solver", dict(N=13), dict(N=2),
       lambda q: 2.0 * q["N"] ** 3 / 3),
    _k("ludcmp", build_ludcmp, "solver", dict(N=13), dict(N=1),
       lambda q: 2.0 * q["N"] ** 3 / 3 + 2.0 * q["N"] ** 2),
    _k("cholesky", build_cholesky, "solver", dict(N=13), dict(N=1),
       lambda q: q["N"] ** 3 / 3.0),
    _k("gramschmidt", build_gramschmidt, "solver", dict(M=13, N=11), dict(M=2, N=1),
       lambda q: 2.0 * q["M"] * q["N"] ** 2 + 3.0 * q["M"] * q["N"]),
    _k("durbin", build_durbin, "solver", dict(N=15), dict(N=1),
       lambda q: 2.0 * q["N"] ** 2),
    # stencils
    _k("jacobi_1d", build_jacobi_1d, "stencil", dict(T=5, N=31), dict(T=1, N=2),
       lambda q: 6.0 * q["T"] * max(q["N"] - 2, 0)),
    _k("jacobi_2d", build_jacobi_2d, "stencil", dict(T=3, N=13), dict(T=1, N=2),
       lambda q: 10.0 * q["T"] * max(q["N"] - 2, 0) ** 2),
    _k("seidel_2d", build_seidel_2d, "stencil", dict(T=3, N=13), dict(T=1, N=1),
       lambda q: 9.0 * q["T"] * max(q["N"] - 2, 0) ** 2),
    _k("heat_3d", build_heat_3d, "stencil", dict(T=3, N=9), dict(T=1, N=3),
       lambda q: 30.0 * q["T"] * max(q["N"] - 2, 0) ** 3),
    _k("fdtd_2d", build_fdtd_2d, "stencil", dict(T=3, NX=11, NY=13), dict(T=1, NX=1, NY=2),
       lambda q: q["T"] * (11.0 * q["NX"] * q["NY"])),
    _k("adi", build_adi, "stencil", dict(T=3, N=11), dict(T=1, N=2),
       lambda q: 30.0 * q["T"] * max(q["N"] - 2, 0) ** 2),
    _k("blur", build_blur, "stencil", dict(C=3, H=15, W=17), dict(C=1, H=5, W=4),
       lambda q: 9.0 * q["C"] * (q["H"] + max(q["H"] - 4, 0)) * max(q["W"] - 4, 0)),
    # data mining
    _k("covariance", build_covariance, "datamining", dict(M=11, N=13), dict(M=1, N=2),
       lambda q: q["M"] * (q["M"] + 1) / 2 * 2.0 * q["N"] + 2.0 * q["M"] * q["N"]),
    _k("correlation", build_correlation, "datamining", dict(M=11, N=13), dict(M=1, N=1),
       lambda q: q["M"] * (q["M"] - 1) / 2 * 2.0 * q["N"] + 7.0 * q["M"] * q["N"]),
    # medley
    _k("deriche", build_deriche, "medley", dict(W=13, H=11), dict(W=1, H=2),
       lambda q: 32.0 * q["W"] * q["H"]),
    _k("floyd_warshall", build_floyd_warshall, "medley", dict(N=13), dict(N=1),
       lambda q: 2.0 * q["N"] ** 3),
    _k("nussinov", build_nussinov, "medley", dict(N=13), dict(N=1),
       lambda q: q["N"] ** 3 / 3.0),
]

#: Every kernel of the suite, by name.
KERNELS: dict[str, Kernel] = {k.name: k for k in _LIST}


# ---------------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------------
_SCALARS = {"alpha": 1.5, "beta": 1.2, "eps": 0.1}


def _spd(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.uniform(-1.0, 1.0, (n, n))
    return m @ m.T + n * np.eye(n)


def _diag_dominant(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.uniform(-1.0, 1.0, (n, n))
    return a + (n + 1.0) * np.eye(n)


def copy_args(args: dict[str, Any]) -> dict[str, Any]:
    """Fresh copies of the arrays of ``args`` (other values shared): one run's inputs."""
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _random_args(prog: Program, params: Params, rng: np.random.Generator) -> dict[str, Any]:
    """Uniform random arrays in [-1, 1), the suite's scalar values, and the parameters that no array
    extent uses (so they cannot be inferred)."""
    args: dict[str, Any] = {}
    in_shapes: set[str] = set()
    for arr in prog.arrays:
        shape = tuple(evaluate(e, params) for e in arr.shape)
        for e in arr.shape:
            in_shapes |= {n.name for n in walk(e) if isinstance(n, Var)}
        args[arr.name] = rng.uniform(-1.0, 1.0, shape).astype(arr.dtype)
    for sc in prog.scalars:
        args[sc.name] = np.dtype(sc.dtype).type(_SCALARS[sc.name])
    for q in prog.params:
        if q not in in_shapes:
            args[q] = int(params[q])
    return args


def _cholesky_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    args["A"] = _spd(rng, params["N"])


def _lu_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    args["A"] = _diag_dominant(rng, params["N"])


def _trisolv_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    n = params["N"]
    args["L"] = rng.uniform(-1.0, 1.0, (n, n)) + (n + 1.0) * np.eye(n)


def _gramschmidt_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    m, n = params["M"], params["N"]
    a = rng.uniform(-1.0, 1.0, (m, n))
    a[: min(m, n), : min(m, n)] += 2.0 * np.eye(min(m, n))  # columns clearly independent
    args["A"] = a


def _correlation_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    if params["M"] > 1:
        args["data"][:, 1] = 0.25  # a constant column: exercises the stddev <= eps guard


def _durbin_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    n = params["N"]  # autocorrelations of a stable process: every |alpha| < 1
    args["r"] = 0.5 ** np.arange(1, n + 1) * rng.uniform(0.5, 1.0, n)


def _floyd_warshall_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    args["path"] = rng.uniform(0.0, 1.0, args["path"].shape)  # no negative cycle


def _nussinov_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    args["seq"] = rng.integers(0, 4, args["seq"].shape).astype(np.float64)  # the bases, 0 to 3
    args["table"] = np.zeros_like(args["table"])


def _blur_inputs(args: dict[str, Any], params: Params, rng: np.random.Generator) -> None:
    """An image in [0, 1) (blur's ``img``, deriche's ``imgIn``)."""
    name = "img" if "img" in args else "imgIn"
    args[name] = rng.uniform(0.0, 1.0, args[name].shape).astype(np.float32)


#: Kernels whose random inputs are replaced or adjusted (well-conditioned matrices, special cases).
_CONDITIONED_INPUTS: dict[str, Callable[[dict[str, Any], Params, np.random.Generator], None]] = {
    "cholesky": _cholesky_inputs, "lu": _lu_inputs, "ludcmp": _lu_inputs, "trisolv": _trisolv_inputs,
    "gramschmidt": _gramschmidt_inputs, "correlation": _correlation_inputs, "blur": _blur_inputs,
    "durbin": _durbin_inputs, "floyd_warshall": _floyd_warshall_inputs, "nussinov": _nussinov_inputs,
    "deriche": _blur_inputs,
}


def make_args(kernel: Kernel | str, params: Params, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments for ``pt.reference`` and compiled kernels: random inputs, scalars, and the
    parameters that cannot be inferred from array shapes (``T`` of most stencils)."""
    if isinstance(kernel, str):
        kernel = KERNELS[kernel]
    prog = to_program(kernel.build())
    missing = [q for q in prog.params if q not in params]
    if missing:
        raise ValueError(f"make_args({kernel.name}): missing parameter(s) {missing}")
    rng = np.random.default_rng(seed)
    args = _random_args(prog, params, rng)
    condition = _CONDITIONED_INPUTS.get(kernel.name)
    if condition is not None:
        condition(args, params, rng)
    return args
