"""A compiled graph's steps launch their kernels directly after a checked call (frontend/torch_launch.py),
and runs of consecutive steps in one C call (frontend/torch_graph_launch.py)."""

from __future__ import annotations

import gc
from typing import Any

import torch
import torch.fx as fx

import polytri as pt
from polytri.frontend.torch_graph_launch import CALL, GraphLaunch, graph_launch
from polytri.frontend.torch_launch import launch_for
from polytri.frontend.torch_runtime import CompiledGraph, _KernelStep
from polytri.suite.models import build


def _steps() -> list[_KernelStep]:
    found = []
    for o in gc.get_objects():
        try:
            if type(o) is _KernelStep:
                found.append(o)
        except ReferenceError:
            pass
    return found


def test_later_calls_run_the_launch_on_new_values_and_equal_eager() -> None:
    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x @ w + b)
        return (h.reshape(4, 2, 16).permute(1, 0, 2) * 2).sum(-1)
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(4, 8, generator=gen), torch.randn(8, 32, generator=gen), torch.randn(32, generator=gen)]
    before = {id(s) for s in _steps()}
    g = pt.jit(f, compile_options={"cache": False})
    torch.testing.assert_close(g(*args), f(*args))
    mine = [s for s in _steps() if id(s) not in before]
    assert mine and all(s._launches for s in mine if s._launchable)
    launched = [s for s in mine if s._launches]
    assert launched
    calls = []
    for s in launched:
        for launch in s._launches.values():
            inner = launch.call
            object.__setattr__(launch, "call", lambda a, p, inner=inner: (calls.append(a), inner(a, p)))
    for _ in range(3):  # new values each call: the launch reads the addresses of this call's tensors
        args = [torch.randn(t.shape, generator=gen) for t in args]
        torch.testing.assert_close(g(*args), f(*args))
    assert len(calls) == 3 * sum(len(s._launches) for s in launched)
    assert any(args[0].data_ptr() in a for a in calls)


def test_a_launch_takes_the_long_way_for_an_input_that_is_not_contiguous() -> None:
    node = fx.Graph().placeholder("x")
    seen: list[list[int]] = []
    temp = torch.zeros(3)
    launch = launch_for(lambda a, p: seen.append(list(a)), ["x", "t", "y"], [("x", node)],
                        [("y", (2, 3), torch.float32, 2)], {"t": temp}, (), torch.device("cpu"))
    x = torch.randn(3, 2)
    assert launch({node: x.t()}) is None and seen == []  # nothing ran
    made = launch({node: x})
    assert made is not None and seen == [[x.data_ptr(), temp.data_ptr(), made["y"].data_ptr()]]
    assert made["y"].shape == (2, 3) and made["y"].dtype == torch.float32
    assert launch.temps[0] is temp  # its address stays valid whatever the step's reuse table drops


def _compiled_graphs() -> list[CompiledGraph]:
    return [o for o in gc.get_objects() if type(o) is CompiledGraph]


def _resnet_graph() -> tuple[torch.nn.Module, Any, torch.Tensor, CompiledGraph, GraphLaunch]:
    """The zoo's ResNet-like model (several kernel steps, none with indirect reads) after two calls, and
    its graph's one launch of consecutive steps."""
    model, x = build("resnet")
    before = {id(g) for g in _compiled_graphs()}
    g = pt.jit(model, compile_options={"cache": False})
    with torch.no_grad():
        g(x)
        g(x)
    [graph] = [c for c in _compiled_graphs() if id(c) not in before]
    [plan] = graph._plans.values()
    [whole] = [u for u in plan if isinstance(u, GraphLaunch)]
    return model, g, x, graph, whole


def test_consecutive_kernel_steps_run_as_one_launch_equal_to_the_steps_one_by_one() -> None:
    """Later calls run the graph's kernel steps in one C call: every step of the ResNet is in it, its
    steps' own launches are not called, the driver is called once a call, and the results equal eager's
    and, bit for bit, those of the steps run one by one."""
    model, g, x, graph, whole = _resnet_graph()
    steps = [s for s in graph.steps if isinstance(s, _KernelStep)]
    assert len(whole.steps) == len(steps) == len(graph.steps) > 1
    driven, per_step = [], []
    inner = whole._driver
    whole._driver = lambda *a: (driven.append(a), inner(*a))[1]
    for s in steps:
        for launch in s._launches.values():
            call = launch.call
            object.__setattr__(launch, "call", lambda a, p, call=call: (per_step.append(a), call(a, p)))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(x.shape, generator=gen)
            got = g(x)
            torch.testing.assert_close(got, model(x), rtol=1e-3, atol=1e-4)
            plan = graph._plans
            graph._plans = {k: list(graph.steps) for k in plan}  # the same steps, one by one
            one_by_one = g(x)
            graph._plans = plan
            torch.testing.assert_close(got, one_by_one, rtol=0, atol=0)
    assert len(driven) == 3 and len(per_step) == 3 * len(steps)  # the one-by-one calls only


