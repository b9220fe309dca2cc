"""Peak microbenchmarks for ``polytri bench``: FMA throughput and a STREAM-like triad.

C written here by hand, built with the same compiler and flags as the generated kernels (plus
``-ffp-contract=fast`` so that ``a * b + c`` becomes one FMA), called through ctypes.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..cpu_codegen.build import DEFAULT_FLAGS, build_library
from ..runtime.cpu_share import usable_cores


def default_threads() -> int:
    """The thread count OpenMP uses by default here (``OMP_NUM_THREADS``, else the CPUs we may run on)."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return usable_cores()


# ---------------------------------------------------------------------------------------------------
# peak microbenchmarks
# ---------------------------------------------------------------------------------------------------
#: Independent vector accumulators per thread: FMA latency (4 cycles) x FMA pipes (2) with room to spare;
#: 16 of them plus two operands fit in the 32 vector registers of AVX-512 (16 with AVX2: gcc then spills a
#: little, which the 64-byte vectors hide).
NACC = 16
#: Bytes per vector of the FMA loop (one AVX-512 register; gcc splits it in two on AVX2 machines).
VECTOR_BYTES = 64


def _fma_function(name: str, ctype: str) -> str:
    """``double name(int64_t iters, int threads, T mul, T add, int *used)``: NACC independent chains
    ``acc = acc * mul + add`` of vectors; returns the sum of every lane so nothing is dead code."""
    decl = "\n".join(f"    {name}_v acc{k} = zero + ({ctype})({k + 1}) * (({ctype})0.001 + ({ctype})tid);"
                     for k in range(NACC))
    body = "\n".join(f"      acc{k} = acc{k} * m + a;" for k in range(NACC))
    total = " + ".join(f"acc{k}" for k in range(NACC))
    return f"""
typedef {ctype} {name}_v __attribute__((vector_size({VECTOR_BYTES})));
double {name}(int64_t iters, int threads, {ctype} mul, {ctype} add, int *used) {{
  double total = 0.0;
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  int n_used = 1;
  #pragma omp parallel num_threads(nt) reduction(+:total)
  {{
    const {ctype} tid = ({ctype})omp_get_thread_num();
    const {name}_v zero = {{0}};
    const {name}_v m = zero + mul, a = zero + add;
{decl}
    for (int64_t i = 0; i < iters; i++) {{
{body}
    }}
    {name}_v s = {total};
    for (int l = 0; l < (int)(sizeof(s) / sizeof(s[0])); l++) total += s[l];
    #pragma omp single
    n_used = omp_get_num_threads();
  }}
  *used = n_used;
  return total;
}}
"""


PEAK_SOURCE = ("""\
/* polytri.bench: peak microbenchmarks (FMA throughput, triad bandwidth), written by hand. */
#include <stdint.h>
#include <omp.h>
""" + _fma_function("pt_fma_f32", "float") + _fma_function("pt_fma_f64", "double") + """
/* STREAM's triad, every thread, static schedule (each thread touches the same part in init and triad). */
void pt_triad_init(double *restrict a, double *restrict b, double *restrict c, int64_t n, int threads) {
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  #pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) { a[i] = 0.0; b[i] = 1.0 + (double)(i & 7); c[i] = 0.5; }
}
void pt_triad(double *restrict a, const double *restrict b, const double *restrict c, double s, int64_t n,
              int threads) {
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  #pragma omp parallel for simd num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
""")

#: The generated kernels' flags, OpenMP, and contraction of ``a * b + c`` into FMA instructions (the
#: kernels themselves build with ``-ffp-contract=off``; the later flag wins).
PEAK_FLAGS = DEFAULT_FLAGS + ("-fopenmp", "-ffp-contract=fast")


@cache
def peak_library() -> ctypes.CDLL:
    """The peak microbenchmarks, built (or found in polytri's cache) and loaded."""
    cc = os.environ.get("CC") or "cc"
    lib = ctypes.CDLL(str(build_library(PEAK_SOURCE, cc=cc, flags=PEAK_FLAGS)))
    for dt, ct in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
        fn = getattr(lib, f"pt_fma_{dt}")
        fn.restype = ctypes.c_double
        fn.argtypes = [ctypes.c_int64, ctypes.c_int, ct, ct, ctypes.POINTER(ctypes.c_int)]
    lib.pt_triad_init.restype = None
    lib.pt_triad_init.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int]
    lib.pt_triad.restype = None
    lib.pt_triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_double, ctypes.c_int64, ctypes.c_int]
    return lib


