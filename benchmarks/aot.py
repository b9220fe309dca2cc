"""A loaded artifact against the same model compiled in process: eager, ``pt.jit`` and ``pt.load`` of a
``pt.export`` side by side, per call, on the zoo's models (test sizes by default).

    .venv/bin/python benchmarks/aot.py                  # mlp, resnet, mobilenet, vit; one thread
    .venv/bin/python benchmarks/aot.py --bench-sizes --only resnet --repeat 20

Each row exports into a fresh temporary directory; the load happens in this process (what it costs per call
does not depend on the process). Measure on a quiet machine and quote the load average.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

import polytri as pt
from polytri.suite.models import ZOO, build
from polytri.tools.bench_models import median_ms


def row(name: str, bench: bool, repeat: int) -> str:
    model, x = build(name, bench=bench)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = pt.export(model, (x,), Path(tmp) / name)
        export_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        loaded = pt.load(path)
        load_s = time.perf_counter() - t0
        jitted = pt.jit(model)
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), model(x), rtol=1e-3, atol=1e-3)
            eager, jit, aot = median_ms([model, jitted, loaded], (x,), repeat)
    return (f"| {name} | {tuple(x.shape)} | {eager:.3f} | {jit:.3f} | {aot:.3f} | {aot / jit:.2f}x | "
            f"{export_s:.1f} s | {load_s:.2f} s |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=["mlp", "resnet", "mobilenet", "vit"], choices=sorted(ZOO))
    parser.add_argument("--bench-sizes", action="store_true", help="the benchmark's input sizes (default: tests')")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    print(f"load average {os.getloadavg()[0]:.2f}; {args.threads} thread(s)")
    print("| model | input | eager ms | pt.jit ms | pt.load ms | load / jit | export | load |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.only:
        print(row(name, args.bench_sizes, args.repeat), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