def test_arrays_that_only_later_steps_read_are_kept_from_call_to_call() -> None:
    """A step's output that only later kernels of the run read is allocated once, at the same address at
    every call; the graph's result is allocated anew (the caller may keep it)."""
    model, g, x, graph, whole = _resnet_graph()
    assert whole.kept
    kept = {t.data_ptr() for _, _, t in whole.kept.values()}
    with torch.no_grad():
        first, second = g(x), g(x)
        want = model(x)
    assert {t.data_ptr() for _, _, t in whole.kept.values()} == kept
    assert first.data_ptr() != second.data_ptr() and not {first.data_ptr(), second.data_ptr()} & kept
    torch.testing.assert_close(first, want, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(second, first, rtol=0, atol=0)


def test_no_array_is_kept_beyond_the_byte_limit(monkeypatch) -> None:
    from polytri.frontend import torch_graph_launch
    monkeypatch.setattr(torch_graph_launch, "KEPT_BYTES", 0)
    model, g, x, graph, whole = _resnet_graph()
    assert whole.kept == {}
    with torch.no_grad():
        torch.testing.assert_close(g(x), model(x), rtol=1e-3, atol=1e-4)


def test_the_graph_launch_runs_nothing_for_an_input_that_is_not_contiguous_or_a_step_held(monkeypatch) -> None:
    _, g, x, graph, whole = _resnet_graph()
    seen: list[dict] = []
    run = GraphLaunch.__call__
    monkeypatch.setattr(GraphLaunch, "__call__", lambda self, env: (seen.append(dict(env)), run(self, env))[1])
    with torch.no_grad():
        g(x)
    monkeypatch.undo()
    [env] = seen
    driven = []
    inner = whole._driver
    whole._driver = lambda *a: (driven.append(a), inner(*a))[1]
    [node] = [n for _, n in whole.inputs if env[n] is x or (isinstance(env[n], torch.Tensor) and env[n].shape == x.shape
                                                               and env[n].data_ptr() == x.data_ptr())]
    env[node] = x.transpose(-1, -2).contiguous().transpose(-1, -2)  # same shape and values, not contiguous
    assert not env[node].is_contiguous() and whole(env) is False
    env[node] = x
    with whole.steps[1]._lock:  # another call holds a step: its intermediates are in use
        assert whole(env) is False
    assert driven == []
    assert whole(env) is True and len(driven) == 1


def test_a_run_is_made_only_from_steps_that_recorded_the_call_at_hand(monkeypatch) -> None:
    """Each step records the call in which it last ran on its own intermediates with the addresses of the
    arrays it made then: a run is made from the records of the call at hand only (those of another call,
    a concurrent one, name other arrays, which a reused address could make look right).  A step held by
    another call records nothing, so that call makes no run; the next one does."""
    _, g, x, graph, whole = _resnet_graph()
    seen: list[tuple[dict, dict]] = []
    make = CompiledGraph._make_plan
    monkeypatch.setattr(CompiledGraph, "_make_plan",
                        lambda self, key, env, params: (seen.append((env, params)), make(self, key, env, params))[1])
    graph._plans.clear()
    with torch.no_grad():
        g(x)
    [(env, params)] = seen
    steps = whole.steps
    keys = [tuple(params[p] for p in s.params) for s in steps]
    assert graph_launch(steps, keys, env) is not None
    assert graph_launch(steps, keys, {**env, CALL: object()}) is None  # the same values, another call
    graph._plans.clear()
    with torch.no_grad():
        with steps[1]._lock:
            g(x)
        [plan] = graph._plans.values()
        assert not any(isinstance(u, GraphLaunch) for u in plan)
        graph._plans.clear()
        g(x)
    [plan] = graph._plans.values()
    assert any(isinstance(u, GraphLaunch) for u in plan)
