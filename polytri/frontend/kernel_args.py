"""``@pt.kernel``'s arguments: arrays, scalars and parameters declared from the function's annotations."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ProgramError
from ..ir.builder import ProgramBuilder
from ..ir.expr import FUNCTIONS
from ..ir.names import check_identifier
from .annotations import ArraySpec, ArrayType
from .kernel_source import Source, located


# -- arguments ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Signature:
    arrays: tuple[str, ...]
    scalars: tuple[str, ...]
    params: tuple[str, ...]
    """``int`` arguments, in order."""
    implicit: tuple[str, ...]
    """Parameters named only in array shapes (not arguments): keyword-only at call time."""


def _shape_names(entry: object) -> list[str]:
    if isinstance(entry, tuple):
        return [n for e in entry for n in _shape_names(e)]
    if not isinstance(entry, str):
        return []
    try:
        tree = ast.parse(entry.strip(), mode="eval")
    except SyntaxError:
        return []  # the builder reports it, with the location of the argument
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in FUNCTIONS]


def _annotation(fn: Callable[..., Any], name: str, raw: Any, src: Source, node: ast.AST) -> Any:
    if not isinstance(raw, str):
        return raw
    try:  # `from __future__ import annotations`: the annotation is still a string
        return eval(raw, dict(fn.__globals__), {})  # noqa: S307 - the user's own annotation text
    except Exception as exc:
        raise src.error(node, f"cannot evaluate the annotation {raw!r} of argument {name!r}: "
                              f"{type(exc).__name__}: {exc}") from None


#: One argument: its name, ``"array"``, ``"scalar"`` or ``"param"``, and its spec (an :class:`ArraySpec`
#: for an array, the dtype name for a scalar, ``None`` for a parameter).
_Argument = tuple[str, str, Any]

_ANNOTATION_HELP = ("pt.f64[\"N\", ...] (or f32, f16, bf16, i8, i32, i64, bool_) for an array, int for a parameter, "
                    "float or a bare element type (pt.f32) for a scalar")


def _classify(ann: Any) -> tuple[str, Any] | None:
    """``(kind, spec)`` of an evaluated annotation, ``None`` when it declares nothing polytri knows."""
    if isinstance(ann, ArraySpec):
        return "array", ann
    if isinstance(ann, ArrayType):
        return "scalar", ann.dtype
    if ann is int:
        return "param", None
    if ann is float:
        return "scalar", "float64"
    if ann is bool:
        return "scalar", "bool"
    return None


def _argument(fn: Callable[..., Any], src: Source, par: inspect.Parameter, node: ast.AST) -> _Argument:
    """What one parameter of the function declares, from its annotation."""
    pname = par.name
    if par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD):
        raise src.error(node, f"variadic argument {pname!r} is not supported")
    if par.annotation is inspect.Parameter.empty:
        raise src.error(node, f"argument {pname!r} needs an annotation: pt.f64[\"N\", ...] (or another element "
                              f"type) for an array, int for a parameter, float for a scalar")
    ann = _annotation(fn, pname, par.annotation, src, node)
    found = _classify(ann)
    if found is None:
        raise src.error(node, f"argument {pname!r}: unsupported annotation {ann!r}; use {_ANNOTATION_HELP}")
    return pname, found[0], found[1]


def _implicit_params(kinds: list[_Argument]) -> list[str]:
    """Names used in array shapes that are not arguments, in order of first use."""
    names = {k[0] for k in kinds}
    implicit: list[str] = []
    for _, kind, spec in kinds:
        if kind != "array":
            continue
        for entry in spec.shape:
            for n in _shape_names(entry):
                if n not in names and n not in implicit:
                    implicit.append(n)
    return implicit


def _check_name(src: Source, name: str, what: str, node: ast.AST) -> None:
    """A name the program would reject (``c1``, ``_fict_``, ``min``), at the argument that declares it."""
    try:
        check_identifier(name, what)
    except ProgramError as exc:
        raise src.error(node, f"{exc}; rename it: a kernel's arguments keep their names in the program, whose "
                              f"compiled kernels and pt.reference take them as keywords", ProgramError) from None


def declare_arguments(fn: Callable[..., Any], src: Source, fdef: ast.FunctionDef, name: str) -> tuple[ProgramBuilder, Signature]:
    """A builder with the function's arrays, scalars and parameters declared, and the call signature."""
    a = fdef.args
    nodes: dict[str, ast.arg] = {x.arg: x for x in a.posonlyargs + a.args + a.kwonlyargs}
    for star in (a.vararg, a.kwarg):
        if star is not None:
            raise src.error(star, f"variadic argument {star.arg!r} is not supported: declare every array, "
                                  f"scalar and parameter by name")
    kinds = [_argument(fn, src, par, nodes.get(par.name, fdef)) for par in inspect.signature(fn).parameters.values()]
    params = [k[0] for k in kinds if k[1] == "param"]
    implicit = _implicit_params(kinds)
    for pname, kind, spec in kinds:
        _check_name(src, pname, {"param": "parameter"}.get(kind, kind), nodes.get(pname, fdef))
        for n in _shape_names(spec.shape) if kind == "array" else []:
            if n in implicit:
                _check_name(src, n, "parameter", nodes.get(pname, fdef))
    with located(src, fdef):
        p = ProgramBuilder(name, params=params + implicit)
    for pname, kind, spec in kinds:
        with located(src, nodes.get(pname, fdef)):
            if kind == "array":
                p.array(pname, spec.shape, spec.dtype)
            elif kind == "scalar":
                p.scalar(pname, spec)
    sig_info = Signature(tuple(k[0] for k in kinds if k[1] == "array"), tuple(k[0] for k in kinds if k[1] == "scalar"),
                          tuple(params), tuple(implicit))
    return p, sig_info

