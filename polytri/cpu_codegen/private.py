"""Array contraction in C: a temporary that lives inside one iteration of a loop becomes a local buffer.

A *temporary* (compile option ``temporaries``: its contents after the call do not matter) whose every
read has a source write in the program (isl's dataflow analysis finds no read of a value from before
the call) can be replaced, in the body of a loop ``L``, by a buffer declared inside the body, when:

* every statement that accesses it runs only inside ``L`` (nowhere else in the loop AST);
* one subscript position ``p`` of every access, with the iterators replaced by the loop counters,
  is exactly ``L``'s counter: iteration ``c`` of ``L`` touches only the slice ``T[..., c, ...]``, so
  no value of ``T`` crosses iterations (each read's source wrote the same element, hence ran in the
  same iteration, and before the read since the schedule is legal);
* the slice has constant extents, and the slices of one loop fit in :data:`MAX_BYTES` together (they
  live on the stack of the thread running the iteration).

The accesses then drop subscript ``p``: ``T[i][j]`` with ``i = c`` reads ``pt_loc_T[j]``.  The softmax's
row of exponentials and the partial sums of a row reduction stay in L1 (or in registers) and the
temporary's global array is never touched.  Arrays read by a micro-kernel contraction inside the loop
keep their global storage (the packing code computes addresses from the array's own strides).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable

from .. import dtypes
from ..ir.affine import const_value, linear
from ..ir.expr import Access, accesses, substitute
from ..ir.program import Program, Statement
from ..schedule.loop_ast import For, Run, run_counts, walk

log = logging.getLogger("polytri.cpu")

#: Most bytes of local buffers per loop, on the stack of a thread (8 MiB here, ``ulimit -s``; OpenMP's
#: threads take ``OMP_STACKSIZE`` where it is set).
MAX_BYTES = 256 * 1024


def local_name(array: str) -> str:
    """C name of the local buffer standing for ``array``."""
    return f"pt_loc_{array}"


def _slice_position(loop: For, st: Statement, args: tuple, acc: Access) -> set[int]:
    """Subscript positions of ``acc`` (in ``st``, run with ``args``) that equal the counter of ``loop``."""
    env = dict(zip(st.iterators, args))
    out = set()
    for p, e in enumerate(acc.index):
        lin = linear(substitute(e, env))
        if lin is not None and lin == ({loop.var: 1}, 0):
            out.add(p)
    return out


Use = tuple[Statement, tuple, Access]
"""An access of a statement, with the arguments that run the statement in the loop."""


def private_arrays(loop: For, program: Program, candidates: frozenset[str], runs: Counter[str],
                   contracted: Iterable[str] = ()) -> dict[str, int]:
    """Each array of ``candidates`` that can live in a buffer local to one iteration of ``loop``, with the
    subscript position that equals the loop counter (dropped in the buffer).  ``runs`` counts every
    statement's instances in the whole loop AST; ``contracted`` are arrays that keep their storage."""
    if not candidates:
        return {}
    inside = run_counts(loop.body)
    out: dict[str, int] = {}
    total = 0
    skip = set(contracted)
    for array, found in _uses(loop, program, candidates).items():
        if array in skip or not _only_inside(program, array, inside, runs):
            continue
        p = _common_slice_position(loop, found)
        size = None if p is None else _slice_bytes(program, array, p)
        if p is None or size is None:
            continue
        if total + size > MAX_BYTES:
            log.info("%s: %s's slice (%d bytes) does not fit in the loop's local buffers", program.name, array,
                     size)
            continue
        total += size
        out[array] = p
    return out


def _uses(loop: For, program: Program, candidates: frozenset[str]) -> dict[str, list[Use]]:
    """The accesses of each array of ``candidates`` in the body of ``loop``."""
    uses: dict[str, list[Use]] = {}
    for r in walk(loop.body):
        if not isinstance(r, Run):
            continue
        st = program.statement(r.statement)
        for acc in (st.target, *accesses(st.value)):
            if acc.array in candidates:
                uses.setdefault(acc.array, []).append((st, r.args, acc))
    return uses


def _only_inside(program: Program, array: str, inside: Counter[str], runs: Counter[str]) -> bool:
    """Whether every statement that accesses ``array`` runs all its instances inside the loop (``inside``
    counts them there, ``runs`` in the whole loop AST)."""
    users = {s.name for s in program.statements
             if s.target.array == array or any(a.array == array for a in accesses(s.value))}
    return all(inside[u] == runs[u] for u in users)


def _common_slice_position(loop: For, found: list[Use]) -> int | None:
    """The first subscript position at which every access of ``found`` is the counter of ``loop``."""
    common: set[int] | None = None
    for st, args, acc in found:
        pos = _slice_position(loop, st, args, acc)
        common = pos if common is None else common & pos
    return min(common) if common else None


def _slice_bytes(program: Program, array: str, p: int) -> int | None:
    """Bytes of a slice of ``array`` at a fixed subscript ``p``, or ``None`` when an extent is not constant."""
    a = program.array(array)
    size = dtypes.dtype(a.dtype).itemsize
    for x in (const_value(e) for k, e in enumerate(a.shape) if k != p):
        if x is None:
            return None
        size *= max(x, 1)
    return size
