"""A compiled GPU kernel: Triton on CUDA/ROCm tensors, Triton's interpreter on CPU data, PTX/AMDGCN ahead of
time with :meth:`TritonKernel.asm`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import ArgumentError, CompilationError, UnsupportedError, public
from ..ir.program import Program
from ..pipeline.decisions import Decision
from ..runtime.args import bind, is_torch_tensor
from ..runtime.compiled import CompiledKernel
from ..schedule.dependences import Dependences
from ..schedule.schedule import Schedule
from .host import Launch
from .index_width import INDEX_TYPES, INT32_MAX, index_extreme, lane_margin
from .kgen import kernel_parameters
from .loader import import_triton
from .module import ModuleRecipe, interpreter_scope, load_module
from .standalone import standalone_source
from .target import ARCHS, GPUArch, LaunchModel
from .texpr import SIGNATURE_TYPES

log = logging.getLogger("polytri.triton")


class TritonKernel(CompiledKernel):
    """``pt.compile(program, target="nvgpu" | "amdgpu")``: call it with keyword arguments; it runs in place.

    CUDA / ROCm tensors launch the kernels on their GPU; numpy arrays and CPU tensors run them in
    Triton's interpreter (on copies, written back when every launch has succeeded)."""

    def __init__(self, program: Program, schedule: Schedule, deps: Dependences, *, target: str, arch: GPUArch,
                 model: LaunchModel, recipe: ModuleRecipe, source: str, interpreter_source: str,
                 launches: list[Launch], options: dict[str, Any], decisions: Sequence[Decision | str],
                 local_arrays: frozenset[str] = frozenset()):
        super().__init__(program, schedule, deps, options, decisions, target)
        self._decisions.append(Decision(
            "codegen", "index-width", program.name,
            "index arithmetic: int32 for calls whose counters, bounds and offsets all fit (bounded at each call "
            "from its parameters), the int64 variant of the module for the others"))
        self.source = source
        """The generated Triton module (kernels and the host function that launches them), with int32 index
        arithmetic; :meth:`source_for` gives the int64 variant."""
        self.local_arrays = local_arrays
        """Temporaries never stored: read only from the registers of the program that computes them."""
        self.interpreter_source = interpreter_source
        """The module run by the interpreter (differs from :attr:`source` only for bfloat16 programs)."""
        self.arch = arch
        """The GPU architecture the launch model targets (option ``arch``)."""
        self.model = model
        """The launch model: block sizes and launch parameters chosen for this program on :attr:`arch`."""
        self.launches = launches
        """The kernel launches of one call, in order."""
        self._recipe = recipe
        self._variants = {"int32": (source, interpreter_source)}
        self._margin = lane_margin(model)
        self._index_types: dict[tuple[int, ...], str] = {}
        self._asm: dict[tuple[str, str], str] = {}
        self._modules: dict[tuple[str, str], Any] = {}

    @property
    def kernels(self) -> list[str]:
        """Names of the Triton kernels, in launch order of first appearance."""
        return [launch.spec.name for launch in self.launches]

    def module_source(self, index: str = "int32") -> str:
        """The generated module as a file that runs without polytri: its device functions under
        ``@triton.jit`` and ``run(arrays..., scalars..., sizes...)``, which launches the kernels on GPU
        tensors (with ``TRITON_INTERPRET=1``, on CPU tensors in Triton's interpreter); ``index`` as for
        :meth:`source_for`."""
        return standalone_source(self.source_for(index), self.program, self.model)

    def source_for(self, index: str) -> str:
        """The module with ``index`` (``int32`` or ``int64``) counters, bounds and offsets."""
        return self._sources(index)[0]

    def _sources(self, index: str) -> tuple[str, str]:
        if index not in INDEX_TYPES:
            raise UnsupportedError(f"index type {index!r}: expected one of {', '.join(INDEX_TYPES)}")
        if index not in self._variants:
            source = self._recipe.print(index, bf16_as_f32=False)[0]
            self._variants[index] = (source, self._recipe.interpreter_source(index, source))
        return self._variants[index]

    def index_type(self, params: dict[str, int]) -> str:
        """``int32`` when every integer the kernels compute for these parameter values provably fits in
        int32 (:func:`~.index_width.index_extreme`), else ``int64``."""
        key = tuple(params[p] for p in self.program.params)
        if key not in self._index_types:
            extreme = index_extreme(self._recipe.program, self._recipe.ast, params, margin=self._margin)
            index = "int32" if extreme <= INT32_MAX else "int64"
            if index == "int64":
                log.info("%s: index values up to %s with %s: the int64 variant runs", self.program.name, extreme,
                         ", ".join(f"{p}={v}" for p, v in params.items()) or "these sizes")
            self._index_types[key] = index
        return self._index_types[key]

    def _module(self, mode: str, index: str = "int32") -> Any:
        """The generated module loaded for ``jit`` (GPU, ahead of time) or ``interpret`` (loaded once)."""
        if (mode, index) not in self._modules:
            source, interpreted = self._sources(index)
            self._modules[mode, index] = load_module(interpreted if mode == "interpret" else source, mode)
        return self._modules[mode, index]

    # --- running ----------------------------------------------------------------------------------------
    @public
    def __call__(self, **kwargs: Any) -> None:
        """Run the kernels in place, with the arguments passed by name as for a
        :class:`~polytri.cpu_codegen.kernel.CpuKernel`: on the GPU for GPU tensors, in Triton's interpreter
        for numpy arrays and CPU tensors."""
        bound = bind(self.program, kwargs, device="gpu")
        index = self.index_type(bound.params)
        on_gpu = any(is_torch_tensor(x) and x.device.type != "cpu" for x in bound.arrays.values())
        if on_gpu:
            self._run_gpu(bound, index)
        else:
            self._run_interpreted(bound, index)

    def _scalar_tensors(self, bound: Any, device: Any, bf16_as_f32: bool) -> list[Any]:
        import torch
        out = []
        for s in self.program.scalars:
            d = dtypes.dtype(s.dtype)
            name = "float32" if d is dtypes.BFLOAT16 and bf16_as_f32 else d.name
            out.append(torch.tensor([bound.scalars[s.name].item()], dtype=getattr(torch, name), device=device))
        return out

    def _run_interpreted(self, bound: Any, index: str) -> None:
        import torch
        module = self._module("interpret", index)
        works, backs = [], []
        for a in self.program.arrays:
            x = bound.arrays[a.name]
            if is_torch_tensor(x):
                w = x.detach().clone().contiguous()
                if w.dtype == torch.bfloat16:
                    w = w.float()
            else:
                w = torch.from_numpy(np.array(x, copy=True, order="C"))
            works.append(w)
            backs.append((x, w))
        scalars = self._scalar_tensors(bound, "cpu", bf16_as_f32=True)
        params = [bound.params[p] for p in self.program.params]

        def launch(kernel: Any, grid: tuple[int, int, int], args: tuple[Any, ...]) -> None:
            kernel[grid](*args)
        try:
            # masked-off lanes compute too (on junk or zeros): their overflows and divisions by zero
            # are not the program's
            with interpreter_scope(), np.errstate(all="ignore"):
                module.pt_host(launch, *works, *scalars, *params)
        except Exception as exc:  # the interpreter's own errors: nothing was written back
            raise CompilationError(f"{self.program.name}: a Triton kernel failed in the interpreter: {exc}") from exc
        for x, w in backs:
            if is_torch_tensor(x):
                with torch.no_grad():
                    x.copy_(w.to(x.dtype))
            else:
                x[...] = w.numpy()

    def _run_gpu(self, bound: Any, index: str) -> None:
        import torch
        module = self._module("jit", index)
        works, backs = [], []
        for a in self.program.arrays:
            x = bound.arrays[a.name]
            if not is_torch_tensor(x):
                raise ArgumentError(f"{self.program.name}: array {a.name!r} is a numpy array; give GPU tensors "
                                    f"(or only CPU data, to run in Triton's interpreter)")
            w = x if x.is_contiguous() else x.contiguous()
            works.append(w)
            if w is not x:
                backs.append((x, w))
        device = works[0].device if works else "cuda"
        scalars = self._scalar_tensors(bound, device, bf16_as_f32=False)
        params = [bound.params[p] for p in self.program.params]
        opts = {"num_warps": self.model.num_warps, "num_stages": self.model.num_stages, "enable_fp_fusion": False}

        def launch(kernel: Any, grid: tuple[int, int, int], args: tuple[Any, ...]) -> None:
            kernel[grid](*args, **opts)
        module.pt_host(launch, *works, *scalars, *params)
        with torch.no_grad():
            for x, w in backs:
                x.copy_(w)

    # --- ahead of time ------------------------------------------------------------------------------------
    def signature(self, launch: Launch, index: str = "int32") -> dict[str, str]:
        """Triton's signature of a kernel: pointer and integer argument types."""
        sig: dict[str, str] = {}
        names = kernel_parameters(self.program, launch.spec)
        types = [f"*{SIGNATURE_TYPES[a.dtype]}" for a in self.program.arrays]
        types += [f"*{SIGNATURE_TYPES[s.dtype]}" for s in self.program.scalars]
        types += [SIGNATURE_TYPES[index]] * (len(names) - len(types))
        for n, t in zip(names, types):
            sig[n] = t
        return sig

    def asm(self, arch: str = "sm_90", index: str = "int32") -> str:
        """Compile every kernel ahead of time for ``arch`` (``sm_80``, ``sm_90``, ``gfx90a``, ``gfx942``,
        ``gfx1100``) without a GPU, with ``index`` (``int32``, or ``int64`` for parameters whose index
        values do not fit: :meth:`index_type`) counters and integer arguments; return the PTX (NVIDIA) or
        AMDGCN (AMD) text of all kernels."""
        if arch not in ARCHS:
            raise UnsupportedError(f"unknown architecture {arch!r}; known: {', '.join(ARCHS)}")
        if (arch, index) not in self._asm:
            import_triton()
            import triton
            from triton.compiler import ASTSource
            target = ARCHS[arch]
            module = self._module("jit", index)
            texts = []
            for launch in self.launches:
                fn = getattr(module, launch.spec.name)
                src = ASTSource(fn=fn, signature=self.signature(launch, index), constexprs={})
                options = {"num_warps": self.model.num_warps, "num_stages": self.model.num_stages,
                           "enable_fp_fusion": False}
                if target.backend == "hip":
                    options["waves_per_eu"] = 0
                try:
                    compiled = triton.compile(src, target=target.triton_target(), options=options)
                except Exception as exc:
                    raise CompilationError(f"{self.program.name}: Triton could not compile kernel "
                                           f"{launch.spec.name} for {arch}: {exc}") from exc
                key = "ptx" if target.backend == "cuda" else "amdgcn"
                texts.append(f"// kernel {launch.spec.name} for {arch}\n{compiled.asm[key]}")
            self._asm[arch, index] = "\n".join(texts)
        return self._asm[arch, index]

    def explain(self) -> str:
        """A readable report: schedule, launches (grid loops, blocks), decisions."""
        p = self.program
        lines = [f"program {p.name} [{', '.join(p.params)}], target {self.target} (model: {self.arch.name})",
                 "", "statements:"]
        lines += [f"  {st.name}: {st.text()}" for st in p.statements]
        lines += [""] + self._schedule_report() + self._stage_report()
        lines += ["", "kernels:"]
        for launch in self.launches:
            spec = launch.spec
            if spec.chain:
                grid = ", ".join(c.var for c in spec.chain)
                lines.append(f"  {spec.name}: grid loops ({grid}), blocks {spec.vector or '-'}, "
                             f"host loops {', '.join(spec.host_counters) or '-'}")
            else:
                lines.append(f"  {spec.name}: one program, host loops {', '.join(spec.host_counters) or '-'}")
        lines += ["", f"launch model: {self.model}", "", "decisions:"] + [f"  - {d}" for d in self._decisions]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<polytri.TritonKernel {self.program.name!r} target={self.target!r}>"
