"""Exact dependences with isl's dataflow analysis, the arrays whose values come from before the call, and
whether one statement's accesses follow another's writes in the original order.

* flow (read after write): value-based, from the last write of each read element (isl's must-source
  analysis), which is exact for the static control programs polytri accepts;
* anti (write after read) and output (write after write): memory-based, every earlier access of the
  element, as needed to keep memory reuse legal without array expansion.

Dependences relate statement instances, ``{ S0[i, j] -> S1[i', j'] }``, and are restricted to the
program's parameter context.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass

import islpy as isl

from ..errors import public
from ..ir.builder import to_program
from ..ir.expr import Access
from ..ir.program import Program, Statement

log = logging.getLogger("polytri.schedule")


@dataclass(frozen=True)
class Dependences:
    """The dependences of a program, as isl union maps between statement instances."""

    flow: isl.UnionMap
    """Read-after-write, value-based (the write that produced the value read)."""
    anti: isl.UnionMap
    """Write-after-read, memory-based."""
    output: isl.UnionMap
    """Write-after-write, memory-based."""

    @functools.cached_property
    def all(self) -> isl.UnionMap:
        """Every dependence, of all three kinds (computed once: scheduling one transformer block asked
        for it some fifty times)."""
        return self.flow.union(self.anti).union(self.output).coalesce()

    @functools.cached_property
    def verdicts(self) -> dict[str, bool]:
        """Whether each schedule checked against these dependences is legal, by the text of its map
        (:func:`polytri.schedule.legality.is_legal`): the passes of one compilation check some schedules
        again (the GPU's candidates each prove the input order), and isl answers once."""
        return {}

    def __str__(self) -> str:
        return f"flow:   {self.flow}\nanti:   {self.anti}\noutput: {self.output}"


def _flow(sink: isl.UnionMap, source: isl.UnionMap, schedule: isl.UnionMap, *, must: bool) -> isl.UnionMap:
    info = isl.UnionAccessInfo.from_sink(sink)
    info = info.set_must_source(source) if must else info.set_may_source(source)
    info = info.set_schedule_map(schedule)
    flow = info.compute_flow()
    return flow.get_may_dependence()


def compute_dependences(program: Program, schedule: isl.UnionMap | None = None) -> Dependences:
    """Dependences of ``program`` under its original order (or under ``schedule``, an order map)."""
    order = program.schedule if schedule is None else schedule
    reads, writes = program.reads, program.writes
    flow = _flow(reads, writes, order, must=True)
    anti = _flow(writes, reads, order, must=False)
    output = _flow(writes, writes, order, must=False)
    ctx = program.context
    return Dependences(flow.intersect_params(ctx).coalesce(), anti.intersect_params(ctx).coalesce(),
                       output.intersect_params(ctx).coalesce())


@public
def dependences(program: object) -> Dependences:
    """``pt.dependences``: the exact flow, anti and output dependences of a program."""
    return compute_dependences(to_program(program))


def live_in(program: Program, names: Iterable[str] | None = None) -> frozenset[str]:
    """The arrays among ``names`` (default: all) some read of which sees a value from before the call."""
    wanted = {a.name for a in program.arrays} if names is None else set(names)
    out = set()
    for name in sorted(wanted):
        reads = isl.UnionMap.empty(program.context.get_space())
        for s in program.statements:
            for acc in s.reads:
                if acc.array == name:
                    reads = reads.union(isl.UnionMap.from_map(program.access_map(s, acc)))
        if reads.is_empty():
            continue
        info = (isl.UnionAccessInfo.from_sink(reads).set_must_source(program.writes)
                .set_schedule_map(program.schedule))
        if not info.compute_flow().get_may_no_source().intersect_params(program.context).is_empty():
            out.add(name)
    return frozenset(out)


def scratch_arrays(program: Program, temporaries: Iterable[str]) -> frozenset[str]:
    """The temporaries of ``program`` no read of which sees a value from before the call."""
    names = {a.name for a in program.arrays} & set(temporaries)
    before = live_in(program, names)
    for t in sorted(before):
        log.info("%s: temporary %s is read before it is written: kept in memory", program.name, t)
    return frozenset(names - before)


def follows_writes(program: Program, writer: Statement, user: Statement, uses: Iterable[Access]) -> bool:
    """Whether, in the original order, every instance of ``user`` that touches an element through
    ``uses`` (accesses of ``user``) comes after every instance of ``writer`` that writes that element."""
    write = isl.UnionMap.from_map(program.access_map(writer, writer.target))
    touch = isl.UnionMap.empty(program.schedule.get_space())
    for acc in uses:
        touch = touch.union(isl.UnionMap.from_map(program.access_map(user, acc)))
    pairs = touch.apply_range(write.reverse()).intersect_params(program.context)  # user -> writer, same element

    def time(st: Statement) -> isl.UnionMap:
        return program.schedule.intersect_domain(isl.UnionSet.from_set(st.domain))
    return pairs.is_subset(time(user).lex_gt_union_map(time(writer)))
