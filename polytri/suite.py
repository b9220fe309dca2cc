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

from .ir.affine import evaluate
from .ir.builder import to_program
from .ir.expr import Var, walk

#: The categories of the suite.
CATEGORIES = ("linear-algebra", "solver", "stencil", "datamining")


# ---------------------------------------------------------------------------------------------------
# linear algebra: BLAS-like kernels
# ---------------------------------------------------------------------------------------------------
def build_gemm() -> pt.Program:
    """C = alpha * A @ B + beta * C (float32)."""
    p = pt.Program("gemm", params=["NI", "NJ", "NK"])
    p.array("C", ("NI", "NJ"), "float32")
    p.array("A", ("NI", "NK"), "float32")
    p.array("B", ("NK", "NJ"), "float32")
    p.scalar("alpha", "float32")
    p.scalar("beta", "float32")
    with p.loop("i", 0, "NI"):
        with p.loop("j", 0, "NJ"):
            p.assign("C[i, j] *= beta")
        with p.loop("k", 0, "NK"):
            with p.loop("j", 0, "NJ"):
                p.assign("C[i, j] += alpha * A[i, k] * B[k, j]")
    return p


def build_2mm() -> pt.Program:
    """D = alpha * A @ B @ C + beta * D."""
    p = pt.Program("mm2", params=["NI", "NJ", "NK", "NL"])
    p.array("tmp", ("NI", "NJ"))
    p.array("A", ("NI", "NK"))
    p.array("B", ("NK", "NJ"))
    p.array("C", ("NJ", "NL"))
    p.array("D", ("NI", "NL"))
    p.scalar("alpha")
    p.scalar("beta")
    with p.loop("i", 0, "NI"):
        with p.loop("j", 0, "NJ"):
            p.assign("tmp[i, j] = 0.0")
            with p.loop("k", 0, "NK"):
                p.assign("tmp[i, j] += alpha * A[i, k] * B[k, j]")
    with p.loop("i", 0, "NI"):
        with p.loop("j", 0, "NL"):
            p.assign("D[i, j] *= beta")
            with p.loop("k", 0, "NJ"):
                p.assign("D[i, j] += tmp[i, k] * C[k, j]")
    return p


def build_3mm() -> pt.Program:
    """G = (A @ B) @ (C @ D)."""
    p = pt.Program("mm3", params=["NI", "NJ", "NK", "NL", "NM"])
    p.array("E", ("NI", "NJ"))
    p.array("A", ("NI", "NK"))
    p.array("B", ("NK", "NJ"))
    p.array("F", ("NJ", "NL"))
    p.array("C", ("NJ", "NM"))
    p.array("D", ("NM", "NL"))
    p.array("G", ("NI", "NL"))
    with p.loop("i", 0, "NI"):
        with p.loop("j", 0, "NJ"):
            p.assign("E[i, j] = 0.0")
            with p.loop("k", 0, "NK"):
                p.assign("E[i, j] += A[i, k] * B[k, j]")
    with p.loop("i", 0, "NJ"):
        with p.loop("j", 0, "NL"):
            p.assign("F[i, j] = 0.0")
            with p.loop("k", 0, "NM"):
                p.assign("F[i, j] += C[i, k] * D[k, j]")
    with p.loop("i", 0, "NI"):
        with p.loop("j", 0, "NL"):
            p.assign("G[i, j] = 0.0")
            with p.loop("k", 0, "NJ"):
                p.assign("G[i, j] += E[i, k] * F[k, j]")
    return p


def build_atax() -> pt.Program:
    """y = A^T (A x)."""
    p = pt.Program("atax", params=["M", "N"])
    p.array("A", ("M", "N"))
    p.array("x", ("N",))
    p.array("y", ("N",))
    p.array("tmp", ("M",))
    with p.loop("i", 0, "N"):
        p.assign("y[i] = 0.0")
    with p.loop("i", 0, "M"):
        p.assign("tmp[i] = 0.0")
        with p.loop("j", 0, "N"):
            p.assign("tmp[i] += A[i, j] * x[j]")
        with p.loop("j", 0, "N"):
            p.assign("y[j] += A[i, j] * tmp[i]")
    return p


