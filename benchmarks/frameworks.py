"""One function through each framework's own runtime, its compiler and polytri, side by side: the blur,
conv + bias + ReLU and softmax + matmul, written in PyTorch, in JAX and in TensorFlow.

- PyTorch: eager, Inductor (``torch.compile``), ``pt.jit``;
- JAX: op by op (``jax.disable_jit``), XLA (``jax.jit``), ``polytri.jax.jit``;
- TensorFlow: eager, XLA (``tf.function(jit_compile=True)``), ``polytri.tf.jit``.

    .venv/bin/python benchmarks/frameworks.py                  # every case, both frameworks, one thread
    .venv/bin/python benchmarks/frameworks.py --only blur --repeat 5

Each row checks that the three results agree, then times them in turn (median of ``--repeat`` calls).
JAX needs the jax extra and TensorFlow the tensorflow extra; without one, its rows are skipped with a note.  Measure on a quiet machine
and quote the load average.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import polytri as pt

BLUR = [0.0625, 0.25, 0.375, 0.25, 0.0625]


def _inputs(case: str) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    if case == "blur":
        return [rng.random((3, 1024, 1024), dtype=np.float32)]
    if case == "conv_bias_relu":
        return [rng.standard_normal(s, dtype=np.float32) for s in ((1, 32, 56, 56), (64, 32, 3, 3), (64,))]
    return [rng.standard_normal(s, dtype=np.float32) for s in ((256, 512), (512, 256))]


def torch_case(case: str) -> Callable[..., torch.Tensor]:
    """The case written with torch ops."""
    kernel = torch.tensor(BLUR)

    def blur(img: torch.Tensor) -> torch.Tensor:
        x = img.reshape(3, 1, img.shape[1], img.shape[2])
        return F.conv2d(F.conv2d(x, kernel.reshape(1, 1, 1, 5)), kernel.reshape(1, 1, 5, 1))

    def conv_bias_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(F.conv2d(x, w, b, padding=1))

    def softmax_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1) @ w
    return {"blur": blur, "conv_bias_relu": conv_bias_relu, "softmax_matmul": softmax_matmul}[case]


def jax_case(case: str) -> Callable[..., Any]:
    """The case written with JAX (``lax`` convolutions, as the PolyBlocks documentation writes the blur)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def blur(img: Any) -> Any:
        kernel = jnp.array(BLUR, dtype=jnp.float32)
        x = img.reshape(3, 1, img.shape[1], img.shape[2])
        blurx = lax.conv_general_dilated(x, kernel.reshape(1, 1, 1, 5), (1, 1), "VALID")
        return lax.conv_general_dilated(blurx, kernel.reshape(1, 1, 5, 1), (1, 1), "VALID")

    def conv_bias_relu(x: Any, w: Any, b: Any) -> Any:
        y = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))
        return jax.nn.relu(y + b.reshape(1, -1, 1, 1))

    def softmax_matmul(x: Any, w: Any) -> Any:
        return jax.nn.softmax(x, axis=-1) @ w
    return {"blur": blur, "conv_bias_relu": conv_bias_relu, "softmax_matmul": softmax_matmul}[case]


def tf_case(case: str) -> Callable[..., Any]:
    """The case written with TensorFlow ops (NHWC images, HWIO filters: TensorFlow's own layouts)."""
    import tensorflow as tf

    def blur(img: Any) -> Any:
        kernel = tf.constant(BLUR, dtype=tf.float32)
        x = tf.reshape(img, (3, img.shape[1], img.shape[2], 1))
        blurx = tf.nn.conv2d(x, tf.reshape(kernel, (1, 5, 1, 1)), 1, "VALID")
        return tf.nn.conv2d(blurx, tf.reshape(kernel, (5, 1, 1, 1)), 1, "VALID")

    def conv_bias_relu(x: Any, w: Any, b: Any) -> Any:
        return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b))

    def softmax_matmul(x: Any, w: Any) -> Any:
        return tf.matmul(tf.nn.softmax(x), w)
    return {"blur": blur, "conv_bias_relu": conv_bias_relu, "softmax_matmul": softmax_matmul}[case]


