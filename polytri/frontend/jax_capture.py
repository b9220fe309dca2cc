"""Capturing a JAX function: its jaxpr for one call signature (shapes, dtypes, static values).

The call's arguments are split into static ones (``static_argnums``: compile-time constants, part of the
signature by value) and dynamic ones, whose pytree leaves are the jaxpr's inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import MissingExtraError, UnsupportedError


def require_jax() -> ModuleType:
    """The ``jax`` module; :class:`MissingExtraError` naming the extra when it is not installed."""
    try:
        import jax
    except ImportError as exc:
        raise MissingExtraError("polytri.jax needs JAX, which is not installed: pip install polytri[jax] "
                                f"(importing jax failed: {exc})") from None
    return jax


@dataclass(frozen=True)
class CallSplit:
    """One call's arguments: the dynamic leaves, their tree, the static values and the signature."""

    leaves: list[Any]
    tree: Any
    statics: tuple[tuple[int, Any], ...]
    """(position, value) of each static argument."""
    key: Hashable
    """What a compiled graph is cached under: the tree, each leaf's shape, dtype and weak type, the
    static values."""


def static_positions(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    """``static_argnums`` as a sorted tuple of ints."""
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if not all(isinstance(n, int) for n in nums):
        raise UnsupportedError(f"static_argnums must be ints, got {static_argnums!r}")
    return tuple(sorted(set(nums)))


def split_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               static: tuple[int, ...]) -> CallSplit:
    """Split a call of ``fn`` into dynamic leaves and static values."""
    jax = require_jax()
    where = {n + len(args) if n < 0 else n for n in static}
    statics = tuple((k, a) for k, a in enumerate(args) if k in where)
    for k, value in statics:
        try:
            hash(value)
        except TypeError:
            raise UnsupportedError(f"static argument {k} of {_name(fn)} is not hashable: {type(value).__name__} "
                                   f"(static arguments are compile-time constants, compared by value)") from None
    dynamic = [a for k, a in enumerate(args) if k not in where]
    leaves, tree = jax.tree_util.tree_flatten((dynamic, kwargs))
    key = (tree, tuple(_leaf_key(x) for x in leaves), statics)
    return CallSplit(leaves, tree, statics, key)


def _leaf_key(x: Any) -> Hashable:
    shape = getattr(x, "shape", None)
    if shape is not None and hasattr(x, "dtype"):
        return (tuple(shape), str(x.dtype), bool(getattr(x, "weak_type", False)))
    return (type(x).__name__,)  # a Python number: a weakly typed scalar


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


def capture(fn: Callable[..., Any], split: CallSplit, nargs: int) -> tuple[Any, Any]:
    """The ``ClosedJaxpr`` of ``fn`` for this call (its inputs: the dynamic leaves) and its output tree."""
    jax = require_jax()
    statics = dict(split.statics)

    def flat(*leaves: Any) -> Any:
        dynamic, kwargs = jax.tree_util.tree_unflatten(split.tree, leaves)
        it = iter(dynamic)
        full = [statics[k] if k in statics else next(it) for k in range(nargs)]
        return fn(*full, **kwargs)
    closed, shapes = jax.make_jaxpr(flat, return_shape=True)(*split.leaves)
    return closed, jax.tree_util.tree_structure(shapes)