def build_bicg() -> pt.Program:
    """s = A^T r and q = A p (BiCG sub-kernel)."""
    p = pt.Program("bicg", params=["M", "N"])
    p.array("A", ("N", "M"))
    p.array("s", ("M",))
    p.array("q", ("N",))
    p.array("pv", ("M",))
    p.array("r", ("N",))
    with p.loop("i", 0, "M"):
        p.assign("s[i] = 0.0")
    with p.loop("i", 0, "N"):
        p.assign("q[i] = 0.0")
        with p.loop("j", 0, "M"):
            p.assign("s[j] += r[i] * A[i, j]")
            p.assign("q[i] += A[i, j] * pv[j]")
    return p


def build_mvt() -> pt.Program:
    """x1 += A y_1 and x2 += A^T y_2."""
    p = pt.Program("mvt", params=["N"])
    p.array("x1", ("N",))
    p.array("x2", ("N",))
    p.array("y_1", ("N",))
    p.array("y_2", ("N",))
    p.array("A", ("N", "N"))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("x1[i] += A[i, j] * y_1[j]")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("x2[i] += A[j, i] * y_2[j]")
    return p


def build_gemver() -> pt.Program:
    """Rank-2 update then two matrix-vector products."""
    p = pt.Program("gemver", params=["N"])
    p.array("A", ("N", "N"))
    for v in ("u1", "v1", "u2", "v2", "w", "x", "y", "z"):
        p.array(v, ("N",))
    p.scalar("alpha")
    p.scalar("beta")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("x[i] = x[i] + beta * A[j, i] * y[j]")
    with p.loop("i", 0, "N"):
        p.assign("x[i] = x[i] + z[i]")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("w[i] = w[i] + alpha * A[i, j] * x[j]")
    return p


def build_gesummv() -> pt.Program:
    """y = alpha * A x + beta * B x."""
    p = pt.Program("gesummv", params=["N"])
    p.array("A", ("N", "N"))
    p.array("B", ("N", "N"))
    p.array("tmp", ("N",))
    p.array("x", ("N",))
    p.array("y", ("N",))
    p.scalar("alpha")
    p.scalar("beta")
    with p.loop("i", 0, "N"):
        p.assign("tmp[i] = 0.0")
        p.assign("y[i] = 0.0")
        with p.loop("j", 0, "N"):
            p.assign("tmp[i] = A[i, j] * x[j] + tmp[i]")
            p.assign("y[i] = B[i, j] * x[j] + y[i]")
        p.assign("y[i] = alpha * tmp[i] + beta * y[i]")
    return p


def build_syrk() -> pt.Program:
    """Lower triangle of C = alpha * A A^T + beta * C."""
    p = pt.Program("syrk", params=["M", "N"])
    p.array("C", ("N", "N"))
    p.array("A", ("N", "M"))
    p.scalar("alpha")
    p.scalar("beta")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "i + 1"):
            p.assign("C[i, j] *= beta")
        with p.loop("k", 0, "M"):
            with p.loop("j", 0, "i + 1"):
                p.assign("C[i, j] += alpha * A[i, k] * A[j, k]")
    return p


def build_syr2k() -> pt.Program:
    """Lower triangle of C = alpha * (A B^T + B A^T) + beta * C."""
    p = pt.Program("syr2k", params=["M", "N"])
    p.array("C", ("N", "N"))
    p.array("A", ("N", "M"))
    p.array("B", ("N", "M"))
    p.scalar("alpha")
    p.scalar("beta")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "i + 1"):
            p.assign("C[i, j] *= beta")
        with p.loop("k", 0, "M"):
            with p.loop("j", 0, "i + 1"):
                p.assign("C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]")
    return p


