"""Global memory traffic of a kernel, estimated: the figure ``pt.explain`` sets against the unfused total.

The model counts compulsory traffic: each array that the kernel keeps in global memory moves once, at
its full size, in each direction it is used.

* An array whose initial value some statement reads (isl's dataflow: a read with no source write in
  the program) is read once.
* An array the program writes is written once, unless it is a temporary kept out of global memory:
  recomputed where it is read (no statement accesses it any more), or never stored: held in buffers
  local to a loop iteration (the C generator's array contraction, ``CpuKernel.local_arrays``), or read
  only from the registers of the Triton program that computes it (``TritonKernel.local_arrays``).
* A temporary that stays in global memory is written and read back: twice its size.  A product's target
  that only its epilogue reads is never stored: each register block is summed in a tile that the
  epilogue reads (``CpuKernel.epilogue_arrays``).  A temporary's size is that of the box of elements the
  program touches (isl): the online softmax keeps one block of columns per row in the first columns of
  the arrays it replaces.

Reuse that misses the caches (a tile of a product loaded once per block of the other operand) is not
counted: the estimate is a lower bound, the same for fused and unfused code, which is what makes the two
comparable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import islpy as isl

from .. import dtypes
from ..ir.affine import evaluate
from ..ir.program import Program, params_prefix
from ..schedule.dependences import live_in


@dataclass(frozen=True)
class ArrayTraffic:
    """The estimated bytes one array moves, and why."""

    array: str
    bytes: int
    why: str


@dataclass(frozen=True)
class Traffic:
    """Estimated global memory traffic of one kernel."""

    arrays: tuple[ArrayTraffic, ...]

    @property
    def bytes(self) -> int:
        return sum(a.bytes for a in self.arrays)


def array_bytes(program: Program, name: str, params: Mapping[str, int]) -> int:
    """Size of array ``name`` for these parameter values."""
    a = program.array(name)
    return math.prod(max(0, evaluate(e, dict(params))) for e in a.shape) * dtypes.dtype(a.dtype).itemsize


def footprint_bytes(program: Program, name: str, params: Mapping[str, int]) -> int:
    """Bytes of the bounding box of the elements of array ``name`` that the program accesses, for these
    parameter values (exact, with isl)."""
    a = program.array(name)
    touched = program.writes.union(program.reads).range()
    dims = ", ".join(f"x{d}" for d in range(len(a.shape)))
    elements = touched.extract_set(isl.Set(f"{params_prefix(program.params)}{{ {name}[{dims}] }}").get_space())
    for i, p in enumerate(program.params):
        elements = elements.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(elements.get_ctx(), params[p]))
    elements = elements.project_out(isl.dim_type.param, 0, len(program.params))
    if elements.is_empty():
        return 0
    size, rank = dtypes.dtype(a.dtype).itemsize, len(a.shape)
    for d in range(rank):
        line = elements.project_out(isl.dim_type.set, d + 1, rank - d - 1).project_out(isl.dim_type.set, 0, d)
        lo, hi = (x.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
                  for x in (line.lexmin(), line.lexmax()))
        size *= hi - lo + 1
    return size


def kernel_traffic(program: Program, params: Mapping[str, int], *, temporaries: Iterable[str] = (),
                   local: Iterable[str] = (), tiled: Iterable[str] = ()) -> Traffic:
    """The estimate of the module docstring for ``program`` run with ``params``; ``temporaries`` are the
    arrays whose contents after the call do not matter, ``local`` those the kernel never stores,
    ``tiled`` the products' targets that their epilogues read from tiles (never stored either)."""
    temps, kept_local, in_tiles = set(temporaries), set(local), set(tiled)
    written = {s.target.array for s in program.statements}
    read = {acc.array for s in program.statements for acc in s.reads}
    before = live_in(program, read)
    out = []
    for a in program.arrays:
        size = array_bytes(program, a.name, params)
        if a.name not in written | read:
            out.append(ArrayTraffic(a.name, 0, "not accessed (recomputed where it is read)"))
        elif a.name in kept_local:
            out.append(ArrayTraffic(a.name, 0, "never stored (local buffers or registers)"))
        elif a.name in temps and a.name in in_tiles:
            out.append(ArrayTraffic(a.name, 0, "never stored (summed in tiles that the product's epilogue reads)"))
        elif a.name in temps:
            size = footprint_bytes(program, a.name, params)
            moves = (a.name in written) + (a.name in read)
            out.append(ArrayTraffic(a.name, moves * size, "temporary stored and read back" if moves == 2
                                    else "temporary, " + ("written" if a.name in written else "read")))
        else:
            moves = (a.name in before) + (a.name in written)
            what = " and ".join(w for w, on in (("read", a.name in before), ("written", a.name in written)) if on)
            out.append(ArrayTraffic(a.name, moves * size, what or "read (its reads see the kernel's writes)"))
    return Traffic(tuple(out))
