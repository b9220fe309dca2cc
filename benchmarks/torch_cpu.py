"""PyTorch programs on this CPU: eager vs Inductor vs polytri, side by side in one run.

    .venv/bin/python benchmarks/torch_cpu.py            # every case
    .venv/bin/python benchmarks/torch_cpu.py --only blur softmax --repeat 5

Each case is compiled once by each backend (compile time reported), checked against eager, then timed:
``--repeat`` rounds, each running eager, Inductor and polytri in turn (:data:`CALLS` calls each, after a
warm-up), and the median of every backend's calls.  Interleaving the backends spreads the load of a shared
machine over all three instead of charging one block of runs with it.  The table gives the speed-up of
polytri over Inductor per case and the geometric mean over the cases other than the blur (the issue's
criterion).  Absolute times drift on a shared machine; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import polytri as pt
from polytri.tools.bench_models import CALLS, median_ms
from polytri.tools.demo import blur_torch


def _mlp() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    w1, b1 = torch.randn(1024, 512) / 32, torch.randn(1024)
    w2, b2 = torch.randn(512, 1024) / 32, torch.randn(512)

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    return mlp, (torch.randn(256, 512),)


def _attention() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1) * 0.125, dim=-1) @ v
    return attention, tuple(torch.randn(4, 4, 256, 64) for _ in range(3))


def _conv() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    w, b = torch.randn(32, 16, 3, 3) / 12, torch.randn(32)

    def conv_bias_relu(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(F.conv2d(x, w, b, padding=1))
    return conv_bias_relu, (torch.randn(1, 16, 128, 128),)


def _pointwise() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x * 1.5 + y) * torch.tanh(x - y) + torch.relu(y)
    return chain, (torch.randn(2048, 2048), torch.randn(2048, 2048))


def _rows() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    def row_reductions(x: torch.Tensor) -> torch.Tensor:
        return x.sum(-1) + x.amax(-1)
    return row_reductions, (torch.randn(2048, 2048),)


def _softmax() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return (lambda x: torch.softmax(x, dim=-1)), (torch.randn(2048, 1024),)


def _layer_norm() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    w, b = torch.randn(1024), torch.randn(1024)
    return (lambda x: F.layer_norm(x, (1024,), w, b)), (torch.randn(2048, 1024),)


def _blur() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return blur_torch, (torch.randn(3, 2048, 2048),)


CASES: dict[str, Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
    "blur 3x2048x2048": _blur, "softmax 2048x1024": _softmax, "layer norm 2048x1024": _layer_norm,
    "MLP 256x512-1024-512": _mlp, "attention 4x4x256x64": _attention, "conv3x3+bias+relu 16->32 128x128": _conv,
    "pointwise chain 2048x2048": _pointwise, "row sum+amax 2048x2048": _rows,
}




def run(only: list[str] | None, repeat: int, threads: int | None = None) -> int:
    torch.manual_seed(0)
    options: dict[str, Any] = {}
    if threads:
        torch.set_num_threads(threads)  # eager and Inductor's kernels
        options["threads"] = threads
    rows, ratios = [], []
    for name, make in CASES.items():
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        fn, args = make()
        torch._dynamo.reset()
        with torch.no_grad():
            eager_out = fn(*args)
            t0 = time.perf_counter()
            ind = torch.compile(fn, backend="inductor")
            ind(*args)
            c_ind = time.perf_counter() - t0
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                poly = pt.jit(fn, compile_options=options)
                out = poly(*args)
            c_poly = time.perf_counter() - t0
            ok = torch.allclose(out, eager_out, rtol=1e-3, atol=1e-4)
            t_eager, t_ind, t_poly = median_ms([fn, ind, poly], args, repeat)
        ratio = t_ind / t_poly
        if not name.startswith("blur"):
            ratios.append(ratio)
        note = "" if not caught else f" ({len(caught)} warning(s))"
        rows.append((name, f"{t_eager:.1f}", f"{t_ind:.1f}", f"{t_poly:.1f}", f"{ratio:.2f}x",
                     f"{c_ind:.1f}", f"{c_poly:.1f}", ("yes" if ok else "NO") + note))
        print(f"  done: {name}", file=sys.stderr)
    head = ("case", "eager ms", "inductor ms", "polytri ms", "polytri vs inductor", "inductor compile s",
            "polytri compile s", "equal")
    widths = [max(len(r[c]) for r in [head, *rows]) for c in range(len(head))]
    for i, r in enumerate([head, *rows]):
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\ngeometric mean of polytri's speed-up over Inductor (cases other than the blur): {geo:.2f}x")
    return 0 if all(r[-1].startswith("yes") for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run the cases whose name contains one of these words")
    parser.add_argument("--repeat", type=int, default=7,
                        help=f"timed rounds per case (each runs every backend {CALLS} times)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for every backend (default: each backend's own, all cores)")
    args = parser.parse_args(argv)
    return run(args.only, args.repeat, args.threads)


if __name__ == "__main__":
    sys.exit(main())