def build_trmm() -> pt.Program:
    """B = alpha * A^T B with A unit lower triangular."""
    p = pt.Program("trmm", params=["M", "N"])
    p.array("A", ("M", "M"))
    p.array("B", ("M", "N"))
    p.scalar("alpha")
    with p.loop("i", 0, "M"):
        with p.loop("j", 0, "N"):
            with p.loop("k", "i + 1", "M"):
                p.assign("B[i, j] += A[k, i] * B[k, j]")
            p.assign("B[i, j] = alpha * B[i, j]")
    return p


def build_symm() -> pt.Program:
    """C = alpha * A B + beta * C with A symmetric (lower triangle stored); temp2 kept per (i, j)."""
    p = pt.Program("symm", params=["M", "N"])
    p.array("C", ("M", "N"))
    p.array("A", ("M", "M"))
    p.array("B", ("M", "N"))
    p.array("temp2", ("M", "N"))
    p.scalar("alpha")
    p.scalar("beta")
    with p.loop("i", 0, "M"):
        with p.loop("j", 0, "N"):
            p.assign("temp2[i, j] = 0.0")
            with p.loop("k", 0, "i"):
                p.assign("C[k, j] += alpha * B[i, j] * A[i, k]")
                p.assign("temp2[i, j] += B[k, j] * A[i, k]")
            p.assign("C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2[i, j]")
    return p


def build_doitgen() -> pt.Program:
    """Multi-resolution analysis kernel: A[r, q, :] = A[r, q, :] @ C4."""
    p = pt.Program("doitgen", params=["NR", "NQ", "NP"])
    p.array("A", ("NR", "NQ", "NP"))
    p.array("C4", ("NP", "NP"))
    p.array("sum", ("NP",))
    with p.loop("r", 0, "NR"):
        with p.loop("q", 0, "NQ"):
            with p.loop("pp", 0, "NP"):
                p.assign("sum[pp] = 0.0")
                with p.loop("s", 0, "NP"):
                    p.assign("sum[pp] += A[r, q, s] * C4[s, pp]")
            with p.loop("pp", 0, "NP"):
                p.assign("A[r, q, pp] = sum[pp]")
    return p


# ---------------------------------------------------------------------------------------------------
# solvers and factorizations
# ---------------------------------------------------------------------------------------------------
def build_trisolv() -> pt.Program:
    """Forward substitution L x = b."""
    p = pt.Program("trisolv", params=["N"])
    p.array("L", ("N", "N"))
    p.array("x", ("N",))
    p.array("b", ("N",))
    with p.loop("i", 0, "N"):
        p.assign("x[i] = b[i]")
        with p.loop("j", 0, "i"):
            p.assign("x[i] -= L[i, j] * x[j]")
        p.assign("x[i] = x[i] / L[i, i]")
    return p


def build_lu() -> pt.Program:
    """In-place LU factorization without pivoting."""
    p = pt.Program("lu", params=["N"])
    p.array("A", ("N", "N"))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "i"):
            with p.loop("k", 0, "j"):
                p.assign("A[i, j] -= A[i, k] * A[k, j]")
            p.assign("A[i, j] /= A[j, j]")
        with p.loop("j", "i", "N"):
            with p.loop("k", 0, "i"):
                p.assign("A[i, j] -= A[i, k] * A[k, j]")
    return p


