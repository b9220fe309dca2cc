"""``polytri demo``: showcase kernels through the reference and the compiled C, side by side."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .compiler import compile as pt_compile
from .reference import reference
from .suite import copy_args

#: (suite kernel, parameter values): sizes the pure-Python reference runs in a few seconds.
SHOWCASE = (("gemm", {"NI": 64, "NJ": 64, "NK": 64}),
            ("jacobi_2d", {"T": 10, "N": 64}),
            ("blur", {"C": 3, "H": 64, "W": 64}))

#: The sizes of DESIGN.md's reference table, for the compiled kernels alone.
BENCH_SIZES = {"gemm": {"NI": 1024, "NJ": 1024, "NK": 1024},
               "jacobi_2d": {"T": 100, "N": 2000},
               "blur": {"C": 3, "H": 2048, "W": 2048}}


def _median_time(kernel: Callable[..., None], args: dict[str, Any], repeat: int) -> float:
    """Median time of ``kernel`` on fresh copies of ``args`` (the copies are made outside the timing)."""
    times = []
    for _ in range(repeat):
        fresh = copy_args(args)
        t0 = time.perf_counter()
        kernel(**fresh)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _size(params: dict[str, int]) -> str:
    return ", ".join(f"{p}={v}" for p, v in params.items())


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    table = [head, *rows]
    widths = [max(len(row[c]) for row in table) for c in range(len(head))]
    for i, row in enumerate(table):
        print("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def run_demo(show_source: bool = True, bench: bool = True) -> int:
    """Run the showcase; return 0 when every compiled kernel agrees with the reference."""
    from .suite import KERNELS, make_args

    rows = []
    ok = True
    shown = None
    for name, params in SHOWCASE:
        kern = KERNELS[name]
        prog = kern.build()
        args = make_args(kern, params)
        ref_args, cmp_args = copy_args(args), copy_args(args)
        t0 = time.perf_counter()
        reference(prog, **ref_args)
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        k = pt_compile(prog, target="cpu")
        t_compile = time.perf_counter() - t0
        k(**cmp_args)
        agree = all(np.allclose(cmp_args[a.name], ref_args[a.name], rtol=1e-4, atol=1e-5) for a in prog.arrays)
        ok &= agree
        t_run = _median_time(k, args, 5)
        rows.append((name, _size(params), f"{t_ref:.3f}", f"{t_compile:.2f}", f"{t_run * 1e3:.3f}",
                     "yes" if agree else "NO"))
        shown = shown or k
    print("polytri demo: the original order, through pt.reference and through the generated C\n")
    _table(("kernel", "size", "reference s", "compile s", "compiled ms", "agrees"), rows)
    print("\n(compiled: median of 5 runs; compile time is short when the build is in the cache)\n")
    if bench:
        rows = []
        for name, params in BENCH_SIZES.items():
            kern = KERNELS[name]
            k = pt_compile(kern.build(), target="cpu")
            args = make_args(kern, params)
            t = _median_time(k, args, 3)
            rows.append((name, _size(params), k.schedule_info.origin, f"{t * 1e3:.1f}",
                         f"{kern.flops(params) / t / 1e9:.2f}"))
        print("the same kernels compiled at DESIGN.md's sizes (default schedule, not tiled yet):\n")
        _table(("kernel", "size", "schedule", "median ms", "GFLOP/s"), rows)
    if show_source and shown is not None:
        print(f"\ngenerated C for {shown.program.name} (helpers omitted):\n")
        src = shown.source
        print(src[src.index(f"void pt_{shown.program.name}("):])
    if not ok:
        print("MISMATCH: a compiled kernel disagrees with the reference")
    return 0 if ok else 1