def _tf_inputs(case: str) -> list[np.ndarray]:
    arrays = _inputs(case)
    if case == "conv_bias_relu":  # NCHW -> NHWC, OIHW -> HWIO
        x, w, b = arrays
        return [np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(2, 3, 1, 0)), b]
    return arrays


def median_ms(fn: Callable[..., Any], args: list[Any], repeat: int) -> float:
    def call() -> None:
        out = fn(*args)
        if hasattr(out, "block_until_ready"):
            out.block_until_ready()
    call()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def torch_row(case: str, repeat: int) -> str:
    fn, args = torch_case(case), [torch.from_numpy(a) for a in _inputs(case)]
    inductor, poly = torch.compile(fn), pt.jit(fn, compile_options={"threads": 1})
    expected = fn(*args)
    for f in (inductor, poly):
        torch.testing.assert_close(f(*args), expected, rtol=1e-4, atol=1e-4)
    eager_ms, ind_ms, pt_ms = (median_ms(f, args, repeat) for f in (fn, inductor, poly))
    return f"| {case} | PyTorch | {eager_ms:.3f} | Inductor {ind_ms:.3f} | {pt_ms:.3f} | {ind_ms / pt_ms:.2f}x |"


def jax_row(case: str, repeat: int) -> str:
    import jax

    import polytri.jax as ptj
    fn = jax_case(case)
    args = [jax.numpy.asarray(a) for a in _inputs(case)]
    xla, poly = jax.jit(fn), ptj.jit(fn, compile_options={"threads": 1})
    expected = np.asarray(xla(*args))
    np.testing.assert_allclose(np.asarray(poly(*args)), expected, rtol=1e-4, atol=1e-4)

    def op_by_op(*a: Any) -> Any:
        with jax.disable_jit():
            return fn(*a)
    eager_ms, xla_ms, pt_ms = (median_ms(f, args, repeat) for f in (op_by_op, xla, poly))
    return f"| {case} | JAX | {eager_ms:.3f} | XLA {xla_ms:.3f} | {pt_ms:.3f} | {xla_ms / pt_ms:.2f}x |"


def tf_row(case: str, repeat: int) -> str:
    from polytri.codegen_triton.loader import import_triton
    import_triton()  # before TensorFlow: torch.compile imports it, which after TensorFlow aborts the process
    import tensorflow as tf

    import polytri.tf as ptt
    fn = tf_case(case)
    args = [tf.constant(a) for a in _tf_inputs(case)]
    xla, poly = tf.function(fn, jit_compile=True), ptt.jit(fn, compile_options={"threads": 1})
    expected = xla(*args).numpy()
    np.testing.assert_allclose(poly(*args).numpy(), expected, rtol=1e-4, atol=1e-4)
    eager_ms, xla_ms, pt_ms = (median_ms(f, args, repeat) for f in (fn, xla, poly))
    return f"| {case} | TensorFlow | {eager_ms:.3f} | XLA {xla_ms:.3f} | {pt_ms:.3f} | {xla_ms / pt_ms:.2f}x |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cases = ["blur", "conv_bias_relu", "softmax_matmul"]
    parser.add_argument("--only", nargs="*", default=cases, choices=cases)
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f}; polytri and torch on one thread, XLA on its own threads")
    print("| case | framework | runtime ms | its compiler ms | polytri ms | compiler / polytri |")
    print("|---|---|---|---|---|---|")
    for case in args.only:
        print(torch_row(case, args.repeat), flush=True)
        try:
            print(jax_row(case, args.repeat), flush=True)
        except ImportError as exc:
            print(f"| {case} | JAX | skipped: {exc} | | | |")
        try:
            print(tf_row(case, args.repeat), flush=True)
        except ImportError as exc:
            print(f"| {case} | TensorFlow | skipped: {exc} | | | |")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
