"""``pt.compile``: program -> verified, scheduled, generated, built kernel."""

from __future__ import annotations

import logging
import math
import os
import shlex
import warnings
from collections.abc import Mapping
from typing import Any

import islpy as isl

from .cpu_codegen.build import DEFAULT_FLAGS, build_library, vector_math_flags
from .cpu_codegen.cgen import CodegenOptions, generate_c
from .cpu_codegen.contraction import describe, read_back_by_epilogues
from .cpu_codegen.kernel import CpuKernel
from .errors import CompilationError, OptionError, PolytriError, public
from .ir.builder import to_program
from .ir.program import Program
from .ir.textform import program_to_text
from .ir.verify import verify
from .loop_ast import For, Node, Run, build_loop_ast, enclosing_loops, walk
from .schedule.dependences import Dependences, compute_dependences, scratch_arrays
from .schedule.legality import IllegalScheduleError, prove_legal
from .schedule.locality import dominant_streams, strided_streams
from .schedule.pluto import FUSION_POLICIES, SchedulingError, pluto_schedule
from .schedule.schedule import Schedule, original_schedule
from .schedule.tiling import tile_schedule

log = logging.getLogger("polytri.compile")

TARGETS = ("cpu", "nvgpu", "amdgpu")

#: Options of the cpu target, with their defaults and a description.
CPU_OPTIONS: dict[str, tuple[Any, str]] = {
    "schedule": ("auto", "'pluto' (the affine scheduler), 'original' (the input order), or 'auto': Pluto "
                         "unless it moves a statement's outermost parallel loop inward or walks memory with "
                         "more strided streams than the input order"),
    "fuse": ("smart", "fusion policy of the scheduler: 'smart', 'max', 'none' or 'outer'"),
    "tile": (None, "tile the permutable bands of the Pluto schedule: True, False, or None (schedule='auto' "
                   "decides; 'pluto' alone does not tile)"),
    "tile_size": (None, "tile side for every band dimension (default: from a model of the L2 cache)"),
    "openmp": (True, "parallelize the outermost parallel loop of each nest with OpenMP"),
    "simd": (True, "mark innermost parallel loops '#pragma omp simd' and use the SIMD math functions of "
                   "glibc's libmvec where it links"),
    "microkernel": (True, "run gemm-like contraction nests as packed panels and a register-blocked "
                          "micro-kernel (BLIS-style, generated C)"),
    "fma": (False, "the micro-kernel fuses each product into its sum (one rounding, as BLAS libraries do): "
                   "faster, no longer bit-identical to pt.reference (which rounds the product, then the sum)"),
    "threads": (None, "OpenMP thread count (default: OpenMP's own)"),
    "cc": (None, "C compiler (default: $CC or 'cc')"),
    "cflags": ((), "extra compiler flags, appended to the defaults"),
    "temporaries": ((), "arrays whose contents after the call do not matter: their producers may be "
                        "recomputed in their consumers instead of stored (see polytri.fusion)"),
}


def _check_options(target: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(CPU_OPTIONS))
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(map(repr, unknown))} for target {target!r}; known: "
                          f"{', '.join(CPU_OPTIONS)}")
    merged = {k: opts.get(k, default) for k, (default, _) in CPU_OPTIONS.items()}
    for flag in ("openmp", "simd", "microkernel", "fma", "tile"):
        if not isinstance(merged[flag], bool) and not (flag == "tile" and merged[flag] is None):
            raise OptionError(f"option {flag!r} must be True or False, got {merged[flag]!r}")
    if merged["schedule"] not in ("auto", "pluto", "original"):
        raise OptionError(f"option 'schedule' must be 'auto', 'pluto' or 'original', got {merged['schedule']!r}")
    if merged["fuse"] not in FUSION_POLICIES:
        raise OptionError(f"option 'fuse' must be one of {', '.join(FUSION_POLICIES)}, got {merged['fuse']!r}")
    ts = merged["tile_size"]
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int) or ts < 1):
        raise OptionError(f"option 'tile_size' must be a positive int, got {ts!r}")
    t = merged["threads"]
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
        raise OptionError(f"option 'threads' must be a positive int, got {t!r}")
    if isinstance(merged["cflags"], str):
        merged["cflags"] = tuple(shlex.split(merged["cflags"]))
    merged["cflags"] = tuple(merged["cflags"])
    merged["cc"] = merged["cc"] or os.environ.get("CC") or "cc"
    return merged


