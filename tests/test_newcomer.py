"""What a newcomer reads (issue 26): schedules in program order, decisions without ``inf``, the demo's C."""

from __future__ import annotations

import re

import islpy as isl
import pytest

import polytri as pt
from polytri.schedule.choose import choose_schedule
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.schedule import map_text
from polytri.tools.cli import main
from polytri.tools.demo import kernel_c


def _many_statements(n: int = 12) -> pt.Program:
    """``n`` loops one after the other, each writing its own array: isl prints them in no useful order."""
    p = pt.Program("many", params=["N"])
    for k in range(n):
        p.array(f"A{k}", ("N",), "float64")
        with p.loop("i", 0, "N"):
            p.assign(f"A{k}[i] = A{k}[i] + {k}.0")
    return p


def _jacobi_1d() -> pt.Program:
    p = pt.Program("jacobi_1d", params=["T", "N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("t", 0, "T"):
        with p.loop("i", 1, "N - 1"):
            p.assign("B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3")
        with p.loop("i", 1, "N - 1"):
            p.assign("A[i] = B[i]")
    return p


def test_map_text_lists_statements_in_the_order_given_and_parses_back() -> None:
    m = isl.UnionMap("[N] -> { S10[i] -> [i, 2] : 0 <= i < N; S2[i] -> [i, 1] : 0 <= i < N; "
                     "S1[i] -> [i, 0] : 0 <= i < N }")
    lines = map_text(m)
    assert lines[0] == "[N] -> {" and lines[-1] == "}"
    assert [line.split("[")[0].strip() for line in lines[1:-1]] == ["S1", "S2", "S10"]  # S2 before S10
    assert isl.UnionMap("\n".join(lines)) == m
    assert [line.split("[")[0].strip() for line in map_text(m, ["S10", "S1", "S2"])[1:-1]] == ["S10", "S1", "S2"]
    one = isl.UnionMap("{ S0[i] -> [i] : 0 <= i < 4 }")
    assert map_text(one) == [str(one)]
    deps = isl.UnionMap("{ S2[i] -> S0[i]; S0[i] -> S2[i + 1]; S0[i] -> S1[i] }")
    assert [line.strip().rstrip(";") for line in map_text(deps)[1:-1]] == [
        "S0[i] -> S1[i]", "S0[i] -> S2[1 + i]", "S2[i] -> S0[i]"]


@pytest.mark.cc
def test_schedules_list_statements_in_program_order(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    prog = _many_statements()
    names = [s.name for s in prog.statements]
    k = pt.compile(prog, target="cpu")
    report = k.explain()
    section = report[report.index("schedule ("):]
    rows = re.findall(r"^    (S\d+)\[", section, re.M)
    assert rows == names, rows
    spec = tmp_path / "many.py"
    spec.write_text("import polytri as pt\n\n\ndef many() -> pt.Program:\n"
                    "    p = pt.Program('many', params=['N'])\n"
                    "    for k in range(12):\n"
                    "        p.array(f'A{k}', ('N',), 'float64')\n"
                    "        with p.loop('i', 0, 'N'):\n"
                    "            p.assign(f'A{k}[i] = A{k}[i] + {k}.0')\n"
                    "    return p\n")
    assert main(["compile", str(spec), "--show", "schedule,deps"]) == 0
    out = capsys.readouterr().out
    schedule = out[out.index("==== schedule ===="):]
    assert re.findall(r"^    (S\d+)\[", schedule, re.M) == names


def test_the_choice_of_the_input_order_reads_without_inf() -> None:
    prog = _jacobi_1d().build()
    deps = compute_dependences(prog)
    sched, decisions, _ = choose_schedule(prog, deps, "auto", "smart", None)
    assert sched.origin == "original"
    assert decisions[0].kind == "original-order" and decisions[0].data["reason"] == "parallelism-lost"
    assert decisions[0].data["loops"] == ({"statements": ("S0", "S1"), "pluto": None, "original": 1},)
    why = decisions[0].text   # the sentence explain() prints
    assert not re.search(r"\binf\b", why), why
    assert ("its outermost parallel loop is loop 2 of S0, S1, where the Pluto schedule has none "
            "(loops counted from the outermost)") in why


def test_parallel_depths_names_the_pluto_loop_when_there_is_one() -> None:
    from polytri.schedule.choose import _parallel_depths
    assert _parallel_depths(["S3"], 1, 0) == "loop 1 of S3, where the Pluto schedule runs loop 2 in parallel"
    assert _parallel_depths(["S0", "S1"], float("inf"), 1) == "loop 2 of S0, S1, where the Pluto schedule has none"


@pytest.mark.cc
def test_the_demo_shows_the_loop_nest_not_the_dispatch_wrapper() -> None:
    from polytri.suite import KERNELS
    from polytri.tools.demo import SHOWCASE, SHOWN
    assert SHOWN in dict(SHOWCASE)
    k = pt.compile(KERNELS[SHOWN].build(), target="cpu")
    shown = kernel_c(k.source, f"pt_{SHOWN}")
    assert shown.startswith(f"static void pt_{SHOWN}_par0(")
    assert f"void pt_{SHOWN}(" not in shown  # not the entry point that dispatches
    assert "#include" not in shown and "pt__max_int64_t(int64_t" not in shown  # not the helpers
    loops = re.findall(r"^\s*for \(int64_t (c\d) ", shown, re.M)
    assert len(loops) >= 2  # the nest
    for st in k.program.statements:  # both passes, fused in one nest
        assert f"/* {st.name}: " in shown
    # the nest five times: with tmp's rows in a ring or not, out's rows streamed past the last-level cache
    # or not, then the rows that waited
    assert len(shown.splitlines()) < 200
    # without parallel regions: the entry point itself, which then holds the loops
    serial = pt.compile(KERNELS[SHOWN].build(), target="cpu", options={"openmp": False})
    alone = kernel_c(serial.source, f"pt_{SHOWN}")
    assert alone.startswith(f"void pt_{SHOWN}(") and "for (int64_t" in alone


@pt.kernel
def reads_before_the_start(A: pt.f64["N"], N: int):  # noqa: F821, UP037
    for i in range(N):
        A[i] = A[i - 1]


def test_a_size_error_that_no_size_avoids_does_not_advise_other_sizes() -> None:
    import numpy as np

    from polytri.errors import ParameterBoundsError
    with pytest.raises(ParameterBoundsError) as info:
        reads_before_the_start(np.zeros(4))
    text = str(info.value)
    assert "at every size at which the statement runs" in text and "change the subscript" in text
    assert "other sizes" not in text
    p = pt.Program("shifted", params=["N", "M"])  # out of bounds only when M >= N: other sizes help
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "M"):
        p.assign("A[i] = A[i + 1]")
    k = pt.compile(p)
    with pytest.raises(ParameterBoundsError, match="Pass other sizes"):
        k(A=np.zeros(4), M=4)


def test_the_input_orders_table_gives_each_statements_row() -> None:
    from polytri.runtime.compiled import schedule_table
    from polytri.schedule.schedule import original_schedule
    prog = _jacobi_1d().build()
    table = schedule_table(original_schedule(prog, compute_dependences(prog)), ["S0", "S1"])
    assert table[1].endswith("sequential S0: t, S1: t") and table[2].endswith("S0: 0, S1: 1")
    assert table[3].endswith("parallel   S0: i, S1: i")
