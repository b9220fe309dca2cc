"""Stencils of the suite: time-iterated sweeps (PolyBench/C 4.2) and a separable 5-tap blur."""

from __future__ import annotations

import polytri as pt


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


def build_adi() -> pt.Program:
    """Alternating-direction implicit solver of 2-D heat diffusion: per time step, a tridiagonal solve
    along each column (``u`` into ``v``), then along each row (``v`` into ``u``).  PolyBench's
    coefficients (DX = DY = 1/N, DT = 1/T, B1 = 2, B2 = 1) are written out: ``a = c = -N²/T``,
    ``b = 1 + 2N²/T``, ``d = f = -N²/(2T)``, ``e = 1 + N²/T``; its downward ``j`` is ``N - 1 - jj``."""
    p = pt.Program("adi", params=["T", "N"])
    p.assume("N >= 2")
    for name in ("u", "v", "p", "q"):
        p.array(name, ("N", "N"))
    a = "(-1.0 * N * N / T)"      # = c
    b = "(1.0 + 2.0 * N * N / T)"
    d = "(-0.5 * N * N / T)"      # = f
    e = "(1.0 + 1.0 * N * N / T)"
    with p.loop("t", 1, "T + 1"):
        with p.loop("i", 1, "N - 1"):           # along each column: u -> v
            p.assign("v[0, i] = 1.0")
            p.assign("p[i, 0] = 0.0")
            p.assign("q[i, 0] = v[0, i]")
            with p.loop("j", 1, "N - 1"):
                p.assign(f"p[i, j] = -{a} / ({a} * p[i, j - 1] + {b})")
                p.assign(f"q[i, j] = (-{d} * u[j, i - 1] + (1.0 + 2.0 * {d}) * u[j, i] - {d} * u[j, i + 1] "
                         f"- {a} * q[i, j - 1]) / ({a} * p[i, j - 1] + {b})")
            p.assign("v[N - 1, i] = 1.0")
            with p.loop("jj", 1, "N - 1"):
                p.assign("v[N - 1 - jj, i] = p[i, N - 1 - jj] * v[N - jj, i] + q[i, N - 1 - jj]")
        with p.loop("i", 1, "N - 1"):           # along each row: v -> u
            p.assign("u[i, 0] = 1.0")
            p.assign("p[i, 0] = 0.0")
            p.assign("q[i, 0] = u[i, 0]")
            with p.loop("j", 1, "N - 1"):
                p.assign(f"p[i, j] = -{d} / ({d} * p[i, j - 1] + {e})")
                p.assign(f"q[i, j] = (-{a} * v[i - 1, j] + (1.0 + 2.0 * {a}) * v[i, j] - {a} * v[i + 1, j] "
                         f"- {d} * q[i, j - 1]) / ({d} * p[i, j - 1] + {e})")
            p.assign("u[i, N - 1] = 1.0")
            with p.loop("jj", 1, "N - 1"):
                p.assign("u[i, N - 1 - jj] = p[i, N - 1 - jj] * u[i, N - jj] + q[i, N - 1 - jj]")
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
