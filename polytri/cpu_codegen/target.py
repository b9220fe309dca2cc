"""The ``cpu`` target: C with OpenMP, built with the system's C compiler and called through ctypes."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..fusion.cost import BALANCE
from ..ir.program import Program
from ..ir.types import program_typer
from ..pipeline.decisions import Decision
from ..pipeline.options import CpuOptions
from ..pipeline.target import Target
from ..schedule.choose import choose_schedule
from ..schedule.dependences import Dependences, scratch_arrays
from ..schedule.index_split import split_loops
from ..schedule.jam import jam_chains
from ..schedule.loop_ast import If, Node
from ..schedule.schedule import Schedule
from .build import (
    build_library,
    build_library_later,
    building_in_background,
    default_flags,
    vector_math_flags,
)
from .cgen import CodegenOptions, generate_c
from .contraction import find_domain_contraction
from .contraction_fusion import kept_in_tiles
from .contraction_model import describe
from .fork_cost import fork_cost
from .kernel import CpuKernel
from .nest_plan import kernel_statements
from .seams import find_seams


class CpuTarget(Target):
    """Tiled Pluto schedules (or the input order), printed as C, parallel loops under OpenMP."""

    options_class = CpuOptions
    balance: float = BALANCE["cpu"]
    source_suffix = "kernel.c"
    rewrite_name = "index-set splitting"

    def check_options(self, options: Any) -> dict[str, Any]:
        """The options, with the C compiler resolved: the option, else ``$CC``, else ``cc``."""
        opts = super().check_options(options)
        opts["cc"] = opts["cc"] or os.environ.get("CC") or "cc"
        return opts

    def rewrite(self, program: Program, opts: dict[str, Any]) -> tuple[Program, list[Decision], bool]:
        """Under ``schedule="auto"`` and option ``split``: loops split where their carried dependences all
        meet one iteration (:mod:`polytri.schedule.index_split`)."""
        if not (opts["split"] and opts["schedule"] == "auto"):
            return program, [], False
        split, decisions = split_loops(program)
        return split, decisions, False

    def schedule(self, program: Program, deps: Dependences, opts: dict[str, Any], *, built: bool
                 ) -> tuple[Schedule, list[Decision], Node]:
        packed: frozenset[str] = frozenset()
        if opts["microkernel"] and opts["schedule"] == "auto":  # read by tiling by size and the jam
            typer = program_typer(program)
            packed = frozenset(st.name for st in program.statements  # the micro-kernel blocks these itself
                               if find_domain_contraction(st, program, typer))
        schedule, decisions, ast = choose_schedule(program, deps, opts["schedule"], opts["fuse"], opts["tile"],
                                                   opts["tile_size"], vector_loops=True,
                                                   packed=packed if opts["tile"] is None else frozenset())
        if opts["jam"] and opts["schedule"] == "auto":
            # the statements the micro-kernel runs in this loop AST: one that could be a contraction but
            # is not one here (gramschmidt's update, under the loop of its sums) is jammed with its loop
            scratch = scratch_arrays(program, opts["temporaries"])
            nests = (kernel_statements(ast, program, program_typer(program), simd=opts["simd"], scratch=scratch)
                     if packed else frozenset())
            schedule, ast, jammed = jam_chains(program, deps, schedule, ast, exclude=nests, buffered=scratch)
            decisions += jammed
        return schedule, decisions, ast

    def generate(self, program: Program, deps: Dependences, schedule: Schedule, ast: Node, *,
                 opts: dict[str, Any], decisions: list[Decision], scratch: frozenset[str],
                 dump: Callable[[str], None]) -> CpuKernel:
        cg = CodegenOptions(openmp=opts["openmp"], simd=opts["simd"], microkernel=opts["microkernel"],
                            fma=opts["fma"], scratch=scratch)
        function = f"pt_{program.name}"
        versioned = isinstance(ast, If) and schedule.alternative is not None  # two maps: the AST scans both
        seams = find_seams(program, schedule.map, deps, ast) if opts["openmp"] and not (versioned or schedule.tiled) else {}
        out = generate_c(program, ast, function=function, options=cg, seams=seams)
        source, contractions, local = out.source, out.contractions, out.local_arrays
        min_work = 0.0
        if any(r.verdict == "runtime" for r in out.regions):
            min_work = opts["min_parallel_work"]
            if min_work is None:
                min_work = fork_cost(opts["cc"]).min_work
        made: list[Decision | str] = [*decisions, *(describe(c) for c in contractions),
                                      *(r.decision(min_work) for r in out.regions),
                                      *(s.decision() for s in out.streams),
                                      *(s.decision() for s in out.seams)]
        flags = (default_flags(opts["cc"]) + (("-fopenmp",) if (opts["openmp"] or opts["simd"]) else ())
                 + (vector_math_flags(opts["cc"]) if opts["simd"] else ()) + opts["cflags"])
        dump(source)  # before the build, which may fail
        library = (build_library_later if building_in_background() else build_library)(source, cc=opts["cc"],
                                                                                       flags=flags)
        made.append(f"built with {opts['cc']} {' '.join(flags)}")
        return CpuKernel(program, schedule, deps, source, library, function, opts, made, local_arrays=local,
                         epilogue_arrays=kept_in_tiles(contractions), min_parallel_work=min_work)
