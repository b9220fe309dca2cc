"""The legality proof (polytri/schedule/legality.py): the original and the Pluto schedules of every suite
kernel are accepted; mutated schedules that run a dependence backwards are rejected with an example; and
``pt.compile`` falls back to the original order, with a warning, when the scheduler's result is illegal."""

from __future__ import annotations

import dataclasses
import functools
import re

import islpy as isl
import numpy as np
import pytest

import polytri as pt
import polytri.schedule.choose
from polytri.ir import to_program
from polytri.ir.program import Program, params_prefix
from polytri.schedule.dependences import Dependences, compute_dependences
from polytri.schedule.legality import IllegalScheduleError, is_legal, prove_legal, violations
from polytri.schedule.pluto import SchedulingError, pluto_schedule
from polytri.schedule.schedule import Schedule, original_schedule
from polytri.suite import KERNELS, copy_args, make_args

Rows = list[dict[str, str]]


@functools.cache
def _analysed(name: str) -> tuple[Program, Dependences]:
    prog = to_program(KERNELS[name].build())
    return prog, compute_dependences(prog)


@functools.cache
def _pluto(name: str, fuse: str = "smart") -> Schedule:
    prog, deps = _analysed(name)
    return pluto_schedule(prog, deps, fuse=fuse)


def build_map(prog: Program, rows: Rows) -> isl.UnionMap:
    """A schedule from per-statement row texts (the form of ``Schedule.rows``), on the domain."""
    union = isl.UnionMap.empty(prog.context.get_space())
    for st in prog.statements:
        dims = ", ".join(r[st.name] for r in rows)
        m = isl.Map(f"{params_prefix(prog.params)}{{ {st.name}[{', '.join(st.iterators)}] -> [{dims}] }}")
        union = union.union(isl.UnionMap.from_map(m.intersect_domain(st.domain)))
    return union.intersect_params(prog.context)


def rows_of(name: str) -> Rows:
    return [dict(r) for r in _pluto(name).rows]


def negate(row: dict[str, str]) -> dict[str, str]:
    return {n: f"-({t})" for n, t in row.items()}


def assert_rejected(prog: Program, deps: Dependences, sched: isl.UnionMap) -> None:
    """``sched`` is illegal, and every checker says so consistently, with a genuine counterexample."""
    assert not is_legal(sched, deps)
    bad = violations(sched, deps)
    assert not bad.is_empty()
    assert bad.is_subset(deps.all)
    assert bad.intersect(sched.lex_lt_union_map(sched)).is_empty(), "a 'violation' that runs in order"
    with pytest.raises(IllegalScheduleError) as info:
        prove_legal(sched, deps, what=f"{prog.name}: the mutated schedule")
    msg = str(info.value)
    assert msg.startswith(f"{prog.name}: the mutated schedule")
    assert "violates dependences, for example" in msg
    example = isl.UnionMap(msg.split("for example ", 1)[1])
    assert re.search(r"S\d+\[", msg)
    assert not example.is_empty()
    assert example.is_subset(deps.all), f"the example {example} is not a dependence"
    assert example.is_subset(bad), f"the example {example} runs in order under the schedule"


def assert_accepted(deps: Dependences, sched: isl.UnionMap) -> None:
    assert is_legal(sched, deps)
    assert violations(sched, deps).is_empty()
    prove_legal(sched, deps, what="accepted")


# -- every suite kernel: the original order and the Pluto schedules are legal -------------------------
@pytest.mark.parametrize("name", list(KERNELS))
def test_original_order_is_legal(name: str) -> None:
    prog, deps = _analysed(name)
    assert not deps.all.is_empty()
    assert_accepted(deps, prog.schedule)
    assert_accepted(deps, original_schedule(prog, deps).map)


@pytest.mark.parametrize("name,fuse", [
    pytest.param(name, fuse, marks=[pytest.mark.slow] if (name, fuse) == ("deriche", "max") else [])  # 15 s
    for fuse in ("smart", "max", "none") for name in KERNELS])
def test_pluto_schedule_is_legal(name: str, fuse: str) -> None:
    prog, deps = _analysed(name)
    s = _pluto(name, fuse)
    assert_accepted(deps, s.map)
    assert build_map(prog, [dict(r) for r in s.rows]).is_equal(s.map), "Schedule.rows disagree with the map"
    # every instance is scheduled, and no two instances share a time
    assert s.map.domain().is_equal(prog.domain)
    assert s.map.is_injective()


@pytest.mark.parametrize("name", [n if n != "deriche" else pytest.param(n, marks=pytest.mark.slow) for n in KERNELS])
def test_negating_a_dimension_is_legal_exactly_when_it_is_parallel(name: str) -> None:
    """A dimension carrying a dependence runs it backwards once negated; a parallel one carries none."""
    prog, deps = _analysed(name)
    s = _pluto(name)
    assert not all(s.parallel), "every suite kernel carries some dependence"
    for d in range(s.ndim):
        rows = rows_of(name)
        rows[d] = negate(rows[d])
        mutated = build_map(prog, rows)
        if s.parallel[d]:
            assert is_legal(mutated, deps), f"{name}: negating parallel dimension {d} was rejected"
        else:
            assert_rejected(prog, deps, mutated)


