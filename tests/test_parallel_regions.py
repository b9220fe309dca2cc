"""Adequate parallelism on the cpu target: the work bound of a loop AST, the region tests in the generated
C, the measured cost of a region, and the thread count that follows the other processes' load."""

from __future__ import annotations

import json
import subprocess
import sys

import islpy as isl
import numpy as np
import pytest

import polytri as pt
from polytri.cpu_codegen import fork_cost
from polytri.cpu_codegen.parallel_plan import MIN_WORK, weight
from polytri.errors import OptionError
from polytri.ir.builder import to_program
from polytri.ir.expr import Binary, Call, Const, Expr, Var
from polytri.runtime import cpu_share
from polytri.runtime.cpu_share import CpuShare, StatSample
from polytri.schedule.choose import choose_schedule
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.loop_ast import For, If, Node, walk
from polytri.schedule.loop_work import constant_bound, loop_work, short_bound
from polytri.suite import KERNELS, copy_args, make_args


def _ast(name: str, schedule: str) -> tuple[pt.Program, Node]:
    prog = to_program(KERNELS[name].build())
    deps = compute_dependences(prog)
    tiled = schedule.endswith("+tiled")   # "pluto+tiled": Pluto's schedule, tiled
    _, _, ast = choose_schedule(prog, deps, schedule.removesuffix("+tiled"), "smart", True if tiled else None, None)
    return prog, ast


def _instances(prog: pt.Program, params: dict[str, int]) -> int:
    """Statement instances of ``prog`` at ``params``, counted by isl."""
    total = 0
    for st in prog.statements:
        dom = st.domain
        for p, v in params.items():
            pos = dom.find_dim_by_name(isl.dim_type.param, p)
            if pos >= 0:
                dom = dom.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(dom.get_ctx(), v))
        total += int(dom.count_val().to_python())
    return total


# The bound is a box around each statement's instances below a loop: exact on rectangles, 6x on a
# tetrahedron (i < N, j < i, k < j), more where tiles cut a triangle (the tiles a triangle partly
# covers count whole).  An overestimate only makes a region open where it might not pay: the behaviour
# without the model.
@pytest.mark.parametrize("name, schedule, params, slack, other", [
    ("gemm", "original", dict(NI=7, NJ=5, NK=3), 1.0, None),
    ("jacobi_2d", "original", dict(T=3, N=9), 1.0, None),
    ("heat_3d", "pluto+tiled", dict(T=8, N=66), 17.0, None),  # time-tiled
    ("lu", "original", dict(N=30), 6.0, None),
    ("lu", "auto", dict(N=200), 10.0, 6.0),             # tiled, guards / untiled where one tile at a time
    ("cholesky", "auto", dict(N=200), 32.0, 6.0),
])
def test_the_work_bound_covers_every_instance(name: str, schedule: str, params: dict[str, int],
                                              slack: float, other: float | None) -> None:
    prog, ast = _ast(name, schedule)
    count = _instances(prog, params)
    # an AST carrying two schedules (tiled by size, or a wavefront by tile count: schedule/choose.py) runs
    # one of its branches: each is bounded alone, the untiled one as a triangle is (6x on a tetrahedron)
    assert (other is not None) == (isinstance(ast, If) and ast.orelse is not None)
    branches = [(ast.then, slack), (ast.orelse, other)] if isinstance(ast, If) and ast.orelse else [(ast, slack)]
    for branch, most in branches:
        bound = loop_work(branch, lambda s: 1).value(params)
        assert bound is not None and count <= bound <= most * count, (bound, count)


def test_the_bound_of_a_loop_is_an_expression_of_its_outer_counters() -> None:
    prog, ast = _ast("lu", "original")
    # for c1 < N: ... for c3 in [c1, N): for c5 < c1: S2 (the parallel loop c3 of the row's update)
    (loop,) = [n for n in walk(ast) if isinstance(n, For) and n.parallel]
    work = loop_work(loop, lambda s: 1)
    assert work.value() is None  # symbolic in N and the outer counter
    assert work.value({"N": 10, "c1": 2}) == (10 - 2) * 2
    assert work.value({"N": 10, "c1": 9}) == (10 - 9) * 9


