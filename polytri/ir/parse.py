"""Text -> expression trees.

The expression language is a small subset of Python's expression syntax, so Python's own parser does
the tokenizing; this module checks the subset and resolves names.  Errors show the text with a caret.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .. import dtypes
from ..errors import NameResolutionError, ParseError, caret
from .expr import FUNCTIONS, OPERATOR_FUNCTIONS, Access, Binary, Call, Cast, Const, Expr, Unary, Var

NameKind = Literal["array", "scalar", "param", "iter"]

_BINOPS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**",
}
_CMPOPS: dict[type, str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
}
AUG_OPS = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}


@dataclass(frozen=True)
class Scope:
    """What each name means where a statement is written."""

    names: Mapping[str, NameKind]
    """Arrays, scalars, parameters and iterators visible to the statement."""


@dataclass(frozen=True)
class ParsedAssign:
    """A parsed ``A[...] op= expr`` before it becomes a statement."""

    target: Access
    """The written element."""
    op: str
    """``=``, ``+=``, ``-=``, ``*=`` or ``/=``."""
    value: Expr
    """The right-hand side as written (the update is not yet folded in)."""


class _Converter:
    def __init__(self, text: str, scope: Scope, what: str):
        self.text = text
        self.scope = scope
        self.what = what

    def fail(self, node: ast.AST, message: str, cls: type[Exception] = ParseError) -> Exception:
        col = getattr(node, "col_offset", None)
        end = getattr(node, "end_col_offset", None)
        width = (end - col) if (col is not None and end is not None and end > col) else 1
        return cls(f"{self.what}: {message}\n{caret(self.text, col, width=width)}")

    def expr(self, node: ast.expr) -> Expr:
        """The expression tree of ``node``, by the kind of Python syntax it is."""
        convert = _CONVERTERS.get(type(node))
        if convert is None:
            raise self.fail(node, f"unsupported syntax ({type(node).__name__})")
        return convert(self, node)

    def constant(self, node: ast.Constant) -> Expr:
        if isinstance(node.value, (bool, int, float)):
            return Const(node.value)
        raise self.fail(node, f"unsupported literal {node.value!r}")

    def unary(self, node: ast.UnaryOp) -> Expr:
        """``-x`` (folded into the constant when ``x`` is a number) or ``+x`` (just ``x``)."""
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.USub):
            if isinstance(operand, Const) and not isinstance(operand.value, bool):
                return Const(-operand.value)
            return Unary("-", operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        raise self.fail(node, "unsupported unary operator (only - and + are allowed)")

    def binary(self, node: ast.BinOp) -> Expr:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(node, f"unsupported operator {type(node.op).__name__}")
        return Binary(op, self.expr(node.left), self.expr(node.right))

    def compare(self, node: ast.Compare) -> Expr:
        if len(node.ops) != 1:
            raise self.fail(node, "chained comparisons are not supported; use where() or split them")
        op = _CMPOPS.get(type(node.ops[0]))
        if op is None:
            raise self.fail(node, f"unsupported comparison {type(node.ops[0]).__name__}")
        return Binary(op, self.expr(node.left), self.expr(node.comparators[0]))

    def name(self, node: ast.Name) -> Expr:
        kind = self.scope.names.get(node.id)
        if kind is None:
            if node.id in FUNCTIONS or node.id in dtypes.ALL:
                raise self.fail(node, f"function {node.id!r} used without a call", NameResolutionError)
            raise self.fail(node, f"unknown name {node.id!r}", NameResolutionError)
        if kind == "array":
            raise self.fail(node, f"array {node.id!r} used without a subscript", NameResolutionError)
        return Var(node.id, kind)

    def access(self, node: ast.Subscript) -> Access:
        if not isinstance(node.value, ast.Name):
            raise self.fail(node, "only named arrays can be subscripted")
        name = node.value.id
        kind = self.scope.names.get(name)
        if kind is None:
            raise self.fail(node.value, f"unknown array {name!r}", NameResolutionError)
        if kind != "array":
            raise self.fail(node.value, f"{name!r} is a {kind}, not an array", NameResolutionError)
        sl = node.slice
        items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        for it in items:
            if isinstance(it, ast.Slice):
                raise self.fail(it, "slices are not supported; subscripts are affine expressions")
        return Access(name, tuple(self.expr(it) for it in items))

    def call(self, node: ast.Call) -> Expr:
        if not isinstance(node.func, ast.Name):
            raise self.fail(node, "only the built-in functions can be called")
        if node.keywords:
            raise self.fail(node, "keyword arguments are not supported")
        fname = node.func.id
        args = tuple(self.expr(a) for a in node.args)
        if fname in dtypes.ALL or fname in dtypes.ALIASES:
            if len(args) != 1:
                raise self.fail(node, f"cast {fname}() takes one argument, got {len(args)}")
            return Cast(dtypes.dtype(fname).name, args[0])
        if fname in OPERATOR_FUNCTIONS:
            if len(args) != 2:
                raise self.fail(node, f"{fname}() takes 2 arguments, got {len(args)}")
            return Binary(OPERATOR_FUNCTIONS[fname], args[0], args[1])
        if fname not in FUNCTIONS:
            raise self.fail(node.func, f"unknown function {fname!r}; known: {', '.join(FUNCTIONS)}",
                            NameResolutionError)
        if len(args) != FUNCTIONS[fname]:
            raise self.fail(node, f"{fname}() takes {FUNCTIONS[fname]} argument(s), got {len(args)}")
        return Call(fname, args)


_CONVERTERS: dict[type, Callable[[_Converter, Any], Expr]] = {
    ast.Constant: _Converter.constant, ast.Name: _Converter.name, ast.Subscript: _Converter.access,
    ast.UnaryOp: _Converter.unary, ast.BinOp: _Converter.binary, ast.Compare: _Converter.compare,
    ast.Call: _Converter.call,
}


def _parse_python(text: str, mode: str, what: str) -> ast.AST:
    try:
        return ast.parse(text.strip(), mode=mode)
    except SyntaxError as exc:
        col = (exc.offset - 1) if exc.offset else None
        raise ParseError(f"{what}: syntax error: {exc.msg}\n{caret(text.strip(), col)}") from None


def parse_expr(text: str, scope: Scope, *, what: str = "expression") -> Expr:
    """Parse one expression of the language, resolving names in ``scope``."""
    tree = _parse_python(text, "eval", what)
    assert isinstance(tree, ast.Expression)
    return _Converter(text.strip(), scope, what).expr(tree.body)


def parse_assign(text: str, scope: Scope, *, what: str = "statement") -> ParsedAssign:
    """Parse ``A[...] = expr`` (or ``+=``, ``-=``, ``*=``, ``/=``)."""
    stripped = text.strip()
    tree = _parse_python(stripped, "exec", what)
    assert isinstance(tree, ast.Module)
    conv = _Converter(stripped, scope, what)
    if len(tree.body) != 1:
        raise ParseError(f"{what}: expected exactly one assignment, found {len(tree.body)} statements\n"
                         f"{caret(stripped, None)}")
    node = tree.body[0]
    if isinstance(node, ast.Assign):
        if len(node.targets) != 1:
            raise conv.fail(node, "chained assignment is not supported")
        target_node, op, value_node = node.targets[0], "=", node.value
    elif isinstance(node, ast.AugAssign):
        sym = _BINOPS.get(type(node.op))
        if sym is None or sym + "=" not in AUG_OPS:
            raise conv.fail(node, "only =, +=, -=, *= and /= are supported")
        target_node, op, value_node = node.target, sym + "=", node.value
    else:
        raise conv.fail(node, "expected an assignment to an array element, like A[i, j] = ...")
    if not isinstance(target_node, ast.Subscript):
        raise conv.fail(target_node, "the target of an assignment must be an array element, like A[i]")
    target = conv.access(target_node)
    return ParsedAssign(target, op, conv.expr(value_node))