@pytest.mark.parametrize("name", list(KERNELS))
def test_permuting_a_band_is_legal(name: str) -> None:
    """The rows of a permutable band may come in any order (reversed and rotated here)."""
    prog, deps = _analysed(name)
    s = _pluto(name)
    assert s.bands
    for b in s.bands:
        if b.width < 2:
            continue
        dims = list(b.dims)
        for perm in (dims[::-1], dims[1:] + dims[:1]):
            rows = rows_of(name)
            rows[b.first:b.first + b.width] = [rows[d] for d in perm]
            assert_accepted(deps, build_map(prog, rows))


# -- mutations of particular schedules ----------------------------------------------------------------
def test_swapping_a_needed_cut_is_illegal() -> None:
    """jacobi-1d's last dimension orders S0 before S1 at equal (t, 2t + i): S1 reads B[i - 1] too."""
    prog, deps = _analysed("jacobi_1d")
    rows = rows_of("jacobi_1d")
    assert rows[-1] == {"S0": "0", "S1": "1"}
    rows[-1] = {"S0": "1", "S1": "0"}
    assert_rejected(prog, deps, build_map(prog, rows))


def test_swapping_an_ordering_cut_without_dependence_is_legal() -> None:
    """jacobi-2d's shift carries every dependence between S0 and S1 in the band: the last dimension only
    orders them, either way."""
    prog, deps = _analysed("jacobi_2d")
    rows = rows_of("jacobi_2d")
    assert rows[-1] == {"S0": "0", "S1": "1"}
    rows[-1] = {"S0": "1", "S1": "0"}
    assert_accepted(deps, build_map(prog, rows))


def test_swapping_the_distribution_of_gemm_is_illegal() -> None:
    """C *= beta must run before the products are accumulated into C."""
    prog, deps = _analysed("gemm")
    s = _pluto("gemm")
    rows = rows_of("gemm")
    d = next(d for d in range(s.ndim) if s.scalar[d] and rows[d]["S0"] != rows[d]["S1"])
    rows[d] = {"S0": rows[d]["S1"], "S1": rows[d]["S0"]}
    assert_rejected(prog, deps, build_map(prog, rows))


@pytest.mark.parametrize("name", ["jacobi_1d", "jacobi_2d", "seidel_2d", "heat_3d", "fdtd_2d"])
def test_reversing_time_is_illegal(name: str) -> None:
    prog, deps = _analysed(name)
    rows = rows_of(name)
    assert set(rows[0].values()) == {"t"}, rows[0]
    rows[0] = negate(rows[0])
    assert_rejected(prog, deps, build_map(prog, rows))


def test_jacobi_1d_without_skew_and_shift_is_illegal() -> None:
    prog, deps = _analysed("jacobi_1d")
    rows = rows_of("jacobi_1d")
    assert [r["S0"] for r in rows] == ["t", "2*t + i", "0"] and [r["S1"] for r in rows] == ["t", "2*t + i + 1", "1"]
    rows[1] = {"S0": "i", "S1": "i"}  # (t, i, 0) / (t, i, 1): S1(i) runs before S0(i + 1), which it reads
    assert_rejected(prog, deps, build_map(prog, rows))
    rows[1] = {"S0": "i", "S1": "i + 1"}  # the shift alone keeps the fused order legal (not permutable)
    assert_accepted(deps, build_map(prog, rows))


def test_moving_the_cut_of_jacobi_1d_outermost_is_illegal() -> None:
    """Interchanging the scalar dimension with the time loop runs every S0 before every S1."""
    prog, deps = _analysed("jacobi_1d")
    rows = rows_of("jacobi_1d")
    rows[0], rows[2] = rows[2], rows[0]
    assert_rejected(prog, deps, build_map(prog, rows))


def test_interchanging_bands_of_doitgen_is_illegal() -> None:
    """r and q are separate bands: sum[] is reused by every (r, q), so only the lexicographic order of
    (r, q) is legal."""
    prog, deps = _analysed("doitgen")
    s = _pluto("doitgen")
    rows = rows_of("doitgen")
    assert rows[0]["S0"] == "r" and rows[1]["S0"] == "q", rows
    assert [(b.first, b.width) for b in s.bands[:2]] == [(0, 1), (1, 1)]
    rows[0], rows[1] = rows[1], rows[0]
    assert_rejected(prog, deps, build_map(prog, rows))


def test_interchanging_seidel_in_the_original_order_is_illegal() -> None:
    prog, deps = _analysed("seidel_2d")
    assert_rejected(prog, deps, build_map(prog, [{"S0": "i"}, {"S0": "t"}, {"S0": "j"}]))
    assert_rejected(prog, deps, build_map(prog, [{"S0": "t"}, {"S0": "j"}, {"S0": "i"}]))
    assert_accepted(deps, build_map(prog, [{"S0": "t"}, {"S0": "i"}, {"S0": "j"}]))


