"""``@pt.kernel``'s view of the function's source: reading it, and turning an ast node into a file location
with a caret for error messages."""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ParseError, PolytriError, caret


@dataclass(frozen=True)
class Source:
    """The function's source, and how to turn an ast node into a file location with a caret."""

    filename: str
    lines: tuple[str, ...]
    """The function's lines as in the file (decorators included)."""
    first: int
    """Line number in the file of ``lines[0]``."""
    offset: int
    """Lines prepended before parsing (1 when an indented function was wrapped in ``if 1:``)."""
    text: str
    """The text that was parsed."""
    function: str

    def where(self, node: ast.AST) -> str:
        """``File "...", line N, in @pt.kernel f:`` followed by the source line and a caret."""
        lineno = getattr(node, "lineno", None)
        if lineno is None or not (1 <= lineno - self.offset <= len(self.lines)):
            return f'File "{self.filename}", in @pt.kernel {self.function}:'
        rel = lineno - self.offset
        line = self.lines[rel - 1].rstrip("\r\n")
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        col = _char_col(line, node.col_offset)  # type: ignore[attr-defined]
        end_lineno, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if end_lineno == lineno and end_col is not None:
            width = _char_col(line, end_col) - col
        else:
            width = len(line.rstrip()) - col
        shown = caret(stripped.rstrip(), col - indent, width=max(1, width))
        return f'File "{self.filename}", line {self.first + rel - 1}, in @pt.kernel {self.function}:\n{shown}'

    def line(self, lineno: int) -> int:
        """The line number in the file of line ``lineno`` of the parsed text."""
        return self.first + lineno - self.offset - 1

    def error(self, node: ast.AST, message: str, cls: type[PolytriError] = ParseError) -> PolytriError:
        return cls(f"{self.where(node)}\n{message}")

    def segment(self, node: ast.AST) -> str:
        """The source text of a one-line node as written; multi-line nodes are unparsed."""
        if getattr(node, "lineno", None) is not None and node.lineno == getattr(node, "end_lineno", None):  # type: ignore[attr-defined]
            seg = ast.get_source_segment(self.text, node)
            if seg is not None:
                return seg
        return ast.unparse(node)


def _char_col(line: str, byte_col: int) -> int:
    """ast column offsets count UTF-8 bytes; carets count characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


def read_source(fn: Callable[..., Any], name: str) -> tuple[Source, ast.FunctionDef]:
    code_file: str = getattr(getattr(fn, "__code__", None), "co_filename", "<unknown>")
    filename = inspect.getsourcefile(fn) or code_file
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise ParseError(f"@pt.kernel {name}: cannot read the source of {fn!r} ({exc}); kernels must be defined "
                         f"in a file (or a notebook cell), not built with exec() or at the interactive prompt") from None
    offset = 0
    text = "".join(lines)
    if lines and lines[0][:1].isspace():  # a function defined inside a block: parse it inside `if 1:`
        text, offset = "if 1:\n" + text, 1
    src = Source(filename, tuple(lines), max(first, 1), offset, text, name)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ParseError(f'File "{filename}", line {first + (exc.lineno or 1) - 1 - offset}, in @pt.kernel {name}:\n'
                         f"cannot parse the function: {exc.msg}") from None
    body = tree.body[0].body if offset else tree.body  # type: ignore[attr-defined]
    fdef = body[0] if body else None
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise src.error(fdef, "async functions cannot be kernels")
    if not isinstance(fdef, ast.FunctionDef):
        raise ParseError(f'File "{filename}", line {first}, in @pt.kernel {name}:\n'
                         f"@pt.kernel expects a function defined with `def` (lambdas are not supported)")
    return src, fdef


@contextlib.contextmanager
def located(src: Source, node: ast.AST) -> Iterator[None]:
    """Re-raise an error of the builder with the location of ``node`` prepended, keeping its class."""
    try:
        yield
    except PolytriError as exc:
        if getattr(exc, "_pt_located", False):
            raise
        new = type(exc)(f"{src.where(node)}\n{exc}")
        new._pt_located = True  # type: ignore[attr-defined]
        raise new from (exc if os.environ.get("POLYTRI_DEBUG", "") not in ("", "0") else None)

