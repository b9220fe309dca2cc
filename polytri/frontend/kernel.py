"""``@pt.kernel``: a restricted Python function becomes a :class:`~polytri.ir.program.Program`.

The subset (see ``docs/kernel.md``): ``for v in range(lo, hi[, step])`` with affine bounds and a literal
step, ``if``/``elif``/``else`` with affine conditions (``and``, ``or``, ``not`` and chained comparisons included), and assignments or
augmented assignments to array elements; ``assert`` on the parameters at the top level becomes an
assumption (``Program.assume``).  Docstrings, ``pass`` and ``...`` are ignored.  The function is
never run: its source is read with :mod:`inspect`, parsed with :mod:`ast` and replayed on a
:class:`~polytri.ir.builder.ProgramBuilder`, so every check of the builder applies.  Every error points
at the offending line of the file, with a caret.

Arguments are declared by their annotations: ``pt.f64["N", "N"]`` (an array; shape entries are ints,
parameter names or affine strings), ``int`` (a parameter), ``float`` (a ``float64`` scalar), a bare
element type such as ``pt.f32`` (a scalar of that type) or ``bool``.  Names used in array shapes that are
not arguments become parameters too (after the ``int`` arguments), inferred from the shapes at call time.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .. import dtypes
from ..errors import ArgumentError, NameResolutionError, ParseError, PolytriError, ProgramError, caret, public
from ..ir.builder import ProgramBuilder
from ..ir.expr import FUNCTIONS
from ..ir.program import Program
from ..runtime.args import bind
from .annotations import ArraySpec, ArrayType

_SUBSET = ("a @pt.kernel body may only contain `for v in range(lo, hi)` loops, `if`/`else` with affine "
           "conditions, and assignments to array elements (A[i] = ..., A[i] += ...)")

#: Statements outside the subset, and what to say about them.
_UNSUPPORTED: dict[type, str] = {
    ast.While: "'while' loops are not supported; use `for v in range(lo, hi)` with affine bounds",
    ast.Return: "'return' is not supported: a kernel works in place on its array arguments",
    ast.Break: "'break' is not supported: loops run over their whole affine range",
    ast.Continue: "'continue' is not supported: guard the statements with an `if` instead",
    ast.FunctionDef: "nested functions are not supported",
    ast.AsyncFunctionDef: "nested functions are not supported",
    ast.ClassDef: "class definitions are not supported",
    ast.Lambda: "lambdas are not supported",
    ast.With: "'with' blocks are not supported",
    ast.AsyncWith: "'with' blocks are not supported",
    ast.AsyncFor: "'async for' is not supported",
    ast.Try: "'try' blocks are not supported",
    ast.Raise: "'raise' is not supported",
    ast.Import: "imports are not supported inside a kernel",
    ast.ImportFrom: "imports are not supported inside a kernel",
    ast.Global: "'global' is not supported: kernels only see their arguments",
    ast.Nonlocal: "'nonlocal' is not supported: kernels only see their arguments",
    ast.Delete: "'del' is not supported",
    ast.AnnAssign: "annotated assignments are not supported: kernels have no local variables",
}


# -- source locations --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Source:
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


def _read_source(fn: Callable[..., Any], name: str) -> tuple[_Source, ast.FunctionDef]:
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
    src = _Source(filename, tuple(lines), max(first, 1), offset, text, name)
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
def _located(src: _Source, node: ast.AST) -> Iterator[None]:
    """Re-raise an error of the builder with the location of ``node`` prepended, keeping its class."""
    try:
        yield
    except PolytriError as exc:
        if getattr(exc, "_pt_located", False):
            raise
        new = type(exc)(f"{src.where(node)}\n{exc}")
        new._pt_located = True  # type: ignore[attr-defined]
        raise new from (exc if os.environ.get("POLYTRI_DEBUG", "") not in ("", "0") else None)


# -- arguments ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Signature:
    arrays: tuple[str, ...]
    scalars: tuple[str, ...]
    params: tuple[str, ...]
    """``int`` arguments, in order."""
    implicit: tuple[str, ...]
    """Parameters named only in array shapes (not arguments): keyword-only at call time."""


def _shape_names(entry: object) -> list[str]:
    if not isinstance(entry, str):
        return []
    try:
        tree = ast.parse(entry.strip(), mode="eval")
    except SyntaxError:
        return []  # the builder reports it, with the location of the argument
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in FUNCTIONS]


def _annotation(fn: Callable[..., Any], name: str, raw: Any, src: _Source, node: ast.AST) -> Any:
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


def _argument(fn: Callable[..., Any], src: _Source, par: inspect.Parameter, node: ast.AST) -> _Argument:
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


def _declare_arguments(fn: Callable[..., Any], src: _Source, fdef: ast.FunctionDef, name: str) -> tuple[ProgramBuilder, _Signature]:
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
    with _located(src, fdef):
        p = ProgramBuilder(name, params=params + implicit)
    for pname, kind, spec in kinds:
        with _located(src, nodes.get(pname, fdef)):
            if kind == "array":
                p.array(pname, spec.shape, spec.dtype)
            elif kind == "scalar":
                p.scalar(pname, spec)
    sig_info = _Signature(tuple(k[0] for k in kinds if k[1] == "array"), tuple(k[0] for k in kinds if k[1] == "scalar"),
                          tuple(params), tuple(implicit))
    return p, sig_info


# -- the body ----------------------------------------------------------------------------------------
Path = list[tuple[ast.expr, bool]]
"""A conjunction of affine comparisons, each possibly negated: one nest of ``p.when`` blocks."""


def _paths(node: ast.expr, positive: bool) -> list[Path]:
    """Disjoint conjunctions whose union is ``node`` (or its negation): ``or`` and negated ``and`` split."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _paths(node.operand, not positive)
    if isinstance(node, ast.Compare) and len(node.ops) > 1:
        operands = [node.left, *node.comparators]
        pairs: list[ast.expr] = []
        for k, op in enumerate(node.ops):
            c = ast.Compare(left=operands[k], ops=[op], comparators=[operands[k + 1]])
            ast.copy_location(c, operands[k])
            c.end_lineno, c.end_col_offset = operands[k + 1].end_lineno, operands[k + 1].end_col_offset
            c._pt_synthetic = True  # type: ignore[attr-defined]
            pairs.append(c)
        node = ast.BoolOp(op=ast.And(), values=pairs)
    if isinstance(node, ast.BoolOp):
        conj = isinstance(node.op, ast.And) == positive  # `a and b` or `not (a or b)`: one conjunction
        result = _paths(node.values[0], positive)
        for value in node.values[1:]:
            nxt = _paths(value, positive)
            if conj:
                result = [p + q for p in result for q in nxt]
            else:  # a or b  ==  a  |  (not a and b), kept disjoint so each statement runs once
                first_neg = _paths(_fold(node, value), not positive)
                result = result + [p + q for p in first_neg for q in nxt]
        return result
    return [[(node, not positive)]]