def test_reversing_the_reduction_of_gemm_is_illegal() -> None:
    prog, deps = _analysed("gemm")
    rows = rows_of("gemm")
    s = _pluto("gemm")
    band = s.bands[0]
    k_dim = next(d for d in band.dims if rows[d]["S1"] == "k")
    rows[k_dim] = {"S0": rows[k_dim]["S0"], "S1": "-k"}
    assert_rejected(prog, deps, build_map(prog, rows))


def test_empty_dependences_accept_anything() -> None:
    p = pt.Program("copy", params=["N"])
    p.array("A", ("N",))
    p.array("B", ("N",))
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[i]")
    prog = to_program(p)
    deps = compute_dependences(prog)
    assert deps.all.is_empty()
    assert_accepted(deps, build_map(prog, [{"S0": "-i"}]))


# -- the compile fallback -----------------------------------------------------------------------------
def _reversed(s: Schedule) -> Schedule:
    """``s`` with every time dimension negated: every dependence runs backwards."""
    n = s.ndim
    a = ", ".join(f"a{d}" for d in range(n))
    neg = ", ".join(f"-a{d}" for d in range(n))
    return dataclasses.replace(s, map=s.map.apply_range(isl.UnionMap(f"{{ [{a}] -> [{neg}] }}")))


def _check_against_reference(name: str, k) -> None:
    kern = KERNELS[name]
    args = make_args(kern, kern.small)
    want = copy_args(args)
    got = copy_args(args)
    pt.reference(kern.build(), **want)
    k(**got)
    for n, v in args.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_allclose(got[n], want[n], rtol=1e-5, atol=1e-9, err_msg=f"{name}: {n}")


@pytest.mark.cc
@pytest.mark.parametrize("options", [{"schedule": "pluto"}, {}], ids=["pluto", "default"])
@pytest.mark.parametrize("name", ["jacobi_1d", "gemm"])
def test_compile_falls_back_on_an_illegal_schedule(monkeypatch, name: str, options: dict) -> None:
    real = polytri.schedule.choose.pluto_schedule
    calls = []

    def illegal(program, deps, **kw):
        calls.append(program.name)
        return _reversed(real(program, deps, **kw))

    monkeypatch.setattr(polytri.schedule.choose, "pluto_schedule", illegal)
    with pytest.warns(UserWarning, match="violates dependences.*original order"):
        k = pt.compile(KERNELS[name].build(), options=options)
    assert calls, "the monkeypatched scheduler was not called"
    prog, _ = _analysed(name)
    assert k.schedule.is_equal(prog.schedule.intersect_domain(prog.domain))
    assert any(d.kind == "original-order" and d.data["reason"] == "scheduler-error"
               and d.data["error"] == "IllegalScheduleError" for d in k.decision_records)
    _check_against_reference(name, k)


@pytest.mark.cc
def test_compile_falls_back_when_the_scheduler_fails(monkeypatch) -> None:
    def failing(program, deps, **kw):
        raise SchedulingError(f"{program.name}: no hyperplane (simulated)")

    monkeypatch.setattr(polytri.schedule.choose, "pluto_schedule", failing)
    with pytest.warns(UserWarning, match="simulated.*original order"):
        k = pt.compile(KERNELS["seidel_2d"].build(), options={"schedule": "pluto"})
    prog, _ = _analysed("seidel_2d")
    assert k.schedule.is_equal(prog.schedule)
    (why,) = [d for d in k.decision_records if d.kind == "original-order"]
    assert why.data == {"reason": "scheduler-error", "error": "SchedulingError"}
    _check_against_reference("seidel_2d", k)


@pytest.mark.cc
def test_compile_drops_illegal_tiles_with_a_record(monkeypatch) -> None:
    real = polytri.schedule.choose.tile_schedule
    monkeypatch.setattr(polytri.schedule.choose, "tile_schedule", lambda *a, **kw: _reversed(real(*a, **kw)))
    with pytest.warns(UserWarning, match="violates dependences.*untiled"):
        k = pt.compile(KERNELS["jacobi_1d"].build(), options={"schedule": "pluto", "tile": True})
    assert k.schedule.is_equal(_pluto("jacobi_1d").map) and not k.schedule_info.tiled
    (why,) = [d for d in k.decision_records if d.kind == "tiling-dropped"]
    assert why.data == {"error": "IllegalScheduleError"}
    _check_against_reference("jacobi_1d", k)


@pytest.mark.cc
def test_compile_keeps_a_legal_pluto_schedule(recwarn) -> None:
    k = pt.compile(KERNELS["jacobi_2d"].build(), options={"schedule": "pluto"})
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
    assert k.schedule.is_equal(_pluto("jacobi_2d").map)
    _check_against_reference("jacobi_2d", k)