def fma_peak(dtype: str = "float32", seconds: float = 0.1, repeat: int = 5, threads: int = 0) -> float:
    """FMA throughput in GFLOP/s (an FMA counts 2 flops): the best of ``repeat`` runs of about ``seconds``
    each, on ``threads`` threads (0: OpenMP's default).  The best, as STREAM reports its best rate: a peak
    is what the machine can do, and a run slowed by another process must not lower it (a bench run's
    median read 43 GFLOP/s in float32 while its gemm ran at 132)."""
    lanes = VECTOR_BYTES // np.dtype(dtype).itemsize
    fn = getattr(peak_library(), "pt_fma_f32" if dtype == "float32" else "pt_fma_f64")
    used = ctypes.c_int(0)
    # mul < 1 and add > 0: each chain converges to add / (1 - mul), no overflow, no denormals
    mul, add = 0.999, 0.001

    def run(iters: int) -> float:
        t0 = time.perf_counter()
        total = fn(iters, threads, mul, add, ctypes.byref(used))
        dt = time.perf_counter() - t0
        if not np.isfinite(total):  # also keeps the sum alive
            raise RuntimeError(f"fma peak: non-finite sum {total}")
        return dt

    iters = 1000
    while True:  # calibrate: about `seconds` per run
        dt = run(iters)
        if dt >= seconds / 4 or iters > 1 << 40:
            break
        iters *= 4
    iters = max(1, int(iters * seconds / max(dt, 1e-9)))
    times = [run(iters) for _ in range(repeat)]
    flops = 2.0 * NACC * lanes * iters * used.value
    return flops / min(times) / 1e9


def triad_bandwidth(mbytes: float = 64.0, repeat: int = 10, threads: int = 0) -> float:
    """Triad bandwidth in GB/s over three float64 arrays of ``mbytes`` MB each: the best of ``repeat``
    runs (as :func:`fma_peak`), counting 3 arrays' bytes per run (2 read, 1 written; STREAM's convention, without the
    write-allocate read of ``a``, which would make it 4/3 as much)."""
    n = max(1, int(mbytes * 1e6) // 8)
    lib = peak_library()
    a, b, c = (np.empty(n, dtype=np.float64) for _ in range(3))
    lib.pt_triad_init(a.ctypes.data, b.ctypes.data, c.ctypes.data, n, threads)
    lib.pt_triad(a.ctypes.data, b.ctypes.data, c.ctypes.data, 3.0, n, threads)  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        lib.pt_triad(a.ctypes.data, b.ctypes.data, c.ctypes.data, 3.0, n, threads)
        times.append(time.perf_counter() - t0)
    if a[n - 1] != b[n - 1] + 3.0 * c[n - 1]:
        raise RuntimeError("triad: wrong result")
    return 3.0 * 8 * n / min(times) / 1e9


@dataclass(frozen=True)
class Peak:
    """Measured peaks of this machine (every thread)."""

    fma_f32: float
    """GFLOP/s."""
    fma_f64: float
    """GFLOP/s."""
    triad: float
    """GB/s (3 arrays counted)."""
    threads: int
    triad_mb: float

    def fma(self, dtype: str) -> float:
        return self.fma_f32 if np.dtype(dtype).itemsize <= 4 else self.fma_f64

    def header(self) -> str:
        return (f"peak ({self.threads} threads): FMA {self.fma_f32:.1f} GFLOP/s fp32, {self.fma_f64:.1f} GFLOP/s "
                f"fp64; triad {self.triad:.1f} GB/s (3 x {self.triad_mb:g} MB float64 arrays, 3 arrays counted, "
                f"no write-allocate)")


def measure_peak(quick: bool = False) -> Peak:
    """The peaks, with short runs when ``quick``."""
    mb = 16.0 if quick else 64.0
    secs, rep = (0.02, 3) if quick else (0.1, 5)
    return Peak(fma_peak("float32", secs, rep), fma_peak("float64", secs, rep),
                triad_bandwidth(mb, 5 if quick else 10), default_threads(), mb)
