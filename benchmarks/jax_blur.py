"""The PolyBlocks blur (two 5-tap convolutions) in JAX at 3x2048x2048: XLA (``jax.jit``) against
``polytri.jax.jit``, in one process, interleaved; median of 5 calls, two rounds.  Needs the jax extra.

    .venv/bin/python benchmarks/jax_blur.py          # polytri on one thread (XLA uses its own threads)
    .venv/bin/python benchmarks/jax_blur.py 2        # polytri on two threads

Measure on a quiet machine and quote the load average.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import polytri.jax as ptj


def blur(img: Any) -> Any:
    kernel = jnp.array([0.0625, 0.25, 0.375, 0.25, 0.0625], dtype=jnp.float32)
    x = img.reshape(3, 1, img.shape[1], img.shape[2])
    blurx = lax.conv_general_dilated(x, kernel.reshape(1, 1, 1, 5), (1, 1), "VALID")
    return lax.conv_general_dilated(blurx, kernel.reshape(1, 1, 5, 1), (1, 1), "VALID")


def median_ms(fn: Callable[[Any], Any], img: Any, calls: int = 5) -> float:
    fn(img).block_until_ready()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn(img).block_until_ready()
        times.append(time.perf_counter() - t0)
    return sorted(times)[calls // 2] * 1e3


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    img = jax.random.uniform(jax.random.key(0), (3, 2048, 2048), dtype=jnp.float32)
    xla = jax.jit(blur)
    poly = ptj.jit(blur, compile_options={"target": "cpu", "threads": threads})
    np.testing.assert_allclose(np.asarray(xla(img)), np.asarray(poly(img)), rtol=1e-5, atol=1e-5)
    print(f"load average {os.getloadavg()[0]:.2f}; polytri on {threads} thread(s), XLA on its own threads")
    for _ in range(2):
        x_ms, p_ms = median_ms(xla, img), median_ms(poly, img)
        print(f"XLA {x_ms:.1f} ms, polytri {p_ms:.1f} ms: polytri {x_ms / p_ms:.1f}x faster")


if __name__ == "__main__":
    main()