def test_a_statement_weighs_its_store_loads_and_arithmetic_not_its_subscripts() -> None:
    prog = to_program(KERNELS["jacobi_1d"].build())
    # B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]): a store, three loads, three operations
    assert weight(prog.statement("S0")) == 7


def _run(k, name: str, params: dict[str, int]) -> dict:
    args = make_args(KERNELS[name], params, seed=3)
    k(**args)
    return args


@pytest.mark.parametrize("name", ["jacobi_2d", "lu", "gemm", "atax"])
def test_both_sides_of_a_region_test_compute_the_reference(name: str) -> None:
    prog = to_program(KERNELS[name].build())
    params = KERNELS[name].small
    want = copy_args(make_args(KERNELS[name], params, seed=3))
    pt.reference(prog, **want)
    for opts in ({"threads": 2, "min_parallel_work": 0}, {"threads": 2, "min_parallel_work": 1e30},
                 {"threads": 1}):
        k = pt.compile(prog, options=opts)
        # the region test whose two sides this runs
        assert any(d.kind == "region-runtime" for d in k.decision_records) and "pt__region_pays(" in k.source
        got = _run(k, name, params)
        for a in prog.arrays:
            np.testing.assert_allclose(got[a.name], want[a.name], rtol=1e-10, err_msg=f"{opts}: {a.name}")


def test_the_threshold_is_the_kernels_own_and_explained() -> None:
    prog = to_program(KERNELS["jacobi_2d"].build())
    k = pt.compile(prog, options={"min_parallel_work": 12345})
    other = pt.compile(prog, options={"min_parallel_work": 0})
    assert other.library == k.library  # one source, one library ...
    assert (k.min_parallel_work, other.min_parallel_work) == (12345, 0)  # ... each kernel its threshold
    assert f"double {MIN_WORK}" in k.source.split("void pt_jacobi_2d(")[1].split(")")[0]
    regions = [d for d in k.decision_records if d.kind.startswith("region")]
    assert regions and all(d.kind == "region-runtime" and d.data["min_work"] == 12345 for d in regions)
    assert all(d.text in k.explain() for d in regions) and any("1.23e+04 operations" in d.text for d in regions)


@pytest.mark.parametrize("bad", [-1, "many", True, float("nan")])
def test_a_bad_threshold_is_refused(bad) -> None:
    with pytest.raises(OptionError, match="min_parallel_work"):
        pt.compile(to_program(KERNELS["gemm"].build()), options={"min_parallel_work": bad})


def _measured_in(tmp_path, monkeypatch, busy: bool) -> fork_cost.ForkCost:
    """The region cost measured afresh with the cache in ``tmp_path``, the machine ``busy`` or not."""
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fork_cost, "contended", lambda: busy)
    fork_cost.fork_cost.cache_clear()
    cost = fork_cost.fork_cost("cc")
    assert cost.region_seconds >= 0 and cost.op_seconds > 0
    return cost


def test_the_region_cost_is_measured_once_and_kept(tmp_path, monkeypatch) -> None:
    cost = _measured_in(tmp_path, monkeypatch, busy=False)
    assert cost.min_work > 0
    kept = json.loads((tmp_path / "cpu" / "fork_cost.json").read_text())
    assert list(kept.values()) == [{"threads": cost.threads, "region_seconds": cost.region_seconds,
                                    "op_seconds": cost.op_seconds, "wake_seconds": cost.wake_seconds}]
    assert cost.wake_seconds >= 0 and (cost.threads > 1 or cost.wake_seconds == 0)
    assert fork_cost.known_wake("cc") == cost.wake_seconds
    fork_cost.fork_cost.cache_clear()

    def no_measure(cc: str):
        raise AssertionError("measured again")
    monkeypatch.setattr(fork_cost, "measure", no_measure)
    assert fork_cost.fork_cost("cc") == cost
    fork_cost.fork_cost.cache_clear()


