"""polytri.jax: each translated JAX primitive against JAX's own result, the issue's programs (the blur,
conv+bias+relu, softmax+matmul, a gradient-descent step with static arguments), fallback through JAX,
the cache, and the error without the extra."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import polytri as pt  # noqa: E402
import polytri.jax as ptj  # noqa: E402
from polytri.errors import MissingExtraError  # noqa: E402

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True, scope="module")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYTRI_CACHE_DIR", str(tmp_path_factory.mktemp("jax_cache")))
    yield
    mp.undo()


_RNG = np.random.default_rng(0)


def _f(*shape: int, positive: bool = False) -> Any:
    x = _RNG.standard_normal(shape).astype(np.float32)
    return jnp.asarray(np.abs(x) + 0.1 if positive else x)


def _i(*shape: int) -> Any:
    return jnp.asarray(_RNG.integers(-9, 10, size=shape).astype(np.int32))


def _b(*shape: int) -> Any:
    return jnp.asarray(_RNG.random(shape) > 0.5)


def _nchw_conv(x: Any, w: Any, **kw: Any) -> Any:
    return lax.conv_general_dilated(x, w, kw.pop("strides", (1, 1)), kw.pop("padding", "VALID"), **kw)


#: (case, JAX primitive it covers, function, arguments, whether everything must run in polytri kernels;
#: False where the ATen op the primitive becomes runs in eager PyTorch: fmod, argmax, sign...).
CASES: list[tuple[str, str, Callable[..., Any], tuple[Any, ...], bool]] = [
    ("add", "add", lambda x, y: x + y, (_f(4, 5), _f(5)), True),
    ("add_scalar", "add", lambda x: 1.5 + x, (_f(4, 5),), True),
    ("sub", "sub", lambda x, y: x - y, (_f(4, 5), _f(4, 1)), True),
    ("rsub", "sub", lambda x: 2.0 - x, (_f(4, 5),), True),
    ("mul", "mul", lambda x, y: x * y, (_f(3, 4), _f(3, 4)), True),
    ("mul_int", "mul", lambda x: x * 3, (_i(3, 4),), True),
    ("div", "div", lambda x, y: x / y, (_f(3, 4), _f(3, 4, positive=True)), True),
    ("div_int", "div", lambda x, y: lax.div(x, y), (_i(3, 4), jnp.full((3, 4), 4, jnp.int32)), False),
    ("rem", "rem", lambda x, y: lax.rem(x, y), (_f(3, 4), _f(3, 4, positive=True)), False),
    ("max", "max", lambda x, y: jnp.maximum(x, y), (_f(3, 4), _f(3, 4)), True),
    ("min", "min", lambda x, y: jnp.minimum(x, y), (_f(3, 4), _f(3, 4)), True),
    ("relu", "max", jax.nn.relu, (_f(3, 4),), True),
    ("min_scalar", "min", lambda x: jnp.minimum(x, 0.5), (_f(3, 4),), True),
    ("pow", "pow", lambda x, y: lax.pow(x, y), (_f(3, 4, positive=True), _f(3, 4)), False),
    ("integer_pow", "integer_pow", lambda x: x ** 3, (_f(3, 4),), True),
    ("integer_pow_neg", "integer_pow", lambda x: lax.integer_pow(x, -2), (_f(3, 4, positive=True),), True),
    ("square", "square", lambda x: lax.square(x), (_f(3, 4),), True),
    ("neg", "neg", lambda x: -x, (_f(3, 4),), True),
    ("abs", "abs", jnp.abs, (_f(3, 4),), True),
    ("exp", "exp", jnp.exp, (_f(3, 4),), True),
    ("log", "log", jnp.log, (_f(3, 4, positive=True),), True),
    ("tanh", "tanh", jnp.tanh, (_f(3, 4),), True),
    ("logistic", "logistic", jax.nn.sigmoid, (_f(3, 4),), True),
    ("erf", "erf", jax.scipy.special.erf, (_f(3, 4),), True),
    ("gelu_tanh", "tanh", lambda x: jax.nn.gelu(x, approximate=True), (_f(3, 4),), True),
    ("erfc", "erfc", lambda x: jax.nn.gelu(x, approximate=False), (_f(3, 4),), False),
    ("sqrt", "sqrt", jnp.sqrt, (_f(3, 4, positive=True),), True),
    ("rsqrt", "rsqrt", lax.rsqrt, (_f(3, 4, positive=True),), True),
    ("sign", "sign", jnp.sign, (_f(3, 4),), False),
    ("compare", "lt", lambda x, y: (x < y, x <= y, x > y, x >= y, x == y, x != y), (_f(3, 4), _f(3, 4)), True),
    ("compare_scalar", "gt", lambda x: (x > 0.0, 0.5 < x), (_f(3, 4),), True),
    ("logical", "and", lambda a, b: (a & b, a | b, a ^ b, ~a), (_b(3, 4), _b(3, 4)), True),
    ("select_n", "select_n", lambda c, x, y: jnp.where(c, x, y), (_b(3, 4), _f(3, 4), _f(3, 4)), True),
    ("select_n_int", "select_n", lambda k, x, y, z: lax.select_n(k, x, y, z),
     (jnp.asarray(_RNG.integers(0, 3, (3, 4)).astype(np.int32)), _f(3, 4), _f(3, 4), _f(3, 4)), True),
    ("clamp", "clamp", lambda x: lax.clamp(-0.5, x, 0.5), (_f(3, 4),), True),
    ("convert", "convert_element_type", lambda x: (x.astype(jnp.int32), x.astype(jnp.bfloat16).astype(jnp.float32)),
     (_f(3, 4) * 4,), True),
    ("matmul", "dot_general", lambda a, b: a @ b, (_f(5, 6), _f(6, 7)), True),
    ("matvec", "dot_general", lambda a, b: a @ b, (_f(5, 6), _f(6)), True),
    ("batched", "dot_general", lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (_f(2, 3, 4), _f(2, 4, 5)), True),
    ("contract2", "dot_general", lambda a, b: jnp.einsum("bchw,bchw->bc", a, b), (_f(2, 3, 4, 5), _f(2, 3, 4, 5)), True),
    ("conv", "conv_general_dilated", _nchw_conv, (_f(2, 3, 8, 8), _f(4, 3, 3, 3)), True),
    ("conv_same_strided", "conv_general_dilated", lambda x, w: _nchw_conv(x, w, strides=(2, 2), padding="SAME"),
     (_f(1, 3, 8, 8), _f(4, 3, 2, 2)), True),
    ("conv_same_stride2", "conv_general_dilated", lambda x, w: _nchw_conv(x, w, strides=(2, 2), padding="SAME"),
     (_f(2, 3, 8, 8), _f(4, 3, 3, 3)), True),
    ("conv_nhwc", "conv_general_dilated",
     lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
     (_f(2, 6, 6, 3), _f(3, 3, 3, 4)), True),
    ("conv_groups", "conv_general_dilated", lambda x, w: _nchw_conv(x, w, feature_group_count=2, rhs_dilation=(2, 1)),
     (_f(1, 4, 7, 7), _f(4, 2, 2, 2)), True),
    ("reduce_sum", "reduce_sum", lambda x: (x.sum(), x.sum(axis=1), x.mean(axis=0)), (_f(3, 4, 5),), True),
    ("reduce_sum_int", "reduce_sum", lambda x: x.sum(axis=0), (_i(3, 4),), True),
    ("reduce_max", "reduce_max", lambda x: (x.max(axis=1), x.max()), (_f(3, 4, 5),), True),
    ("reduce_min", "reduce_min", lambda x: x.min(axis=(0, 2)), (_f(3, 4, 5),), True),
    ("reduce_bool", "reduce_or", lambda x: (jnp.any(x > 0, axis=1), jnp.all(x > -1, axis=0)), (_f(3, 4),), True),
    ("argmax", "argmax", lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)), (_f(3, 4),), False),
    ("cumsum", "cumsum", lambda x: jnp.cumsum(x, axis=1), (_f(3, 4),), True),
    ("max_pool", "reduce_window_max",
     lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"), (_f(2, 7, 7, 3),), True),
    ("sum_pool", "reduce_window_sum",
     lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4, (_f(2, 3, 6, 6),), True),
    ("broadcast_in_dim", "broadcast_in_dim", lambda x: jnp.broadcast_to(x[:, None], (3, 4, 5)), (_f(3, 5),), True),
    ("reshape", "reshape", lambda x: x.reshape(6, 10) * 2, (_f(3, 4, 5),), True),
    ("transpose", "transpose", lambda x: jnp.transpose(x, (2, 0, 1)) + 1, (_f(3, 4, 5),), True),
    ("squeeze", "squeeze", lambda x: jnp.squeeze(x, 1) * 2, (_f(3, 1, 5),), True),
    ("expand_dims", "broadcast_in_dim", lambda x: jnp.expand_dims(x, 0) * 2, (_f(3, 5),), True),
    ("slice", "slice", lambda x: (x[1:3, ::2] * 2, x[:, 1:4]), (_f(4, 6),), True),
    ("concatenate", "concatenate", lambda x, y: jnp.concatenate([x, y], axis=1), (_f(3, 4), _f(3, 2)), True),
    ("pad", "pad", lambda x: lax.pad(x, 1.5, ((1, 2, 0), (-1, 1, 0))), (_f(3, 4),), True),
    ("iota", "iota", lambda x: x + jnp.arange(4, dtype=jnp.float32), (_f(3, 4),), True),
    ("split", "split", lambda x: tuple(v * 2 for v in jnp.split(x, 2, axis=1)), (_f(3, 4),), True),
    ("softmax", "reduce_max", lambda x: jax.nn.softmax(x, axis=-1), (_f(4, 6),), True),
]


def _close(got: Any, want: Any) -> None:
    g_leaves, w_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(g_leaves) == len(w_leaves)
    for g, w in zip(g_leaves, w_leaves):
        assert isinstance(g, jax.Array)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if jnp.issubdtype(w.dtype, jnp.floating):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2e-5, atol=2e-5)
        else:
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_primitive_matches_jax(case: tuple[str, str, Callable[..., Any], tuple[Any, ...], bool]) -> None:
    _, primitive, fn, args, in_kernels = case
    assert primitive in str(jax.make_jaxpr(fn)(*args))
    report = ptj.explain(fn, *args, compile_options={"target": "cpu"})
    _close(report.result, jax.jit(fn)(*args))
    assert primitive not in report.fallback_ops
    assert not report.errors
    if in_kernels:
        assert report.kernels and not report.fallback_ops, str(report)


def blur(img: Any) -> Any:
    kernel = jnp.array([0.0625, 0.25, 0.375, 0.25, 0.0625], dtype=jnp.float32)
    x = img.reshape(3, 1, img.shape[1], img.shape[2])
    bx = lax.conv_general_dilated(x, kernel.reshape(1, 1, 1, 5), (1, 1), "VALID")
    return lax.conv_general_dilated(bx, kernel.reshape(1, 1, 5, 1), (1, 1), "VALID")


def test_blur_is_one_kernel_equal_to_xla() -> None:
    img = jnp.asarray(_RNG.random((3, 48, 40)).astype(np.float32))
    report = ptj.explain(blur, img)
    assert len(report.kernels) == 1 and not report.fallback_ops, str(report)
    _close(report.result, jax.jit(blur)(img))
    _close(ptj.jit(blur)(img), jax.jit(blur)(img))


@pytest.mark.interp
def test_blur_on_nvgpu_in_the_interpreter() -> None:
    img = jnp.asarray(_RNG.random((3, 12, 10)).astype(np.float32))
    report = ptj.explain(blur, img, compile_options={"target": "nvgpu"})
    assert [k.target for k in report.kernels] == ["nvgpu"] and not report.fallback_ops
    _close(report.result, jax.jit(blur)(img))


def conv_bias_relu(params: dict[str, Any], x: Any) -> Any:
    y = lax.conv_general_dilated(x, params["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y + params["b"])


def test_conv_bias_relu_with_parameters_as_arguments() -> None:
    params = {"w": _f(3, 3, 4, 8), "b": _f(8)}
    x = _f(2, 10, 10, 4)
    layer = ptj.jit(conv_bias_relu)
    _close(layer(params, x), jax.jit(conv_bias_relu)(params, x))
    assert layer.fallbacks == []
    report = ptj.explain(layer, params, x)
    assert report.kernels and not report.fallback_ops, str(report)


def test_softmax_matmul() -> None:
    def attend(q: Any, k: Any, v: Any) -> Any:
        return jax.nn.softmax(q @ k.T / 4.0, axis=-1) @ v
    q, k, v = _f(6, 16), _f(8, 16), _f(8, 5)
    report = ptj.explain(attend, q, k, v)
    assert report.kernels and not report.fallback_ops, str(report)
    _close(report.result, jax.jit(attend)(q, k, v))


def descend(w: Any, data: tuple[Any, Any], lr: float, steps: int) -> Any:
    """``steps`` steps of gradient descent on the least-squares loss ``|X w - y|^2 / n``."""
    x, y = data

    def loss(w: Any) -> Any:
        return jnp.mean((x @ w - y) ** 2)
    for _ in range(steps):
        w = w - lr * jax.grad(loss)(w)
    return w


def test_gradient_descent_with_static_arguments() -> None:
    x, y, w = _f(32, 4), _f(32), jnp.zeros(4, jnp.float32)
    step = ptj.jit(descend, static_argnums=(2, 3))
    got = step(w, (x, y), 0.1, 3)
    _close(got, jax.jit(descend, static_argnums=(2, 3))(w, (x, y), 0.1, 3))
    assert step.compiles == 1 and step.fallbacks == []
    again = step(got, (x * 2, y), 0.1, 3)  # new values, equal statics: no recompilation
    _close(again, jax.jit(descend, static_argnums=(2, 3))(got, (x * 2, y), 0.1, 3))
    assert step.compiles == 1
    step(w, (x, y), 0.05, 3)  # another static value: a new compilation
    assert step.compiles == 2


def test_gradient_of_a_strided_convolution() -> None:
    def loss(w: Any, img: Any) -> Any:
        return jnp.sum(jax.nn.relu(_nchw_conv(img, w, strides=(2, 2), padding="SAME")) ** 2)
    w, img = _f(4, 3, 3, 3) * 0.1, _f(2, 3, 8, 8)
    grad = jax.grad(loss, argnums=(0, 1))
    g = ptj.jit(grad)
    _close(g(w, img), jax.jit(grad)(w, img))
    assert "conv_general_dilated" in g.fallbacks  # the input's gradient: a transposed convolution


def test_fallback_primitive_runs_through_jax_and_is_listed() -> None:
    def f(x: Any) -> Any:
        return lax.cumlogsumexp(jnp.exp(x), axis=1) * 2, jnp.sort(x, axis=0)
    x = _f(4, 5)
    report = ptj.explain(f, x)
    assert "cumlogsumexp" in report.fallback_ops and "sort" in report.fallback_ops
    assert "getitem" not in report.fallback_ops
    assert report.kernels
    _close(report.result, jax.jit(f)(x))
    g = ptj.jit(f)
    _close(g(x), jax.jit(f)(x))
    assert set(g.fallbacks) == {"cumlogsumexp", "sort"}


def test_pytrees_keywords_and_python_scalars() -> None:
    def f(tree: dict[str, Any], scale: float, *, shift: Any) -> dict[str, Any]:
        return {"a": tree["x"] * scale + shift, "b": [tree["y"].sum(), tree["x"]]}
    tree, shift = {"x": _f(3, 4), "y": _f(5)}, _f(4)
    g = ptj.jit(f)
    _close(g(tree, 2.5, shift=shift), f(tree, 2.5, shift=shift))
    _close(g(tree, 0.5, shift=shift), f(tree, 0.5, shift=shift))
    assert g.compiles == 1  # a Python number is a dynamic, weakly typed scalar


def test_decorator_form_and_option_errors() -> None:
    @ptj.jit(compile_options={"target": "cpu", "fuse": "max"})
    def f(x: Any) -> Any:
        return jnp.tanh(x) * 2
    x = _f(8)
    _close(f(x), jnp.tanh(x) * 2)
    with pytest.raises(pt.OptionError, match="unknown polytri option"):
        ptj.jit(lambda x: x, compile_options={"tile_sizes": 32})
    with pytest.raises(pt.OptionError):
        ptj.jit(compile_options={"target": "tpu"})
    with pytest.raises(pt.errors.UnsupportedError, match="static argument 1 .* not hashable"):
        ptj.jit(lambda x, n: x, static_argnums=1)(x, [1, 2])


def test_untranslatable_function_runs_in_jax_with_a_warning() -> None:
    def f(x: Any) -> Any:
        return x.astype(jnp.float8_e5m2).astype(jnp.float32) * 2
    x = _f(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = ptj.jit(f)(x)
    assert any("runs in JAX" in str(w.message) for w in caught)
    _close(got, jax.jit(f)(x))


def test_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install polytri\[jax\]"):
        ptj.jit(lambda x: x)
    with pytest.raises(pt.errors.UnsupportedError):
        ptj.explain(lambda x: x, 1.0)


def test_importing_polytri_does_not_import_jax() -> None:
    code = "import sys, polytri, polytri.jax; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    code = ("import sys, polytri; f = polytri.jax.jit; assert 'jax' not in sys.modules, 'jax imported'; "
            "assert polytri.jax.__name__ == 'polytri.jax'")  # reachable without importing it first
    subprocess.run([sys.executable, "-c", code], check=True)
