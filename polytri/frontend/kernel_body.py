"""``@pt.kernel``'s body: statements of the Python subset replayed on a :class:`~polytri.ir.builder.ProgramBuilder`."""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..errors import NameResolutionError, ParseError, PolytriError, ProgramError
from ..ir.builder import ProgramBuilder
from ..ir.expr import FUNCTIONS, OPERATOR_FUNCTIONS
from ..ir.names import check_identifier
from .kernel_args import Signature
from .kernel_locals import Locals, assigned_names
from .kernel_source import Source, located

_SUBSET = ("a @pt.kernel body may only contain `for v in range(lo, hi)` loops, `if`/`else` with affine "
           "conditions, assignments to array elements (A[i] = ..., A[i] += ...) and scalar locals (t = ...)")

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
    ast.AnnAssign: "annotated assignments are not supported: write a local without annotation (t = ...)",
}



def _valid_name(name: str) -> bool:
    """Whether the builder accepts ``name`` (not reserved for isl, C or generated code)."""
    try:
        check_identifier(name, "iterator")
    except ProgramError:
        return False
    return True


def _is_function(name: str) -> bool:
    """A function or cast of the expression language."""
    return name in FUNCTIONS or name in dtypes.ALL or name in dtypes.ALIASES


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


class Translator:
    def __init__(self, fn: Callable[..., Any], src: Source, fdef: ast.FunctionDef, builder: ProgramBuilder,
                 sig: Signature):
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
        self.locals = Locals(src, frozenset(assigned_names(fdef.body)))
        """Scalar locals (``t = A[i] * 2``): substituted where they are read."""

    def text(self, node: ast.AST) -> str:
        """Source text of ``node`` for the builder, with locals and renamed loop variables substituted."""
        substituted = self.locals.substitute(node)
        synthetic = getattr(node, "_pt_synthetic", False) or substituted is not node
        node = substituted
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
        """A program name for a loop variable whose name is reserved in the IR (``_t``, ``c1``, ``min``)."""
        base = var.strip("_") or "it"
        cand = base + "_" if _valid_name(base + "_") else f"it_{base}_"
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
            if isinstance(n.ctx, ast.Load) and self.locals.check_read(n):
                continue
            if id(n) in calls and (_is_function(n.id) or n.id in OPERATOR_FUNCTIONS):
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
        if var in self.locals.everywhere:
            raise self.fail(s.target, f"loop variable {var!r} is also assigned as a local; use another name")
        if step != 1 or (var not in self.known and not _valid_name(var)):
            # names reserved in the IR (`_`, `_fict_`, `c1`) are renamed; a step needs a counter of its own
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
            with located(self.src, s.target if var in self.known or var in self.iters else it):
                stack.enter_context(self.p.loop(name, bounds[0], bounds[1]))
            self.iters.append(var)
            stack.enter_context(self.locals.loop(var, s))
            try:
                self.body(s.body)
            finally:
                self.iters.pop()
                self.rename = saved

    def if_(self, s: ast.If) -> None:
        self.check_names(s.test)
        rebound: tuple[set[str], set[str]] = (set(), set())
        self.guarded(_paths(s.test, True), s.body, rebound[0])
        if s.orelse:
            self.guarded(_paths(s.test, False), s.orelse, rebound[1])
        self.locals.after_if(s, *rebound)

    def assumption(self, s: ast.Assert) -> None:
        """``assert N >= 1`` at the top level: an assumption on the parameters (``Program.assume``)."""
        if self.iters or self.guards:
            raise self.fail(s, "'assert' is only allowed at the top level of a kernel, on the parameters")
        self.check_names(s.test)
        paths = _paths(s.test, True)
        if len(paths) != 1 or any(negate for _, negate in paths[0]):
            raise self.fail(s.test, "an assertion must be affine comparisons of the parameters joined by 'and'")
        for atom, _ in paths[0]:
            with located(self.src, atom):
                self.p.assume(self.text(atom))

    def guarded(self, paths: list[Path], stmts: list[ast.stmt], rebound: set[str]) -> None:
        """``stmts`` once per path; ``rebound`` collects the locals they assign."""
        self.guards += 1
        try:
            self._guarded(paths, stmts, rebound)
        finally:
            self.guards -= 1

    def _guarded(self, paths: list[Path], stmts: list[ast.stmt], rebound: set[str]) -> None:
        for path in paths:
            with contextlib.ExitStack() as stack:
                branch = stack.enter_context(self.locals.branch())
                for atom, negate in path:
                    text = self.text(atom)
                    with located(self.src, atom):
                        stack.enter_context(self.p.when(text, negate=negate))
                self.body(stmts)
            rebound |= branch

    def assign(self, s: ast.Assign | ast.AugAssign) -> None:
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        if len(targets) != 1:
            raise self.fail(s, "chained assignment (A[i] = B[i] = ...) is not supported; write two statements")
        target = targets[0]
        if isinstance(target, ast.Name):
            return self.local(s, target)
        if not isinstance(target, ast.Subscript):
            raise self.fail(target, "the target of an assignment must be an array element (A[i, j]) or a name (a "
                                    "local: t = ...)")
        self.check_names(s)
        with located(self.src, s):
            self.p.assign(self.text(s))
        if isinstance(target.value, ast.Name):
            self.locals.array_written(target.value.id, s.lineno)

    def local(self, s: ast.Assign | ast.AugAssign, target: ast.Name) -> None:
        """``t = expr`` or ``t += expr``: a scalar local, substituted where it is read."""
        name = target.id
        if name in self.known:
            raise self.fail(target, f"cannot assign to the argument {name!r}: arrays, scalars and parameters are "
                                    f"read-only names in a kernel (store into an array element: A[i] = ...)")
        if name in self.iters or name in self.rename:
            raise self.fail(target, f"cannot assign to the loop variable {name!r}")
        if _is_function(name) or name in OPERATOR_FUNCTIONS:
            raise self.fail(target, f"a local cannot be named {name!r}: it is one of polytri's functions or types")
        value = s.value
        if isinstance(s, ast.AugAssign):  # t += e reads t
            read = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), target)
            value = ast.copy_location(ast.BinOp(left=read, op=s.op, right=s.value), s)
        self.check_names(value)
        self.locals.assign(name, value, s.lineno)