@public
def compile(program: object, target: str = "cpu", options: Mapping[str, Any] | None = None) -> Any:
    """Compile a program (builder, frozen IR or ``@pt.kernel``) for ``target``: a :class:`CpuKernel` for
    ``cpu``, a :class:`~polytri.codegen_triton.kernel.TritonKernel` for ``nvgpu`` and ``amdgpu``."""
    if target not in TARGETS:
        raise OptionError(f"unknown target {target!r}; known targets: {', '.join(TARGETS)}")
    prog = to_program(program)
    if target == "cpu":
        opts = _check_options(target, options)
    else:
        from .codegen_triton.options import check_gpu_options
        opts = check_gpu_options(target, options)
    verify(prog)
    temps = opts["temporaries"]  # one name or several
    opts["temporaries"] = (temps,) if isinstance(temps, str) else tuple(temps or ())
    _check_temporaries(prog, opts["temporaries"])
    fusion: list[str] = []
    built = False
    if target != "cpu":  # the online softmax first: inlining its exponentials would hide it
        prog, fusion, built = _online_form(prog, target, opts)
    prog, inlined = _inline_temporaries(prog, opts["temporaries"], target)
    fusion += inlined
    deps = compute_dependences(prog)
    try:
        return _generate(prog, deps, target, opts, fusion, built)
    except PolytriError:
        raise
    except Exception as exc:  # an internal bug: never let it become a crash when a safe path exists
        if opts["schedule"] == "original":
            raise CompilationError(f"{prog.name}: internal error in polytri while generating code in the "
                                   f"original order ({type(exc).__name__}: {exc}); please report it") from exc
        warnings.warn(f"polytri: internal error while compiling {prog.name} ({type(exc).__name__}: {exc}); "
                      f"compiling it in its original order", stacklevel=3)
        log.warning("%s: internal error, falling back to the original order", prog.name, exc_info=True)
        return _generate(prog, deps, target, {**opts, "schedule": "original"}, fusion)


def _generate(prog: Program, deps: Dependences, target: str, opts: dict[str, Any], fusion: list[str],
              built: bool = False) -> Any:
    """Schedule, generate and build ``prog`` for ``target``; ``built``: a rewrite (the online softmax) put
    the program in the order it should run."""
    if target == "cpu":
        schedule, decisions, ast = choose_schedule(prog, deps, opts["schedule"], opts["fuse"], opts["tile"],
                                                   opts["tile_size"])
    else:  # GPU kernels block their parallel loops themselves: the schedule stays untiled
        from .codegen_triton.options import gpu_schedule
        schedule, decisions, ast = gpu_schedule(prog, deps, opts, built=built)
    decisions = [f"fusion: {d}" for d in fusion] + decisions
    for n in walk(ast):
        if isinstance(n, For):
            what = "parallel" if n.parallel else "carries a dependence"
            stmts = sorted({r.statement for r in walk(n.body) if isinstance(r, Run)}, key=lambda s: (len(s), s))
            decisions.append(f"loop {n.var} (time dimension {n.dim}) over {', '.join(stmts)}: {what}")
    scratch = scratch_arrays(prog, opts["temporaries"])
    if target != "cpu":
        from .codegen_triton.options import compile_gpu
        kernel = compile_gpu(prog, deps, schedule, ast, target=target, opts=opts, decisions=decisions,
                             scratch=scratch)
        _dump(prog, deps, schedule, ast, kernel.source, suffix="triton.py")
        return kernel
    cg = CodegenOptions(openmp=opts["openmp"], simd=opts["simd"], microkernel=opts["microkernel"],
                        fma=opts["fma"], scratch=scratch)
    function = f"pt_{prog.name}"
    source, contractions, local = generate_c(prog, ast, function=function, options=cg)
    decisions += [describe(c) for c in contractions]
    flags = (DEFAULT_FLAGS + (("-fopenmp",) if (opts["openmp"] or opts["simd"]) else ())
             + (vector_math_flags(opts["cc"]) if opts["simd"] else ()) + opts["cflags"])
    _dump(prog, deps, schedule, ast, source)
    library = build_library(source, cc=opts["cc"], flags=flags)
    decisions.append(f"built with {opts['cc']} {' '.join(flags)}")
    return CpuKernel(prog, schedule, deps, source, library, function, opts, decisions, local_arrays=local,
                     epilogue_arrays=read_back_by_epilogues(prog, contractions))


