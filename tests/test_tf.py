"""polytri.tf: the translated TensorFlow operations against TensorFlow's own eager results (grouped, a few
operations per compiled function), the issue's programs (the blur equal to XLA's, conv+bias+relu,
softmax+matmul, a least-squares gradient descent), an operation run through TensorFlow, the cache, the
input signature, Triton after TensorFlow in one process, and the error without the extra."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from polytri.codegen_triton.loader import import_triton

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed (pip install polytri[tensorflow])", allow_module_level=True)
# Triton before TensorFlow: this module is collected by every worker, whose other tests import
# torch._dynamo, which imports Triton (after TensorFlow, a plain import would abort the process)
import_triton()
tf = pytest.importorskip("tensorflow")

import polytri.tf as ptt  # noqa: E402
from polytri.errors import ArgumentError, MissingExtraError, OptionError  # noqa: E402

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True, scope="module")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYTRI_CACHE_DIR", str(tmp_path_factory.mktemp("tf_cache")))
    yield
    mp.undo()


_RNG = np.random.default_rng(0)


def _f(*shape: int, positive: bool = False) -> Any:
    x = _RNG.standard_normal(shape).astype(np.float32)
    return tf.constant(np.abs(x) + 0.1 if positive else x)


def _i(*shape: int) -> Any:
    return tf.constant(_RNG.integers(-9, 10, size=shape).astype(np.int32))


def _close(got: Any, want: Any, tol: float = 1e-5) -> None:
    got, want = tf.nest.flatten(got), tf.nest.flatten(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tf.is_tensor(g), type(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol)


def _ops(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The operation types of ``fn``'s graph for ``args``."""
    return [op.type for op in tf.function(fn).get_concrete_function(*args).graph.get_operations()]


#: (case, TensorFlow operations it must contain, function, arguments). Each case is translated whole (no
#: operation runs through TensorFlow), runs in polytri kernels but for the ATen ops of :data:`EAGER`, and
#: equals TensorFlow's eager result.
CASES: list[tuple[str, tuple[str, ...], Callable[..., Any], tuple[Any, ...]]] = [
    ("unary", ("Relu", "Relu6", "Sigmoid", "Tanh", "Exp", "Neg", "Erf", "Square", "Abs"),
     lambda x: (tf.nn.relu(x), tf.nn.relu6(x * 4), tf.sigmoid(x), tf.tanh(x), tf.exp(x), -x, tf.math.erf(x),
                tf.square(x), tf.abs(x)), (_f(4, 6),)),
    ("unary_positive", ("Log", "Sqrt", "Rsqrt", "Pow"),
     lambda x: (tf.math.log(x), tf.sqrt(x), tf.math.rsqrt(x), tf.pow(x, 3.0), tf.pow(x, x)), (_f(5, 3, positive=True),)),
    ("binary", ("AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "SquaredDifference"),
     lambda x, y: (x + y, x - 2.0, 3.0 * y, x / (tf.abs(y) + 1), tf.maximum(x, y), tf.minimum(x, 0.5),
                   tf.math.squared_difference(x, y)), (_f(4, 5), _f(5))),
    ("compare_select", ("Greater", "Less", "SelectV2", "Cast"),
     lambda x, y: (tf.where(x > y, x, y), tf.cast(x < 0.0, tf.float32), tf.cast(x * 4, tf.int32)), (_f(3, 4), _f(3, 4))),
    ("reductions", ("Sum", "Mean", "Max", "Min"),
     lambda x: (tf.reduce_sum(x, axis=1), tf.reduce_mean(x, axis=[0, 2], keepdims=True), tf.reduce_max(x),
                tf.reduce_min(x, axis=-1)), (_f(3, 4, 5),)),
    ("int_sum", ("Sum",), lambda x: tf.reduce_sum(x, axis=0), (_i(6, 3),)),
    ("softmax", ("Softmax",), lambda x: tf.nn.softmax(x), (_f(4, 7),)),
    ("matmul", ("MatMul",),
     lambda a, b: (tf.matmul(a, b), tf.matmul(a, a, transpose_b=True), tf.matmul(b, b, transpose_a=True)),
     (_f(4, 6), _f(6, 3))),
    ("batch_matmul", ("BatchMatMulV2",),
     lambda a, b: (tf.matmul(a, b), tf.matmul(a, a, adjoint_b=True)), (_f(2, 3, 4), _f(4, 5))),
    ("shapes", ("Reshape", "Transpose", "ExpandDims", "Squeeze", "ConcatV2", "Pad", "StridedSlice"),
     lambda x: (tf.reshape(x, (6, -1)), tf.transpose(x, (2, 0, 1)), tf.expand_dims(x, -1),
                tf.squeeze(x[:, :1, :], axis=1), tf.concat([x, x * 2], axis=1),
                tf.pad(x, [[0, 0], [1, 2], [2, 1]]), x[1:, ::2, -2], x[..., 1:3]), (_f(3, 4, 5),)),
    ("conv", ("Conv2D", "BiasAdd"),
     lambda x, w, b: (tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b), tf.nn.conv2d(x, w, 2, "SAME"),
                      tf.nn.conv2d(x, w, (1, 2), "VALID")), (_f(2, 9, 8, 3), _f(3, 3, 3, 4), _f(4))),
    ("depthwise", ("DepthwiseConv2dNative",),
     lambda x, w: tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1), "SAME"), (_f(1, 6, 7, 3), _f(3, 3, 3, 2))),
]


