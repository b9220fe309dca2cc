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
        _adi_sweep(p, "u", "v", lower=a, main=b, across=d, along_rows=False)
        _adi_sweep(p, "v", "u", lower=d, main=e, across=a, along_rows=True)
    return p


def _adi_sweep(p: pt.Program, src: str, dst: str, *, lower: str, main: str, across: str,
               along_rows: bool) -> None:
    """One half step of adi: for each line ``i`` (a row of ``dst`` when ``along_rows``, else a column), a
    tridiagonal solve along the line (``p``, ``q`` forward, then ``dst`` backward) whose right-hand side
    is ``src`` smoothed across the lines.  PolyBench's coefficients fold into three: the column sweep's
    ``a = c``, ``b``, ``d = f`` and the row sweep's ``d = f``, ``e``, ``a = c``."""
    def at(x: str, line: str, pos: str) -> str:
        return f"{x}[{line}, {pos}]" if along_rows else f"{x}[{pos}, {line}]"

    with p.loop("i", 1, "N - 1"):
        p.assign(f"{at(dst, 'i', '0')} = 1.0")
        p.assign("p[i, 0] = 0.0")
        p.assign(f"q[i, 0] = {at(dst, 'i', '0')}")
        with p.loop("j", 1, "N - 1"):
            p.assign(f"p[i, j] = -{lower} / ({lower} * p[i, j - 1] + {main})")
            p.assign(f"q[i, j] = (-{across} * {at(src, 'i - 1', 'j')} + (1.0 + 2.0 * {across}) * "
                     f"{at(src, 'i', 'j')} - {across} * {at(src, 'i + 1', 'j')} - {lower} * q[i, j - 1]) / "
                     f"({lower} * p[i, j - 1] + {main})")
        p.assign(f"{at(dst, 'i', 'N - 1')} = 1.0")
        with p.loop("jj", 1, "N - 1"):
            p.assign(f"{at(dst, 'i', 'N - 1 - jj')} = p[i, N - 1 - jj] * {at(dst, 'i', 'N - jj')} "
                     f"+ q[i, N - 1 - jj]")


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