def _check_temporaries(prog: Program, temps: tuple[str, ...]) -> None:
    unknown = [t for t in temps if t not in {a.name for a in prog.arrays}]
    if unknown:
        raise OptionError(f"option 'temporaries' names {', '.join(map(repr, unknown))}, not arrays of program "
                          f"{prog.name!r}; its arrays: {', '.join(a.name for a in prog.arrays)}")


def _online_form(prog: Program, target: str, opts: dict[str, Any]) -> tuple[Program, list[str], bool]:
    """``prog`` with its softmax-weighted sums in online form where they match, the decisions, and whether
    it was rewritten; an internal error leaves the program as it is, with a warning."""
    from .codegen_triton.options import online_form
    try:
        rewritten, decisions = online_form(prog, target, opts)
        if rewritten is not prog:
            verify(rewritten)
    except Exception as exc:  # a bug of the rewrite: the program as written is a safe path
        warnings.warn(f"polytri: internal error in the online softmax of {prog.name} ({type(exc).__name__}: "
                      f"{exc}); compiling the program as written", stacklevel=4)
        log.warning("%s: online softmax failed, program left as written", prog.name, exc_info=True)
        return prog, [f"online softmax not applied: internal error ({type(exc).__name__})"], False
    return rewritten, decisions, rewritten is not prog


def _inline_temporaries(prog: Program, temps: tuple[str, ...], target: str) -> tuple[Program, list[str]]:
    """Recompute the producers of the arrays declared temporary (option ``temporaries``) where it pays at
    the target's balance; on GPU targets also those reading finished arrays (:func:`.inline_producers`)."""
    if not temps:
        return prog, []
    from .fusion import inline_producers
    from .fusion.cost import BALANCE
    inlined, decisions = inline_producers(prog, temps, settled_inputs=target != "cpu", balance=BALANCE[target])
    if inlined is not prog:
        verify(inlined)
    return inlined, decisions


def _dump(prog: Program, deps: Dependences, schedule: Schedule, ast: Node, source: str,
          suffix: str = "kernel.c") -> None:
    """With ``POLYTRI_DUMP=dir``, write every stage of the compilation of ``prog`` into ``dir``."""
    folder = os.environ.get("POLYTRI_DUMP")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    stages = {"ir.txt": program_to_text(prog), "dependences.txt": str(deps),
              "schedule.txt": f"{schedule.map}\nparallel: {schedule.parallel}\n", "loop_ast.txt": repr(ast),
              suffix: source}
    for name, text in stages.items():
        with open(os.path.join(folder, f"{prog.name}.{name}"), "w") as f:
            f.write(text)
    log.info("%s: stages written to %s", prog.name, folder)


def choose_schedule(prog: Program, deps: Dependences, kind: str, fuse: str,
                    tile: bool | None = False, tile_size: int | None = None) -> tuple[Schedule, list[str], Node]:
    """The schedule to generate code from, proved legal, with the decisions and its loop AST; the original
    order when the scheduler fails or its result cannot be proved legal (with a warning: never wrong
    code)."""
    original = original_schedule(prog, deps)
    prove_legal(original.map, deps, what=f"{prog.name}: the original order")
    if kind == "original":
        return original, ["schedule: the original order (option schedule='original')"], \
            build_loop_ast(prog, original, deps)
    try:
        sched = pluto_schedule(prog, deps, fuse=fuse)
        prove_legal(sched.map, deps, what=f"{prog.name}: the Pluto schedule")
    except (SchedulingError, IllegalScheduleError, isl.Error) as exc:
        warnings.warn(f"polytri: {exc}; compiling {prog.name} in its original order", stacklevel=3)
        log.warning("%s: falling back to the original order: %s", prog.name, exc)
        return original, [f"schedule: the original order, because {exc}"], build_loop_ast(prog, original, deps)
    untiled = sched
    if (tile is True or (tile is None and kind == "auto")) and any(b.width >= 2 for b in sched.bands):
        try:
            tiled = tile_schedule(prog, sched, deps, size=tile_size)
            prove_legal(tiled.map, deps, what=f"{prog.name}: the tiled schedule")
            sched = tiled
        except (IllegalScheduleError, isl.Error) as exc:
            warnings.warn(f"polytri: {exc}; compiling {prog.name} untiled", stacklevel=3)
            log.warning("%s: tiling dropped: %s", prog.name, exc)
        if tile is None and sched is not untiled and not _tiling_pays(original, untiled, sched):
            sched = untiled
    decisions = [f"scheduler: {d}" for d in sched.decisions]
    ours = build_loop_ast(prog, sched, deps)
    if kind == "auto":
        theirs = build_loop_ast(prog, original, deps)
        why = _parallelism_lost(prog, ours, theirs) or _locality_loss(prog, untiled, original)
        if why is not None:
            log.info("%s: %s", prog.name, why)
            return original, [f"schedule: the original order, because {why}"] + decisions, theirs
    return sched, [f"schedule: Pluto (fusion '{fuse}'), proved legal with isl"] + decisions, ours