def _fold(node: ast.BoolOp, upto: ast.expr) -> ast.expr:
    """The operands of ``node`` before ``upto``, as one expression."""
    before = node.values[:node.values.index(upto)]
    return before[0] if len(before) == 1 else ast.BoolOp(op=node.op, values=before)


class _Translator:
    def __init__(self, fn: Callable[..., Any], src: _Source, fdef: ast.FunctionDef, builder: ProgramBuilder,
                 sig: _Signature):
        self.fn = fn
        self.src = src
        self.p = builder
        self.known = set(sig.arrays) | set(sig.scalars) | set(sig.params) | set(sig.implicit)
        self.iters: list[str] = []
        """Loop variables in scope, as written."""
        self.rename: dict[str, str] = {}
        """Loop variables the builder would reject (``_``, ``_t``) -> the name they take in the program, and
        the variables of loops with a step -> their value, an expression of the program's counter."""
        self.guards = 0
        """Number of enclosing ``if`` blocks."""
        self.written = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(fdef)
                                                                                     if isinstance(a, ast.arg)}

    def text(self, node: ast.AST) -> str:
        """Source text of ``node`` for the builder, with renamed loop variables substituted."""
        synthetic = getattr(node, "_pt_synthetic", False)
        if not any(isinstance(n, ast.Name) and n.id in self.rename for n in ast.walk(node)):
            return ast.unparse(node) if synthetic else self.src.segment(node)
        rename = self.rename

        class Sub(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.expr:
                new = rename.get(n.id, n.id)
                if new.isidentifier():
                    return ast.copy_location(ast.Name(id=new, ctx=n.ctx), n)
                return ast.copy_location(ast.parse(new, mode="eval").body, n)  # a stepped loop's value

        return ast.unparse(Sub().visit(copy.deepcopy(node)))

    def fresh(self, var: str) -> str:
        """A program name for a loop variable starting with '_' (reserved for generated code)."""
        cand = (var.strip("_") or "it") + "_"
        while cand in self.written or cand in self.known or any(cand in v for v in self.rename.values()):
            cand += "_"
        return cand

    def fail(self, node: ast.AST, message: str, cls: type[PolytriError] = ParseError) -> PolytriError:
        return self.src.error(node, message, cls)

    def check_names(self, node: ast.AST) -> None:
        """Unknown names, with a caret on the very name (the builder would only show the statement)."""
        calls = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        names = sorted((n for n in ast.walk(node) if isinstance(n, ast.Name)), key=lambda n: (n.lineno, n.col_offset))
        for n in names:  # the first unknown name in reading order
            if n.id in self.known or n.id in self.iters or n.id in self.rename:
                continue
            if id(n) in calls and (n.id in FUNCTIONS or n.id in dtypes.ALL or n.id in dtypes.ALIASES):
                continue
            if n.id in FUNCTIONS or n.id in dtypes.ALL or n.id in dtypes.ALIASES:
                continue  # a function used without a call: the builder says so
            if n.id in self.fn.__globals__ or hasattr(builtins, n.id):
                hint = (f"; {n.id!r} is a Python global or builtin, but a kernel only sees its arguments, its "
                        f"loop iterators and polytri's functions ({', '.join(FUNCTIONS)}): pass it as an argument")
            else:
                hint = f"; known names: {', '.join(sorted(self.known | set(self.iters)))}"
            raise self.fail(n, f"unknown name {n.id!r}{hint}", NameResolutionError)

    def body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.statement(s)

    def statement(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Pass):
            return
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant) and (isinstance(s.value.value, str) or s.value.value is ...):
                return  # a docstring, a string used as a comment, or `...`
            if isinstance(s.value, ast.Call):
                raise self.fail(s, f"a call is not a statement in a kernel ({_SUBSET})")
            raise self.fail(s, f"an expression is not a statement in a kernel ({_SUBSET})")
        if isinstance(s, ast.For):
            return self.for_(s)
        if isinstance(s, ast.If):
            return self.if_(s)
        if isinstance(s, (ast.Assign, ast.AugAssign)):
            return self.assign(s)
        if isinstance(s, ast.Assert):
            return self.assumption(s)
        message = _UNSUPPORTED.get(type(s), f"{type(s).__name__} statements are not supported")
        raise self.fail(s, f"{message} ({_SUBSET})")

    def range_call(self, s: ast.For) -> ast.Call:
        """The loop's ``range(hi)`` / ``range(lo, hi)`` / ``range(lo, hi, step)``, checked."""
        if not isinstance(s.target, ast.Name):
            raise self.fail(s.target, "the loop variable must be a single name, like `for i in range(N)`")
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
            raise self.fail(it, "loops must iterate over range(hi) or range(lo, hi) with affine bounds")
        if it.keywords or not 1 <= len(it.args) <= 3 or any(isinstance(a, ast.Starred) for a in it.args):
            raise self.fail(it, "range() takes one to three positional arguments: range(hi), range(lo, hi)")
        if s.orelse:
            raise self.fail(s.orelse[0], "'for ... else' is not supported")
        return it

    def step(self, it: ast.Call) -> int:
        """The loop's step: 1, or the literal integer of ``range(lo, hi, step)`` (negative counts down)."""
        if len(it.args) < 3:
            return 1
        node = it.args[2]
        sign = 1
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            node, sign = node.operand, -1
        if not (isinstance(node, ast.Constant) and type(node.value) is int):
            raise self.fail(it.args[2], f"range()'s step ({self.src.segment(it.args[2])}) must be an integer "
                                        f"literal, like range(N - 1, -1, -1) or range(0, N, 2)")
        if node.value == 0:
            raise self.fail(it.args[2], "range()'s step must not be zero")
        return sign * node.value

    def bound(self, b: ast.expr | None) -> int | str:
        """A loop bound for the builder: 0 when omitted, an int literal as is, else its (checked) text."""
        if b is None:
            return 0
        self.check_names(b)
        return b.value if isinstance(b, ast.Constant) and type(b.value) is int else self.text(b)

    def for_(self, s: ast.For) -> None:
        it = self.range_call(s)
        assert isinstance(s.target, ast.Name)
        lo_node = it.args[0] if len(it.args) >= 2 else None
        hi_node = it.args[1] if len(it.args) >= 2 else it.args[0]
        bounds = [self.bound(lo_node), self.bound(hi_node)]
        var = s.target.id
        if var in self.iters:  # Python would overwrite the outer variable for the rest of its body
            raise self.fail(s.target, f"loop iterator {var!r} clashes with the iterator of an enclosing loop; "
                                      f"use another name", ProgramError)
        saved = dict(self.rename)
        step = self.step(it)
        if var.startswith("_") or step != 1:  # `_` is reserved in the IR; a step needs a counter of its own
            self.rename[var] = self.fresh(var)
        name = self.rename.get(var, var)
        if step != 1:
            # v = lo + step * t for t in [0, count): count = ceil((hi - lo) / step), computed as
            # ceil(span / |step|) with span = hi - lo counting up, lo - hi counting down; empty when <= 0
            lo, hi = (f"({b})" for b in bounds)
            span = f"{hi} - {lo}" if step > 0 else f"{lo} - {hi}"
            bounds = [0, f"({span} + {abs(step) - 1}) // {abs(step)}" if abs(step) > 1 else span]
            self.rename[var] = f"({lo} + {step} * {name})" if step != -1 else f"({lo} - {name})"
        with contextlib.ExitStack() as stack:
            with _located(self.src, s.target if var in self.known or var in self.iters else it):
                stack.enter_context(self.p.loop(name, bounds[0], bounds[1]))
            self.iters.append(var)
            try:
                self.body(s.body)
            finally:
                self.iters.pop()
                self.rename = saved

    def if_(self, s: ast.If) -> None:
        self.check_names(s.test)
        self.guarded(_paths(s.test, True), s.body)
        if s.orelse:
            self.guarded(_paths(s.test, False), s.orelse)

    def assumption(self, s: ast.Assert) -> None:
        """``assert N >= 1`` at the top level: an assumption on the parameters (``Program.assume``)."""
        if self.iters or self.guards:
            raise self.fail(s, "'assert' is only allowed at the top level of a kernel, on the parameters")
        self.check_names(s.test)
        paths = _paths(s.test, True)
        if len(paths) != 1 or any(negate for _, negate in paths[0]):
            raise self.fail(s.test, "an assertion must be affine comparisons of the parameters joined by 'and'")
        for atom, _ in paths[0]:
            with _located(self.src, atom):
                self.p.assume(self.text(atom))

    def guarded(self, paths: list[Path], stmts: list[ast.stmt]) -> None:
        self.guards += 1
        try:
            self._guarded(paths, stmts)
        finally:
            self.guards -= 1

    def _guarded(self, paths: list[Path], stmts: list[ast.stmt]) -> None:
        for path in paths:
            with contextlib.ExitStack() as stack:
                for atom, negate in path:
                    text = self.text(atom)
                    with _located(self.src, atom):
                        stack.enter_context(self.p.when(text, negate=negate))
                self.body(stmts)

    def assign(self, s: ast.Assign | ast.AugAssign) -> None:
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        if len(targets) != 1:
            raise self.fail(s, "chained assignment (A[i] = B[i] = ...) is not supported; write two statements")
        target = targets[0]
        if isinstance(target, ast.Name):
            raise self.fail(s, f"assignment to the plain variable {target.id!r} is not supported: kernels have no "
                               f"local variables; assign to an array element (A[i] = ...) or inline the expression")
        if not isinstance(target, ast.Subscript):
            raise self.fail(target, "the target of an assignment must be an array element, like A[i, j]")
        self.check_names(s)
        with _located(self.src, s):
            self.p.assign(self.text(s))


