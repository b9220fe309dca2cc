"""The ``nvgpu`` and ``amdgpu`` targets: the launch model, the online softmax, the GPU schedule, and the
Triton module of a scheduled program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..fusion.cost import BALANCE
from ..fusion.online_softmax import online_softmax
from ..ir.program import Program
from ..pipeline.decisions import Decision
from ..pipeline.options import GpuOptions
from ..pipeline.target import Target
from ..schedule.dependences import Dependences
from ..schedule.loop_ast import Node
from ..schedule.schedule import Schedule
from .gpu_schedule import gpu_schedule
from .kernel import TritonKernel
from .module import ModuleRecipe
from .target import GPUArch, LaunchModel, arch_for, launch_model


def gpu_model(prog: Program, target: str, opts: dict[str, Any]) -> tuple[GPUArch, LaunchModel]:
    """The GPU of ``target`` and the launch model for ``prog``'s element types and the options."""
    arch = arch_for(target, opts["arch"])
    sizes = [dtypes.dtype(a.dtype).itemsize for a in prog.arrays] or [4]
    model = launch_model(arch, element_bytes=max(sizes), dot_bytes=min(sizes), block=opts["block"],
                         dot_block=tuple(opts["dot_block"]) if opts["dot_block"] is not None else None,
                         num_warps=opts["num_warps"], num_stages=opts["num_stages"])
    return arch, model


def online_form(prog: Program, target: str, opts: dict[str, Any]) -> tuple[Program, list[Decision]]:
    """``prog`` with its softmax-weighted sums in online form (:mod:`polytri.fusion.online_softmax`), in
    blocks of ``tl.dot``'s column tile, where its temporaries allow it; with the decisions.  Only under the
    default scheduling (``schedule`` and ``fuse`` 'auto'): another choice asks for the program's own loops."""
    if not opts["temporaries"] or opts["schedule"] != "auto" or opts["fuse"] != "auto":
        return prog, []
    _, model = gpu_model(prog, target, opts)
    return online_softmax(prog, opts["temporaries"], block=model.dot_block[1])


class GpuTarget(Target):
    """Untiled schedules whose parallel loops become grids of Triton programs; ``tl.dot`` for products."""

    options_class = GpuOptions
    recompute_from_settled_inputs = True
    source_suffix = "triton.py"
    rewrite_name = "online softmax"

    def __init__(self, name: str):
        super().__init__(name)
        self.balance = BALANCE[name]

    def check_options(self, options: Any) -> dict[str, Any]:
        opts = super().check_options(options)
        arch_for(self.name, opts["arch"])
        return opts

    def rewrite(self, program: Program, opts: dict[str, Any]) -> tuple[Program, list[Decision], bool]:
        """The online softmax (before recomputation of temporaries, which would hide it)."""
        rewritten, decisions = online_form(program, self.name, opts)
        return rewritten, decisions, rewritten is not program

    def schedule(self, program: Program, deps: Dependences, opts: dict[str, Any], *, built: bool
                 ) -> tuple[Schedule, list[Decision], Node]:
        return gpu_schedule(program, deps, opts, built=built)

    def generate(self, program: Program, deps: Dependences, schedule: Schedule, ast: Node, *,
                 opts: dict[str, Any], decisions: list[Decision], scratch: frozenset[str],
                 dump: Callable[[str], None]) -> TritonKernel:
        arch, model = gpu_model(program, self.name, opts)
        recipe = ModuleRecipe(program, ast, schedule, model, self.name, opts["fp32_dot"], scratch)
        source, launches, unstored = recipe.print("int32", bf16_as_f32=False)
        dump(source)
        interp = recipe.interpreter_source("int32", source)
        made: list[Decision | str] = [
            *decisions,
            f"{len(launches)} kernel launch site(s); model for {arch.name}: blocks {model.block}, tl.dot tiles "
            f"{model.dot_block}, {model.num_warps} warps, {model.num_stages} stages"]
        return TritonKernel(program, schedule, deps, target=self.name, arch=arch, model=model, recipe=recipe,
                            source=source, interpreter_source=interp, launches=launches, options=opts,
                            decisions=made, local_arrays=unstored)
