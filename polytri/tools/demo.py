"""``polytri demo``: showcase kernels through the reference and the compiled C, side by side."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..compiler import compile as pt_compile
from ..reference import reference
from ..suite import copy_args

#: (suite kernel, parameter values): sizes the pure-Python reference runs in a few seconds.
SHOWCASE = (("gemm", {"NI": 64, "NJ": 64, "NK": 64}),
            ("jacobi_2d", {"T": 10, "N": 64}),
            ("blur", {"C": 3, "H": 64, "W": 64}))

#: The reference sizes of docs/performance.md, for the compiled kernels alone.
BENCH_SIZES = {"gemm": {"NI": 1024, "NJ": 1024, "NK": 1024},
               "jacobi_2d": {"T": 100, "N": 2000},
               "blur": {"C": 3, "H": 2048, "W": 2048}}


#: The showcase kernel whose C the demo prints, and what to see in it.
SHOWN = "blur"
SHOWN_NOTE = ("its two passes fused into one loop nest; the threads share its channels and blocks of rows, the "
              "vertical pass's first rows of each block waiting for a barrier; where an image's output outgrows "
              "the last-level cache, its rows are written with non-temporal stores")


def kernel_c(source: str, function: str) -> str:
    """The functions of a cpu kernel's C file that hold its loop nests, without the entry point that
    dispatches to them and without the helpers: ``function``'s parallel regions (``static void
    function_par0(...)``, ...), else ``function`` itself (a kernel without parallel loops)."""
    def body(start: int) -> str:
        return source[start:source.index("\n}\n", start) + 2]
    regions = [m.start() for m in re.finditer(rf"^static void {re.escape(function)}_par\d+\(", source, re.M)]
    if regions:
        return "\n\n".join(body(start) for start in regions)
    return body(source.index(f"void {function}("))


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


class _Table:
    """A table printed row by row, each row as soon as its run is done (a run takes up to seconds)."""

    def __init__(self, head: tuple[str, ...], widths: tuple[int, ...]):
        self.widths = tuple(max(w, len(h)) for h, w in zip(head, widths))
        self._line(head)
        print("  ".join("-" * w for w in self.widths), flush=True)

    def row(self, *cells: str) -> None:
        self._line(cells)

    def _line(self, cells: tuple[str, ...]) -> None:
        print("  ".join(x.ljust(w) for x, w in zip(cells, self.widths)).rstrip(), flush=True)


def run_demo(show_source: bool = True, bench: bool = True) -> int:
    """Run the showcase; return 0 when every compiled kernel agrees with the reference."""
    from ..suite import KERNELS, make_args

    ok = True
    shown = None
    print("polytri demo: the original order, through pt.reference and through the generated C\n")
    table = _Table(("kernel", "size", "reference s", "compile s", "compiled ms", "agrees"), (10, 24, 0, 0, 0, 0))
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
        table.row(name, _size(params), f"{t_ref:.3f}", f"{t_compile:.2f}", f"{t_run * 1e3:.3f}",
                  "yes" if agree else "NO")
        shown = k if name == SHOWN or shown is None else shown
    print("\n(compiled: median of 5 runs; compile time is short when the build is in the cache)\n")
    if bench:
        print("the same kernels compiled at the reference sizes (default schedule, not tiled yet):\n")
        table = _Table(("kernel", "size", "schedule", "median ms", "GFLOP/s"), (10, 24, 8, 0, 0))
        for name, params in BENCH_SIZES.items():
            kern = KERNELS[name]
            k = pt_compile(kern.build(), target="cpu")
            args = make_args(kern, params)
            t = _median_time(k, args, 3)
            table.row(name, _size(params), k.schedule_info.label, f"{t * 1e3:.1f}",
                      f"{kern.flops(params) / t / 1e9:.2f}")
    if show_source and shown is not None:
        note = SHOWN_NOTE if shown.program.name == SHOWN else "its loop nests"
        print(f"\ngenerated C for {shown.program.name}: {note}\n")
        text = kernel_c(shown.source, f"pt_{shown.program.name}")
        print(text)
        entry = (f"the entry point, pt_{shown.program.name}, runs this on every thread when the work is large enough, "
                 f"and the same loops on one thread otherwise; " if text.startswith("static ") else "")
        print(f"\n({entry}k.source holds the whole file)")
    ok &= run_torch_blur(size=2048 if bench else 256)
    if not ok:
        print("MISMATCH: a compiled kernel disagrees with the reference")
    return 0 if ok else 1


def blur_torch(img: Any) -> Any:
    """The separable 5-tap blur as PolyBlocks' documentation writes it: a 3xHxW image seen as three
    one-channel images, a 1x5 then a 5x1 ``conv2d`` with the binomial kernel, 'valid' borders."""
    import torch
    import torch.nn.functional as F

    kernel = torch.tensor([0.0625, 0.25, 0.375, 0.25, 0.0625], dtype=torch.float32)
    img = img.reshape(3, 1, img.shape[1], img.shape[2])
    blurx = F.conv2d(img, kernel.reshape(1, 1, 1, 5))
    blury = F.conv2d(blurx, kernel.reshape(1, 1, 5, 1))
    return blury


def run_torch_blur(size: int = 2048, repeat: int = 5) -> bool:
    """Time the PyTorch blur in eager, through Inductor and through polytri (``pt.jit``); True when the
    compiled results equal eager's.  Skipped (True) without torch."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        print("\n(torch is not installed: the PyTorch blur is skipped)")
        return True
    from ..frontend.jit import jit

    img = torch.rand(3, size, size)
    expected = blur_torch(img)
    ok, medians = True, {}
    print(f"\nPyTorch: the separable blur (two conv2d, PolyBlocks' example) on a 3x{size}x{size} image\n")
    table = _Table(("backend", "first call s", "median ms", "equals eager"), (8, 0, 0, 0))
    for name, make in (("eager", lambda: blur_torch), ("inductor", lambda: torch.compile(blur_torch)),
                       ("polytri", lambda: jit(blur_torch, compile_options={"target": "cpu"}))):
        torch._dynamo.reset()
        t0 = time.perf_counter()
        fn = make()
        out = fn(img)
        t_compile = time.perf_counter() - t0
        agree = bool(torch.allclose(out, expected, rtol=1e-5, atol=1e-6))
        ok &= agree
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(img)
            times.append(time.perf_counter() - t0)
        medians[name] = statistics.median(times) * 1e3
        table.row(name, f"{t_compile:.2f}" if name != "eager" else "-", f"{medians[name]:.1f}",
                  "yes" if agree else "NO")
    base = medians
    print(f"\npolytri is {base['inductor'] / base['polytri']:.1f}x faster than Inductor and "
          f"{base['eager'] / base['polytri']:.1f}x faster than eager here (both convolutions in one statement).")
    return ok
