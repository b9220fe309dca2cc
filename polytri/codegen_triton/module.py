"""The generated Python module: helpers, kernels and the host function, written to the cache and loaded.

One source is loaded in two ways.  For GPUs and ahead-of-time compilation every kernel and helper is
wrapped in ``triton.runtime.jit.JITFunction``; for CPU tensors in Triton's interpreter.  The interpreter
normally requires ``TRITON_INTERPRET=1`` before triton is imported, because it makes triton's own
``@jit`` library functions (``tl.zeros``, ``tl.sum``, ...) interpretable at import time; polytri instead
swaps those functions for interpreted ones only while an interpreted kernel runs
(:func:`interpreter_scope`), so one process can interpret kernels and compile them for real GPUs.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..cpu_codegen.build import cache_dir
from ..ir.program import Program
from ..ir.types import program_typer
from ..schedule.loop_ast import For, Node, run_counts, walk
from ..schedule.schedule import Schedule
from .block_fit import fitted_sides
from .host import HostPlanner, Launch
from .kgen import KernelPrinter
from .loader import import_triton
from .reduction import SumPlan, sum_plan
from .target import LaunchModel
from .texpr import HELPERS

log = logging.getLogger("polytri.triton")

_HEADER = '''"""polytri: program {name}, target {target}.  Generated code: kernels, then the host function."""
import triton
import triton.language as tl
'''


def generate_module(program: Program, ast: Node, schedule: Schedule, model: LaunchModel, *, target: str,
                    bf16_as_f32: bool, fp32_dot: str, scratch: frozenset[str] = frozenset(), index: str = "int32"
                    ) -> tuple[str, list[Launch], frozenset[str]]:
    """The module's source, its launches, and the temporaries it never stores (read from registers only);
    ``scratch`` are temporaries no read of which sees a value from before the call; ``index`` the integer
    type of counters, bounds and offsets (see :mod:`.index_width`)."""
    typer = program_typer(program)

    plans: dict[tuple[int, ...], SumPlan] = {}

    def plan(chain: tuple[For, ...], body: Node) -> SumPlan:
        """The launch's :func:`.reduction.sum_plan`, made once: for its block sides, then for its printer."""
        key = (id(body), *map(id, chain))
        if key not in plans:
            plans[key] = sum_plan(chain, body, program, typer)
        return plans[key]

    def sides(chain, body, trips) -> tuple[int, ...]:
        kind = plan(chain, body).kind
        if kind == "grid":
            return model.dot_block[:2]
        if kind == "columns":
            return (model.dot_block[0],)  # row blocks; the products' columns are chunks of inner loops
        loops = any(isinstance(n, For) for n in walk(body))
        # spread over the multiprocessors only where each lane runs loops (chunks of their iterations)
        programs = model.programs if model.programs is None or loops else 1
        if len(chain) >= 2:
            return fitted_sides(model.block, trips, programs)
        if loops:  # loops inside run in chunks along a second axis: few lanes here
            return fitted_sides((model.block[0],), trips, programs)
        return fitted_sides((model.block[0] * model.block[1],), trips, programs)

    planner = HostPlanner(program, schedule, sides)
    host = planner.plan(ast)
    printers = [KernelPrinter(program, launch.spec, typer, model, bf16_as_f32=bf16_as_f32, fp32_dot=fp32_dot,
                              private=_read_only_in(launch.spec.body, program, ast, scratch), index=index,
                              sums=plan(launch.spec.chain, launch.spec.body))
                for launch in planner.launches]
    kernels = [p.source() for p in printers]
    unstored = set().union(*(p.stores.dropped for p in printers)) - set().union(*(p.stores.stored for p in printers))
    parts = [_HEADER.format(name=program.name, target=target), HELPERS, *kernels, host]
    return "\n\n".join(p.strip("\n") + "\n" for p in parts), planner.launches, frozenset(unstored)


