"""Options of the ``nvgpu`` and ``amdgpu`` targets, and the backend's entry point."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .. import dtypes
from ..errors import OptionError
from ..ir.program import Program
from ..loop_ast import Node, build_loop_ast
from ..schedule.dependences import Dependences
from ..schedule.legality import prove_legal
from ..schedule.permute import parallel_outward
from ..schedule.pluto import FUSION_POLICIES
from ..schedule.schedule import Schedule
from .dot_order import order_for_dot
from .host import dot_contractions, launch_chains
from .kernel import TritonKernel
from .module import ModuleRecipe
from .nest_fusion import drop_uniform_dimensions, hoist_parallel_loops
from .target import GPUArch, LaunchModel, arch_for, launch_model

log = logging.getLogger("polytri.triton")

#: Options of the GPU targets, with their defaults and a description.
GPU_OPTIONS: dict[str, tuple[Any, str]] = {
    "schedule": ("auto", "'pluto', 'original', or 'auto' (Pluto unless it moves an outermost parallel loop inward)"),
    "fuse": ("auto", "fusion policy of the scheduler: 'smart', 'max', 'none', 'outer', or 'auto': 'smart' or "
                     "'none', whichever keeps the most grid loops, then makes the fewest launches"),
    "arch": (None, "architecture the launch model targets and asm() defaults to: sm_80, sm_90 (nvgpu, "
                   "default sm_90); gfx90a, gfx942, gfx1100 (amdgpu, default gfx942)"),
    "block": (None, "block side of elementwise kernels, a power of two (default: the model's)"),
    "dot_block": (None, "(M, N, K) tile of tl.dot contractions, powers of two (default: the model's)"),
    "num_warps": (None, "warps per program (default: the model's)"),
    "num_stages": (None, "software pipeline stages of tl.dot loops (default: the model's)"),
    "temporaries": ((), "arrays whose contents after the call do not matter: their producers may be "
                        "recomputed in their consumers instead of stored (see polytri.fusion)"),
    "fp32_dot": ("ieee", "float32 contractions: 'ieee' (exact products, as the reference) or 'tf32' "
                         "(tensor cores, 10-bit mantissa products)"),
}


def check_gpu_options(target: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Options merged with their defaults; unknown or ill-typed options raise :class:`OptionError`."""
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(GPU_OPTIONS))
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(map(repr, unknown))} for target {target!r}; known: "
                          f"{', '.join(GPU_OPTIONS)}")
    merged = {k: opts.get(k, default) for k, (default, _) in GPU_OPTIONS.items()}
    if merged["schedule"] not in ("auto", "pluto", "original"):
        raise OptionError(f"option 'schedule' must be 'auto', 'pluto' or 'original', got {merged['schedule']!r}")
    if merged["fuse"] not in (*FUSION_POLICIES, "auto"):
        raise OptionError(f"option 'fuse' must be one of {', '.join(FUSION_POLICIES)} or 'auto', got "
                          f"{merged['fuse']!r}")
    if merged["fp32_dot"] not in ("ieee", "tf32"):
        raise OptionError(f"option 'fp32_dot' must be 'ieee' or 'tf32', got {merged['fp32_dot']!r}")
    arch_for(target, merged["arch"])
    return merged


def _candidate(prog: Program, deps: Dependences, opts: dict[str, Any], fuse: str) -> tuple[Schedule, list[str], Node]:
    from ..compiler import choose_schedule
    schedule, decisions, ast = choose_schedule(prog, deps, opts["schedule"], fuse, False, None)
    if schedule.bands:
        permuted = parallel_outward(schedule, deps)
        if permuted is not schedule:
            prove_legal(permuted.map, deps, what=f"{prog.name}: the GPU band order")
            decisions += [f"scheduler: {d}" for d in permuted.decisions[len(schedule.decisions):]]
            schedule, ast = permuted, build_loop_ast(prog, permuted, deps)
    schedule, ast = order_for_dot(prog, deps, schedule, ast, decisions)
    return schedule, decisions, ast