def test_figures_of_an_older_layout_are_measured_again(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path))
    entries, key, found = fork_cost._kept("cc")
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "fork_cost.json").write_text(json.dumps(
        {key: {"threads": 2, "region_seconds": 1e-6, "op_seconds": 1e-10}}))   # before wake_seconds
    assert fork_cost._kept("cc")[2] is None   # measured again by the next fork_cost("cc")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_short_call_after_idle_cores_runs_on_one_thread(monkeypatch) -> None:
    monkeypatch.setattr(cpu_share, "threads_now", lambda fixed: fixed or 2)
    clock = _Clock()
    calls = cpu_share.CallRecord(wake=0.005, clock=clock)
    assert calls.threads(None, "n=8") == 2                # nothing known yet
    calls.ended("n=8", 2, clock.now - 0.001)              # 1 ms on two threads: 2 ms alone, under waking's 5
    clock.now += 0.002
    assert calls.threads(None, "n=8") == 2                # the workers still spin
    clock.now += cpu_share.IDLE_GAP
    assert calls.threads(None, "n=8") == 1                # they sleep: one thread is faster
    assert calls.threads(4, "n=8") == 4                   # a count the caller fixed is kept
    assert calls.threads(None, "n=1000") == 2             # another size: its time is not known
    calls.ended("n=1000", 2, clock.now - 0.01)            # 20 ms alone: waking pays
    clock.now += 1.0
    assert calls.threads(None, "n=1000") == 2
    calls.ended("n=8", 1, clock.now - 0.004)              # a cold call on one thread keeps the least time
    clock.now += 1.0
    assert calls.threads(None, "n=8") == 1
    assert cpu_share.CallRecord(wake=0.0, clock=clock).threads(None) == 2   # waking not measured: no rule


def test_a_framework_limit_caps_the_free_cores_but_not_a_fixed_count(monkeypatch) -> None:
    monkeypatch.setattr(cpu_share, "threads_now", lambda fixed: fixed or 2)
    calls = cpu_share.CallRecord(wake=0.0)
    assert calls.threads(None, None, 1) == 1        # torch.set_num_threads(1): one thread
    assert calls.threads(None, None, 0) == 2        # no limit: the free cores
    assert calls.threads(None, None, 4) == 2        # a limit above the free cores leaves them
    assert calls.threads(2, None, 1) == 2           # the threads option (or OMP_NUM_THREADS) decides


def test_a_kernel_records_its_calls() -> None:
    k = pt.compile(to_program(KERNELS["gemm"].build()), options={"threads": 2})
    args = make_args(KERNELS["gemm"], {"NI": 8, "NJ": 9, "NK": 7})
    k(**copy_args(args))
    assert list(k.calls._alone) == [(8, 9, 7)] and k.calls._alone[(8, 9, 7)] > 0
    assert cpu_share._LAST_END[0] > 0


def test_a_cost_measured_on_a_busy_machine_is_used_but_not_kept(tmp_path, monkeypatch) -> None:
    _measured_in(tmp_path, monkeypatch, busy=True)
    assert not (tmp_path / "cpu" / "fork_cost.json").exists()
    fork_cost.fork_cost.cache_clear()


def test_the_probe_stops_at_its_budget() -> None:
    """Regions of a busy machine can take milliseconds each: the probe's 5000 regions stop at the budget."""
    import ctypes
    import time

    from polytri.cpu_codegen.build import DEFAULT_FLAGS, build_library
    lib = ctypes.CDLL(str(build_library(fork_cost.PROBE_SOURCE, cc="cc", flags=DEFAULT_FLAGS + ("-fopenmp",))))
    lib.pt_probe.restype = ctypes.c_double
    lib.pt_probe.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_double]
    buf = (ctypes.c_double * 32768)()
    t0 = time.perf_counter()
    per_call = lib.pt_probe(buf, 32768, 0, 1000000, 1000, 0.05)   # a million calls of 8 us each: far over
    assert time.perf_counter() - t0 < 1.0 and 0 < per_call < 1.0


def test_one_thread_never_opens_a_region() -> None:
    assert fork_cost.ForkCost(1, 1e-6, 1e-9, 0.0).min_work == float("inf")
    assert fork_cost.ForkCost(2, 1e-6, 1e-9, 0.0).min_work == pytest.approx(fork_cost.MARGIN * 1e-6 / 0.5e-9)


