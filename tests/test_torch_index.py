"""``aten.embedding``, ``aten.gather`` and ``aten.index.Tensor`` through ``torch.compile(backend="polytri")``
(polytri/frontend/torch_ops_index.py): equal to eager, no fallback, index values checked at every call."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import polytri as pt
from polytri.frontend.torch_graph_launch import GraphLaunch
from polytri.frontend.torch_launch import Launch
from polytri.frontend.torch_runtime import CompiledGraph, _KernelStep
from polytri.runtime.index_check import flat_runs


def _embedding(w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.embedding(ids, w) * 2.0


def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, 1, idx) + 1.0


def _index_apart(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x[a, :, b]  # index tensors apart: the broadcast dimensions come first


def _index_middle(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return x[:, a].exp()


def _index_computed(w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    j = ids + 1  # computed and used twice: stored by one program, read by the embedding's
    return F.embedding(j, w) + j.sum()


torch.manual_seed(0)
_X = torch.randn(5, 7, 3)
CASES: list[tuple[Callable[..., torch.Tensor], tuple[Any, ...]]] = [
    (_embedding, (torch.randn(11, 6), torch.randint(0, 11, (3, 4)))),
    (_gather, (_X, torch.randint(0, 7, (5, 4, 3)))),
    (_index_apart, (_X, torch.tensor([[0, -1], [4, 2]]), torch.tensor([2, -3]))),
    (_index_middle, (_X, torch.tensor([6, -7, 3], dtype=torch.int32))),
    (_index_computed, (torch.randn(11, 6), torch.randint(0, 10, (2, 3)))),
]


@pytest.mark.parametrize(("fn", "args"), CASES, ids=[f.__name__ for f, _ in CASES])
def test_compiled_equals_eager_without_fallback(fn: Callable[..., torch.Tensor], args: tuple[Any, ...]) -> None:
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback or a run-time failure warns
        got = torch.compile(fn, backend="polytri")(*args)
    torch.testing.assert_close(got, fn(*args))  # exp may differ from eager in the last bit
    report = pt.explain(fn, *args)
    assert report.fallback_ops == [] and report.kernels
    checks = [d for k in report.kernels for d in k.runtime if d.kind == "index-check"]
    assert checks and all(d.data["compiled"] for d in checks)  # every index read as it is: checked in C
    assert "checked by compiled code" in str(report)


def test_an_index_out_of_range_raises_eagers_error_and_later_calls_stay_compiled() -> None:
    torch._dynamo.reset()
    w, ids = torch.randn(11, 6), torch.randint(0, 11, (3, 4))
    f = torch.compile(_embedding, backend="polytri")
    f(w, ids)
    bad = ids.clone()
    bad[1, 2] = 11
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the graph is not given up for bad data
        with pytest.raises(IndexError, match="index out of range"):
            f(w, bad)
        torch.testing.assert_close(f(w, ids), _embedding(w, ids), rtol=0, atol=0)



def test_an_index_tensor_changed_in_place_after_a_good_call_is_checked_again() -> None:
    """Index values are checked at every call (in C once the kernel has a launch): a value written into
    the index tensor in place after good calls is caught."""
    torch._dynamo.reset()
    w, ids = torch.randn(11, 6), torch.randint(0, 11, (3, 4))
    f = torch.compile(_embedding, backend="polytri")
    f(w, ids)
    f(w, ids)   # unchanged: not read again
    ids[1, 2] = 11
    with pytest.raises(IndexError, match="index out of range"):
        f(w, ids)
    ids[1, 2] = 10
    torch.testing.assert_close(f(w, ids), _embedding(w, ids), rtol=0, atol=0)


@pytest.mark.parametrize(("fn", "args", "bad"), [
    (_embedding, (torch.randn(11, 6), torch.randint(0, 11, (3, 4))), (11, -1)),
    (_index_middle, (_X, torch.tensor([6, -7, 3], dtype=torch.int32)), (7, -8)),   # negative: from the end
    (_index_computed, (torch.randn(11, 6), torch.randint(0, 10, (2, 3))), (10, -2)),  # checked between programs
], ids=["embedding", "wrapped-int32", "computed"])
def test_launches_check_index_ranges_in_c_and_a_bad_value_still_raises(fn: Callable[..., torch.Tensor],
                                                                       args: tuple[Any, ...], bad: tuple[int, int],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels with indirect reads get launches (and join a graph's launch) whose index ranges are checked
    by compiled code; a value out of range found there sends the call the checked way, which raises eager's
    error, and the graph stays compiled."""
    ran: list[Any] = []
    for cls in (Launch, GraphLaunch):
        inner = cls.__call__
        monkeypatch.setattr(cls, "__call__", lambda self, env, inner=inner: (ran.append(self), inner(self, env))[1])
    torch._dynamo.reset()
    f = torch.compile(fn, backend="polytri")
    for _ in range(3):
        torch.testing.assert_close(f(*args), fn(*args))
    ranges = [la.ranges for la in ran if isinstance(la, Launch)]
    ranges += [la.ranges for g in ran if isinstance(g, GraphLaunch) for la in g.launches]
    assert any(r is not None for r in ranges)
    if fn is _index_computed:  # two programs, the second reads the first's values as indices
        assert any(isinstance(u, GraphLaunch) for u in ran)
    graphs = {g for g in ran if isinstance(g, GraphLaunch)}
    timed = {g: dict(g.calls._alone) for g in graphs}   # whole runs timed (CallRecord)
    assert all(set(t) == {None} for t in timed.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the graph is not given up for bad data
        for value in bad:
            wrong = args[-1].clone()
            wrong.view(-1)[-1] = value
            with pytest.raises(IndexError):
                f(*args[:-1], wrong)
        assert {g: g.calls._alone for g in graphs} == timed   # a run stopped by its ranges is not timed
        torch.testing.assert_close(f(*args), fn(*args))


def test_index_ranges_are_the_blocks_of_the_index_arrays_in_c_order() -> None:
    assert flat_runs((2, 128), (slice(0, 2), slice(0, 128))) == [(0, 256)]
    assert flat_runs((1, 128), (0, slice(0, 128))) == [(0, 128)]
    assert flat_runs((4, 6), (slice(1, 3), slice(2, 5))) == [(8, 3), (14, 3)]
    assert flat_runs((3, 4, 5), (slice(0, 3), 1, slice(0, 5))) == [(5, 5), (25, 5), (45, 5)]
    assert flat_runs((), ()) == [(0, 1)]
    values = np.arange(60).reshape(3, 4, 5)
    block = (slice(1, 3), slice(1, 3), slice(0, 5))
    runs = flat_runs(values.shape, block)
    assert sorted(v for s, n in runs for v in values.reshape(-1)[s:s + n]) == sorted(values[block].reshape(-1))


def test_indices_computed_in_the_subscript_keep_the_checked_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """``embedding(ids + 1, w)``: the kernel reads ``w[ids[i, j] + 1, k]``, whose values must be computed
    before they are checked, which :meth:`IndexCheck.ranges` does not do: the step gets no launch, and
    every call goes through the checked way, which still catches a bad value."""
    def fn(w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids + 1, w) * 2.0
    called: list[CompiledGraph] = []
    run = CompiledGraph.__call__
    monkeypatch.setattr(CompiledGraph, "__call__", lambda self, *a: (called.append(self), run(self, *a))[1])
    torch._dynamo.reset()
    w, ids = torch.randn(11, 6), torch.randint(0, 10, (3, 4))
    f = torch.compile(fn, backend="polytri")
    for _ in range(3):
        torch.testing.assert_close(f(w, ids), fn(w, ids))
    [graph] = set(called)
    [step] = [s for s in graph.steps if isinstance(s, _KernelStep)]
    assert step._indirect and not step._launchable and not step._launches
    bad = ids.clone()
    bad[2, 3] = 10
    with pytest.raises(IndexError):
        f(w, bad)
    report = pt.explain(fn, w, ids)
    [check] = [d for k in report.kernels for d in k.runtime]
    assert check.kind == "index-check" and not check.data["compiled"] and "checked in Python" in str(report)