def build_ludcmp() -> pt.Program:
    """LU factorization, then forward (L y = b) and backward (U x = y) substitution."""
    p = pt.Program("ludcmp", params=["N"])
    p.array("A", ("N", "N"))
    p.array("b", ("N",))
    p.array("x", ("N",))
    p.array("y", ("N",))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "i"):
            with p.loop("k", 0, "j"):
                p.assign("A[i, j] -= A[i, k] * A[k, j]")
            p.assign("A[i, j] /= A[j, j]")
        with p.loop("j", "i", "N"):
            with p.loop("k", 0, "i"):
                p.assign("A[i, j] -= A[i, k] * A[k, j]")
    with p.loop("i", 0, "N"):
        p.assign("y[i] = b[i]")
        with p.loop("j", 0, "i"):
            p.assign("y[i] -= A[i, j] * y[j]")
    with p.loop("ii", 0, "N"):          # i = N - 1 - ii runs downwards
        p.assign("x[N - 1 - ii] = y[N - 1 - ii]")
        with p.loop("j", "N - ii", "N"):
            p.assign("x[N - 1 - ii] -= A[N - 1 - ii, j] * x[j]")
        p.assign("x[N - 1 - ii] = x[N - 1 - ii] / A[N - 1 - ii, N - 1 - ii]")
    return p


def build_cholesky() -> pt.Program:
    """In-place Cholesky factorization (lower triangle) of a symmetric positive definite matrix."""
    p = pt.Program("cholesky", params=["N"])
    p.array("A", ("N", "N"))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "i"):
            with p.loop("k", 0, "j"):
                p.assign("A[i, j] -= A[i, k] * A[j, k]")
            p.assign("A[i, j] /= A[j, j]")
        with p.loop("k", 0, "i"):
            p.assign("A[i, i] -= A[i, k] * A[i, k]")
        p.assign("A[i, i] = sqrt(A[i, i])")
    return p


def build_gramschmidt() -> pt.Program:
    """QR decomposition by modified Gram-Schmidt (the norm accumulates in R[k, k])."""
    p = pt.Program("gramschmidt", params=["M", "N"])
    p.assume("N <= M")  # at most M independent columns: beyond, the norms vanish
    p.array("A", ("M", "N"))
    p.array("R", ("N", "N"))
    p.array("Q", ("M", "N"))
    with p.loop("k", 0, "N"):
        p.assign("R[k, k] = 0.0")
        with p.loop("i", 0, "M"):
            p.assign("R[k, k] += A[i, k] * A[i, k]")
        p.assign("R[k, k] = sqrt(R[k, k])")
        with p.loop("i", 0, "M"):
            p.assign("Q[i, k] = A[i, k] / R[k, k]")
        with p.loop("j", "k + 1", "N"):
            p.assign("R[k, j] = 0.0")
            with p.loop("i", 0, "M"):
                p.assign("R[k, j] += Q[i, k] * A[i, j]")
            with p.loop("i", 0, "M"):
                p.assign("A[i, j] = A[i, j] - Q[i, k] * R[k, j]")
    return p


# ---------------------------------------------------------------------------------------------------
# stencils with time loops
# ---------------------------------------------------------------------------------------------------
def build_jacobi_1d() -> pt.Program:
    p = pt.Program("jacobi_1d", params=["T", "N"])
    p.array("A", ("N",))
    p.array("B", ("N",))
    with p.loop("t", 0, "T"):
        with p.loop("i", 1, "N - 1"):
            p.assign("B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])")
        with p.loop("i", 1, "N - 1"):
            p.assign("A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])")
    return p


def build_jacobi_2d() -> pt.Program:
    p = pt.Program("jacobi_2d", params=["T", "N"])
    p.array("A", ("N", "N"))
    p.array("B", ("N", "N"))
    with p.loop("t", 0, "T"):
        with p.loop("i", 1, "N - 1"):
            with p.loop("j", 1, "N - 1"):
                p.assign("B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])")
        with p.loop("i", 1, "N - 1"):
            with p.loop("j", 1, "N - 1"):
                p.assign("A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])")
    return p


def build_seidel_2d() -> pt.Program:
    p = pt.Program("seidel_2d", params=["T", "N"])
    p.array("A", ("N", "N"))
    with p.loop("t", 0, "T"):
        with p.loop("i", 1, "N - 1"):
            with p.loop("j", 1, "N - 1"):
                p.assign("A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]"
                         " + A[i, j - 1] + A[i, j] + A[i, j + 1]"
                         " + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0")
    return p