@dataclass(frozen=True)
class ModuleRecipe:
    """What a module is printed from, kept to print it again with another index type."""

    program: Program
    ast: Node
    schedule: Schedule
    model: LaunchModel
    target: str
    fp32_dot: str
    scratch: frozenset[str]

    def print(self, index: str, *, bf16_as_f32: bool) -> tuple[str, list[Launch], frozenset[str]]:
        """:func:`generate_module` of the recipe with ``index`` counters."""
        return generate_module(self.program, self.ast, self.schedule, self.model, target=self.target,
                               bf16_as_f32=bf16_as_f32, fp32_dot=self.fp32_dot, scratch=self.scratch, index=index)

    def interpreter_source(self, index: str, source: str) -> str:
        """The module for the interpreter, given the one for GPUs: they differ only for bfloat16 programs
        (the interpreter's bfloat16 lives in float32)."""
        p = self.program
        has_bf16 = any(a.dtype == "bfloat16" for a in p.arrays) or any(s.dtype == "bfloat16" for s in p.scalars)
        return self.print(index, bf16_as_f32=True)[0] if has_bf16 else source


def _read_only_in(body: Node, program: Program, ast: Node, scratch: frozenset[str]) -> frozenset[str]:
    """The temporaries of ``scratch`` whose every reader runs in ``body`` only (each of its instances in
    the whole loop tree is in ``body``)."""
    here, everywhere = run_counts(body), run_counts(ast)
    out = set()
    for t in scratch:
        if all(here[r] == everywhere[r] for r in program.readers(t)):
            out.add(t)
    return frozenset(out)


def _write(source: str) -> Path:
    """The source's file in the cache (a temporary directory when the cache cannot be written)."""
    key = hashlib.sha256(source.encode()).hexdigest()
    for folder in (cache_dir() / "triton", Path(tempfile.gettempdir()) / "polytri-triton"):
        path = folder / f"pt_{key[:32]}.py"
        try:
            if path.exists() and path.read_text() == source:
                return path
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".py.tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)
            return path
        except OSError as exc:
            log.warning("cannot write generated Triton source to %s (%s); trying a temporary directory", folder, exc)
    raise OSError("no writable directory for generated Triton source")


def function_names(source: str) -> list[str]:
    """Top-level device functions of a generated module (everything but the host function)."""
    return [line[4:line.index("(")] for line in source.splitlines()
            if line.startswith("def ") and not line.startswith("def pt_host(")]


_loaded: dict[tuple[str, str], ModuleType] = {}
_lock = threading.RLock()


def load_module(source: str, mode: str) -> ModuleType:
    """Load ``source`` with its device functions wrapped for ``mode`` (``jit`` or ``interpret``)."""
    with _lock:
        key = (hashlib.sha256(source.encode()).hexdigest(), mode)
        if key in _loaded:
            return _loaded[key]
        import_triton()  # the generated module imports it: see .loader
        path = _write(source)
        spec = importlib.util.spec_from_file_location(f"polytri_generated_{key[0][:16]}_{mode}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        from triton.runtime.jit import JITFunction
        wrap = JITFunction if mode == "jit" else _interpreted()
        for name in function_names(source):
            setattr(module, name, wrap(getattr(module, name)))
        _loaded[key] = module
        return module


_interp_class = None


def _interpreted():
    """``InterpretedFunction`` whose nested calls undo their patches of ``triton.language`` (Triton 3.x
    leaves them in place, which breaks a later ahead-of-time compilation in the same process)."""
    global _interp_class
    if _interp_class is None:
        from triton.runtime.interpreter import InterpretedFunction, _patch_lang

        class Interpreted(InterpretedFunction):
            def __call__(self, *args, **kwargs):
                scope = _patch_lang(self.fn)
                try:
                    return self.rewrite()(*args, **kwargs)
                finally:
                    scope.restore()
        _interp_class = Interpreted
    return _interp_class


@contextlib.contextmanager
def interpreter_scope() -> Iterator[None]:
    """Triton's own ``@jit`` library functions as interpreted functions, for the duration of the block."""
    import_triton()
    import triton.language  # noqa: F401
    with contextlib.suppress(ImportError):
        import triton.experimental.gluon.language  # noqa: F401  (imports lazily otherwise, mid-swap)
    from triton.runtime.jit import JITFunction
    wrap = _interpreted()
    saved = []
    with _lock:
        for name, mod in list(sys.modules.items()):
            if mod is None or not name.startswith("triton.language"):
                continue
            for attr, value in list(vars(mod).items()):
                if isinstance(value, JITFunction):
                    saved.append((mod, attr, value))
                    setattr(mod, attr, wrap(value.fn))
        try:
            yield
        finally:
            for mod, attr, value in saved:
                setattr(mod, attr, value)
