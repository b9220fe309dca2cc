"""Which parts of a loop AST become kernel launches, and which of their contractions run on ``tl.dot``.

A parallel loop starts a launch whose grid loops are it and the parallel loops perfectly nested inside it
(:func:`grid_chain`); a sequential loop with a parallel loop inside stays on the host; anything else runs
in a launch of one program.  This is the analysis that the GPU schedule compares its candidates by
(:mod:`.gpu_schedule`, :mod:`.nest_fusion`, :mod:`.dot_order`: most products on ``tl.dot``, then the
launches' grid loops) and that the host printer (:mod:`.host`) follows: both read the same answer off the
same loop AST.
"""

from __future__ import annotations

from ..ir.program import Program
from ..ir.types import program_typer
from ..schedule.loop_ast import Block, For, If, Node, walk
from .reduction import dot_launch


def has_parallel(n: Node) -> bool:
    """Whether a loop under ``n`` (or ``n`` itself) is parallel."""
    return any(isinstance(m, For) and m.parallel for m in walk(n))


def grid_chain(root: For) -> tuple[For, ...]:
    """``root`` and the parallel loops perfectly nested in it."""
    chain = [root]
    body = root.body
    while True:
        while isinstance(body, Block) and len(body.body) == 1:
            body = body.body[0]
        if isinstance(body, For) and body.parallel:
            chain.append(body)
            body = body.body
        else:
            return tuple(chain)


def launch_chains(n: Node) -> list[int]:
    """Number of grid loops of each launch the host plan of ``n`` makes (0: one program)."""
    if isinstance(n, Block):
        return [c for m in n.body for c in launch_chains(m)]
    if isinstance(n, If):
        return launch_chains(n.then) + (launch_chains(n.orelse) if n.orelse is not None else [])
    if isinstance(n, For) and n.parallel:
        return [len(grid_chain(n))]
    if isinstance(n, For) and has_parallel(n.body):
        return launch_chains(n.body)
    return [0]


def dot_contractions(n: Node, program: Program, columns: bool = False) -> int:
    """Number of contractions that the launches of ``n`` compute with ``tl.dot`` on tiles of their grid
    (see :func:`.reduction.dot_launch`); with ``columns``, also those whose columns run in chunks inside
    row-block programs (the online softmax's products; elsewhere, fusing a product below its rows alone
    would trade its column parallelism for a launch less, which this count does not reward)."""
    if isinstance(n, Block):
        return sum(dot_contractions(m, program, columns) for m in n.body)
    if isinstance(n, If):
        return dot_contractions(n.then, program, columns) + (
            dot_contractions(n.orelse, program, columns) if n.orelse else 0)
    if isinstance(n, For) and n.parallel:
        chain = grid_chain(n)
        kind, found = dot_launch(chain, chain[-1].body, program, program_typer(program))
        return len(found) if kind == "grid" or columns else 0
    if isinstance(n, For):
        return dot_contractions(n.body, program, columns)
    return 0


__all__ = ["dot_contractions", "grid_chain", "has_parallel", "launch_chains"]
