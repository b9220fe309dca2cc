"""What every compiled kernel shares, whatever its target: the program, its schedule and the decisions
that produced it, and the part of ``explain()`` that describes them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import islpy as isl

from ..ir.program import Program
from ..pipeline.decisions import Decision, records
from ..schedule.dependences import Dependences
from ..schedule.schedule import Schedule, map_text


def schedule_lines(s: Schedule, statements: list[str]) -> list[str]:
    """The schedule for reports: its label (origin and alternative), its map (one statement a line, in
    ``statements``' order) and :func:`schedule_table`."""
    return ([f"schedule ({s.label}):"] + [f"  {line}" for line in map_text(s.map, statements)] + [""]
            + schedule_table(s, statements))


def map_rows(umap: isl.UnionMap, ndim: int) -> tuple[dict[str, str], ...]:
    """Each time dimension of a schedule map as text per statement (``2t + i``), for a schedule that
    carries no rows of its own (the input order); empty where a statement's map is not a function."""
    rows: list[dict[str, str]] = [{} for _ in range(ndim)]
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    for m in maps:
        if not m.is_single_valued():
            return ()
        pma = isl.PwMultiAff.from_map(m)
        for d in range(min(ndim, m.dim(isl.dim_type.out))):
            texts = [p[p.index("[(") + 2:p.rindex(")]")] if "[(" in p else "?" for p in _pieces(pma.get_pw_aff(d))]
            rows[d][m.get_tuple_name(isl.dim_type.in_)] = " | ".join(texts) if texts else "?"
    return tuple(rows)


def _pieces(pa: isl.PwAff) -> list[str]:
    """isl's text of each piece of ``pa`` (``{ S0[t, i] -> [(2t + i)] }``)."""
    out: list[str] = []
    pa.foreach_piece(lambda _, aff: out.append(str(aff)))
    return out


def schedule_table(s: Schedule, statements: list[str]) -> list[str]:
    """One line per time dimension: kind (loop, scalar), band, parallel, and each statement's row."""
    band_of = {d: k for k, b in enumerate(s.bands) for d in b.dims}
    table = s.rows or map_rows(s.map, s.ndim)
    out = []
    for d in range(s.ndim):
        scalar = s.scalar[d] if d < len(s.scalar) else False
        kind = "scalar " if scalar else "loop   "
        band = f"band {band_of[d]} (permutable)" if d in band_of else ("-" if scalar else "outside bands")
        par = "" if scalar else ("parallel" if s.parallel[d] else "sequential")
        rows = ", ".join(f"{n}: {table[d][n]}" for n in statements if n in table[d]) if table else ""
        out.append(f"  t{d}: {kind} {band:22s} {par:10s} {rows}".rstrip())
    return out



class CompiledKernel:
    """Base of :class:`~polytri.cpu_codegen.kernel.CpuKernel` and
    :class:`~polytri.codegen_triton.kernel.TritonKernel`."""

    def __init__(self, program: Program, schedule: Schedule, deps: Dependences, options: dict[str, Any],
                 decisions: Sequence[Decision | str], target: str):
        self.program = program
        self.options = dict(options)
        self.dependences = deps
        self._schedule = schedule
        self._decisions: list[Decision | str] = list(decisions)
        self._target = target
        self.stage_times: tuple[tuple[str, float], ...] = ()
        """Wall time of each stage of the compilation, in order (set by ``pt.compile``)."""

    @property
    def target(self) -> str:
        """The name of the target the kernel was compiled for (``cpu``, ``nvgpu``, ``amdgpu``)."""
        return self._target

    @property
    def schedule(self) -> isl.UnionMap:
        """The final schedule: statement instances -> one common time space, lexicographic order."""
        return self._schedule.map

    @property
    def schedule_info(self) -> Schedule:
        """The final schedule with its facts: bands, parallel and scalar dimensions, decisions."""
        return self._schedule

    @property
    def decisions(self) -> list[str]:
        """Every decision of the compilation (schedule, fusion, parallel loops, launches), in order, as the
        sentences ``explain()`` prints."""
        return [str(d) for d in self._decisions]

    @property
    def decision_records(self) -> list[Decision]:
        """The same decisions as records (stage, kind, subject, sentence, data): what code should read."""
        return records(self._decisions, "compile")

    def _stage_report(self) -> list[str]:
        """The compilation's stages and their times, one line."""
        if not self.stage_times:
            return []
        return ["", "stages: " + ", ".join(f"{name} {1000 * t:.1f} ms" for name, t in self.stage_times)]

    def _schedule_report(self) -> list[str]:
        """The schedule, as a map and as a table of its dimensions."""
        return schedule_lines(self._schedule, [st.name for st in self.program.statements])
