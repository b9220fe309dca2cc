"""``polytri demo``: showcase kernels through the reference and the compiled C, side by side."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .compiler import compile as pt_compile
from .reference import reference

#: (suite kernel, parameter values): sizes the pure-Python reference runs in a few seconds.
SHOWCASE = (("gemm", {"NI": 64, "NJ": 64, "NK": 64}),
            ("jacobi_2d", {"T": 10, "N": 64}),
            ("blur", {"C": 3, "H": 64, "W": 64}))


def _copy(args: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _median_time(fn: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_demo(show_source: bool = True) -> int:
    """Run the showcase; return 0 when every compiled kernel agrees with the reference."""
    from .suite import KERNELS, make_args

    rows = []
    ok = True
    shown = None
    for name, params in SHOWCASE:
        kern = KERNELS[name]
        prog = kern.build()
        args = make_args(kern, params)
        ref_args, cmp_args = _copy(args), _copy(args)
        t0 = time.perf_counter()
        reference(prog, **ref_args)
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        k = pt_compile(prog, target="cpu")
        t_compile = time.perf_counter() - t0
        k(**cmp_args)
        agree = all(np.allclose(cmp_args[a.name], ref_args[a.name], rtol=1e-4, atol=1e-5) for a in prog.arrays)
        ok &= agree
        t_run = _median_time(lambda k=k, args=args: k(**_copy(args)), 5)
        size = ", ".join(f"{p}={v}" for p, v in params.items())
        rows.append((name, size, t_ref, t_compile, t_run, t_ref / t_run, "yes" if agree else "NO"))
        shown = shown or k
    head = ("kernel", "size", "reference s", "compile s", "polytri cpu s", "speed-up", "agrees")
    table = [head] + [(r[0], r[1], f"{r[2]:.3f}", f"{r[3]:.2f}", f"{r[4]:.5f}", f"{r[5]:.0f}x", r[6]) for r in rows]
    widths = [max(len(str(row[c])) for row in table) for c in range(len(head))]
    print("polytri demo: the original order, through pt.reference and through the generated C\n")
    for i, row in enumerate(table):
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("\n(times are medians of 5 runs for the compiled kernel, one run for the reference; the compile "
          "time includes a cached build when the kernel was built before)")
    if show_source and shown is not None:
        print(f"\ngenerated C for {shown.program.name} (helpers omitted):\n")
        src = shown.source
        print(src[src.index(f"void pt_{shown.program.name}("):])
    if not ok:
        print("MISMATCH: a compiled kernel disagrees with the reference")
    return 0 if ok else 1