class _Machine:
    """A fake ``/proc/stat`` and clock: ``others`` cores busy with other processes, ``mine`` with ours."""

    def __init__(self, others: float, mine: float, running: int):
        self.t, self.others, self.mine, self.running = 0.0, others, mine, running
        self.busy = self.own = self.children = 0.0
        self.own_running = 1
        self.env: str | None = None   # OMP_NUM_THREADS

    def tick(self, dt: float) -> None:
        self.t += dt
        self.busy += (self.others + self.mine) * dt
        self.own += self.mine * dt

    def share(self) -> CpuShare:
        return CpuShare(read=lambda: StatSample(self.busy, self.running), own=lambda: self.own,
                        clock=lambda: self.t, cores=lambda: 2, own_running=lambda: self.own_running,
                        children=lambda: self.children, env=lambda: self.env)


@pytest.mark.parametrize("others, mine, running, want", [
    (0.0, 2.0, 3, 2),   # our own busy threads do not count: all cores
    (1.0, 1.0, 3, 1),   # one core busy with another process
    (2.0, 0.0, 3, 1),   # every core busy: still one thread
    (0.3, 0.0, 1, 2),   # a little noise rounds to none
])
def test_the_thread_count_follows_the_other_processes(others, mine, running, want) -> None:
    m = _Machine(others, mine, running)
    share = m.share()
    share.threads()  # the first reading: from the running tasks
    m.tick(cpu_share.WINDOW * 2)
    assert share.threads() == want


def test_a_reading_is_reused_within_its_window_and_stale_ones_use_the_running_tasks() -> None:
    m = _Machine(1.0, 0.0, 2)
    share = m.share()
    assert share.threads() == 1  # first reading: two running tasks, one of them the caller
    m.others, m.running = 0.0, 1
    m.tick(cpu_share.WINDOW / 10)
    assert share.threads() == 1  # reused
    m.tick(cpu_share.STALE * 2)
    assert share.threads() == 2  # stale: the caller alone runs
    m.running, m.own_running = 2, 2
    m.tick(cpu_share.STALE * 2)
    assert share.threads() == 2  # our own spinning worker is not another process


def test_without_proc_stat_or_with_a_fixed_count_openmp_decides(monkeypatch) -> None:
    assert CpuShare(read=lambda: None, env=lambda: None).threads() == 0
    assert cpu_share.threads_now(3) == 3
    m = _Machine(0.0, 0.0, 1)
    share = m.share()
    assert share.threads() == 2
    m.env = "2"   # OMP_NUM_THREADS set while the process runs: seen after the window
    m.tick(cpu_share.WINDOW / 10)
    assert share.threads() == 2
    m.tick(cpu_share.WINDOW)
    assert share.threads() == 0
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert CpuShare(read=lambda: StatSample(0.0, 1)).threads() == 0   # the environment, by default


def test_proc_stat_is_read_where_there_is_one() -> None:
    sample = cpu_share.read_proc_stat()
    if sample is None:
        pytest.skip("no /proc/stat here")
    assert sample.busy > 0 and sample.running >= 1
    assert cpu_share.own_running_threads() >= 1


def test_a_child_that_ended_in_the_window_leaves_the_decision_to_the_running_tasks() -> None:
    """The C compiler that polytri runs (a child process) is known only by its total CPU time once it has
    ended: in that window the running tasks decide, not the machine's busy time (which counted the compile
    as another process's, and the kernels called after a compile ran on one thread)."""
    m = _Machine(1.0, 0.0, 1)  # a core's worth of busy time in the window, nothing else running now
    share = m.share()
    share.threads()
    m.tick(cpu_share.WINDOW * 2)
    assert share.threads() == 1  # the window: another process kept a core busy
    m.children += 1.0
    m.tick(cpu_share.WINDOW * 2)
    assert share.threads() == 2  # a child ended: the running tasks (the caller alone) decide
    m.running = 2
    m.children += 1.0
    m.tick(cpu_share.WINDOW * 2)
    assert share.threads() == 1  # another task runs now: still counted
    before = cpu_share.children_cpu_seconds()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"],
                   check=True)
    assert cpu_share.children_cpu_seconds() - before >= 0.25


