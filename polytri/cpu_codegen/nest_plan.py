"""Which loops of a kernel's loop AST the C printer computes as packed contraction nests, decided before
anything is printed.

A loop is a contraction nest when it roots three loops over one statement of contraction form
(:func:`.contraction.find_contraction`), or, at the top level, a whole nest of its own that computes
every instance of its one statement (:func:`.contraction.find_domain_contraction`); integer sums only
where the machine's dot-product instructions sum them and blocks fill.  At the top level, a contraction
nest also absorbs the nest just before it when that nest only zeroes what it sums (its registers start at
zero: :func:`.contraction_fusion.zero_init_fuses`), and the nest just after it when that one's statement
can run on each register block as soon as its sums are complete (:func:`.contraction_fusion.epilogue_iterators`)
from a tile of the block, the target never stored (:func:`.contraction_fusion.keeps_target_local`).
Those absorbed nests are not printed on their own.  The scan runs each top-level sequence left to right,
as the printer then prints it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from ..ir.program import Program, Statement
from ..ir.types import Typer
from ..schedule.loop_ast import Block, For, If, Node, run_counts, walk
from .contraction import find_contraction, find_domain_contraction
from .contraction_fusion import epilogue_iterators, keeps_target_local, zero_init_fuses
from .contraction_model import Contraction, few_columns
from .dot_product import dot_product


def flat(body: tuple[Node, ...] | list[Node]) -> list[Node]:
    """The nodes of a block's body with nested blocks replaced by their own nodes, in order."""
    out: list[Node] = []
    for n in body:
        out += flat(n.body) if isinstance(n, Block) else [n]
    return out


@dataclass(frozen=True)
class NestPlan:
    """The contraction nests of a loop AST."""

    contractions: dict[int, Contraction] = field(default_factory=dict)
    """The contraction computed at each loop that roots one, by the loop's ``id`` (with the zero init and
    the epilogue it absorbs)."""
    absorbed: frozenset[int] = frozenset()
    """The ``id`` of each top-level nest that a contraction nest beside it computes."""


class _Planner:
    def __init__(self, program: Program, typer: Typer, simd: bool, runs: Counter[str], scratch: frozenset[str]):
        self.p, self.t, self.simd, self.runs, self.scratch = program, typer, simd, runs, scratch
        self.contractions: dict[int, Contraction] = {}
        self.absorbed: set[int] = set()
        self.found: dict[tuple[int, bool], Contraction | None] = {}

    def only_here(self, counts: Counter[str]) -> bool:
        """Whether the statements counted in ``counts`` (from part of the AST) run nowhere else."""
        return all(self.runs[s] == n for s, n in counts.items())

    def contraction(self, n: For, top: bool) -> Contraction | None:
        """The contraction nest rooted at ``n`` (``top``: no loop encloses it), or ``None`` (memoized: the
        scan of a sequence asks again for the nests beside each other)."""
        key = (id(n), top)
        if key not in self.found:
            self.found[key] = self._contraction(n, top)
        return self.found[key]

    def _contraction(self, n: For, top: bool) -> Contraction | None:
        found = find_contraction(n, self.p, self.t)
        if found is None and top:
            runs = run_counts(n)
            if len(runs) == 1 and self.only_here(runs):
                found = find_domain_contraction(self.p.statement(next(iter(runs))), self.p, self.t)
        if found is None:
            return None
        dot = dot_product(found.left, found.right, dtype=found.dtype, op=found.op, typer=self.t, simd=self.simd)
        if found.dtype.kind != "f" and (dot is None or few_columns(found)):
            return None  # integer sums are packed only for the dot-product instructions, and blocks they fill
        return replace(found, dot=dot)

    def beside(self, nest: Node, other: Node) -> tuple[Contraction, Statement] | None:
        """The top-level contraction nest ``nest`` and the one statement of the top-level nest ``other``
        next to it, when each nest runs only its statement and neither statement runs anywhere else."""
        if not (isinstance(nest, For) and isinstance(other, For)):
            return None
        found = self.contraction(nest, top=True)
        if found is None:
            return None
        sums, others = run_counts(nest), run_counts(other)
        if list(sums) != [found.statement.name] or len(others) != 1 or not self.only_here(sums | others):
            return None
        return found, self.p.statement(next(iter(others)))

    def sequence(self, body: list[Node]) -> None:
        """The top-level nodes ``body``, in order: a contraction nest with the init before it and the
        epilogue after it that it absorbs, or a node on its own."""
        k = 0
        while k < len(body):
            pair = self.beside(body[k + 1], body[k]) if k + 1 < len(body) else None
            init = pair is not None and zero_init_fuses(pair[1], pair[0], self.p)
            at = k + 1 if init else k
            after = self.beside(body[at], body[at + 1]) if at + 1 < len(body) else None
            epilogue = None if after is None else epilogue_iterators(after[1], after[0], self.p)
            nest = body[at]
            if (init or epilogue is not None) and isinstance(nest, For):  # always a For: beside() pairs loops
                found = self.contraction(nest, top=True)
                assert found is not None
                if init:
                    found = replace(found, zero_init=True)
                    self.absorbed.add(id(body[k]))
                if epilogue is not None and after is not None:
                    with_epilogue = replace(found, epilogue=after[1], epilogue_at=epilogue)
                    if keeps_target_local(with_epilogue, self.p, self.scratch):
                        found = with_epilogue
                        self.absorbed.add(id(body[at + 1]))
                    else:  # its nest reads back what the product stored: faster than in the product's blocks
                        epilogue = None
                self.contractions[id(nest)] = found
                k = at + 1 + (epilogue is not None)
                continue
            self.node(body[k], top=True)
            k += 1

    def node(self, n: Node, top: bool) -> None:
        """Plan ``n`` and what it holds (``top``: no loop encloses it)."""
        if isinstance(n, Block):
            if top:
                self.sequence(flat(n.body))
            else:
                for c in n.body:
                    self.node(c, top)
        elif isinstance(n, If):
            self.node(n.then, top)
            if n.orelse is not None:
                self.node(n.orelse, top)
        elif isinstance(n, For):
            found = self.contraction(n, top)
            if found is not None:
                self.contractions[id(n)] = found
            else:
                self.node(n.body, top=False)


def kernel_statements(ast: Node, program: Program, typer: Typer, *, simd: bool,
                      scratch: frozenset[str] = frozenset()) -> frozenset[str]:
    """The statements of ``ast`` that the micro-kernel's contraction nests compute, with the nests they
    absorb (:func:`plan_nests`, with the same ``scratch`` as the C printer's)."""
    plan = plan_nests(ast, program, typer, microkernel=True, simd=simd, scratch=scratch)
    roots = set(plan.contractions) | set(plan.absorbed)
    return frozenset(s for n in walk(ast) if id(n) in roots for s in run_counts(n))


def plan_nests(ast: Node, program: Program, typer: Typer, *, microkernel: bool, simd: bool,
               scratch: frozenset[str] = frozenset()) -> NestPlan:
    """The contraction nests of ``ast`` (none without the ``microkernel`` option); ``scratch``: the
    temporaries whose values before and after the call do not matter."""
    if not microkernel:
        return NestPlan()
    planner = _Planner(program, typer, simd, run_counts(ast), scratch)
    planner.node(ast, top=True)
    return NestPlan(planner.contractions, frozenset(planner.absorbed))


__all__ = ["NestPlan", "flat", "kernel_statements", "plan_nests"]
