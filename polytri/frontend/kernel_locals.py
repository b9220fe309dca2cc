"""Scalar locals of a ``@pt.kernel`` body: ``t = A[i] * 2`` followed by ``B[i] = t + 1``.

A local is pure (the expression language has no side effects), so each use is replaced by the expression
assigned last, as written, with the locals it reads already replaced.  That is Python's meaning only where
the value cannot have changed between the assignment and the use, so what would differ is refused:

- a use before any assignment (``NameResolutionError``);
- a value carried from one iteration of a loop to the next (a use before the assignment in the loop body,
  or ``s = s + A[k]`` on a local assigned outside the loop), or out of a loop after it ends;
- a value assigned in one branch of an ``if`` (or chosen by the condition) read after the ``if``;
- a value that reads an array written after the assignment (the substituted read would see the new value).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import NameResolutionError, ParseError, PolytriError
from .kernel_source import Source

log = logging.getLogger(__name__)

_ADVICE = "keep the value in an array element instead (a one-element array works)"


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    """Plain names assigned (``t = ...``, ``t += ...``) anywhere in ``stmts``."""
    out = set()
    for s in stmts:
        for n in ast.walk(s):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def written_arrays(stmts: list[ast.stmt]) -> set[str]:
    """Arrays whose elements are assigned anywhere in ``stmts``."""
    out = set()
    for s in stmts:
        for n in ast.walk(s):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
            out |= {t.value.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
    return out


def _subscripted(node: ast.AST) -> set[str]:
    return {n.value.id for n in ast.walk(node) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)}


@dataclass(frozen=True)
class Binding:
    """The value a local holds: its expression (locals substituted), where it was assigned."""

    value: ast.expr
    depth: int
    """Number of loops around the assignment."""
    line: int
    arrays: frozenset[str]
    """Arrays the value reads."""


@dataclass(frozen=True)
class LoopScope:
    """An enclosing loop, as far as locals care."""

    var: str
    line: int
    assigns: frozenset[str]
    """Locals assigned anywhere in its body."""
    writes: frozenset[str]
    """Arrays written anywhere in its body."""


@dataclass
class Locals:
    """The locals live at the statement being translated, and why the others cannot be read there."""

    src: Source
    everywhere: frozenset[str]
    """Every name the function assigns as a local."""
    live: dict[str, Binding] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    """Locals that exist in Python at this point but whose value the kernel cannot express -> why."""
    loops: list[LoopScope] = field(default_factory=list)
    _rebound: list[set[str]] = field(default_factory=list)

    def fail(self, node: ast.AST, message: str, cls: type[PolytriError] = ParseError) -> PolytriError:
        return self.src.error(node, message, cls)

    # -- reading ------------------------------------------------------------------------------------
    def check_read(self, n: ast.Name) -> bool:
        """Whether ``n`` is a readable local (``False``: not a local at all); raises where it cannot be read."""
        b = self.live.get(n.id)
        if b is None:
            self.not_live(n)
            return False
        for loop in self.loops[b.depth:]:  # loops entered since the assignment
            if n.id in loop.assigns:
                raise self.carried(n, loop)
            clobbered = sorted(b.arrays & loop.writes)
            if clobbered:
                raise self.fail(n, f"local {n.id!r} (assigned at line {b.line}) reads {clobbered[0]!r}, which the "
                                   f"loop over {loop.var!r} (line {loop.line}) writes: from its second iteration on, "
                                   f"Python's {n.id!r} keeps the value read before the loop; {_ADVICE}")
        return True

    def not_live(self, n: ast.Name) -> None:
        if n.id in self.unreadable:
            raise self.fail(n, self.unreadable[n.id])
        for loop in self.loops:
            if n.id in loop.assigns:
                raise self.carried(n, loop)
        if n.id in self.everywhere:
            raise self.fail(n, f"local {n.id!r} is used before it is assigned", NameResolutionError)

    def carried(self, n: ast.Name, loop: LoopScope) -> PolytriError:
        return self.fail(n, f"local {n.id!r} is read here before the loop over {loop.var!r} (line {loop.line}) "
                            f"assigns it: its value would be carried from one iteration to the next, which "
                            f"@pt.kernel does not support (locals live within one iteration); {_ADVICE}")

    def substitute(self, node: ast.AST) -> ast.AST:
        """``node`` with each live local replaced by its value (``node`` itself when none is used)."""
        if not any(isinstance(n, ast.Name) and n.id in self.live for n in ast.walk(node)):
            return node
        live = self.live

        class Sub(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.expr:
                b = live.get(n.id)
                return n if b is None or not isinstance(n.ctx, ast.Load) else copy.deepcopy(b.value)

        return Sub().visit(copy.deepcopy(node))

    # -- writing ------------------------------------------------------------------------------------
    def assign(self, name: str, value: ast.expr, line: int) -> None:
        """``name = value`` (``value`` checked by the caller, locals not yet substituted)."""
        new = self.substitute(value)
        assert isinstance(new, ast.expr)
        self.live[name] = Binding(new, len(self.loops), self.src.line(line), frozenset(_subscripted(new)))
        self.unreadable.pop(name, None)
        for rebound in self._rebound:
            rebound.add(name)
        log.debug("local %s = %s (line %d)", name, ast.unparse(new), line)

    def array_written(self, array: str, line: int) -> None:
        """After ``array[...] = ...``: locals whose value reads ``array`` no longer hold what they read."""
        for name, b in list(self.live.items()):
            if array in b.arrays:
                del self.live[name]
                self.unreadable[name] = (f"local {name!r} (assigned at line {b.line}) reads {array!r}, which line "
                                         f"{self.src.line(line)} writes before this use: substituting its expression would read "
                                         f"the new value; move the use before the write, or {_ADVICE}")

    # -- scopes -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def loop(self, var: str, node: ast.For) -> Iterator[None]:
        """The body of a loop: what it assigns is unreadable after it."""
        self.loops.append(LoopScope(var, self.src.line(node.lineno), frozenset(assigned_names(node.body)),
                                    frozenset(written_arrays(node.body))))
        with self._scope() as rebound:
            try:
                yield
            finally:
                self.loops.pop()
        for name in rebound:
            self.unreadable[name] = (f"local {name!r} is assigned inside the loop over {var!r} (line {self.src.line(node.lineno)}): "
                                     f"after the loop it would hold the last iteration's value, which @pt.kernel "
                                     f"does not support (locals live within one iteration); {_ADVICE}")

    @contextlib.contextmanager
    def branch(self) -> Iterator[set[str]]:
        """One branch of an ``if`` (or one piece of its condition): the locals it (re)binds."""
        with self._scope() as rebound:
            yield rebound

    def after_if(self, node: ast.If, body: set[str], orelse: set[str]) -> None:
        """After an ``if``: a local (re)bound in a branch depends on the condition."""
        for name in body | orelse:
            how = "both branches" if name in body and name in orelse else "one branch only"
            self.unreadable[name] = (f"local {name!r} is assigned in {how} of the `if` at line {self.src.line(node.lineno)}: its "
                                     f"value after the `if` depends on the condition, which @pt.kernel does not "
                                     f"support; assign it before the `if` with where(cond, a, b), or {_ADVICE}")

    @contextlib.contextmanager
    def _scope(self) -> Iterator[set[str]]:
        saved = dict(self.live)
        rebound: set[str] = set()
        self._rebound.append(rebound)
        try:
            yield rebound
        finally:
            self._rebound.remove(rebound)  # what was live before and not rebound nor overwritten inside
            self.live = {k: v for k, v in saved.items() if self.live.get(k) is v}
