"""The numpy/torch column of ``polytri bench``: for the kernels with an obvious library equivalent, a
function ``prepare(args, threads)`` that returns a call computing in place into ``args``' arrays what the
kernel computes (``polytri/tools/bench.py`` times it beside the compiled variants and checks it against the
naive C)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _torch(threads: int) -> Any:
    import torch
    torch.set_num_threads(threads)
    return torch


def _gemm_torch(args: dict[str, Any], threads: int) -> Callable[[], None]:
    torch = _torch(threads)
    c, a, b = (torch.from_numpy(args[n]) for n in ("C", "A", "B"))
    alpha, beta = float(args["alpha"]), float(args["beta"])

    def run() -> None:
        c.addmm_(a, b, beta=beta, alpha=alpha)
    return run


def _jacobi_1d_numpy(args: dict[str, Any], threads: int) -> Callable[[], None]:
    a, b, steps = args["A"], args["B"], int(args["T"])

    def run() -> None:
        for _ in range(steps):
            b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
            a[1:-1] = 0.33333 * (b[:-2] + b[1:-1] + b[2:])
    return run


def _ping_pong(sweep: Callable[[np.ndarray, np.ndarray], None], a: np.ndarray, b: np.ndarray,
               steps: int) -> Callable[[], None]:
    """``steps`` time steps of a two-array stencil: B from A, then A from B."""
    def run() -> None:
        for _ in range(steps):
            sweep(b, a)
            sweep(a, b)
    return run


def _jacobi_2d_numpy(args: dict[str, Any], threads: int) -> Callable[[], None]:
    a, b, steps = args["A"], args["B"], int(args["T"])

    def sweep(out: np.ndarray, src: np.ndarray) -> None:
        out[1:-1, 1:-1] = 0.2 * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1]
                                 + src[:-2, 1:-1])

    return _ping_pong(sweep, a, b, steps)


def _heat_3d_numpy(args: dict[str, Any], threads: int) -> Callable[[], None]:
    a, b, steps = args["A"], args["B"], int(args["T"])
    c = (slice(1, -1),) * 3

    def sweep(out: np.ndarray, s: np.ndarray) -> None:
        mid = s[c]
        out[c] = (0.125 * (s[2:, 1:-1, 1:-1] - 2.0 * mid + s[:-2, 1:-1, 1:-1])
                  + 0.125 * (s[1:-1, 2:, 1:-1] - 2.0 * mid + s[1:-1, :-2, 1:-1])
                  + 0.125 * (s[1:-1, 1:-1, 2:] - 2.0 * mid + s[1:-1, 1:-1, :-2]) + mid)

    return _ping_pong(sweep, a, b, steps)


def _blur_numpy(args: dict[str, Any], threads: int) -> Callable[[], None]:
    img, tmp, out = args["img"], args["tmp"], args["out"]
    w = img.shape[2]
    h = img.shape[1]
    k = (0.0625, 0.25, 0.375, 0.25, 0.0625)

    def run() -> None:
        tmp[...] = (k[0] * img[:, :, 0:w - 4] + k[1] * img[:, :, 1:w - 3] + k[2] * img[:, :, 2:w - 2]
                    + k[3] * img[:, :, 3:w - 1] + k[4] * img[:, :, 4:w])
        out[...] = (k[0] * tmp[:, 0:h - 4] + k[1] * tmp[:, 1:h - 3] + k[2] * tmp[:, 2:h - 2]
                    + k[3] * tmp[:, 3:h - 1] + k[4] * tmp[:, 4:h])
    return run


#: kernel -> (what it is, prepare).
LIBRARY_EQUIVALENTS: dict[str, tuple[str, Callable[[dict[str, Any], int], Callable[[], None]]]] = {
    "gemm": ("torch addmm_", _gemm_torch),
    "jacobi_1d": ("numpy slices", _jacobi_1d_numpy),
    "jacobi_2d": ("numpy slices", _jacobi_2d_numpy),
    "heat_3d": ("numpy slices", _heat_3d_numpy),
    "blur": ("numpy slices", _blur_numpy),
}
#: The kernels whose equivalent runs on torch's thread pool, whose workers keep spinning for about 10 ms
#: after the call (numpy's slices run on the calling thread).
SPINNING: frozenset[str] = frozenset({"gemm"})
#: Pause after the library's call, which ends each round, where it runs on torch's workers (s): they spin
#: for about 10 ms after it.  Not after numpy's: a pause lets both cores idle, and the calls after it pay
#: for waking them (here, an OpenMP region 30 ms after the last one took 1.9 ms, median of 15, against
#: 1 us back to back; jacobi-1d's default at LARGE ran at 1.09x and 0.89x the naive C's time in two runs
#: of rounds ended by a pause, 0.86x in both without: docs/performance.md).
LIBRARY_SETTLE_S = 0.03
