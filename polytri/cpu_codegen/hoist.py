"""Tests that read no loop counter, computed once where their function starts.

The generated code tests the sizes of the call in places: whether a parallel region pays for itself
(:mod:`.parallel_plan`), whether a nest writes enough to stream its stores (:mod:`.streaming`).  Printed
where the loop starts, such a test inside a time loop is evaluated at every time step, though nothing
it reads changes there: jacobi-1d's two region tests at PolyBench's MEDIUM size (400 points) cost about
6 ns a step that way, a tenth of the step's work (69.5 against 63.3 ns a step for the input order's
plain C: the slope between 1 and 201 steps, medians of 3001 calls).  gcc does not move them out of the
loop itself.

:class:`Hoisted` collects the tests of one C function whose words are all the function's own arguments
(sizes, scalars, the thread count, the counters of the loops outside an outlined region) and prints each
once, as a ``const bool`` after the function's first lines; a test that reads a counter of a loop of the
function stays where it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..ir.program import Program
from .cexpr import cname

#: C words a test may hold besides names: casts.
C_WORDS = frozenset({"double", "float", "int64_t", "int"})

_WORD = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def reads_only(text: str, names: frozenset[str]) -> bool:
    """Whether every word of C expression ``text`` is one of ``names``, a cast (:data:`C_WORDS`) or a
    function it calls (the prelude's pure helpers: ``pt__max_int64_t(...)``)."""
    for m in _WORD.finditer(text):
        if m.group() in names or m.group() in C_WORDS or text[m.end():].lstrip().startswith("("):
            continue
        return False
    return True


def argument_names(program: Program) -> frozenset[str]:
    """The C names of ``program``'s sizes and scalars, as every function of its kernel receives them."""
    return frozenset(cname(p) for p in program.params) | frozenset(cname(s.name) for s in program.scalars)


@dataclass(frozen=True)
class Hoisted:
    """The hoisted tests of one function: printed at line ``top`` of its body, each reading only
    ``fixed`` (besides casts and calls)."""

    top: int
    """Where the function's first lines end (the tests go after them)."""
    fixed: frozenset[str]
    """The names that keep their value through the function."""
    tests: dict[str, str] = field(default_factory=dict)
    """Each test hoisted so far (its C text) and the name of its constant."""

    def test(self, text: str) -> str:
        """What to print for test ``text``: the name of its constant where it reads only :attr:`fixed`,
        ``text`` itself otherwise."""
        if not reads_only(text, self.fixed):
            return text
        return self.tests.setdefault(text, f"pt__test{len(self.tests)}")

    def splice(self, lines: list[str]) -> None:
        """Insert the constants into ``lines``, the function's body, at :attr:`top`."""
        lines[self.top:self.top] = [f"  const bool {name} = {text};" for text, name in self.tests.items()]


__all__ = ["C_WORDS", "Hoisted", "argument_names", "reads_only"]
