"""The PolyBlocks blur (two 5-tap convolutions) in JAX at 3x2048x2048: XLA (``jax.jit``) against
``polytri.jax.jit``, in one process, interleaved; median of 5 calls, two rounds.  Needs the jax extra.

    .venv/bin/python benchmarks/jax_blur.py          # polytri on one thread (XLA uses its own threads)
    .venv/bin/python benchmarks/jax_blur.py 2        # polytri on two threads

Measure on a quiet machine and quote the load average.
"""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from frameworks import jax_case, median_ms  # this folder's side-by-side benchmark: the same blur and timer

import polytri.jax as ptj


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    img = jax.random.uniform(jax.random.key(0), (3, 2048, 2048), dtype=jnp.float32)
    blur = jax_case("blur")
    xla = jax.jit(blur)
    poly = ptj.jit(blur, compile_options={"target": "cpu", "threads": threads})
    np.testing.assert_allclose(np.asarray(xla(img)), np.asarray(poly(img)), rtol=1e-5, atol=1e-5)
    print(f"load average {os.getloadavg()[0]:.2f}; polytri on {threads} thread(s), XLA on its own threads")
    for _ in range(2):
        x_ms, p_ms = median_ms(xla, [img], 5), median_ms(poly, [img], 5)
        print(f"XLA {x_ms:.1f} ms, polytri {p_ms:.1f} ms: polytri {x_ms / p_ms:.1f}x faster")


if __name__ == "__main__":
    main()
