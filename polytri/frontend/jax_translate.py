"""A jaxpr -> an ATen FX graph that :func:`.torch_backend.compile_graph` plans, compiles and runs.

Inputs become placeholders, the jaxpr's constant arrays ``get_attr`` nodes, and each equation the ATen
calls of its rule (:mod:`.jax_rules`; the rule modules register themselves).  Calls of sub-jaxprs
(``jit``, ``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``...) are inlined.  An equation without a
rule, or whose rule declines or yields a value of another shape or dtype than JAX's, becomes one node
that runs the primitive through JAX (:mod:`.jax_fallback`); the planner leaves such nodes to eager.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from ..errors import UnsupportedError
from . import jax_ops_linalg, jax_ops_pointwise, jax_ops_reduce, jax_ops_shape  # noqa: F401 (rules)
from .jax_convert import to_torch
from .jax_fallback import PrimitiveCall
from .jax_graph import Const, GraphBuilder, Operand
from .jax_rules import RULES, Declined, Eqn, Out, check_results, torch_dtype

log = logging.getLogger("polytri.jax")

#: Primitives that call a sub-jaxpr with the equation's operands: translated inline.
INLINED = frozenset({"jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                     "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint"})
_SUBJAXPR_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


@dataclass(frozen=True)
class Translation:
    """A jaxpr's graph and the primitives it leaves to JAX."""

    module: fx.GraphModule
    fallbacks: tuple[str, ...]
    """Names of the primitives run through JAX, in graph order, each once."""


def translate(closed: Any) -> Translation:
    """The ATen graph of a ``ClosedJaxpr`` (its inputs in the jaxpr's order, a tuple of its outputs)."""
    b = GraphBuilder()
    jaxpr = closed.jaxpr
    env: dict[Any, Operand] = {}
    for k, v in enumerate(jaxpr.invars):
        env[v] = b.placeholder(f"arg{k}", _shape(v.aval), torch_dtype(v.aval.dtype))
    fallbacks: list[str] = []
    _bind_consts(b, env, jaxpr.constvars, closed.consts)
    _run(b, jaxpr, env, fallbacks)
    outs = [_output(b, _read(env, v), v.aval) for v in jaxpr.outvars]
    module = b.module(outs, keep=lambda n: isinstance(n.target, PrimitiveCall))
    return Translation(module, tuple(dict.fromkeys(fallbacks)))


def _shape(aval: Any) -> tuple[int, ...]:
    shape = getattr(aval, "shape", None)
    if shape is None or not all(isinstance(s, int) for s in shape):
        raise UnsupportedError(f"value of type {aval} is not an array of static shape")
    return tuple(shape)


def _bind_consts(b: GraphBuilder, env: dict[Any, Operand], constvars: Sequence[Any], consts: Sequence[Any]) -> None:
    for v, c in zip(constvars, consts):
        env[v] = b.constant(to_torch(c).clone())


def _read(env: dict[Any, Operand], v: Any) -> Operand:
    if type(v).__name__ == "Literal":
        return literal(v.val, v.aval.dtype)
    return env[v]


def literal(value: Any, dtype: Any) -> Const:
    """A scalar constant of the jaxpr as a :class:`Const`."""
    tdtype = torch_dtype(dtype)
    py = value.item() if hasattr(value, "item") else value
    if tdtype == torch.bool:
        py = bool(py)
    elif tdtype.is_floating_point:
        py = float(py)
    else:
        py = int(py)
    return Const(py, tdtype)


def _output(b: GraphBuilder, x: Operand, aval: Any) -> fx.Node:
    if isinstance(x, fx.Node):
        return x
    return b.call(torch.ops.aten.full.default, list(_shape(aval)), x.value, dtype=x.dtype)


def _run(b: GraphBuilder, jaxpr: Any, env: dict[Any, Operand], fallbacks: list[str]) -> None:
    for eqn in jaxpr.eqns:
        args = [_read(env, v) for v in eqn.invars]
        name = eqn.primitive.name
        if name in INLINED:
            outs = _inline(b, eqn, args, fallbacks)
        else:
            outs = _equation(b, eqn, args, fallbacks)
        for v, x in zip(eqn.outvars, outs):
            if type(v).__name__ != "DropVar":
                env[v] = x


def _inline(b: GraphBuilder, eqn: Any, args: list[Operand], fallbacks: list[str]) -> list[Operand]:
    sub = next((eqn.params[p] for p in _SUBJAXPR_PARAMS if p in eqn.params), None)
    if sub is None:
        return _equation(b, eqn, args, fallbacks)
    inner = getattr(sub, "jaxpr", sub)
    env: dict[Any, Operand] = dict(zip(inner.invars, args))
    _bind_consts(b, env, inner.constvars, getattr(sub, "consts", ()))
    _run(b, inner, env, fallbacks)
    return [_read(env, v) for v in inner.outvars]


def _equation(b: GraphBuilder, eqn: Any, args: list[Operand], fallbacks: list[str]) -> list[Operand]:
    name = eqn.primitive.name
    outs = [Out(_shape(v.aval), torch_dtype(v.aval.dtype)) for v in eqn.outvars]
    fn = RULES.get(name)
    if fn is not None:
        mark = b.mark()
        try:
            res = list(fn(b, Eqn(name, args, dict(eqn.params), outs)))
            check_results(name, res, outs)
            return res
        except (Declined, TypeError, ValueError, IndexError, RuntimeError) as exc:
            b.rollback(mark)
            log.debug("%s runs through JAX: %s: %s", name, type(exc).__name__, exc)
    fallbacks.append(name)
    return _through_jax(b, eqn, args, outs)


def _through_jax(b: GraphBuilder, eqn: Any, args: list[Operand], outs: list[Out]) -> list[Operand]:
    """One node calling the primitive through JAX (its tensor operands as arguments)."""
    literals = {k: (a.value, eqn.invars[k].aval.dtype) for k, a in enumerate(args) if isinstance(a, Const)}
    tensors = [a for a in args if isinstance(a, fx.Node)]
    call = PrimitiveCall(eqn.primitive, dict(eqn.params), literals, len(args))
    fakes = [b.fake(o.shape, o.dtype) for o in outs]
    multiple = bool(eqn.primitive.multiple_results)
    node = b.opaque(call, (call.token, *tensors), {}, tuple(fakes) if multiple else fakes[0])
    if not multiple:
        return [node]
    results: list[Operand] = []
    for k, f in enumerate(fakes):
        results.append(b.opaque(operator.getitem, (node, k), {}, f))
    return results
