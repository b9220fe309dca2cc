"""The zoo's transformers models (BERT and GPT-2 of ``transformers``, built from configurations) through
both entry points: every op but the data-dependent reads runs in polytri kernels, and the result equals
eager in float32, and in bfloat16 is no further from the float32 result than twice eager's own error.
Skipped when ``transformers`` is not installed (the ``transformers`` extra)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

import polytri as pt
from polytri.frontend.torch_graph_launch import GraphLaunch
from polytri.frontend.torch_runtime import CompiledGraph, _KernelStep
from polytri.suite.models import TRANSFORMERS, build_call, to_dtype

pytest.importorskip("transformers")

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("module_kernel_cache", "fresh_dynamo")]


def _check_report(name: str, report: pt.ExplainReport) -> None:
    assert report.kernels and not report.errors and not report.declined, f"{name}:\n{report}"
    # the reads at indices taken from a tensor's values (token embeddings, the buffered token types, the
    # mask's rows) run in kernels too, with indirect subscripts
    assert not report.fallback_ops, f"{name}:\n{report}"


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_transformer_through_both_entry_points_equals_eager(name: str) -> None:
    model, args = build_call(name)
    assert args[0].dtype == torch.int64 and (args[1] == 0).any()  # token ids; a padded sequence
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a graph falling back to eager warns
        expected = model(*args)
        compiled = torch.compile(model, backend="polytri")
        torch.testing.assert_close(compiled(*args), expected, rtol=1e-3, atol=1e-4)
        torch._dynamo.reset()
        jitted = pt.jit(model)
        torch.testing.assert_close(jitted(*args), expected, rtol=1e-3, atol=1e-4)
        _check_report(name, pt.explain(jitted, *args))


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_transformer_in_bfloat16_is_as_close_to_float32_as_eager(name: str) -> None:
    model, args = build_call(name)
    with torch.no_grad():
        reference = model(*args).double()
        model, args = model.to(torch.bfloat16), to_dtype(args, torch.bfloat16)
        assert args[0].dtype == torch.int64
        eager_error = (model(*args).double() - reference).abs().max().item()
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            report = pt.explain(model, *args)
    _check_report(name, report)
    assert report.result.dtype == torch.bfloat16
    error = (report.result.double() - reference).abs().max().item()
    assert error <= 2 * eager_error + 1e-6, f"{name}: bfloat16 error {error:.3g}, eager's {eager_error:.3g}"


@pytest.mark.parametrize("name", ["gpt2"])
def test_transformer_with_dynamic_shapes_runs_in_kernels(name: str) -> None:
    # Dynamo restarts its analysis for dynamic shapes (TensorifyScalarRestartAnalysis): the backend hands
    # that back instead of running the graph in eager
    model, args = build_call(name)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        expected = model(*args)
        compiled = torch.compile(model, backend="polytri", dynamic=True)
        torch.testing.assert_close(compiled(*args), expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_transformer_runs_every_kernel_in_one_launch(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the third call on, one C call runs every kernel of the graph, the token embeddings (indirect
    reads, their index ranges checked in C) included; a view between two programs (BERT's token types,
    expanded) goes with the program that reads it, which reads it through its base instead of a copy."""
    model, args = build_call(name)
    called: list[CompiledGraph] = []
    run = CompiledGraph.__call__
    monkeypatch.setattr(CompiledGraph, "__call__", lambda self, *a: (called.append(self), run(self, *a))[1])
    with torch.no_grad():
        jitted = pt.jit(model)
        for _ in range(3):
            got = jitted(*args)
        torch.testing.assert_close(got, model(*args), rtol=1e-3, atol=1e-4)
    [graph] = set(called)
    [plan] = graph._plans.values()
    steps = [s for s in graph.steps if isinstance(s, _KernelStep)]
    assert len(plan) == 1 and isinstance(plan[0], GraphLaunch) and plan[0].steps == steps == graph.steps
    assert any(s._indirect for s in steps) and all(la.ranges is not None for s, la in
                                                   zip(steps, plan[0].launches) if s._indirect)