@pytest.mark.parametrize("work, trips, threads, want", [
    (1e9, 1, 2, 0),          # one iteration: a second thread has nothing to do
    (1e3, 1000, 2, 1),       # an even split: the break-even itself
    (1.4e3, 3, 2, 0),        # 3 iterations on 2 threads save a third, not a half: 1.5x the work needed
    (1.6e3, 3, 2, 1),
    (0.9e3, 1000, 2, 0),
])
def test_a_region_over_few_iterations_needs_more_work(work: float, trips: float, threads: int, want: int) -> None:
    import ctypes

    from polytri.cpu_codegen.build import DEFAULT_FLAGS, build_library
    from polytri.cpu_codegen.prelude import prelude
    source = prelude() + ("\nint region_pays(double w, double t, int p, double m) "
                          "{ return pt__region_pays(w, t, p, m); }\n")
    lib = ctypes.CDLL(str(build_library(source, cc="cc", flags=DEFAULT_FLAGS)))
    lib.region_pays.restype = ctypes.c_int
    lib.region_pays.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_int, ctypes.c_double]
    assert lib.region_pays(work, trips, threads, 1e3) == want


@pytest.mark.parametrize("name, want", [
    ("cholesky", {"dynamic"}),   # a wavefront of tiles whose k range grows with the column tile
    ("syr2k", {"dynamic"}),      # the rows of a triangle
    ("gemm", {"static"}),        # tiles of equal work (a partial tile at the edge does not count)
    ("jacobi_2d", {"static"}),
])
def test_iterations_of_unequal_work_are_handed_out_one_at_a_time(name: str, want: set[str]) -> None:
    prog = to_program(KERNELS[name].build())
    k = pt.compile(prog, options={"threads": 2, "min_parallel_work": 0})
    regions = [d for d in k.decision_records if d.kind.startswith("region")]
    assert regions and {d.data["split"] for d in regions} == want
    assert ("schedule(dynamic, 1)" in k.source) == ("dynamic" in want)
    params = KERNELS[name].small
    ref = copy_args(make_args(KERNELS[name], params, seed=3))
    pt.reference(prog, **ref)
    got = _run(k, name, params)
    for a in prog.arrays:
        np.testing.assert_allclose(got[a.name], ref[a.name], rtol=1e-10, err_msg=a.name)


_N, _T = Var("N", "param"), Var("t", "iter")


@pytest.mark.parametrize("expr, want", [
    (Call("min", (Binary("-", _N, Binary("*", Const(32), _T)), Const(32))), 32),
    (Call("max", (Const(0), Binary("+", Call("min", (Const(31), Binary("-", _N, _T))), Const(1)))), 32),
    (Binary("//", _T, Const(16)), None),
    (Call("max", (_N, Const(4))), None),
    (Call("min", (Call("min", (_N, Const(8))), Binary("*", Const(3), _T))), 8),
])
def test_a_constant_bound_is_read_off_the_min_max_form(expr: Expr, want: int | None) -> None:
    assert constant_bound(expr) == want


def test_a_loosened_bound_is_shorter_and_never_smaller() -> None:
    prog, ast = _ast("cholesky", "auto")
    for branch in (ast.then, ast.orelse) if isinstance(ast, If) and ast.orelse else (ast,):
        exact = loop_work(branch, lambda s: 1)
        loose = exact.loosened()
        assert exact.terms is not None and loose.terms is not None and len(loose.terms) <= len(exact.terms)
        for n in (40, 200, 1000):
            got, want = loose.value({"N": n}), exact.value({"N": n})
            assert got is not None and want is not None and got >= want


@pytest.mark.parametrize("name", ["cholesky", "lu", "seidel_2d", "nussinov"])
def test_a_wavefront_region_tests_its_work_not_only_its_trip_count(name: str) -> None:
    # the exact bounds of these wavefronts (tile loops split around guards) are too long to print;
    # with the tiles' point loops counted whole and each other min at its shorter side they are not
    k = pt.compile(to_program(KERNELS[name].build()), options={"threads": 2})
    regions = [d for d in k.decision_records if d.kind.startswith("region")]
    assert regions and not any("too long" in d.text for d in regions)
    assert f">= {MIN_WORK} && pt__region_pays(" in k.source


def test_a_short_bound_keeps_the_smaller_side_of_each_min() -> None:
    m = Var("M", "param")
    long = Binary("+", Binary("*", Const(3), _T), Binary("*", Const(2), m))
    assert short_bound(Call("min", (long, _N))) == _N
    assert short_bound(Call("max", (_N, long))) == Call("max", (_N, long))