def build_heat_3d() -> pt.Program:
    p = pt.Program("heat_3d", params=["T", "N"])
    p.array("A", ("N", "N", "N"))
    p.array("B", ("N", "N", "N"))
    body = ("{o}[i, j, k] = 0.125 * ({s}[i + 1, j, k] - 2.0 * {s}[i, j, k] + {s}[i - 1, j, k])"
            " + 0.125 * ({s}[i, j + 1, k] - 2.0 * {s}[i, j, k] + {s}[i, j - 1, k])"
            " + 0.125 * ({s}[i, j, k + 1] - 2.0 * {s}[i, j, k] + {s}[i, j, k - 1])"
            " + {s}[i, j, k]")
    with p.loop("t", 0, "T"):
        for out, src in (("B", "A"), ("A", "B")):
            with p.loop("i", 1, "N - 1"):
                with p.loop("j", 1, "N - 1"):
                    with p.loop("k", 1, "N - 1"):
                        p.assign(body.format(o=out, s=src))
    return p


def build_fdtd_2d() -> pt.Program:
    """2-D finite-difference time domain; ``fict[t]`` is the source term (``_fict_`` in PolyBench)."""
    p = pt.Program("fdtd_2d", params=["T", "NX", "NY"])
    p.assume("NX >= 1")
    p.array("ex", ("NX", "NY"))
    p.array("ey", ("NX", "NY"))
    p.array("hz", ("NX", "NY"))
    p.array("fict", ("T",))
    with p.loop("t", 0, "T"):
        with p.loop("j", 0, "NY"):
            p.assign("ey[0, j] = fict[t]")
        with p.loop("i", 1, "NX"):
            with p.loop("j", 0, "NY"):
                p.assign("ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])")
        with p.loop("i", 0, "NX"):
            with p.loop("j", 1, "NY"):
                p.assign("ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])")
        with p.loop("i", 0, "NX - 1"):
            with p.loop("j", 0, "NY - 1"):
                p.assign("hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])")
    return p


def build_blur() -> pt.Program:
    """Separable binomial 5-tap blur of a (C, H, W) float32 image, 'valid' borders.

    The horizontal pass writes ``tmp`` (C, H, W - 4); the vertical pass writes ``out`` (C, H - 4, W - 4).
    """
    p = pt.Program("blur", params=["C", "H", "W"])
    p.assume("H >= 4")
    p.assume("W >= 4")
    p.array("img", ("C", "H", "W"), "float32")
    p.array("tmp", ("C", "H", "W - 4"), "float32")
    p.array("out", ("C", "H - 4", "W - 4"), "float32")
    with p.loop("c", 0, "C"):
        with p.loop("y", 0, "H"):
            with p.loop("x", 0, "W - 4"):
                p.assign("tmp[c, y, x] = 0.0625 * img[c, y, x] + 0.25 * img[c, y, x + 1] + 0.375 * img[c, y, x + 2]"
                         " + 0.25 * img[c, y, x + 3] + 0.0625 * img[c, y, x + 4]")
    with p.loop("c", 0, "C"):
        with p.loop("y", 0, "H - 4"):
            with p.loop("x", 0, "W - 4"):
                p.assign("out[c, y, x] = 0.0625 * tmp[c, y, x] + 0.25 * tmp[c, y + 1, x] + 0.375 * tmp[c, y + 2, x]"
                         " + 0.25 * tmp[c, y + 3, x] + 0.0625 * tmp[c, y + 4, x]")
    return p


