"""``pt.compile``: program -> verified, rewritten, scheduled, generated kernel, for any registered target.

The driver runs the stages every target shares and asks the target (:class:`~polytri.pipeline.target.Target`)
for the rest; it never branches on the target's name.  The stages, in order:

========== ==================================================== =========================================
stage      what it does                                         whose
========== ==================================================== =========================================
options    merge with the defaults, check every value           the target's options class
verify     bounds of every access, proved with isl              :mod:`polytri.ir.verify`
rewrite    subscripts that divide written as affine functions   :mod:`polytri.ir.subscripts`
           where they are one, then statement-group rewrites    ``Target.rewrite`` (GPU: online softmax)
           that pay on the target
inline     recompute temporaries where it pays                  :mod:`polytri.fusion` (target's balance)
deps       exact dependences                                    :mod:`polytri.schedule.dependences`
schedule   schedule proved legal, and its loop AST              ``Target.schedule``
generate   source and callable kernel                           ``Target.generate``
========== ==================================================== =========================================

An internal error after the dependences compiles the program again in its original order, with a warning:
never a crash where a safe path exists, never wrong code.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import Any

from .codegen_triton.backend import GpuTarget
from .cpu_codegen.target import CpuTarget
from .errors import CompilationError, OptionError, PolytriError, public
from .fusion import inline_producers
from .ir.builder import to_program
from .ir.program import Program
from .ir.subscripts import simplify_subscripts
from .ir.textform import program_to_text
from .ir.verify import verify
from .pipeline.decisions import Decision, records, under
from .pipeline.option_doc import target_options_text
from .pipeline.options import CpuOptions, option_table
from .pipeline.stages import StageClock
from .pipeline.target import Target, get_target, register_target, target_names
from .schedule.dependences import Dependences, compute_dependences, scratch_arrays
from .schedule.loop_ast import For, Node, Run, walk
from .schedule.schedule import Schedule

log = logging.getLogger("polytri.compile")

for _t in (CpuTarget("cpu"), GpuTarget("nvgpu"), GpuTarget("amdgpu")):
    register_target(_t)

#: The built-in targets.
TARGETS = target_names()

#: Options of the cpu target: ``{name: (default, description)}``, from its dataclass.
CPU_OPTIONS = option_table(CpuOptions)


@public
def compile(program: object, target: str = "cpu", options: Mapping[str, Any] | None = None) -> Any:
    """Compile a program for ``target`` and return the kernel, ready to call with keyword arguments.

    ``program`` is a ``pt.Program`` builder, a frozen :class:`~polytri.ir.program.Program` or a
    ``@pt.kernel`` function.  ``target`` is a registered target's name: ``cpu`` gives a
    :class:`~polytri.cpu_codegen.kernel.CpuKernel` (C with OpenMP), ``nvgpu`` and ``amdgpu`` a
    :class:`~polytri.codegen_triton.kernel.TritonKernel`.  ``options`` maps option names to values; each
    one is checked before anything else runs, and an unknown name or a bad value is an
    :class:`~polytri.errors.OptionError`.  The stages that follow are listed in :mod:`polytri.compiler`;
    ``k.explain()`` reports what they decided.
    """
    tgt = get_target(target)
    prog = to_program(program)
    opts = tgt.check_options(options)
    clock = StageClock(prog.name)
    with clock.stage("verify") as out:
        verify(prog)
        _check_temporaries(prog, opts["temporaries"])
        out.append(prog)
    with clock.stage("rewrite") as out:
        prog, fusion, built = _rewrite(tgt, simplify_subscripts(prog), opts)
        out.append(prog)
    with clock.stage("inline") as out:
        prog, inlined = _inline_temporaries(tgt, prog, opts["temporaries"])
        out.append(prog)
    fusion += inlined
    with clock.stage("dependences") as out:
        deps = compute_dependences(prog)
        out.append(deps)
    kernel = _generate_safely(tgt, prog, deps, opts, fusion, built, clock)
    kernel.stage_times = tuple(clock.times)
    return kernel


if compile.__doc__:  # None under python -OO
    compile.__doc__ += f"\n{target_options_text(TARGETS, indent='    ')}"


def _generate_safely(tgt: Target, prog: Program, deps: Dependences, opts: dict[str, Any], fusion: list[Decision | str],
                     built: bool, clock: StageClock) -> Any:
    """:func:`_generate`, and on an internal error the same in the original order, with a warning."""
    try:
        return _generate(tgt, prog, deps, opts, fusion, clock, built)
    except PolytriError:
        raise
    except Exception as exc:  # an internal bug: never let it become a crash when a safe path exists
        if opts["schedule"] == "original":
            raise CompilationError(f"{prog.name}: internal error in polytri while generating code in the "
                                   f"original order ({type(exc).__name__}: {exc}); please report it") from exc
        warnings.warn(f"polytri: internal error while compiling {prog.name} ({type(exc).__name__}: {exc}); "
                      f"compiling it in its original order", stacklevel=3)
        log.warning("%s: internal error, falling back to the original order", prog.name, exc_info=True)
        return _generate(tgt, prog, deps, {**opts, "schedule": "original"}, fusion, clock)


def _generate(tgt: Target, prog: Program, deps: Dependences, opts: dict[str, Any], fusion: list[Decision | str],
              clock: StageClock, built: bool = False) -> Any:
    """Schedule and generate ``prog``; ``built``: a rewrite (the online softmax) put the program in the order
    it should run."""
    with clock.stage("schedule") as out:
        schedule, chosen, ast = tgt.schedule(prog, deps, opts, built=built)
        out.append((schedule, chosen, ast))
    decisions = ([d if isinstance(d, Decision) and d.stage == "schedule" else under(d, "fusion", "fusion: ")
                  for d in fusion] + records(chosen, "schedule")
                 + _loop_decisions(ast))

    def dump(source: str) -> None:
        _dump(prog, deps, schedule, ast, source, suffix=tgt.source_suffix)
    with clock.stage("generate") as out:
        out.append(tgt.generate(prog, deps, schedule, ast, opts=opts, decisions=decisions,
                                scratch=scratch_arrays(prog, opts["temporaries"]), dump=dump))
    return out[0]


def _loop_decisions(ast: Node) -> list[Decision]:
    """One decision per loop of the AST: parallel, or carrying a dependence of the statements it runs."""
    out = []
    for n in walk(ast):
        if isinstance(n, For):
            what = "parallel" if n.parallel else "carries a dependence"
            stmts = sorted({r.statement for r in walk(n.body) if isinstance(r, Run)}, key=lambda s: (len(s), s))
            out.append(Decision("loops", "parallel" if n.parallel else "sequential", n.var,
                                f"loop {n.var} (time dimension {n.dim}) over {', '.join(stmts)}: {what}",
                                {"dim": n.dim, "statements": tuple(stmts)}))
    return out


def _check_temporaries(prog: Program, temps: tuple[str, ...]) -> None:
    unknown = [t for t in temps if t not in {a.name for a in prog.arrays}]
    if unknown:
        raise OptionError(f"option 'temporaries' names {', '.join(map(repr, unknown))}, not arrays of program "
                          f"{prog.name!r}; its arrays: {', '.join(a.name for a in prog.arrays)}")


def _rewrite(tgt: Target, prog: Program, opts: dict[str, Any]) -> tuple[Program, list[Decision | str], bool]:
    """The target's rewrites (``Target.rewrite``), verified; an internal error leaves the program as it is,
    with a warning."""
    try:
        rewritten, decisions, built = tgt.rewrite(prog, opts)
        if rewritten is not prog:
            verify(rewritten)
    except Exception as exc:  # a bug of the rewrite: the program as written is a safe path
        warnings.warn(f"polytri: internal error in the {tgt.rewrite_name} of {prog.name} ({type(exc).__name__}: "
                      f"{exc}); compiling the program as written", stacklevel=4)
        log.warning("%s: %s failed, program left as written", prog.name, tgt.rewrite_name, exc_info=True)
        return prog, [Decision("rewrite", "internal-error", prog.name,
                               f"{tgt.rewrite_name} not applied: internal error ({type(exc).__name__})",
                               {"error": type(exc).__name__})], False
    return rewritten, list(decisions), built


def _inline_temporaries(tgt: Target, prog: Program, temps: tuple[str, ...]) -> tuple[Program, list[Decision | str]]:
    """Recompute the producers of the arrays declared temporary (option ``temporaries``) where it pays at
    the target's balance; on targets that allow it also those reading finished arrays (:func:`.inline_producers`)."""
    if not temps:
        return prog, []
    inlined, decisions = inline_producers(prog, temps, settled_inputs=tgt.recompute_from_settled_inputs,
                                          balance=tgt.balance)
    if inlined is not prog:
        verify(inlined)
    return inlined, list(decisions)


def _dump(prog: Program, deps: Dependences, schedule: Schedule, ast: Node, source: str, suffix: str) -> None:
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