def gpu_schedule(prog: Program, deps: Dependences, opts: dict[str, Any], *, built: bool = False
                 ) -> tuple[Schedule, list[str], Node]:
    """The schedule (untiled: kernels block their parallel loops themselves), with the band order that puts
    parallel loops outward, and its loop AST.  ``fuse='auto'`` compares Pluto's smart fusion and no
    fusion by the launches they make: most contractions on ``tl.dot``, then most grid loops in the launch
    with fewest, then fewest launches, then most grid loops in the launch with most (fusion that
    serializes a parallel loop, or takes a product off the tensor cores, loses to separate kernels)."""
    if built:
        # a rewrite (the online softmax) built the loops in the order they should run; Pluto is not run on
        # them (its search on the rewritten attention takes minutes): the original order, nests fused
        # below their shared parallel loops
        schedule, decisions, _ = _candidate(prog, deps, {**opts, "schedule": "original"}, "smart")
        schedule = drop_uniform_dimensions(schedule, deps)
        decisions = [*decisions, "GPU: the program is in the order the online softmax built; Pluto not run"]
        return hoist_parallel_loops(prog, deps, schedule, decisions, build_loop_ast(prog, schedule, deps),
                                    columns=True)
    if opts["fuse"] != "auto":
        return _candidate(prog, deps, opts, opts["fuse"])
    if opts["schedule"] == "original":
        return _candidate(prog, deps, opts, "smart")
    best = None
    summary = []
    # Pluto's maximal fusion is not among the candidates: its search can run for minutes on small
    # programs (a two-layer MLP), and isl's operation budget does not stop it
    for fuse in ("smart", "none"):
        cand = _candidate(prog, deps, opts, fuse)
        chains = launch_chains(cand[2]) or [0]
        dots = dot_contractions(cand[2], prog)
        key = (dots, min(chains), -len(chains), max(chains))
        summary.append(f"'{fuse}': {len(chains)} launch(es), grid loops {chains}, {dots} product(s) on tl.dot")
        if best is None or key > best[0]:
            best = (key, fuse, cand)
    assert best is not None
    _, fuse, (schedule, decisions, ast) = best
    decisions = decisions + [f"GPU: fusion '{fuse}' chosen ({'; '.join(summary)})"]
    return hoist_parallel_loops(prog, deps, schedule, decisions, ast)


def gpu_model(prog: Program, target: str, opts: dict[str, Any]) -> tuple[GPUArch, LaunchModel]:
    """The GPU of ``target`` and the launch model for ``prog``'s element types and the options."""
    arch = arch_for(target, opts["arch"])
    sizes = [dtypes.dtype(a.dtype).itemsize for a in prog.arrays] or [4]
    model = launch_model(arch, element_bytes=max(sizes), dot_bytes=min(sizes), block=opts["block"],
                         dot_block=tuple(opts["dot_block"]) if opts["dot_block"] is not None else None,
                         num_warps=opts["num_warps"], num_stages=opts["num_stages"])
    return arch, model


def online_form(prog: Program, target: str, opts: dict[str, Any]) -> tuple[Program, list[str]]:
    """``prog`` with its softmax-weighted sums in online form (:mod:`polytri.fusion.online_softmax`), in
    blocks of ``tl.dot``'s column tile, where its temporaries allow it; with the decisions.  Only under the
    default scheduling (``schedule`` and ``fuse`` 'auto'): another choice asks for the program's own loops."""
    if not opts["temporaries"] or opts["schedule"] != "auto" or opts["fuse"] != "auto":
        return prog, []
    from ..fusion.online_softmax import online_softmax
    _, model = gpu_model(prog, target, opts)
    return online_softmax(prog, opts["temporaries"], block=model.dot_block[1])


def compile_gpu(prog: Program, deps: Dependences, schedule: Schedule, ast: Node, *, target: str,
                opts: dict[str, Any], decisions: list[str], scratch: frozenset[str]) -> TritonKernel:
    """Generate the Triton module of a scheduled program; ``scratch``: temporaries no read of which sees a
    value from before the call (:func:`polytri.schedule.dependences.scratch_arrays`)."""
    arch, model = gpu_model(prog, target, opts)
    recipe = ModuleRecipe(prog, ast, schedule, model, target, opts["fp32_dot"], scratch)
    source, launches, unstored = recipe.print("int32", bf16_as_f32=False)
    interp = recipe.interpreter_source("int32", source)
    decisions.append(f"{len(launches)} kernel launch site(s); model for {arch.name}: blocks {model.block}, "
                     f"tl.dot tiles {model.dot_block}, {model.num_warps} warps, {model.num_stages} stages")
    return TritonKernel(prog, schedule, deps, target=target, arch=arch, model=model, recipe=recipe,
                        source=source, interpreter_source=interp, launches=launches, options=opts, decisions=decisions, local_arrays=unstored)
