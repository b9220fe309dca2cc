"""CPU benchmarks side by side: ``polytri bench`` and ``benchmarks/cpu.py``.

Two parts:

* **peak microbenchmarks**, C written here by hand and built with the same compiler and flags as the
  generated kernels: FMA throughput (GFLOP/s, fp32 and fp64, every thread) and a STREAM-like triad
  ``a[i] = b[i] + s * c[i]`` (GB/s, every thread);
* **the suite's kernels** at benchmark sizes, every variant timed in the same run, interleaved
  (naive gcc -O3 C of the input order, the input order with OpenMP, polytri's default, Pluto tiled, the
  input order built by clang with Polly where there is one (``polytri/tools/polly.py``), and numpy/torch
  where there is an obvious equivalent), with a check that every variant computes what the naive C computes.

Ratios, not absolute times, are what to compare: the machines this runs on are shared and noisy.
``benchmarks/README.md`` explains every column.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..compiler import compile as pt_compile
from ..suite import copy_args
from ..suite.datasets import DATASETS
from .bench_library import LIBRARY_EQUIVALENTS, LIBRARY_SETTLE_S, SPINNING
from .peak import Peak, default_threads, fma_peak, measure_peak, triad_bandwidth
from .polly import ensure_polly, raise_stack_limit

NOTE = "ratios, not absolute times, are what to compare; this machine is shared and noisy"

Params = dict[str, int]


# ---------------------------------------------------------------------------------------------------
# the suite's kernels
# ---------------------------------------------------------------------------------------------------
#: The compiled variants: column name -> ``pt.compile`` options.
VARIANTS: dict[str, dict[str, Any]] = {
    "naive": {"schedule": "original", "openmp": False, "simd": False, "microkernel": False},
    "orig+omp": {"schedule": "original", "microkernel": False},
    "polytri": {},
    "pt 1 thread": {"threads": 1},
    "tiled": {"schedule": "pluto", "tile": True},
}
#: The column of the input order's C built by clang with Polly (added to VARIANTS' when there is one).
POLLY = "polly"
#: The column of the numpy/torch equivalents.
LIBRARY = "numpy/torch"
#: Seed of the variants' order in each round of timed calls.  In a fixed order, the one after a long one
#: paid for it (2mm's default after orig+omp, beside a busy process: 1.20x its one-thread variant, the same
#: code on one thread; swapped, 0.89x-0.97x: docs/performance.md).
ORDER_SEED = 20261127
#: The column of polytri's default variant's compile time (``pt.compile``, fresh cache: the C compiler runs).
COMPILE = "compile s"
#: The summary names the kernels whose default variant compiles in more seconds than this.
COMPILE_LIMIT_S = 2.0

#: Benchmark sizes: the reference points of docs/performance.md, and sizes where the naive C takes roughly 0.05-1 s on a
#: 2-core machine for the others.
BENCH_SIZES: dict[str, Params] = {
    "gemm": dict(NI=1024, NJ=1024, NK=1024),
    "2mm": dict(NI=400, NJ=400, NK=400, NL=400),
    "3mm": dict(NI=400, NJ=400, NK=400, NL=400, NM=400),
    "atax": dict(M=8000, N=8000),
    "bicg": dict(M=8000, N=8000),
    "mvt": dict(N=4000),
    "gemver": dict(N=4000),
    "gesummv": dict(N=8000),
    "syrk": dict(M=600, N=800),
    "syr2k": dict(M=500, N=600),
    "trmm": dict(M=600, N=800),
    "symm": dict(M=600, N=800),
    "doitgen": dict(NR=128, NQ=128, NP=128),
    "trisolv": dict(N=8000),
    "lu": dict(N=800),
    "ludcmp": dict(N=800),
    "cholesky": dict(N=1000),
    "gramschmidt": dict(M=800, N=600),
    "jacobi_1d": dict(T=2000, N=100000),
    "jacobi_2d": dict(T=100, N=2000),
    "seidel_2d": dict(T=40, N=2000),
    "heat_3d": dict(T=50, N=120),
    "fdtd_2d": dict(T=100, NX=1000, NY=1200),
    "blur": dict(C=3, H=2048, W=2048),
    "covariance": dict(M=600, N=800),
    "correlation": dict(M=600, N=800),
    "durbin": dict(N=4000),
    "adi": dict(T=20, N=1000),
    "deriche": dict(W=2048, H=2048),
    "floyd_warshall": dict(N=800),
    "nussinov": dict(N=800),
}

#: ``--quick`` sizes: large enough to time, small enough for a smoke test (kernels not listed: their
#: ``small`` values times 4, time steps kept).
QUICK_SIZES: dict[str, Params] = {
    "gemm": dict(NI=128, NJ=128, NK=128),
    "jacobi_2d": dict(T=10, N=200),
    "seidel_2d": dict(T=5, N=200),
    "heat_3d": dict(T=5, N=32),
    "jacobi_1d": dict(T=20, N=2000),
    "blur": dict(C=3, H=128, W=128),
}


def quick_size(name: str) -> Params:
    from ..suite import KERNELS
    if name in QUICK_SIZES:
        return dict(QUICK_SIZES[name])
    return {p: (v if p == "T" else 4 * v) for p, v in KERNELS[name].small.items()}


#: Elements moved, for the memory-bound kernels (the stencils and the matrix-vector kernels): per sweep
#: over an iteration space, (arrays read + arrays written) x elements of the space, summed over the sweeps
#: and time steps; for the matrix-vector kernels only the matrices count, once per loop nest that reads
#: them and once per nest that writes them.  Deliberately simple: perfect reuse inside a sweep, none
#: between sweeps, no write-allocate, small vectors ignored.
ELEMENTS_MOVED: dict[str, Callable[[Params], float]] = {
    "jacobi_1d": lambda q: q["T"] * 2 * 2 * q["N"],
    "jacobi_2d": lambda q: q["T"] * 2 * 2 * q["N"] ** 2,
    "seidel_2d": lambda q: q["T"] * 2 * q["N"] ** 2,
    "heat_3d": lambda q: q["T"] * 2 * 2 * q["N"] ** 3,
    "fdtd_2d": lambda q: q["T"] * (3 + 3 + 4) * q["NX"] * q["NY"],
    "blur": lambda q: 2 * 2 * q["C"] * q["H"] * q["W"],
    "atax": lambda q: 2 * q["M"] * q["N"],
    "bicg": lambda q: q["M"] * q["N"],
    "mvt": lambda q: 2 * q["N"] ** 2,
    "gemver": lambda q: 4 * q["N"] ** 2,
    "gesummv": lambda q: 2 * q["N"] ** 2,
    "trisolv": lambda q: q["N"] ** 2 / 2,
}


# -- measuring ----------------------------------------------------------------------------------------
def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:160]


def _differs(got: dict[str, Any], ref: dict[str, Any], arrays: Sequence[str]) -> str:
    """Empty when every array of ``got`` is allclose to ``ref`` (tolerance relative to the largest
    magnitude of the reference array), else which array differs and by how much."""
    for name in arrays:
        x, r = np.asarray(got[name]), np.asarray(ref[name])
        tol = 1e-4 if r.dtype.itemsize <= 4 else 1e-9
        finite = np.isfinite(r)
        scale = float(np.max(np.abs(r[finite]))) if finite.any() else 1.0
        if not np.allclose(x, r, rtol=tol, atol=tol * max(scale, 1e-30), equal_nan=True):
            with np.errstate(invalid="ignore"):
                err = float(np.nanmax(np.abs(x.astype(np.float64) - r.astype(np.float64)))) / max(scale, 1e-30)
            return f"{name} off by {err:.1e} (relative to max |{name}|)"
    return ""


@dataclass
class Row:
    """One kernel's measurements."""

    kernel: str
    params: Params
    category: str
    dtype: str
    flops: float
    elements_moved: float | None
    times: dict[str, float | None] = field(default_factory=dict)
    """Median seconds per variant (``None``: not run, or failed)."""
    schedule: str = ""
    """The schedule polytri's default chose (``Schedule.label``)."""
    compile_s: float | None = None
    """Seconds of ``pt.compile`` for polytri's default variant, with a fresh cache (``None``: it failed)."""
    library: str = ""
    """What the numpy/torch column ran, if anything."""
    mismatches: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return not self.mismatches

    @property
    def speedup(self) -> float | None:
        n, p = self.times.get("naive"), self.times.get("polytri")
        return n / p if n and p else None

    @property
    def gflops(self) -> float | None:
        p = self.times.get("polytri")
        return self.flops / p / 1e9 if p else None

    @property
    def gbytes(self) -> float | None:
        p = self.times.get("polytri")
        if not p or self.elements_moved is None:
            return None
        return self.elements_moved * np.dtype(self.dtype).itemsize / p / 1e9


