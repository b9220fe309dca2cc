"""PolyBench/C 4.2.1's MEDIUM and LARGE datasets for the suite's kernels, in the suite's parameter names.

PolyBench calls its time-step parameter ``TSTEPS`` (``TMAX`` in fdtd-2d); the suite calls it ``T``.  Two
departures: gramschmidt's M and N are swapped (PolyBench factors a matrix with more columns than rows, whose
trailing norms vanish; the suite's kernel assumes ``N <= M``), and ``blur``, not a PolyBench kernel, takes
sizes chosen to run about as long as the stencils' at each dataset.
"""

from __future__ import annotations

Params = dict[str, int]

MEDIUM: dict[str, Params] = {
    "gemm": dict(NI=200, NJ=220, NK=240),
    "2mm": dict(NI=180, NJ=190, NK=210, NL=220),
    "3mm": dict(NI=180, NJ=190, NK=200, NL=210, NM=220),
    "atax": dict(M=390, N=410),
    "bicg": dict(M=390, N=410),
    "mvt": dict(N=400),
    "gemver": dict(N=400),
    "gesummv": dict(N=250),
    "syrk": dict(M=200, N=240),
    "syr2k": dict(M=200, N=240),
    "trmm": dict(M=200, N=240),
    "symm": dict(M=200, N=240),
    "doitgen": dict(NQ=40, NR=50, NP=60),
    "trisolv": dict(N=400),
    "lu": dict(N=400),
    "ludcmp": dict(N=400),
    "cholesky": dict(N=400),
    "gramschmidt": dict(M=240, N=200),
    "durbin": dict(N=400),
    "adi": dict(T=100, N=200),
    "deriche": dict(W=720, H=480),
    "floyd_warshall": dict(N=500),
    "nussinov": dict(N=500),
    "jacobi_1d": dict(T=100, N=400),
    "jacobi_2d": dict(T=100, N=250),
    "seidel_2d": dict(T=100, N=400),
    "heat_3d": dict(T=100, N=40),
    "fdtd_2d": dict(T=100, NX=200, NY=240),
    "blur": dict(C=3, H=512, W=512),
    "covariance": dict(M=240, N=260),
    "correlation": dict(M=240, N=260),
}

LARGE: dict[str, Params] = {
    "gemm": dict(NI=1000, NJ=1100, NK=1200),
    "2mm": dict(NI=800, NJ=900, NK=1100, NL=1200),
    "3mm": dict(NI=800, NJ=900, NK=1000, NL=1100, NM=1200),
    "atax": dict(M=1900, N=2100),
    "bicg": dict(M=1900, N=2100),
    "mvt": dict(N=2000),
    "gemver": dict(N=2000),
    "gesummv": dict(N=1300),
    "syrk": dict(M=1000, N=1200),
    "syr2k": dict(M=1000, N=1200),
    "trmm": dict(M=1000, N=1200),
    "symm": dict(M=1000, N=1200),
    "doitgen": dict(NQ=140, NR=150, NP=160),
    "trisolv": dict(N=2000),
    "lu": dict(N=2000),
    "ludcmp": dict(N=2000),
    "cholesky": dict(N=2000),
    "gramschmidt": dict(M=1200, N=1000),
    "durbin": dict(N=2000),
    "adi": dict(T=500, N=1000),
    "deriche": dict(W=4096, H=2160),
    "floyd_warshall": dict(N=2800),
    "nussinov": dict(N=2500),
    "jacobi_1d": dict(T=500, N=2000),
    "jacobi_2d": dict(T=500, N=1300),
    "seidel_2d": dict(T=500, N=2000),
    "heat_3d": dict(T=500, N=120),
    "fdtd_2d": dict(T=500, NX=1000, NY=1200),
    "blur": dict(C=3, H=2048, W=2048),
    "covariance": dict(M=1200, N=1400),
    "correlation": dict(M=1200, N=1400),
}

#: ``polytri bench --dataset NAME`` -> sizes by kernel.
DATASETS: dict[str, dict[str, Params]] = {"medium": MEDIUM, "large": LARGE}
