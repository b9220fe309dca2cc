"""A kernel step's launch once a checked call has passed: the kernel's addresses gathered with nothing else.

A step of a compiled graph (:class:`.torch_runtime._KernelStep`) builds its arguments the long way on its
first call with given parameter values: every input made a contiguous tensor, overlapping inputs copied,
the arguments checked by the kernel's binder.  Every later call with the same values runs a
:class:`Launch` instead: each input's address read from its tensor, new outputs allocated at their known
sizes, the intermediates' addresses fixed, one call of the library.

Why this is safe.  The shapes, types and devices of a graph's values are functions of its inputs' (and of
the parameter values, part of the launch's key).  Those of the inputs are guarded where the graph is
entered: by torch's guards under ``torch.compile`` and ``pt.jit``, by the artifact's own checks under
``polytri.load``.  What no guard covers is checked at each call: every input is a contiguous tensor (else
the step takes the long way for that call).  Inputs may overlap: the kernel only reads them (a step whose
program writes one of its inputs gets no launch), and read-only arrays may share memory under C's
``restrict``.  A kernel with indirect subscripts gets a launch where its index check reduces to ranges
of index values (:meth:`polytri.runtime.index_check.IndexCheck.ranges`): compiled code checks them before
the kernel runs, and where one fails the step takes the long way, whose check names the value.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from ..cpu_codegen.graph_driver import Range, range_check
from ..runtime.index_check import RANGE_TYPES, IndexRange

Shape = tuple[int, ...]


@dataclass(frozen=True)
class NewArray:
    """An array the step allocates at each call: an output, or the base of outputs that are views."""

    position: int
    """Its place among the kernel's arrays."""
    name: str
    """The segment's array name."""
    shape: Shape
    """Its size; ``(1,)`` for a value of rank 0, bound as a 0-d tensor."""
    dtype: torch.dtype
    rank: int


@dataclass(frozen=True)
class Launch:
    """How one step calls its kernel for one set of parameter values (see the module's text)."""

    call: Callable[[list[int], list[int]], None]
    """The kernel's unchecked entry: the arrays' addresses in its order, the parameters in theirs."""
    addresses: tuple[int, ...]
    """The kernel's addresses with the intermediates' filled in (they are the step's own, reused)."""
    inputs: tuple[tuple[int, fx.Node], ...]
    """Each input's place among the kernel's arrays and the graph value it reads."""
    new: tuple[NewArray, ...]
    params: tuple[int, ...]
    device: torch.device
    temps: tuple[torch.Tensor, ...]
    """The intermediates whose addresses :attr:`addresses` holds: kept alive while the launch is (the step
    may drop them from its own reuse table, for many sizes)."""
    ranges: Any = None
    """The index ranges to check before the call: a C array of :class:`.graph_driver.Range` over the
    kernel's arrays (``None``: no indirect subscript)."""
    check: Callable[[int, int, int], int] | None = None
    """The compiled check of :attr:`ranges` (``pt_check_ranges``)."""

    def __call__(self, env: dict[fx.Node, Any]) -> dict[str, torch.Tensor] | None:
        """Run the kernel on the values of ``env``; the new arrays by name (0-d where of rank 0), or ``None``
        where an input is not a contiguous tensor or an index value is out of range (nothing was run)."""
        addresses = list(self.addresses)
        for position, node in self.inputs:
            t = env[node]
            if not isinstance(t, torch.Tensor) or not t.is_contiguous():
                return None
            addresses[position] = t.data_ptr()
        made: dict[str, torch.Tensor] = {}
        for a in self.new:
            t = torch.empty(a.shape, dtype=a.dtype, device=self.device)
            addresses[a.position] = t.data_ptr()
            made[a.name] = t if a.rank else t.reshape(())
        if self.ranges is not None and self.check is not None:
            at = (ctypes.c_void_p * len(addresses))(*addresses)
            if self.check(len(self.ranges), ctypes.addressof(self.ranges), ctypes.addressof(at)) >= 0:
                return None
        self.call(addresses, list(self.params))
        return made


def launch_for(call: Callable[[list[int], list[int]], None], arrays: Sequence[str],
               inputs: Sequence[tuple[str, fx.Node]], new: Sequence[tuple[str, Shape, torch.dtype, int]],
               temps: dict[str, torch.Tensor], params: tuple[int, ...], device: torch.device,
               ranges: Sequence[IndexRange] = (), cc: str = "cc") -> Launch:
    """The launch of a kernel whose arrays are ``arrays`` (in its order): ``inputs`` (array name, graph
    value), ``new`` arrays (name, shape, type, rank), ``temps`` (the step's intermediates by name), the
    index ``ranges`` to check before each call (over the kernel's array names; checked by code built with
    ``cc``)."""
    at = {name: k for k, name in enumerate(arrays)}
    addresses = [0] * len(arrays)
    for name, t in temps.items():
        addresses[at[name]] = t.data_ptr()
    table = range_table(ranges, at) if ranges else None
    return Launch(call, tuple(addresses), tuple((at[name], node) for name, node in inputs),
                  tuple(NewArray(at[name], name, shape if rank else (1,), dtype, rank) for name, shape, dtype, rank in new),
                  params, device, tuple(temps.values()), table, range_check(cc) if table is not None else None)


def range_table(ranges: Sequence[IndexRange], at: dict[str, int]) -> Any:
    """``ranges`` as a C array of :class:`.graph_driver.Range`, each array named by its position ``at``."""
    return (Range * len(ranges))(*[Range(at[r.array], RANGE_TYPES.index(r.dtype), r.start, r.count, r.low, r.high)
                                   for r in ranges])