def _parallelism_lost(prog: Program, ours: Node, theirs: Node) -> str | None:
    """Why the loop AST ``ours`` runs some statement with its outermost parallel loop deeper than the
    input order's AST ``theirs`` does (or with none where the input order has one), or ``None``.  A skewed
    band pays off only through tiling with wavefronts; untiled (or where tiling does not pay yet, see
    _tiling_pays) a skew just removes the input order's parallelism.  (Counting parallel loops instead
    would reject fusing a 4 x 4 nest into one loop of 16 iterations.)"""
    def first_parallel(places: list[tuple[bool, ...]]) -> float:
        return max(next((k for k, par in enumerate(p) if par), math.inf) for p in places)
    mine = {n: first_parallel(p) for n, p in enclosing_loops(ours).items()}
    base = {n: first_parallel(p) for n, p in enclosing_loops(theirs).items()}
    worse = [f"{s.name} ({mine[s.name]} > {base[s.name]})" for s in prog.statements
             if s.name in mine and s.name in base and mine[s.name] > base[s.name]]
    if not worse:
        return None
    return (f"the Pluto schedule puts the outermost parallel loop of {', '.join(worse)} deeper than the input "
            f"order (depth inf: none); the input order is kept")


def _locality_loss(prog: Program, pluto: Schedule, original: Schedule) -> str | None:
    """Why the Pluto schedule's innermost loops have clearly worse spatial locality than the input order,
    or ``None``.  Pluto's cost function sees dependence distances, not memory layout: to fuse bicg's
    ``s[j] += r[i] * A[i, j]`` with ``q[i] += A[i, j] * p[j]`` under an outer parallel loop it scans the
    first on ``(j, i)``, a column walk of ``A`` that loads a cache line per element (3x slower than the
    naive row walk here, which two cores of parallelism cannot repay).  Clearly worse means more strided
    streams (``locality.strided_streams``: accesses shared by fused statements count once) in the deepest
    statements that have any, whose ``n^depth`` iterations dominate the cost."""
    ours = list(strided_streams(prog, pluto.map).values())
    theirs = list(strided_streams(prog, original.map).values())
    depth = max((s.depth for s in ours + theirs), default=0)
    worse, before = dominant_streams(ours, depth), dominant_streams(theirs, depth)
    if len(worse) <= len(before):
        return None
    listed = f" ({', '.join(before)})" if before else ""
    return (f"the Pluto schedule's innermost loops walk {len(worse)} strided stream(s) in statements {depth} "
            f"loop(s) deep ({', '.join(worse)}), the input order {len(before)}{listed}: a strided walk loads a "
            f"cache line per element; the input order is kept")


def _tiling_pays(original: Schedule, untiled: Schedule, tiled: Schedule) -> bool:
    """The default (``tile=None``) tiles only where tiling is the sole source of parallelism: neither the
    input order nor the untiled schedule has a parallel loop, and the wavefront over tiles gives one
    (seidel-like sweeps: 1.66x on seidel-2d here).  Elsewhere the measured gains of the current tile
    sizes are within this machine's noise or negative (docs/scheduler.md), so tiling waits for issue 4."""
    return parallel_loops(original) == 0 and parallel_loops(untiled) == 0 and parallel_loops(tiled) > 0


def parallel_loops(s: Schedule) -> int:
    """Number of loop (non-scalar) time dimensions that carry no dependence."""
    return sum(1 for d, par in enumerate(s.parallel) if par and not (d < len(s.scalar) and s.scalar[d]))