# ---------------------------------------------------------------------------------------------------
# data mining
# ---------------------------------------------------------------------------------------------------
def build_covariance() -> pt.Program:
    """Covariance of the M columns of data (N samples); data is centred in place."""
    p = pt.Program("covariance", params=["M", "N"])
    p.array("data", ("N", "M"))
    p.array("cov", ("M", "M"))
    p.array("mean", ("M",))
    with p.loop("j", 0, "M"):
        p.assign("mean[j] = 0.0")
        with p.loop("i", 0, "N"):
            p.assign("mean[j] += data[i, j]")
        p.assign("mean[j] /= N")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "M"):
            p.assign("data[i, j] -= mean[j]")
    with p.loop("i", 0, "M"):
        with p.loop("j", "i", "M"):
            p.assign("cov[i, j] = 0.0")
            with p.loop("k", 0, "N"):
                p.assign("cov[i, j] += data[k, i] * data[k, j]")
            p.assign("cov[i, j] /= N - 1.0")
            p.assign("cov[j, i] = cov[i, j]")
    return p


def build_correlation() -> pt.Program:
    """Pearson correlation of the M columns of data; columns with stddev <= eps are left unscaled."""
    p = pt.Program("correlation", params=["M", "N"])
    p.assume("M >= 1")
    p.array("data", ("N", "M"))
    p.array("corr", ("M", "M"))
    p.array("mean", ("M",))
    p.array("stddev", ("M",))
    p.scalar("eps")
    with p.loop("j", 0, "M"):
        p.assign("mean[j] = 0.0")
        with p.loop("i", 0, "N"):
            p.assign("mean[j] += data[i, j]")
        p.assign("mean[j] /= N")
    with p.loop("j", 0, "M"):
        p.assign("stddev[j] = 0.0")
        with p.loop("i", 0, "N"):
            p.assign("stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])")
        p.assign("stddev[j] /= N")
        p.assign("stddev[j] = sqrt(stddev[j])")
        p.assign("stddev[j] = where(stddev[j] <= eps, 1.0, stddev[j])")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "M"):
            p.assign("data[i, j] -= mean[j]")
            p.assign("data[i, j] /= sqrt(N) * stddev[j]")
    with p.loop("i", 0, "M - 1"):
        p.assign("corr[i, i] = 1.0")
        with p.loop("j", "i + 1", "M"):
            p.assign("corr[i, j] = 0.0")
            with p.loop("k", 0, "N"):
                p.assign("corr[i, j] += data[k, i] * data[k, j]")
            p.assign("corr[j, i] = corr[i, j]")
    p.assign("corr[M - 1, M - 1] = 1.0")
    return p


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
    _k("blur", build_blur, "stencil", dict(C=3, H=15, W=17), dict(C=1, H=5, W=4),
       lambda q: 9.0 * q["C"] * (q["H"] + max(q["H"] - 4, 0)) * max(q["W"] - 4, 0)),
    # data mining
    _k("covariance", build_covariance, "datamining", dict(M=11, N=13), dict(M=1, N=2),
       lambda q: q["M"] * (q["M"] + 1) / 2 * 2.0 * q["N"] + 2.0 * q["M"] * q["N"]),
    _k("correlation", build_correlation, "datamining", dict(M=11, N=13), dict(M=1, N=1),
       lambda q: q["M"] * (q["M"] - 1) / 2 * 2.0 * q["N"] + 7.0 * q["M"] * q["N"]),
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
    name = kernel.name
    if name == "cholesky":
        args["A"] = _spd(rng, params["N"])
    elif name in ("lu", "ludcmp"):
        args["A"] = _diag_dominant(rng, params["N"])
    elif name == "trisolv":
        n = params["N"]
        args["L"] = rng.uniform(-1.0, 1.0, (n, n)) + (n + 1.0) * np.eye(n)
    elif name == "gramschmidt":
        m, n = params["M"], params["N"]
        a = rng.uniform(-1.0, 1.0, (m, n))
        a[: min(m, n), : min(m, n)] += 2.0 * np.eye(min(m, n))  # columns clearly independent
        args["A"] = a
    elif name == "correlation" and params["M"] > 1:
        args["data"][:, 1] = 0.25  # a constant column: exercises the stddev <= eps guard
    elif name == "blur":
        args["img"] = rng.uniform(0.0, 1.0, args["img"].shape).astype(np.float32)
    return args