def translate(fn: Callable[..., Any], name: str | None = None) -> tuple[Program, _Signature]:
    """The program of a restricted Python function, and how its arguments map onto the program's."""
    fn_name: str = getattr(fn, "__name__", "kernel")
    label = name or fn_name
    src, fdef = _read_source(fn, label)
    builder, sig = _declare_arguments(fn, src, fdef, label)
    _Translator(fn, src, fdef, builder, sig).body(fdef.body)
    return builder.build(), sig


# -- the decorated object ----------------------------------------------------------------------------
class Kernel:
    """A ``@pt.kernel`` function: ``.program`` is its IR; calling it compiles for the cpu (once per
    signature) and runs in place."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None):
        if not inspect.isfunction(fn):
            raise ParseError(f"@pt.kernel expects a Python function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.program, self._sig = translate(fn, name)
        self._signature = inspect.signature(fn)
        self._compiled: dict[tuple[tuple[str, int], ...], Any] = {}

    @property
    def kernels(self) -> dict[tuple[tuple[str, int], ...], Any]:
        """The compiled kernels so far, by signature ((dtype, ndim) of each array argument)."""
        return dict(self._compiled)

    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Map a call's positional and keyword arguments onto the program's argument names."""
        kwargs = dict(kwargs)
        implicit = {k: kwargs.pop(k) for k in list(kwargs) if k in self._sig.implicit}
        try:
            ba = self._signature.bind_partial(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{self.program.name}: {exc}") from None
        ba.apply_defaults()
        out = dict(ba.arguments)
        missing = [n for n in self._sig.arrays + self._sig.scalars if n not in out]
        if missing:
            raise ArgumentError(f"{self.program.name}: missing argument(s) {', '.join(missing)}")
        out.update(implicit)
        return out

    def _key(self, kw: dict[str, Any]) -> tuple[tuple[str, int], ...]:
        key = []
        for n in self._sig.arrays:
            x = kw[n]
            try:
                d = dtypes.of_array(x).name
            except PolytriError:
                d = str(getattr(x, "dtype", type(x).__name__))
            key.append((d, len(getattr(x, "shape", ()))))
        return tuple(key)

    @public
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        kw = self.bind(*args, **kwargs)
        key = self._key(kw)
        k = self._compiled.get(key)
        if k is None:
            bind(self.program, kw)  # check the arguments before paying for a build
            k = self.compile("cpu")
            self._compiled[key] = k
        k(**kw)

    @public
    def compile(self, target: str = "cpu", options: dict[str, Any] | None = None) -> Any:
        """``pt.compile(self.program, target, options)``."""
        from ..compiler import compile as compile_program
        return compile_program(self.program, target=target, options=options)

    @public
    def reference(self, *args: Any, **kwargs: Any) -> None:
        """Run the original-order interpreter (``pt.reference``) with this kernel's calling convention."""
        from ..reference import reference
        reference(self.program, **self.bind(*args, **kwargs))

    def __str__(self) -> str:
        """The program in polytri's text form."""
        from ..ir.textform import program_to_text
        return program_to_text(self.program)

    def __repr__(self) -> str:
        return f"<polytri.Kernel {self.program.name!r}: {len(self.program.statements)} statement(s)>"


@public
def kernel(fn: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Decorator: ``@pt.kernel`` or ``@pt.kernel(name="...")``; also ``pt.kernel(fn, name=...)``."""
    if fn is None:
        return public(lambda f: Kernel(f, name=name))
    return Kernel(fn, name=name)
