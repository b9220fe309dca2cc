"""Linear algebra of the suite: BLAS-like kernels, solvers and factorizations (PolyBench/C 4.2)."""

from __future__ import annotations

import polytri as pt


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


def build_durbin() -> pt.Program:
    """Levinson-Durbin recursion: the Toeplitz system of autocorrelations ``r`` solved into ``y``.
    PolyBench's scalars ``alpha``, ``beta`` and ``sum`` are one-element arrays."""
    p = pt.Program("durbin", params=["N"])
    p.assume("N >= 1")
    p.array("r", ("N",))
    p.array("y", ("N",))
    p.array("z", ("N",))
    for name in ("alpha", "beta", "total"):
        p.array(name, (1,))
    p.assign("y[0] = -r[0]")
    p.assign("beta[0] = 1.0")
    p.assign("alpha[0] = -r[0]")
    with p.loop("k", 1, "N"):
        p.assign("beta[0] = (1.0 - alpha[0] * alpha[0]) * beta[0]")
        p.assign("total[0] = 0.0")
        with p.loop("i", 0, "k"):
            p.assign("total[0] += r[k - i - 1] * y[i]")
        p.assign("alpha[0] = -(r[k] + total[0]) / beta[0]")
        with p.loop("i", 0, "k"):
            p.assign("z[i] = y[i] + alpha[0] * y[k - i - 1]")
        with p.loop("i", 0, "k"):
            p.assign("y[i] = z[i]")
        p.assign("y[k] = alpha[0]")
    return p