def _prepare_compiled(kernel: Callable[..., None], fresh: dict[str, Any]) -> Callable[[], None]:
    return partial(kernel, **fresh)


def _prepare_library(prep: Callable[[dict[str, Any], int], Callable[[], None]], threads: int,
                     fresh: dict[str, Any]) -> Callable[[], None]:
    return prep(fresh, threads)


def run_kernel(name: str, params: Params, repeat: int, threads: int | None = None,
               variants: dict[str, dict[str, Any]] | None = None) -> Row:
    """Compile every variant (default: :data:`VARIANTS`) of suite kernel ``name``, check each against the naive C
    on one run, then time them ``repeat`` times, interleaved, the compiled variants in a new order each
    round (:data:`ORDER_SEED`), the library's last (after torch's, a pause: :data:`LIBRARY_SETTLE_S`);
    each call gets a fresh copy of the inputs, made outside the timed region."""
    from ..ir.builder import to_program
    from ..suite import KERNELS, make_args

    kern = KERNELS[name]
    prog = to_program(kern.build())
    dtypes = {a.dtype for a in prog.arrays}
    dtype = max(dtypes, key=lambda d: np.dtype(d).itemsize)
    moved = ELEMENTS_MOVED.get(name)
    row = Row(name, dict(params), kern.category, dtype, kern.flops(params), moved(params) if moved else None)
    threads = threads or default_threads()
    args = make_args(kern, params)
    variants = VARIANTS if variants is None else variants
    prepares = _compile_variants(name, prog, row, threads, variants)
    _check_variants(prepares, args, [a.name for a in prog.arrays], row)
    samples: dict[str, list[float]] = {v: [] for v in prepares}
    order = [(v, p) for v, p in prepares.items() if v != LIBRARY]
    last = [(v, p) for v, p in prepares.items() if v == LIBRARY]
    shuffle = random.Random(ORDER_SEED).shuffle
    for _ in range(repeat):
        shuffle(order)
        for variant, prepare in order + last:
            call = prepare(copy_args(args))
            t0 = time.perf_counter()
            call()
            samples[variant].append(time.perf_counter() - t0)
            del call
        if last and name in SPINNING:
            time.sleep(LIBRARY_SETTLE_S)
    for variant in (*variants, LIBRARY):
        row.times[variant] = statistics.median(samples[variant]) if samples.get(variant) else None
    return row


