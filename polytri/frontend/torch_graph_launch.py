"""Consecutive kernel steps of a graph in one call, once each of them has a launch (:mod:`.torch_launch`).

Between two kernels of a graph, Python gathered the next one's addresses, allocated its outputs and bound
its results, and it did so after the previous kernel had run through the caches: in situ that took
0.13 ms of ResNet's 0.55 ms a call and 0.27 ms of MobileNet's 1.54 ms (float32, one thread, against the
same launches called back to back).  A :class:`GraphLaunch` does the Python part once for a run of
steps, then one C call (:func:`polytri.cpu_codegen.graph_driver.driver`) runs every kernel of it; that
took back part of it: 0.02 ms of ResNet's call, 0.17 ms of MobileNet's (the measurements in pytorch.md):

- one table of addresses (slots): one slot per value made before the run that a kernel reads (a graph
  input, a result of an earlier step), one per array a step allocates (outputs, bases of views), one per
  intermediate (its address fixed by the step's launch);
- the outputs that only later kernels of the run read (every user in the graph is a node one of them
  computes: not the graph's result, not an op torch runs, not a view) are allocated once, with the launch,
  and kept at the same address from call to call (:func:`internal_arrays`, up to :data:`KEPT_BYTES`):
  allocated at each call, ViT's 30 new arrays took 67 us of Python a call (the Python part of the
  launch, measured around the C call, one thread), and MobileNet's profile showed page faults under a
  kernel's stores; the others, the graph's results among them, are allocated at each call;
- for each kernel, the slot of each of its arrays, its parameter values and parallel-work threshold.

The compiled graph makes one after a call, for each run of two or more consecutive kernel steps that have
launches, on the CPU with a slot entry, where each input of a step that an earlier step of the run made is
that step's array itself (not a view at an offset); the steps' views and results are bound after the call
as the steps bind them.  The checks at each call are the launches': every value made before the run that
a kernel reads is a contiguous tensor (else the steps run one by one); the steps' locks are held during
the call (a concurrent call runs the steps one by one, with intermediates of its own); a step with index
ranges to check (its launch's) runs only where they hold, else the run stops there and its steps run one
by one (the steps before it wrote arrays of their own only, which are dropped).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from ..cpu_codegen.graph_driver import driver
from ..runtime.cpu_share import CallRecord
from .torch_launch import Launch, NewArray

CALL: Any = object()
"""The key of a graph call's values under which the call puts an object of its own: a step records it with
the addresses of the arrays it made (``_KernelStep._last_made``), and a run is made only from steps whose
records are of the call at hand (not of a concurrent one)."""


@dataclass
class _Tables:
    """The C arrays the driver reads (kept alive with the launch)."""

    fns: Any
    nargs: Any
    slot_of: Any
    rows: list[Any]
    params: Any
    param_rows: list[Any]
    work: Any
    nranges: Any
    ranges: Any


class GraphLaunch:
    """A run of consecutive kernel steps of a graph in one C call (see the module's text)."""

    def __init__(self, steps: Sequence[Any], launches: Sequence[Launch], inputs: Sequence[tuple[int, fx.Node]],
                 new: Sequence[tuple[int, int, NewArray]], constants: Sequence[tuple[int, int]],
                 slot_of: Sequence[Sequence[int]], n_slots: int, cc: str, threads: int | None,
                 internal: frozenset[tuple[int, str]] = frozenset()):
        self.steps = list(steps)
        self.launches = list(launches)
        """Kept: each holds its step's intermediates alive (their addresses are in :attr:`slots`)."""
        self.inputs = tuple(inputs)
        self.slots = (ctypes.c_void_p * max(1, n_slots))()
        for slot, address in constants:
            self.slots[slot] = address
        self.device = launches[0].device
        self.kept: dict[int, tuple[int, str, torch.Tensor]] = {}
        """The new arrays that only later steps of the run read (:func:`internal_arrays`), allocated once
        and reused by every call, by slot: see the module's text."""
        for slot, j, a in new:
            if (j, a.name) in internal:
                t = torch.empty(a.shape, dtype=a.dtype, device=self.device)
                self.kept[slot] = (j, a.name, t if a.rank else t.reshape(()))
                self.slots[slot] = t.data_ptr()
        self.new = tuple(x for x in new if x[0] not in self.kept)
        self._slots_at = ctypes.addressof(self.slots)
        self.threads = threads
        self.calls = CallRecord(max(s.kernel.calls.wake for s in steps))
        """The run's call times, for one thread after the cores idled (:class:`.cpu_share.CallRecord`)."""
        self._driver = driver(cc)
        rows = [(ctypes.c_int32 * max(1, len(s)))(*s) for s in slot_of]
        param_rows = [(ctypes.c_int64 * max(1, len(la.params)))(*la.params) for la in launches]
        n = len(launches)
        self._t = _Tables(
            fns=(ctypes.c_void_p * n)(*[s.kernel.slots_entry() for s in steps]),
            nargs=(ctypes.c_int64 * n)(*[len(s) for s in slot_of]),
            slot_of=(ctypes.c_void_p * n)(*[ctypes.addressof(r) for r in rows]), rows=rows,
            params=(ctypes.c_void_p * n)(*[ctypes.addressof(r) for r in param_rows]), param_rows=param_rows,
            work=(ctypes.c_double * n)(*[float(s.kernel.min_parallel_work) for s in steps]),
            nranges=(ctypes.c_int64 * n)(*[0 if la.ranges is None else len(la.ranges) for la in launches]),
            ranges=(ctypes.c_void_p * n)(*[None if la.ranges is None else ctypes.addressof(la.ranges)
                                           for la in launches]))
        self._args = (n, ctypes.addressof(self._t.fns), ctypes.addressof(self._t.nargs),
                      ctypes.addressof(self._t.slot_of), self._slots_at, ctypes.addressof(self._t.params))
        self._tail = (ctypes.addressof(self._t.work), ctypes.addressof(self._t.nranges),
                      ctypes.addressof(self._t.ranges))

    def __call__(self, env: dict[fx.Node, Any]) -> bool:
        """Run every step on the values of ``env`` and bind their results there; ``False`` (nothing bound)
        where an input is not a contiguous tensor, another call holds a step or a step's index ranges do
        not hold."""
        with _all_held([s._lock for s in self.steps]) as held:
            if not held:
                return False
            for slot, node in self.inputs:
                t = env[node]
                if not isinstance(t, torch.Tensor) or not t.is_contiguous():
                    return False
                self.slots[slot] = t.data_ptr()
            made: list[dict[str, torch.Tensor]] = [{} for _ in self.steps]
            for j, name, t in self.kept.values():
                made[j][name] = t
            for slot, j, a in self.new:
                t = torch.empty(a.shape, dtype=a.dtype, device=self.device)
                self.slots[slot] = t.data_ptr()
                made[j][a.name] = t if a.rank else t.reshape(())
            threads = self.calls.threads(self.threads, None, 0 if self.threads else torch.get_num_threads())
            started = self.calls.clock()
            if self._driver(*self._args, threads, *self._tail) >= 0:
                return False   # a step's index ranges failed: the run stopped there, its time says nothing
            self.calls.ended(None, threads, started)
        for step, m in zip(self.steps, made):
            step._bind(m, env)
        return True


@contextlib.contextmanager
def _all_held(locks: Sequence[Any]) -> Iterator[bool]:
    """Hold every lock of ``locks``, or none: yields whether they are held."""
    taken: list[Any] = []
    try:
        for lock in locks:
            if not lock.acquire(blocking=False):
                yield False
                return
            taken.append(lock)
        yield True
    finally:
        for lock in taken:
            lock.release()


class _Slots:
    """The slot table of a graph launch being made: which slot each array of each kernel reads."""

    def __init__(self, produced: set[fx.Node], env: dict[fx.Node, Any]):
        self.produced, self.env = produced, env
        self.at: dict[Any, int] = {}  # graph input node, (step, array name) or (step, position) -> slot
        self.made_at: dict[int, int] = {}  # address of an array a step made -> its slot
        self.inputs: list[tuple[int, fx.Node]] = []
        self.new: list[tuple[int, int, NewArray]] = []
        self.constants: list[tuple[int, int]] = []

    def slot(self, key: Any) -> int:
        if key not in self.at:
            self.at[key] = len(self.at)
        return self.at[key]

    def input_slot(self, node: fx.Node) -> int | None:
        """The slot of a step's input: its own for a value made before the run (a graph input, a value of
        an earlier step), else that of the array an earlier step of the run made (``None``: a view of it
        at an offset)."""
        if node not in self.produced:
            if node not in self.at:
                self.inputs.append((self.slot(node), node))
            return self.at[node]
        t = self.env.get(node)
        if not isinstance(t, torch.Tensor) or not t.is_contiguous() or not t.data_ptr():
            return None
        return self.made_at.get(t.data_ptr())

    def row(self, j: int, step: Any, launch: Launch) -> list[int] | None:
        """The slots of step ``j``'s arrays, in its kernel's order (``None``: see :meth:`input_slot`)."""
        row = [-1] * len(launch.addresses)
        for position, node in launch.inputs:
            s = self.input_slot(node)
            if s is None:
                return None
            row[position] = s
        for a in launch.new:
            row[a.position] = s = self.slot((j, a.name))
            self.new.append((s, j, a))
            self.made_at[step._last_made[1][a.name]] = s
        for position, address in enumerate(launch.addresses):
            if row[position] < 0:  # an intermediate, at the address the step's launch holds
                row[position] = s = self.slot((j, position))
                self.constants.append((s, address))
        return row


def _launch_of(step: Any, key: tuple[int, ...], call: object) -> Launch | None:
    """The launch ``step`` has for parameter values ``key``, where its kernel has a slot entry and the step
    ran on its own intermediates in ``call``."""
    launch = step._launches.get(key)
    made = step._last_made
    if launch is None or made is None or made[0] is not call:
        return None
    return launch if step.kernel.slots_entry() is not None else None


def graph_launch(steps: Sequence[Any], keys: Sequence[tuple[int, ...]], env: dict[fx.Node, Any]) -> GraphLaunch | None:
    """The launch of ``steps`` (consecutive steps of a graph, just run on ``env`` with parameter values
    ``keys``, one per step), or ``None`` where one of them cannot take part (see the module's text)."""
    launches = [_launch_of(step, key, env.get(CALL)) for step, key in zip(steps, keys)]
    if not steps or any(la is None for la in launches):
        return None
    produced = {node for step in steps for node in [*(o[1] for o in step.outputs), *(v[0] for v in step.views)]}
    table = _Slots(produced, env)
    rows = []
    for j, (step, launch) in enumerate(zip(steps, launches)):
        assert launch is not None
        row = table.row(j, step, launch)
        if row is None:
            return None
        rows.append(row)
    kernel = steps[0].kernel
    return GraphLaunch(steps, [la for la in launches if la is not None], table.inputs, table.new, table.constants,
                       rows, len(table.at), kernel.options["cc"], kernel.options.get("threads"),
                       internal_arrays(steps, table.new))


KEPT_BYTES = 16 << 20
"""At most this many bytes of a run's internal arrays are kept from call to call (:func:`internal_arrays`);
beyond, they are allocated at each call as the others.  A graph keeps a run's launch for each of up to 16
sets of sizes (dynamic shapes): so many times this, at most, per run.  The zoo's largest run keeps 5.8
MiB (ViT's, BERT's and GPT-2's blocks at their benchmark sizes)."""


def internal_arrays(steps: Sequence[Any], new: Sequence[tuple[int, int, NewArray]]) -> frozenset[tuple[int, str]]:
    """The new arrays of a run (step number, array name) that no one but later steps of the run reads: an
    output of a step whose every user in the graph is a node that one of the run's kernels computes (not
    the graph's output, not an op run by torch, not a view torch makes), up to :data:`KEPT_BYTES` in all,
    in the run's order."""
    computed = {node for step in steps for node in step.segment.nodes}
    found, total = set(), 0
    for _, j, a in new:
        step = steps[j]
        node = next((o[1] for o in step.outputs if o[0] == a.name), None)
        view_base = any(base == a.name for _, (base, _) in step.views)
        if node is None or view_base or not node.users or not all(u in computed for u in node.users):
            continue
        size = math.prod(a.shape) * a.dtype.itemsize
        if total + size > KEPT_BYTES:
            break
        found.add((j, a.name))
        total += size
    return frozenset(found)


__all__ = ["CALL", "KEPT_BYTES", "GraphLaunch", "graph_launch", "internal_arrays"]