#: ATen ops that the PyTorch frontend leaves to eager (a power with a tensor exponent).
EAGER = {"aten.pow.Tensor_Tensor"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_translated_ops_equal_tensorflow(case: tuple[str, tuple[str, ...], Callable[..., Any], tuple[Any, ...]]) -> None:
    _, ops, fn, args = case
    present = _ops(fn, *args)
    assert set(ops) <= set(present), (ops, present)
    report = ptt.explain(fn, *args)
    assert set(report.fallback_ops) <= EAGER and report.kernels, str(report)
    _close(report.result, fn(*args))


def test_select_v1_and_identity_and_numpy_inputs() -> None:
    cond = tf.constant([True, False, True])

    def pick(c: Any, x: Any, y: Any) -> Any:
        return tf.raw_ops.Select(condition=c, x=x, y=tf.identity(y))
    x, y = _f(3, 4), _f(3, 4)
    _close(ptt.jit(pick)(cond, x.numpy(), y), pick(cond, x, y))


def blur(img: Any) -> Any:
    kernel = tf.constant([0.0625, 0.25, 0.375, 0.25, 0.0625], dtype=tf.float32)
    x = tf.reshape(img, (3, img.shape[1], img.shape[2], 1))  # three one-channel NHWC images
    bx = tf.nn.conv2d(x, tf.reshape(kernel, (1, 5, 1, 1)), 1, "VALID")
    return tf.nn.conv2d(bx, tf.reshape(kernel, (5, 1, 1, 1)), 1, "VALID")


def test_blur_is_one_kernel_equal_to_xla() -> None:
    img = tf.constant(_RNG.random((3, 40, 36)).astype(np.float32))
    report = ptt.explain(blur, img)
    assert len(report.kernels) == 1 and not report.fallback_ops, str(report)
    xla = tf.function(blur, jit_compile=True)(img)
    _close(report.result, xla)
    _close(ptt.jit(blur)(img), xla)


@pytest.mark.interp
def test_blur_on_nvgpu_in_the_interpreter() -> None:
    img = tf.constant(_RNG.random((3, 12, 10)).astype(np.float32))
    report = ptt.explain(blur, img, compile_options={"target": "nvgpu"})
    assert [k.target for k in report.kernels] == ["nvgpu"] and not report.fallback_ops
    _close(report.result, blur(img))


def conv_bias_relu(params: dict[str, Any], x: Any) -> Any:
    return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, params["w"], 1, "SAME"), params["b"]))


def test_conv_bias_relu_with_parameters_as_arguments() -> None:
    params = {"w": _f(3, 3, 4, 8), "b": _f(8)}
    x = _f(2, 10, 10, 4)
    layer = ptt.jit(conv_bias_relu)
    _close(layer(params, x), tf.function(conv_bias_relu, jit_compile=True)(params, x), 1e-4)
    assert layer.fallbacks == [] and layer.compiles == 1


def test_softmax_matmul() -> None:
    def attend(q: Any, k: Any, v: Any) -> Any:
        return tf.matmul(tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / 4.0), v)
    q, k, v = _f(8, 16), _f(12, 16), _f(12, 4)
    report = ptt.explain(attend, q, k, v)
    assert not report.fallback_ops, str(report)
    _close(report.result, tf.function(attend, jit_compile=True)(q, k, v), 1e-4)