Prepare = Callable[[dict[str, Any]], Callable[[], None]]


def _compile_variants(name: str, prog: Any, row: Row, threads: int,
                      variants: dict[str, dict[str, Any]]) -> dict[str, Prepare]:
    """Each variant that compiles, as a function from fresh inputs to a call; failures and warnings go to
    ``row``."""
    prepares: dict[str, Prepare] = {}
    for variant, options in variants.items():
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if variant == "polytri":
                    k, row.compile_s = cold_compile(prog, options)
                else:
                    k = pt_compile(prog, target="cpu", options=options)
            for w in caught:
                row.notes.append(f"{variant}: {str(w.message).splitlines()[0]}")
        except Exception as exc:  # a benchmark reports failures, it does not stop on them
            row.errors[variant] = _short(exc)
            continue
        if variant == "polytri":
            row.schedule = k.schedule_info.label
        prepares[variant] = partial(_prepare_compiled, k)
    if name in LIBRARY_EQUIVALENTS:
        row.library, prep = LIBRARY_EQUIVALENTS[name]
        prepares[LIBRARY] = partial(_prepare_library, prep, threads)
    return prepares


@contextlib.contextmanager
def _fresh_cache() -> Iterator[None]:
    """polytri's cache in a new empty folder for the block (removed after it), keeping the measured cost of a
    parallel region (measured once per process, before the cache moves: it is not part of a compile)."""
    from ..cpu_codegen.fork_cost import fork_cost
    fork_cost(os.environ.get("CC") or "cc")
    saved = os.environ.get("POLYTRI_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="polytri-bench-") as folder:
        os.environ["POLYTRI_CACHE_DIR"] = folder
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("POLYTRI_CACHE_DIR", None)
            else:
                os.environ["POLYTRI_CACHE_DIR"] = saved


def cold_compile(prog: Any, options: dict[str, Any]) -> tuple[Any, float]:
    """The kernel and the seconds ``pt.compile`` took with a fresh cache, so that the C compiler runs (the
    library is loaded before the folder goes)."""
    with _fresh_cache():
        t0 = time.perf_counter()
        k = pt_compile(prog, target="cpu", options=options)
        seconds = time.perf_counter() - t0
        k.wait_built()
    return k, seconds


def _check_variants(prepares: dict[str, Prepare], args: dict[str, Any], arrays: list[str], row: Row) -> None:
    """One untimed run of each variant: the warm-up (page faults, thread pools, torch's first call) and the
    check against the naive C.  A variant that fails is dropped from ``prepares``."""
    reference: dict[str, Any] | None = None
    for variant, prepare in list(prepares.items()):
        fresh = copy_args(args)
        try:
            prepare(fresh)()
        except Exception as exc:
            row.errors[variant] = _short(exc)
            del prepares[variant]
            continue
        if variant == "naive":
            reference = fresh
        elif reference is not None:
            why = _differs(fresh, reference, arrays)
            if why:
                row.mismatches[variant] = why
        del fresh
    if reference is None and "naive" not in row.errors:
        row.errors["naive"] = "did not run"


# -- printing -----------------------------------------------------------------------------------------
def header(variants: Sequence[str]) -> tuple[str, ...]:
    """The table's columns for these variants: with :data:`POLLY`, its time and ``pt/polly``."""
    ratios = ("pt/naive", *(("pt/polly",) if POLLY in variants else ()))
    return ("kernel", "size", *(f"{v} ms" for v in variants), f"{LIBRARY} ms", *ratios, "pt GFLOP/s",
            "pt vs peak", "pt schedule", COMPILE, "check")


#: The columns without Polly's.
HEADER = header(list(VARIANTS))


def _size(params: Params) -> str:
    return " ".join(f"{p}={v}" for p, v in params.items())


def _ms(t: float | None, failed: bool) -> str:
    if failed:
        return "error"
    return "-" if t is None else f"{t * 1e3:.1f}" if t >= 0.01 else f"{t * 1e3:.3f}"


def vs_peak(row: Row, peak: Peak) -> str:
    """Polytri's share of the roof that matters: triad bandwidth for the memory-bound kernels (those with
    an :data:`ELEMENTS_MOVED` estimate), FMA throughput of the kernel's dtype for the others."""
    if row.gbytes is not None:
        return f"{row.gbytes:.1f} GB/s = {100 * row.gbytes / peak.triad:.0f}% triad"
    if row.gflops is not None:
        fp = "fp32" if np.dtype(row.dtype).itemsize <= 4 else "fp64"
        return f"{100 * row.gflops / peak.fma(row.dtype):.1f}% FMA {fp}"
    return "-"


def check(row: Row) -> str:
    if row.mismatches:
        return "DIFFERS: " + ", ".join(row.mismatches)
    if "naive" in row.errors:
        return "unchecked"
    return "agree"


def cells(row: Row, peak: Peak, variants: Sequence[str] = tuple(VARIANTS)) -> list[str]:
    out = [row.kernel, _size(row.params)]
    out += [_ms(row.times.get(v), v in row.errors) for v in variants]
    out.append(_ms(row.times.get(LIBRARY), LIBRARY in row.errors))
    for s in (row.speedup, *((_ratio(row, POLLY, "polytri"),) if POLLY in variants else ())):
        out.append("-" if s is None else f"{s:.2f}x")
    g = row.gflops
    out.append("-" if g is None else f"{g:.2f}")
    out += [vs_peak(row, peak), row.schedule or "-", "-" if row.compile_s is None else f"{row.compile_s:.2f}",
            check(row)]
    return out


def _ratio(row: Row, a: str, b: str) -> float | None:
    """Time of variant ``a`` over time of variant ``b``, when both ran."""
    ta, tb = row.times.get(a), row.times.get(b)
    return ta / tb if ta and tb else None


def _geomean(ratios: Sequence[float]) -> float:
    return float(np.exp(np.mean(np.log(ratios))))


def versus_polly(rows: list[Row]) -> list[str]:
    """The kernels where polytri's default is slower than clang+Polly, and the geometric mean of pt/polly."""
    pairs = [(r.kernel, s) for r in rows for s in [_ratio(r, POLLY, "polytri")] if s]
    slower = [f"{k} ({s:.2f}x)" for k, s in pairs if s < 1.0]
    lines = [f"polytri's default slower than clang+Polly on {len(slower)}: {', '.join(slower) or 'none'}"]
    if pairs:
        lines.append(f"geometric mean speed-up of polytri over clang+Polly: {_geomean([s for _, s in pairs]):.2f}x "
                     f"over {len(pairs)} kernels")
    return lines


def summary(rows: list[Row], peak: Peak, variants: Sequence[str] = tuple(VARIANTS)) -> list[str]:
    lines = []
    slower = [f"{r.kernel} ({r.speedup:.2f}x)" for r in rows if r.speedup is not None and r.speedup < 1.0]
    lines.append(f"polytri's default slower than the naive C on {len(slower)}: {', '.join(slower) or 'none'}")
    alone = [f"{r.kernel} ({t:.2f}x)" for r in rows for t in [_ratio(r, "polytri", "pt 1 thread")] if t and t > 1.0]
    lines.append(f"polytri's default slower than its one-thread run on {len(alone)}: {', '.join(alone) or 'none'}")
    ratios = [r.speedup for r in rows if r.speedup]
    if ratios:
        lines.append(f"geometric mean speed-up of polytri over naive: {_geomean(ratios):.2f}x over {len(ratios)} kernels")
    if POLLY in variants:
        lines += versus_polly(rows)
    lines.append(compile_line(rows))
    libs = [f"{r.kernel}: {r.library}" for r in rows if r.library]
    if libs:
        lines.append(f"{LIBRARY} column: {'; '.join(libs)} ({peak.threads} threads for torch)")
    for r in rows:
        for v, why in r.mismatches.items():
            lines.append(f"MISMATCH {r.kernel} {v}: {why}")
        for v, why in r.errors.items():
            lines.append(f"ERROR {r.kernel} {v}: {why}")
        for note in dict.fromkeys(r.notes):
            lines.append(f"note {r.kernel} {note}")
    return lines


def compile_line(rows: list[Row]) -> str:
    """The kernels whose default variant compiled in over :data:`COMPILE_LIMIT_S` seconds, slowest first."""
    slow = sorted((r for r in rows if r.compile_s is not None and r.compile_s > COMPILE_LIMIT_S),
                  key=lambda r: -(r.compile_s or 0.0))
    names = ", ".join(f"{r.kernel} ({r.compile_s:.2f} s)" for r in slow) or "none"
    load = os.getloadavg()[0]
    return (f"polytri's default compiles (fresh cache) in over {COMPILE_LIMIT_S:g} s on {len(slow)}: {names} "
            f"(load average {load:.2f})")


def render(rows: list[Row], peak: Peak, repeat: int, markdown: bool = False,
           variants: Sequence[str] = tuple(VARIANTS), notes: Sequence[str] = ()) -> str:
    """The table and its summary; ``notes`` (such as why there is no Polly column) go under the header."""
    head = [peak.header(), f"kernels: median of {repeat} interleaved runs per variant; note: {NOTE}",
            *(f"note: {n}" for n in notes), ""]
    columns = header(variants)
    table = [list(columns)] + [cells(r, peak, variants) for r in rows]
    numeric = set(range(2, columns.index("pt schedule"))) | {columns.index(COMPILE)}  # right-aligned
    if markdown:
        def fmt(line: Sequence[str]) -> str:
            return "| " + " | ".join(v.replace("|", "\\|") for v in line) + " |"

        align = ["---:" if c in numeric else "---" for c in range(len(columns))]
        body = [fmt(table[0]), "|" + "|".join(align) + "|"] + [fmt(line) for line in table[1:]]
        tail = ["", *(f"- {line}" for line in summary(rows, peak, variants))]
    else:
        widths = [max(len(line[c]) for line in table) for c in range(len(columns))]

        def fmt(line: Sequence[str]) -> str:
            return "  ".join(v.rjust(w) if c in numeric else v.ljust(w)
                             for c, (v, w) in enumerate(zip(line, widths))).rstrip()

        body = [fmt(table[0]), "  ".join("-" * w for w in widths)] + [fmt(line) for line in table[1:]]
        tail = ["", *summary(rows, peak, variants)]
    return "\n".join(head + body + tail)


# -- command line -------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polytri bench`` and ``benchmarks/cpu.py``."""
    parser.add_argument("--filter", default="", metavar="PATTERN",
                        help="kernels whose name matches this regular expression (re.search; a plain name "
                             "matches as a substring); default: every kernel of the suite")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per variant; the median is reported")
    parser.add_argument("--quick", action="store_true", help="small sizes and short peak runs (a smoke run)")
    parser.add_argument("--dataset", choices=("bench", *DATASETS), default="bench",
                        help="kernel sizes: PolyBench 4.2.1's MEDIUM or LARGE dataset, or 'bench' (default: sizes "
                             "where the naive C takes roughly 0.05-1 s)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--polly", action=argparse.BooleanOptionalAction, default=None,
                        help="the polly column: the input order's C built by clang -O3 -march=native -mllvm -polly "
                             "-mllvm -polly-parallel -fopenmp=libgomp. --polly: installs clang and Polly from "
                             "Debian's packages if missing (as root), --no-polly: no column; default: as --polly "
                             "for --dataset medium and large (without --quick), else the column only where a clang with Polly is "
                             "already installed (`make polly` installs it)")


def dataset_sizes(dataset: str) -> dict[str, Params]:
    """Sizes by kernel for ``--dataset``."""
    return BENCH_SIZES if dataset == "bench" else DATASETS[dataset]


#: How long a whole run took on the 2-core development machine (``docs/performance.md`` has the tables);
#: the default dataset's sizes were not timed as a whole in this version.
DURATIONS = {"medium": "50 s (--repeat 7)", "large": "22 minutes (--repeat 3)", "quick": "27 s"}


def help_epilog() -> str:
    """The kernels and their sizes per ``--dataset``, and how long a run takes: ``polytri bench --help``."""
    from ..suite import KERNELS
    lines = ["kernels (--filter selects among them), with their sizes for --dataset bench / medium / large:"]
    for name in KERNELS:
        sizes = " / ".join(_size(dataset_sizes(d)[name]) for d in ("bench", *DATASETS))
        lines.append(f"  {name:15s} {sizes}")
    lines.append("")
    lines.append("a run takes: " + "; ".join(f"{d} {t}" for d, t in DURATIONS.items()) + " (timed before the polly "
                 "column, which adds one clang build and one more timed variant per kernel)")
    lines.append("defaults: --dataset bench, --repeat 5; every variant is checked against the naive C (exit 1 "
                 "if one differs); see benchmarks/README.md for the columns")
    lines.append("polly column: with --dataset medium or large (or --polly), clang and Polly are installed if missing "
                 "(apt-get, as root; `make polly` does it alone), and the column is left out with a note where they "
                 "cannot be; pt/polly is the speed-up of polytri's default over it")
    return "\n".join(lines)


def select(pattern: str) -> list[str]:
    from ..suite import KERNELS
    if not pattern:
        return list(KERNELS)
    rx = re.compile(pattern)
    return [k for k in KERNELS if rx.search(k)]


def polly_variants(args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """:data:`VARIANTS`, with :data:`POLLY` as ``--polly`` asks (installing clang and Polly if it says so), and
    why there is no Polly column when there is none."""
    if args.polly is False:
        return dict(VARIANTS), []
    install = args.polly is True or (args.polly is None and not args.quick and args.dataset in DATASETS)
    found, why = ensure_polly(install_missing=install,
                              say=lambda m: print(f"polytri bench: {m}", file=sys.stderr, flush=True))
    if found is None:
        hint = "" if install else "; `make polly` or --polly installs clang and Polly"
        return dict(VARIANTS), [f"no {POLLY} column: {why}{hint}"]
    cramped = raise_stack_limit()
    if cramped:
        return dict(VARIANTS), [f"no {POLLY} column: {cramped}"]
    return {**VARIANTS, POLLY: found.options()}, [f"{POLLY} column: {found.cc} ({found.identity}) "
                                                  f"{' '.join(found.flags)}"]


def run(args: argparse.Namespace, out: Any = None) -> int:
    """Run the benchmarks that ``args`` asks for, print the table; 1 when a variant disagrees with the
    naive C or fails, else 0."""
    out = out or sys.stdout
    if args.repeat < 1:
        raise SystemExit("polytri bench: --repeat must be at least 1")
    try:
        names = select(args.filter)
    except re.error as exc:
        raise SystemExit(f"polytri bench: bad --filter pattern {args.filter!r}: {exc}") from None
    if not names:
        raise SystemExit(f"polytri bench: no kernel matches {args.filter!r}")
    variants, notes = polly_variants(args)
    peak = measure_peak(quick=args.quick)
    rows = []
    for name in names:
        params = quick_size(name) if args.quick else dict(dataset_sizes(args.dataset)[name])
        print(f"  {name} {_size(params)} ...", file=sys.stderr, flush=True)
        rows.append(run_kernel(name, params, args.repeat, variants=variants))
    print(render(rows, peak, args.repeat, markdown=args.markdown, variants=list(variants), notes=notes),
          file=out, flush=True)
    return 0 if all(r.agree and not r.errors for r in rows) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="polytri bench", description=__doc__.splitlines()[0],
                                     epilog=help_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def peak_main(argv: Sequence[str] | None = None) -> int:
    """Only the peak microbenchmarks."""
    parser = argparse.ArgumentParser(prog="benchmarks/peak.py", description="peak FMA throughput and triad bandwidth")
    parser.add_argument("--quick", action="store_true", help="short runs")
    args = parser.parse_args(argv)
    peak = measure_peak(quick=args.quick)
    print(peak.header())
    print(f"single thread: FMA {fma_peak('float32', threads=1):.1f} GFLOP/s fp32; "
          f"triad {triad_bandwidth(16.0 if args.quick else 64.0, threads=1):.1f} GB/s")
    print(f"note: {NOTE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
