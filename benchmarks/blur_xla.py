"""The PolyBlocks blur (two 5-tap convolutions) at 3x2048x2048, in JAX and in TensorFlow: the framework's
XLA JIT (``jax.jit``, ``tf.function(jit_compile=True)``) against polytri's decorator, in one process,
interleaved; median of 5 calls, two rounds.  Needs the jax and tensorflow extras (a missing one is
skipped with a note).

    .venv/bin/python benchmarks/blur_xla.py              # polytri on one thread (XLA uses its own threads)
    .venv/bin/python benchmarks/blur_xla.py 2            # polytri on two threads
    .venv/bin/python benchmarks/blur_xla.py 1 jax        # one framework only

Measure on a quiet machine and quote the load average.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

# this folder's side-by-side benchmark: the same blur and timer
from frameworks import jax_case, median_ms, tf_case

SHAPE = (3, 2048, 2048)


def jax_pair(threads: int) -> tuple[Callable[..., Any], Callable[..., Any], Any]:
    import jax

    import polytri.jax as ptj
    img = jax.random.uniform(jax.random.key(0), SHAPE, dtype=jax.numpy.float32)
    blur = jax_case("blur")
    return jax.jit(blur), ptj.jit(blur, compile_options={"target": "cpu", "threads": threads}), img


def tf_pair(threads: int) -> tuple[Callable[..., Any], Callable[..., Any], Any]:
    from polytri.codegen_triton.loader import import_triton
    import_triton()  # before TensorFlow: torch's compiler imports Triton, which after TensorFlow aborts
    import tensorflow as tf

    import polytri.tf as ptt
    img = tf.constant(np.random.default_rng(0).random(SHAPE, dtype=np.float32))
    blur = tf_case("blur")
    return (tf.function(blur, jit_compile=True), ptt.jit(blur, compile_options={"target": "cpu", "threads": threads}),
            img)


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    frameworks = sys.argv[2:] or ["jax", "tensorflow"]
    print(f"load average {os.getloadavg()[0]:.2f}; polytri on {threads} thread(s), XLA on its own threads")
    for name in frameworks:
        if importlib.util.find_spec(name) is None:
            print(f"{name}: not installed, skipped")
            continue
        xla, poly, img = (jax_pair if name == "jax" else tf_pair)(threads)
        np.testing.assert_allclose(np.asarray(xla(img)), np.asarray(poly(img)), rtol=1e-5, atol=1e-5)
        for _ in range(2):
            x_ms, p_ms = median_ms(xla, [img], 5), median_ms(poly, [img], 5)
            print(f"{name}: XLA {x_ms:.1f} ms, polytri {p_ms:.1f} ms: polytri {x_ms / p_ms:.1f}x faster")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
