"""Each loop AST and each legality verdict is computed once per compilation: ``build_loop_ast`` keeps its
trees in the program's memo (by schedule, dependences and options), ``is_legal`` its verdicts with the
dependences; a compilation on either target scans no schedule twice and checks none twice."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

import polytri as pt
from polytri.ir import to_program
from polytri.schedule import legality, loop_ast
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.legality import is_legal
from polytri.schedule.loop_ast import build_loop_ast
from polytri.schedule.schedule import original_schedule
from polytri.suite import KERNELS


def test_the_same_schedule_gets_the_same_tree_and_other_options_or_dependences_a_new_one() -> None:
    prog = to_program(KERNELS["jacobi_2d"].build())
    deps = compute_dependences(prog)
    sched = original_schedule(prog, deps)
    ast = build_loop_ast(prog, sched, deps)
    assert build_loop_ast(prog, sched, deps) is ast
    assert build_loop_ast(prog, sched, deps, separate_guards=True) is not ast
    assert build_loop_ast(prog, sched, compute_dependences(prog)) is not ast
    assert build_loop_ast(prog, sched) is not ast
    copy = dataclasses.replace(prog, statements=prog.statements)  # its own memo
    assert build_loop_ast(copy, sched, deps) is not ast
    assert build_loop_ast(copy, sched, deps) == ast


def test_a_verdict_is_kept_with_the_dependences() -> None:
    prog = to_program(KERNELS["seidel_2d"].build())
    deps = compute_dependences(prog)
    sched = original_schedule(prog, deps)
    assert is_legal(sched.map, deps)
    assert deps.verdicts == {str(sched.map): True}
    deps.verdicts[str(sched.map)] = False  # the kept verdict is what is answered
    assert not is_legal(sched.map, deps)
    assert is_legal(sched.map, compute_dependences(prog))


@pytest.mark.parametrize("target", ["cpu", "nvgpu"])
@pytest.mark.parametrize("name", ["gemm", "2mm", "correlation", "atax"])
def test_a_compilation_scans_and_checks_each_schedule_once(name: str, target: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    scans: Counter[tuple[str, bool]] = Counter()
    checks: Counter[str] = Counter()
    scan, violations = loop_ast._scan, legality.violations

    def counted_scan(program, schedule, deps, separate_guards):  # type: ignore[no-untyped-def]
        scans[(str(schedule.map), separate_guards)] += 1
        return scan(program, schedule, deps, separate_guards)

    def counted_violations(schedule, deps):  # type: ignore[no-untyped-def]
        checks[str(schedule)] += 1
        return violations(schedule, deps)
    monkeypatch.setattr(loop_ast, "_scan", counted_scan)
    monkeypatch.setattr(legality, "violations", counted_violations)
    pt.compile(KERNELS[name].build(), target=target)
    assert scans and checks
    assert max(scans.values()) == 1 and max(checks.values()) == 1, (scans, checks)