def descend(w: Any, x: Any, y: Any, lr: float, steps: int) -> Any:
    for _ in range(steps):
        with tf.GradientTape() as tape:
            tape.watch(w)
            loss = tf.reduce_mean(tf.square(tf.linalg.matvec(x, w) - y))
        w = w - lr * tape.gradient(loss, w)
    return w


def test_least_squares_gradient_descent() -> None:
    x = _f(32, 4)
    y = tf.linalg.matvec(x, tf.range(4, dtype=tf.float32))
    fit = ptt.jit(descend)
    w = tf.zeros(4)
    for _ in range(10):
        w = fit(w, x, y, 0.1, 5)  # Python values: compile-time constants, the same each call
    assert fit.compiles == 1 and fit.fallbacks == []
    want = tf.zeros(4)
    for _ in range(10):
        want = tf.function(descend, jit_compile=True)(want, x, y, 0.1, 5)
    _close(w, want, 1e-4)
    np.testing.assert_allclose(w.numpy(), np.arange(4.0), atol=0.05)
    fit(w, x, y, 0.2, 5)
    assert fit.compiles == 2


def test_an_untranslated_op_runs_through_tensorflow() -> None:
    def scan(x: Any) -> Any:
        return tf.math.cumprod(tf.exp(x), axis=1, reverse=True) * 2.0
    x = _f(3, 5)
    report = ptt.explain(scan, x)
    assert report.fallback_ops == ["Cumprod"] and report.kernels, str(report)
    _close(report.result, scan(x))


def test_input_signature() -> None:
    f = ptt.jit(lambda x: x * 2.0, input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    _close(f(np.ones((2, 3), np.float64)), tf.constant(np.full((2, 3), 2.0, np.float32)))
    with pytest.raises(ArgumentError):
        f(np.ones((2, 4), np.float32))


def test_options_are_checked_at_once() -> None:
    with pytest.raises(OptionError):
        ptt.jit(lambda x: x, compile_options={"no_such_option": 1})


def test_a_captured_variable_runs_in_tensorflow_with_a_warning() -> None:
    v = tf.Variable(2.0)
    f = ptt.jit(lambda x: x * v)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _close(f(tf.ones(3)), tf.fill([3], 2.0))
    assert any("runs in TensorFlow" in str(w.message) for w in caught)


_IMPORT_ORDER = textwrap.dedent("""
    import os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
    import numpy as np
    import polytri.tf as ptt

    def blur(img):
        k = tf.constant([0.25, 0.5, 0.25])
        x = tf.reshape(img, (1, 6, 6, 1))
        return tf.nn.conv2d(tf.nn.conv2d(x, tf.reshape(k, (1, 3, 1, 1)), 1, "VALID"),
                            tf.reshape(k, (3, 1, 1, 1)), 1, "VALID")
    img = tf.constant(np.arange(36, dtype=np.float32).reshape(6, 6))
    out = ptt.jit(blur, compile_options={"target": "nvgpu"})(img)
    np.testing.assert_allclose(out.numpy(), blur(img).numpy(), rtol=1e-6)
    np.testing.assert_allclose(tf.function(blur, jit_compile=True)(img).numpy(), out.numpy(), rtol=1e-6)
    print("ok", "triton" in sys.modules)
""")


@pytest.mark.interp
@pytest.mark.slow   # both runtimes started in one process: a quarter of a minute (make fuzz)
def test_tensorflow_then_triton_in_one_process() -> None:
    """TensorFlow imported first, then a program on nvgpu (Triton's interpreter): the process does not
    abort (LLVM's options registered twice) and the result is right."""
    res = subprocess.run([sys.executable, "-c", _IMPORT_ORDER], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "ok True" in res.stdout, res.stderr[-3000:]


def test_missing_tensorflow_names_the_extra() -> None:
    code = ("import sys; sys.modules['tensorflow'] = None\n"
            "import polytri, polytri.tf as ptt\n"
            "assert 'tensorflow' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "try:\n    ptt.jit(lambda x: x)\nexcept polytri.errors.MissingExtraError as e:\n    print(e)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "pip install polytri[tensorflow]" in res.stdout, res.stderr[-2000:]
    assert issubclass(MissingExtraError, Exception)


def test_import_polytri_does_not_import_tensorflow() -> None:
    code = "import sys, polytri; polytri.tf; print('tensorflow' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == "False", res.stderr[-2000:]
