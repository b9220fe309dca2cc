"""The driver's contracts: typed target options with one validator for every entry point, and the Target
interface through which a target (or a researcher's variant of one) plugs into ``pt.compile``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import polytri as pt
from polytri.cpu_codegen.target import CpuTarget
from polytri.ir.program import Program
from polytri.pipeline import CpuOptions, GpuOptions, get_target, option_table, parse_options, register_target
from polytri.schedule.dependences import Dependences
from polytri.schedule.legality import prove_legal
from polytri.schedule.loop_ast import Node, build_loop_ast
from polytri.schedule.schedule import Schedule, original_schedule
from polytri.suite import KERNELS, copy_args, make_args


@pytest.mark.parametrize(("target", "options", "message"), [
    ("nvgpu", {"num_stages": -1}, "option 'num_stages' must be a positive int, got -1"),
    ("nvgpu", {"num_stages": 0}, "option 'num_stages' must be a positive int"),
    ("nvgpu", {"num_warps": 3}, "option 'num_warps' must be a power of two, got 3"),
    ("nvgpu", {"dot_block": (64, 64)}, r"option 'dot_block' must be \(M, N, K\)"),
    ("nvgpu", {"tile": True}, "unknown option.*'tile' for target 'nvgpu'"),
    ("amdgpu", {"fp32_dot": "fast"}, "option 'fp32_dot' must be 'ieee' or 'tf32', got 'fast'"),
    ("cpu", {"threads": 0}, "option 'threads' must be a positive int"),
    ("cpu", {"tile_size": True}, "option 'tile_size' must be an int, None, got True"),
    ("cpu", {"schedule": "fast"}, "option 'schedule' must be 'auto' or 'pluto' or 'original'"),
])
def test_options_are_checked_by_their_types_and_checks(target: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(pt.OptionError, match=message):
        get_target(target).check_options(options)


def test_option_defaults_and_forms() -> None:
    opts = parse_options(CpuOptions, {"cflags": "-O2 -g", "temporaries": "T"}, "target 'cpu'")
    assert opts.cflags == ("-O2", "-g") and opts.temporaries == ("T",) and opts.cc is None
    assert parse_options(CpuOptions, {"temporaries": {"b", "a"}}, "target 'cpu'").temporaries == ("a", "b")
    assert get_target("cpu").check_options({})["cc"]  # $CC, else cc
    assert parse_options(GpuOptions, {"dot_block": [64, 64, 32]}, "target 'nvgpu'").dot_block == (64, 64, 32)


def test_the_field_docstrings_are_the_documentation() -> None:
    table = option_table(CpuOptions)
    assert list(table) == [f for f in CpuOptions.__dataclass_fields__]
    assert table["fma"][0] is False and "one rounding" in table["fma"][1]
    assert all(doc for _, doc in option_table(GpuOptions).values())


def test_the_torch_frontend_checks_target_options_at_once() -> None:
    """Options the chosen target does not take are an error when the decorator is applied, not a silent
    fall back to eager for every graph."""
    pytest.importorskip("torch")
    with pytest.raises(pt.OptionError, match="'tile' for target 'nvgpu'"):
        pt.jit(compile_options={"target": "nvgpu", "tile": True})
    with pytest.raises(pt.OptionError, match="'threads' for target 'amdgpu'"):
        pt.jit(compile_options={"target": "amdgpu", "threads": 2})


class OriginalOrderCpu(CpuTarget):
    """A researcher's variant of the cpu target: its own schedule stage (here the input order, reversed
    nowhere, proved legal), everything else the cpu target's."""

    def schedule(self, program: Program, deps: Dependences, opts: dict[str, Any], *, built: bool
                 ) -> tuple[Schedule, list[str], Node]:
        s = original_schedule(program, deps)
        prove_legal(s.map, deps, what=f"{program.name}: my schedule")
        return s, ["schedule: mine"], build_loop_ast(program, s, deps)


@pytest.mark.cc
def test_a_registered_target_replaces_a_stage() -> None:
    register_target(OriginalOrderCpu("cpu-mine"))
    prog = KERNELS["gemm"].build()
    k = pt.compile(prog, target="cpu-mine")
    assert "schedule: mine" in k.decisions
    args = make_args(KERNELS["gemm"], KERNELS["gemm"].small, seed=3)
    want, got = copy_args(args), copy_args(args)
    pt.reference(prog, **want)
    k(**got)
    for name, v in want.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_allclose(got[name], v, rtol=1e-9, err_msg=name)
    with pytest.raises(pt.OptionError, match="unknown target 'cpu-theirs'"):
        pt.compile(prog, target="cpu-theirs")


@pytest.mark.cc
def test_every_stage_is_timed_and_seen_by_the_hooks() -> None:
    from polytri.pipeline import add_stage_hook, remove_stage_hook
    from polytri.pipeline.stages import StageEvent
    seen: list[StageEvent] = []
    add_stage_hook(seen.append)
    try:
        k = pt.compile(KERNELS["jacobi_1d"].build(), target="cpu")
    finally:
        remove_stage_hook(seen.append)
    stages = ["verify", "rewrite", "inline", "dependences", "schedule", "generate"]
    assert [e.stage for e in seen] == stages == [name for name, _ in k.stage_times]
    assert seen[-1].value is k and all(e.program == "jacobi_1d" and e.seconds >= 0 for e in seen)
    assert "stages: verify " in k.explain()


@pytest.mark.cc
def test_decisions_are_records_with_the_sentences_explain_prints() -> None:
    k = pt.compile(KERNELS["gemm"].build(), target="cpu")
    recs = k.decision_records
    assert [r.text for r in recs] == k.decisions
    loops = [r for r in recs if r.stage == "loops"]
    assert loops and {r.kind for r in loops} <= {"parallel", "sequential"}
    assert all(r.subject == f"c{r.data['dim']}" and r.data["statements"] for r in loops)
    assert any(r.kind == "parallel" for r in loops)  # gemm's rows


def test_the_option_literals_agree_with_the_scheduler() -> None:
    """The options' types spell the scheduler's fusion policies out (a type needs literals): they must not drift."""
    import typing

    from polytri.pipeline.options import Fusion
    from polytri.schedule.pluto import FUSION_POLICIES
    assert set(typing.get_args(Fusion)) == set(FUSION_POLICIES)
