"""A compiled CPU kernel: a shared library called through ctypes, zero-copy on contiguous arrays."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import public
from ..ir.program import Program
from ..pipeline.decisions import Decision
from ..runtime.args import bind, is_torch_tensor
from ..runtime.compiled import CompiledKernel
from ..runtime.cpu_share import CallRecord
from ..schedule.dependences import Dependences
from ..schedule.schedule import Schedule, map_text
from .fork_cost import known_wake

log = logging.getLogger("polytri.cpu")

_SCALAR_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "uint8": ctypes.c_uint8, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
                  "float16": ctypes.c_float, "bfloat16": ctypes.c_float, "float32": ctypes.c_float,
                  "float64": ctypes.c_double}


def _pointer(x: Any) -> tuple[int, Any]:
    """Data pointer of a C-contiguous view of ``x``, and a copy to write back (or ``None``)."""
    if is_torch_tensor(x):
        if x.is_contiguous():
            return x.data_ptr(), None
        tmp = x.detach().contiguous()
        return tmp.data_ptr(), tmp
    if x.flags.c_contiguous:
        return x.ctypes.data, None
    tmp = np.ascontiguousarray(x)
    return tmp.ctypes.data, tmp


def _write_back(x: Any, tmp: Any) -> None:
    if is_torch_tensor(x):
        import torch
        with torch.no_grad():
            x.copy_(tmp)
    else:
        x[...] = tmp


class CpuKernel(CompiledKernel):
    """``pt.compile(program, target="cpu")``: call it with keyword arguments; it runs in place."""

    def __init__(self, program: Program, schedule: Schedule, deps: Dependences, source: str,
                 library: Path | Future[Path],
                 function: str, options: dict[str, Any], decisions: Sequence[Decision | str], *,
                 local_arrays: frozenset[str] = frozenset(), epilogue_arrays: frozenset[str] = frozenset(),
                 min_parallel_work: float = 0.0):
        super().__init__(program, schedule, deps, options, decisions, "cpu")
        self.source = source
        """The generated C."""
        self.local_arrays = local_arrays
        """Temporaries held in buffers local to a loop iteration only: never stored in global memory."""
        self.epilogue_arrays = epilogue_arrays
        """Targets of contractions summed block by block in tiles that the nest's epilogue reads: never
        stored in global memory."""
        self._library = library
        self._function_name = function
        self._fn: Any = None
        self.thread_limit: Callable[[], int] | None = None
        """At each call without a fixed thread count, the most threads it may use (the torch frontend's:
        ``torch.get_num_threads``); ``None``: no limit but the free cores."""
        self._after_build: list[Callable[[], None]] = []
        self.min_parallel_work = min_parallel_work
        """Operations a parallel region needs to open, passed at each call (see :mod:`.parallel_plan`)."""
        measured = bool(min_parallel_work) and options.get("min_parallel_work") is None
        self.calls = CallRecord(known_wake(options.get("cc", "cc")) if measured else 0.0)
        """Its calls' times, for running on one thread after the cores idled (:class:`.cpu_share.CallRecord`;
        never without a region that tests its work, with a threshold the caller fixed (option
        ``min_parallel_work``: nothing is measured), or where waking the workers could not be measured)."""
        if not isinstance(library, Future):
            self._load()

    @property
    def library(self) -> Path:
        """Path of the built shared library (in polytri's cache); waits for a build in the background."""
        self.wait_built()
        assert not isinstance(self._library, Future)
        return Path(self._library)

    def wait_built(self) -> None:
        """Wait for the library if it is being built in the background (``CompilationError`` if the build
        failed), load it, and run what :meth:`after_build` queued, in this thread."""
        if isinstance(self._library, Future):
            self._library = self._library.result()
        if self._fn is None:
            self._load()
        while self._after_build:
            self._after_build.pop(0)()

    def after_build(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once the library is built: now if it is, else in :meth:`wait_built`."""
        if isinstance(self._library, Future):
            self._after_build.append(fn)
        else:
            fn()

    def _load(self) -> Any:
        lib = ctypes.CDLL(str(self._library))
        fn = getattr(lib, self._function_name)
        fn.restype = None
        fn.argtypes = ([ctypes.c_void_p] * len(self.program.arrays)
                       + [_SCALAR_CTYPES[s.dtype] for s in self.program.scalars]
                       + [ctypes.c_int64] * len(self.program.params) + [ctypes.c_int, ctypes.c_double])
        self._lib, self._fn = lib, fn
        return fn

    @public
    def __call__(self, **kwargs: Any) -> None:
        """Run the kernel in place on numpy arrays or CPU tensors, passed by name with the scalars and
        parameters; parameters the shapes determine may be left out.  Arguments are checked first
        (``ArgumentError``, ``ParameterBoundsError``)."""
        bound = bind(self.program, kwargs)
        pointers, copies = [], []
        for a in self.program.arrays:
            known = bound.pointers.get(a.name)
            if known is not None:   # a C-contiguous numpy array, its pointer read by the checks
                pointers.append(known)
                continue
            ptr, tmp = _pointer(bound.arrays[a.name])
            pointers.append(ptr)
            copies.append((bound.arrays[a.name], tmp))
        scalars = [_SCALAR_CTYPES[s.dtype](bound.scalars[s.name].item()) for s in self.program.scalars]
        params = [bound.params[p] for p in self.program.params]
        self.wait_built()
        self._run(self._fn, [*pointers, *scalars], params)
        for x, tmp in copies:
            if tmp is not None:
                _write_back(x, tmp)

    def call_unchecked(self, pointers: list[int], params: list[int]) -> None:
        """Run on the data pointers of C-contiguous arrays (in the program's array order) and the
        parameters (in its order), with no check at all.  Only for callers that passed arguments of the
        same shapes, types and layout through a checked call before (the torch frontend does, once per
        shape); the program must have no scalars."""
        assert not self.program.scalars
        fn = self._fn if self._fn is not None else self._built()
        self._run(fn, pointers, params)

    def _run(self, fn: Any, head: Sequence[Any], params: Sequence[int]) -> None:
        """``fn(*head, *params, threads, min_parallel_work)``, its thread count and time kept by :attr:`calls`
        (per parameter values)."""
        key = tuple(params)
        fixed = self.options.get("threads")
        threads = self.calls.threads(fixed, key, self.thread_limit() if self.thread_limit and not fixed else 0)
        started = self.calls.clock()
        fn(*head, *params, threads, self.min_parallel_work)
        self.calls.ended(key, threads, started)

    def slots_entry(self) -> int | None:
        """The address of the library's ``<function>_slots`` entry (:mod:`.graph_driver`), or ``None`` for a
        program with scalars, which has none."""
        if self.program.scalars:
            return None
        self.wait_built()
        return ctypes.cast(getattr(self._lib, f"{self._function_name}_slots"), ctypes.c_void_p).value

    def _built(self) -> Any:
        self.wait_built()
        return self._fn

    def explain(self) -> str:
        """A readable report: statements, dependences, schedule, parallel loops, build."""
        p = self.program
        lines = [f"program {p.name} [{', '.join(p.params)}], target cpu", "", "statements:"]
        for st in p.statements:
            lines.append(f"  {st.name}: {st.text()}")
            lines.append(f"      domain {st.domain}")
        lines += ["", "dependences:"]
        order = [st.name for st in p.statements]
        for kind in ("flow", "anti", "output"):
            m = getattr(self.dependences, kind)
            text = ["none"] if m.is_empty() else map_text(m, order)
            lines += [f"  {kind:6s} {text[0]}", *(f"         {line}" for line in text[1:])]
        lines += [""] + self._schedule_report() + self._stage_report()
        lines += ["", "decisions:"] + [f"  - {d}" for d in self._decisions]
        lines += ["", f"library: {self.library}"]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<polytri.CpuKernel {self.program.name!r}>"


