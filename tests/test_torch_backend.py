"""The torch.compile backend and pt.jit: registration, options, fallback, explain, caching, dynamic shapes."""

from __future__ import annotations

import configparser
import pathlib
import re
import warnings
from typing import Any

import pytest
import torch
import torch._dynamo  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import polytri as pt  # noqa: E402
from polytri.frontend import torch_backend, torch_cache  # noqa: E402
from polytri.frontend.torch_options import check_options, default_target  # noqa: E402

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True)
def _fresh(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(torch_backend, "_GRAPH_CACHE", {})
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> dict[str, int]:
    calls = {"n": 0}
    real = getattr(module, name)

    def counted(*a: Any, **k: Any) -> Any:
        calls["n"] += 1
        return real(*a, **k)
    monkeypatch.setattr(module, name, counted)
    return calls


def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x * 2 - y).sum(-1) / 3


def test_backend_by_name_equals_eager_and_compiles_each_graph_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "polytri" in torch._dynamo.list_backends(exclude_tags=())
    builds = _count(monkeypatch, torch_backend, "plan_graph")
    f = torch.compile(chain, backend="polytri", options={"fuse": "max"})
    x, y = torch.randn(5, 7), torch.randn(7)
    for _ in range(3):
        torch.testing.assert_close(f(x, y), chain(x, y))
    assert builds["n"] == 1


def test_entry_point_is_declared() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(pathlib.Path(__file__).parents[1] / "setup.cfg")
    eps = cfg["options.entry_points"]
    assert "polytri = polytri.frontend.torch_backend:polytri_backend" in eps["torch_dynamo_backends"]
    assert "polytri.tools.cli:main" in eps["console_scripts"]


def test_jit_decorator_and_call_forms() -> None:
    @pt.jit(compile_options={"target": "cpu"})
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1

    g = pt.jit(chain)
    x, y = torch.randn(3, 4), torch.randn(4)
    torch.testing.assert_close(f(x), torch.relu(x) + 1)
    torch.testing.assert_close(g(x, y), chain(x, y))
    assert f.__name__ == "f"


def test_unknown_options_are_errors_listing_the_known_ones() -> None:
    with pytest.raises(pt.OptionError, match=r"unknown polytri option\(s\) 'tiles'.*known options: target, fuse"):
        pt.jit(chain, compile_options={"tiles": 32})
    with pytest.raises(pt.OptionError, match="option 'target' must be one of cpu, nvgpu, amdgpu"):
        check_options({"target": "tpu"})
    with pytest.raises(pt.OptionError, match="option 'fuse'"):
        check_options({"fuse": "sometimes"})


def test_products_fuse_multiply_and_add_unless_fma_is_off() -> None:
    w = torch.randn(48, 64)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, w)
    x = torch.randn(40, 64)
    fused = pt.explain(fn, x).kernels[0].source
    plain = pt.explain(fn, x, compile_options={"fma": False}).kernels[0].source
    assert "packed contraction" in fused and 'optimize("fp-contract=fast")' in fused
    assert "packed contraction" in plain and "fp-contract=fast" not in plain
    for opts in ({}, {"fma": False}):
        torch.testing.assert_close(pt.jit(fn, compile_options=opts)(x), fn(x))
    with pytest.raises(pt.OptionError, match="option 'fma' must be True or False"):
        check_options({"fma": 1})


def test_backend_object_is_created_once_per_option_set() -> None:
    a = torch_backend.backend_for({"fuse": "max", "debug": False})
    assert torch_backend.backend_for({"debug": False, "fuse": "max"}) is a
    assert torch_backend.backend_for({"fuse": "none"}) is not a


def test_default_target_follows_the_device() -> None:
    assert default_target([torch.device("cpu")]) == "cpu"
    expected = "amdgpu" if torch.version.hip else "nvgpu"
    assert default_target([torch.device("cpu"), torch.device("cuda", 0)]) == expected


def with_flip(x: torch.Tensor) -> torch.Tensor:
    y = torch.exp(x) * 2
    return torch.flip(y, [0]) + y.amax()


def test_unlowered_ops_run_in_eager_between_kernels() -> None:
    x = torch.randn(6, 3)
    report = pt.explain(with_flip, x)
    torch.testing.assert_close(report.result, with_flip(x))
    assert report.fallback_ops == ["aten.flip.default"]
    assert len(report.kernels) == 2
    text = str(report)
    assert "aten.flip.default" in text and "kernel" in text
    k = report.kernels[0]
    assert k.target == "cpu" and "void pt_" in k.source and k.name.startswith("fx")


def test_fusion_groups_name_the_inlined_nodes() -> None:
    report = pt.explain(chain, torch.randn(4, 5), torch.randn(5))
    assert report.fusion_groups == [["mul", "sub", "sigmoid", "sum_1"]]
    assert report.fallback_ops == [] and len(report.kernels) == 1


def test_a_failing_compilation_falls_back_to_eager_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("scheduler exploded")
    monkeypatch.setattr(torch_backend, "plan_graph", broken)
    f = torch.compile(chain, backend="polytri")
    x, y = torch.randn(2, 3), torch.randn(3)
    with pytest.warns(UserWarning, match="runs in eager: RuntimeError: scheduler exploded"):
        out = f(x, y)
    torch.testing.assert_close(out, chain(x, y))


def test_graphs_are_cached_in_memory_and_kernels_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = _count(monkeypatch, torch_cache, "pt_compile")
    x, y = torch.randn(4, 6), torch.randn(6)
    pt.explain(chain, x, y)
    assert compiles["n"] == 1
    torch._dynamo.reset()
    pt.explain(chain, x, y)  # the same graph: found in memory
    assert compiles["n"] == 1
    monkeypatch.setattr(torch_backend, "_GRAPH_CACHE", {})
    torch._dynamo.reset()
    report = pt.explain(chain, x, y)  # a new process would start here: the kernel comes from disk
    assert compiles["n"] == 1
    torch.testing.assert_close(report.result, chain(x, y))
    pt.explain(chain, x.double(), y.double())  # another dtype: another kernel
    assert compiles["n"] == 2


def test_kernels_of_another_compiler_version_are_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = _count(monkeypatch, torch_cache, "pt_compile")
    x, y = torch.randn(4, 6), torch.randn(6)
    pt.explain(chain, x, y)
    monkeypatch.setattr(torch_backend, "_GRAPH_CACHE", {})
    monkeypatch.setattr(torch_cache, "code_version", lambda: "an edited polytri")
    torch._dynamo.reset()
    pt.explain(chain, x, y)  # same graph, other compiler sources: compiled again, not loaded from disk
    assert compiles["n"] == 2


def test_code_version_digests_the_package_sources() -> None:
    v = torch_cache.code_version()
    assert re.fullmatch(r"[0-9a-f]{64}", v) and torch_cache.code_version() == v


def test_dynamic_sizes_are_parameters_one_kernel_for_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ w, -1).sum(0) + x.mean()
    builds = _count(monkeypatch, torch_backend, "plan_graph")
    g = torch.compile(f, backend="polytri", dynamic=True)
    for m, k in [(4, 8), (7, 3), (33, 17)]:
        x, w = torch.randn(m, k), torch.randn(k, 5)
        torch.testing.assert_close(g(x, w), f(x, w))
    assert builds["n"] == 1
    report = pt.explain(f, torch.randn(6, 4), torch.randn(4, 5))
    assert report.kernels and report.kernels[0].program.startswith("program")


def test_slices_cat_pad_and_factories() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([x[:, 1:], x[:, :1] * 2], 1)
        z = F.pad(y, (1, 2, 0, 1), value=0.5)
        return z + torch.arange(z.shape[1]) + torch.ones(z.shape) * x.select(1, -1).sum()
    x = torch.randn(4, 5)
    report = pt.explain(f, x)
    torch.testing.assert_close(report.result, f(x))
    assert report.fallback_ops == []


@pytest.mark.interp
def test_nvgpu_target_through_the_interpreter() -> None:
    x, y = torch.randn(8, 16), torch.randn(16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager would warn
        report = pt.explain(chain, x, y, compile_options={"target": "nvgpu"})
    torch.testing.assert_close(report.result, chain(x, y))
    assert report.kernels and all(k.target == "nvgpu" for k in report.kernels)


def test_wide_reductions_accumulate_in_lanes_and_equal_eager() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.sum(-1), x.amax(-1, keepdim=True), torch.softmax(x, -1), x.var(-1), x.mean((1, 2)),
                F.layer_norm(x, (128,)), x.amin((0, 2)))
    x = torch.randn(3, 5, 128)
    x[1, 2, 7] = float("nan")  # max and min propagate NaN, as in eager
    report = pt.explain(f, x)
    torch.testing.assert_close(report.result, f(x), equal_nan=True, rtol=1e-5, atol=1e-5)
    assert report.fallback_ops == []
    assert sum(k.program.count("_lanes[") for k in report.kernels) > 0


@pytest.mark.parametrize("n", [197, 300])  # with AVX-512: one vector of partial results and 5 left; four and 44 left
def test_reductions_whose_extent_is_not_a_multiple_of_the_lanes_accumulate_in_lanes(n: int) -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.sum(-1), x.amax(-1), x.amin(-1), torch.softmax(x, -1), F.layer_norm(x, (n,)),
                (x > 2.5).any(-1), (x > -2.5).all(-1))
    x = torch.randn(6, n)
    x[1, n - 2] = float("nan")  # in the elements left after the last whole vector
    x[2, n - 1] = 40.0  # the maximum, last
    x[3, :] = -float("inf")
    x[4, n - 3] = 3.0  # the only element of its row that passes the any
    report = pt.explain(f, x)
    got, want = report.result, f(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, rtol=1e-5, atol=1e-5)
    for g, w in zip(got[1:3], want[1:3]):  # maxima and minima are exact
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)
    assert report.fallback_ops == []
    lanes = [d for k in report.kernels for d in k.lowering if d.kind == "reduction-lanes"]
    from polytri.frontend.torch_ops_reduce import lanes_of
    lane = lanes_of(torch.float32)  # the machine's vector: 16 with AVX-512, 8 with AVX2
    width = lane * (4 if n >= 16 * lane else 1)
    assert lanes and {d.data["partials"] for d in lanes} == {width}, [d.text for d in lanes]
    assert {d.data["remainder"] for d in lanes} == {n % width}


def test_each_element_of_a_reduction_in_lanes_runs_its_steps_in_one_nest() -> None:
    """The partial results of one row are set, accumulated, folded and summed in one nest, each step inside
    the row's loop: in the input order the row's partial results stay in the cache (separate nests walk the
    whole array of partial results once per step; a batch-of-4 MLP in float32 went from 1.14 to 0.93 ms)."""
    from polytri.ir.textform import parse_program
    x = torch.randn(6, 300)
    report = pt.explain(lambda x: x.sum(-1), x)
    [kernel] = report.kernels
    prog = parse_program(kernel.program)
    lanes = [st for st in prog.statements if st.target.array.endswith("_lanes")]
    chain = lanes + [st for st in prog.statements if st.target.array + "_lanes" in {s.target.array for s in lanes}]
    assert len(chain) >= 4, kernel.program
    assert len({st.position[0] for st in chain}) == 1, [(st.name, st.position) for st in chain]
    assert len({st.position[1] for st in chain}) == len(chain)  # one after the other inside the row's loop
    torch.testing.assert_close(report.result, x.sum(-1), rtol=1e-5, atol=1e-5)


def test_a_product_of_a_few_rows_runs_its_rows_inside_each_chunk_of_the_sum() -> None:
    """A linear layer on 4 rows, summed in vector lanes: each chunk of a weight's row is loaded (and
    converted) once for the 4 rows, which run inside the chunk loop (the zoo's MLP on one thread, in one
    process: 1.197 -> 0.882 ms in bfloat16, 0.981 -> 0.786 ms in float32)."""
    from polytri.ir.textform import parse_program
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 256, generator=gen), torch.randn(96, 256, generator=gen)
    report = pt.explain(lambda x, w: torch.nn.functional.linear(x, w), x, w)
    [kernel] = report.kernels
    prog = parse_program(kernel.program)
    [acc] = [st for st in prog.statements if st.target.array.endswith("_lanes") and len(st.iterators) == 4]
    assert acc.iterators == ("i0", "r0", "i1", "r1"), (acc.name, acc.iterators)  # column, chunk, row, lane
    # sums of 256 terms of size ~1 in another order: differences of a few 1e-5 are rounding, not a fault
    torch.testing.assert_close(report.result, x @ w.T, rtol=1e-4, atol=1e-4)


def test_a_computed_transposed_operand_is_stored_in_its_sources_order() -> None:
    """``q @ (k + bias)^T``: the operand is computed (``k + bias``), so it is stored, and as ``[.., n, k]``,
    the order of ``k`` in memory, which the packed panels read transposed (a ``[.., k, n]`` copy walked
    ``k`` with a stride: BERT's bfloat16 q/k/v kernel 0.85 -> 0.74 ms a call)."""
    from polytri.ir.textform import parse_program
    gen = torch.Generator().manual_seed(0)
    q, k, b = torch.randn(2, 3, 16, 8, generator=gen), torch.randn(2, 3, 16, 8, generator=gen), torch.randn(8, generator=gen)

    def f(q: torch.Tensor, k: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return q @ (k + b).transpose(-1, -2)
    report = pt.explain(f, q, k, b, compile_options={"cache": False})
    torch.testing.assert_close(report.result, f(q, k, b), rtol=1e-5, atol=1e-5)
    [kernel] = report.kernels
    prog = parse_program(kernel.program)
    [copy] = [st for st in prog.statements if st.target.array.endswith("_b")]
    assert copy.domain.dim_max_val(1).to_python() == 15 and copy.domain.dim_max_val(2).to_python() == 7  # [.., n, k]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("chains", [True, False])
def test_16bit_chains_round_where_stored_or_after_every_op(chains: bool, dtype: torch.dtype) -> None:
    """Elementwise ops on bfloat16 computed in one statement pass float32 values on and round once, at
    the store (Inductor's numerics, option float32_chains, the default); without the option every op
    rounds, as eager does: ``(x + 1000) - 1000`` loses x's low bits in eager's 16-bit arithmetic only."""
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x + 1000) - 1000
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0)).to(dtype)
    out = pt.jit(f, compile_options={"float32_chains": chains})(x)
    if chains:
        torch.testing.assert_close(out.float(), x.float(), rtol=0, atol=2.5e-4)
        assert not torch.equal(out, f(x))
    else:
        assert torch.equal(out, f(x))


def test_causal_attention_with_an_infinite_mask_is_lowered() -> None:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)).masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        return torch.softmax(scores, -1) @ v
    q, k, v = (torch.randn(2, 6, 4) for _ in range(3))
    report = pt.explain(attention, q, k, v)
    torch.testing.assert_close(report.result, attention(q, k, v))
    assert report.fallback_ops == []


def test_boolean_triangles_logical_constants_and_causal_sdpa_are_lowered() -> None:
    """``where`` of two boolean constants (a triangle of ``ones(dtype=bool)``, ``x | True``) is a boolean,
    so another ``where`` or a logical op can read it."""
    def masks(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tri = torch.ones(x.shape[-1], x.shape[-1], dtype=torch.bool).tril()
        return tri & (x > 0), ((x > 0.5) | True) & (x < 1), ~torch.ones_like(x, dtype=torch.bool).triu()

    def causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x, q, k, v = torch.randn(5, 5), *(torch.randn(1, 2, 6, 4) for _ in range(3))
    for fn, args in ((masks, (x,)), (causal, (q, k, v))):
        report = pt.explain(fn, *args)
        torch.testing.assert_close(report.result, fn(*args))
        assert report.kernels and report.fallback_ops == [] and not report.declined, str(report)


def test_integer_division_remainder_shifts_and_not_by_numbers() -> None:
    """Integer floor and truncating division and remainder by a nonzero number, shifts by a number and
    ``~`` are arithmetic; a tensor divisor runs in eager (eager raises at a zero)."""
    def ints(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = (a // 3, torch.div(a, 3, rounding_mode="trunc"), a % 3, torch.remainder(a, 1), a >> 3, a << 2, ~a)
        if a.dtype == torch.uint8:  # a negative divisor is no uint8 literal
            return r
        return (*r, a // -3, torch.div(a, -4, rounding_mode="trunc"), a % -3)
    big = torch.tensor([-2**63, 2**63 - 1, 2**62 + 5, -2**62 - 7])
    for a in (torch.cat([torch.arange(-20, 21), big]), torch.arange(-128, 128, dtype=torch.int8),
              torch.arange(0, 256, dtype=torch.uint8), torch.arange(-40, 40, 3, dtype=torch.int32)):
        torch._dynamo.reset()
        report = pt.explain(ints, a)
        for got, want in zip(report.result, ints(a)):
            assert got.dtype == want.dtype and torch.equal(got, want), (a.dtype, got, want)
        assert report.fallback_ops == [], str(report)
    report = pt.explain(lambda a, b: a // b + a % b, a, torch.full_like(a, 3))
    assert set(report.declined) == {"div", "remainder"}, str(report)
    assert "by a tensor runs in eager" in report.declined["div"]


def test_mark_dynamic_makes_a_parameter_and_declined_nodes_run_in_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).reshape(-1, 2).sum(1)  # splitting a dynamic dimension: not affine
    builds = _count(monkeypatch, torch_backend, "plan_graph")
    g = torch.compile(f, backend="polytri")
    for n in (6, 10, 14):
        x = torch.randn(n, 4)
        torch._dynamo.mark_dynamic(x, 0)
        torch.testing.assert_close(g(x), f(x))
    assert builds["n"] == 1
    x = torch.randn(8, 4)
    torch._dynamo.mark_dynamic(x, 0)
    report = pt.explain(f, x)
    torch.testing.assert_close(report.result, f(x))
    assert report.kernels, "the multiplication and the sum still run in polytri kernels"
    assert any("dynamic" in why for why in report.declined.values())


def test_each_fallback_op_is_logged_once(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_backend, "_LOGGED_FALLBACKS", set())
    with caplog.at_level("INFO", logger="polytri.torch"):
        pt.explain(with_flip, torch.randn(4, 3))
        torch._dynamo.reset()
        pt.explain(with_flip, torch.randn(5, 2))
    lines = [r.getMessage() for r in caplog.records if "aten.flip.default" in r.getMessage()]
    assert len(lines) == 1 and "runs in eager" in lines[0]


@pytest.mark.parametrize("stride, padding, dilation, groups", [(1, 1, 1, 1), (2, 2, 1, 2), (1, (0, 2), 2, 4),
                                                               (3, 1, (2, 1), 1)])
def test_convolutions_with_stride_padding_dilation_groups(stride: Any, padding: Any, dilation: Any,
                                                          groups: int) -> None:
    w, b = torch.randn(8, 8 // groups, 3, 3), torch.randn(8)

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups))
    x = torch.randn(2, 8, 11, 10)
    report = pt.explain(f, x)
    torch.testing.assert_close(report.result, f(x), rtol=1e-4, atol=1e-5)
    assert report.fallback_ops == []


def test_arguments_are_checked_once_per_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's argument checks run on the first call of each shape; later calls of that shape go
    straight to the library, and still compute what eager computes."""
    from polytri.cpu_codegen.kernel import CpuKernel
    checked, unchecked = [], []
    monkeypatch.setattr(CpuKernel, "__call__", lambda self, **kw: checked.append(1) or
                        CpuKernel.call_unchecked(self, [kw[a.name].data_ptr() for a in self.program.arrays],
                                                 [kw[p] for p in self.program.params]))
    real = CpuKernel.call_unchecked
    monkeypatch.setattr(CpuKernel, "call_unchecked", lambda self, ptrs, params: unchecked.append(1) or
                        real(self, ptrs, params))

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 2, -1)
    torch._dynamo.reset()
    g = pt.jit(f, compile_options={"cache": False})
    x = torch.randn(6, 40)
    torch._dynamo.mark_dynamic(x, 0)
    for _ in range(3):
        torch.testing.assert_close(g(x), f(x))
    assert len(checked) == 1
    y = torch.randn(9, 40)
    torch._dynamo.mark_dynamic(y, 0)
    torch.testing.assert_close(g(y), f(y))  # a new size: checked again
    z = torch.randn(9, 40)
    torch._dynamo.mark_dynamic(z, 0)
    torch.testing.assert_close(g(z), f(z))  # same signature, other memory
    assert len(checked) == 2
    assert len(unchecked) >= 5  # the checked calls above also run through call_unchecked


def test_explain_twice_reports_the_kernels_again() -> None:
    """Dynamo caches compiled frames per code object: a second pt.explain of the same function must still
    compile and report (it used to report no kernel)."""
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1)
    x = torch.randn(4, 8)
    first, second = pt.explain(f, x), pt.explain(f, x)
    assert len(first.kernels) == len(second.kernels) == 1
    assert first.kernels[0].source == second.kernels[0].source


def test_explain_reports_a_jit_function_before_and_after_it_ran():
    @pt.jit(compile_options={"target": "cpu"})
    def layer(x, w, b):
        return torch.relu(x @ w + b)

    args = (torch.randn(8, 4), torch.randn(4, 3), torch.randn(3))
    before = pt.explain(layer, *args)
    layer(*args)  # Dynamo now holds the compiled frame: the report must not come back empty
    after = pt.explain(layer, *args)
    for report in (before, after):
        assert len(report.graphs) == 1 and report.kernels, str(report)
        assert all(k.target == "cpu" for k in report.kernels)  # the wrapper's options
    assert [k.nodes for k in before.kernels] == [k.nodes for k in after.kernels]
    module = pt.jit(torch.nn.Linear(4, 3), compile_options={"target": "cpu"})
    module(args[0])
    assert pt.explain(module, args[0]).kernels


def test_explain_of_a_jit_function_reports_what_it_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """pt.explain on a pt.jit function that has run reports its graph without tracing or compiling it
    again; a call with a new shape adds that graph to the report."""
    from polytri.frontend import torch_backend
    compiles: list[int] = []
    original = torch_backend._compile_graph
    monkeypatch.setattr(torch_backend, "_compile_graph", lambda *a: compiles.append(1) or original(*a))

    @pt.jit(compile_options={"target": "cpu", "cache": False}, dynamic=False)
    def scaled_softmax(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, -1) * 2

    x = torch.randn(4, 8)
    scaled_softmax(x)
    report = pt.explain(scaled_softmax, x)
    assert len(compiles) == 1
    assert len(report.graphs) == 1 and len(report.kernels) == 1 and report.kernels[0].source
    torch.testing.assert_close(report.result, torch.softmax(x, -1) * 2)
    y = torch.randn(5, 3)
    report = pt.explain(scaled_softmax, y)
    assert len(compiles) == 2 and len(report.graphs) == 2
    torch.testing.assert_close(report.result, torch.softmax(y, -1) * 2)


def test_a_failed_background_build_runs_the_graph_in_eager(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: pathlib.Path) -> None:
    """The kernels of a graph are built in the background while the next one is scheduled; a build that
    fails still makes the graph run in eager, with a warning, and the right result.  (The build that runs
    in the worker threads is replaced by one that fails: a graph built in the foreground would not call
    it, compile, and fail the test.)"""
    from polytri.cpu_codegen import build

    def failing_build(source: str, **_: object) -> pathlib.Path:
        raise pt.CompilationError("building generated C failed (a test's compiler)")
    monkeypatch.setattr(build, "build_library", failing_build)
    monkeypatch.setenv("POLYTRI_CACHE_DIR", str(tmp_path / "fresh"))
    x = torch.randn(8, 8)
    with pytest.warns(UserWarning, match="runs in eager"):
        report = pt.explain(lambda t: torch.relu(t) * 2 + t.sum(), x, compile_options={"threads": 1})
    torch.testing.assert_close(report.result, torch.relu(x) * 2 + x.sum())
    assert report.kernels == [] and any("a test's compiler" in e for e in report.errors)


@pytest.mark.parametrize("k, stride, dilation", [(5, 2, 1), (3, 1, 2)])
def test_padded_depthwise_convolutions_unroll_over_a_zero_padded_copy(k: int, stride: int, dilation: int) -> None:
    # each input channel feeds one output channel: no reuse for a product's register blocks, so the padding
    # becomes a copy with zero borders and the window one statement (with the batch norm and activation)
    c = 6
    w, b = torch.randn(c, 1, k, k), torch.randn(c)
    scale, shift = torch.rand(c) + 0.5, torch.rand(c) - 0.5

    def f(x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, w, b, stride=stride, padding=dilation * (k // 2), dilation=dilation, groups=c)
        return F.hardswish(y * scale[:, None, None] + shift[:, None, None])
    x = torch.randn(2, c, 13, 11)
    report = pt.explain(f, x, compile_options={"target": "cpu"})
    torch.testing.assert_close(report.result, f(x), rtol=1e-4, atol=1e-5)
    forms = [d.data["form"] for kern in report.kernels for d in kern.lowering if d.kind == "convolution"]
    assert forms == ["padded-unrolled"]
    assert report.fallback_ops == []


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("groups, form", [(1, "implicit-gemm"), (16, "unrolled")])
def test_small_dense_convolutions_are_implicit_gemms(dt: torch.dtype, groups: int, form: str) -> None:
    # 16 terms per output element: unrolled, each of the 24 output channels would read (and in bfloat16
    # convert) every input element again; the implicit GEMM packs it once and reuses it in its register
    # blocks. A depthwise convolution (one output channel per group) has no such reuse: unrolled
    cout, k = (24, 1) if groups == 1 else (16, 3)
    w, b = torch.randn(cout, 16 // groups, k, k).to(dt), torch.randn(cout).to(dt)

    def f(x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(F.conv2d(x, w, b, groups=groups))
    x = torch.randn(1, 16, 14, 10).to(dt)
    report = pt.explain(f, x, compile_options={"target": "cpu"})
    forms = [d.data["form"] for kern in report.kernels for d in kern.lowering if d.kind == "convolution"]
    assert forms == [form]
    want = F.hardswish(F.conv2d(x.float(), w.float(), b.float(), groups=groups))
    err, eager_err = (report.result.float() - want).abs().max(), (f(x).float() - want).abs().max()
    assert err <= max(2 * eager_err, 1e-5), (err, eager_err)


@pytest.mark.parametrize("stride", [1, 2])
def test_wide_rows_keep_the_row_form_only_at_stride_1(stride: int) -> None:
    # output rows as wide as the register blocks' columns: at stride 1 the row form goes on the packed
    # micro-kernel; a stride along the width cannot (its columns read every other input pixel), so it is
    # flattened into the implicit GEMM, which can
    from polytri.cpu_codegen.blocking import blocking
    from polytri.dtypes import FLOAT32
    nr = blocking(FLOAT32).nr
    w, b = torch.randn(8, 3, 3, 3), torch.randn(8)

    def f(x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, b, stride=stride, padding=1)
    x = torch.randn(1, 3, 5, stride * (nr - 1) + 1)  # nr output columns: the rows fill the blocks
    report = pt.explain(f, x, compile_options={"target": "cpu"})
    torch.testing.assert_close(report.result, f(x), rtol=1e-4, atol=1e-5)
    forms = [d.data["form"] for kern in report.kernels for d in kern.lowering if d.kind == "convolution"]
    assert forms == ["rows" if stride == 1 else "implicit-gemm"]
    assert "packed contraction" in report.kernels[0].source


@pytest.mark.parametrize("padding", [0, 1])
def test_windows_are_zero_filled_only_under_padding(padding: int) -> None:
    # a strided convolution copies its windows out (im2col); without padding the copy writes every
    # element, so no statement fills the copy with zeros first (ViT's patches wrote 600 KB twice)
    import re
    w = torch.randn(8, 3, 4, 4)

    def f(x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, stride=4, padding=padding)
    x = torch.randn(1, 3, 32, 32)
    report = pt.explain(f, x, compile_options={"target": "cpu"})
    torch.testing.assert_close(report.result, f(x), rtol=1e-4, atol=1e-5)
    forms = [d.data["form"] for kern in report.kernels for d in kern.lowering if d.kind == "convolution"]
    assert forms == ["implicit-gemm"]
    fills = re.findall(r"S\d+: \w+_windows\[[^\]]*\] = 0 \*/", report.kernels[0].source)
    assert bool(fills) == bool(padding), fills


def test_a_cheap_left_factor_of_a_packed_product_is_computed_as_it_is_packed() -> None:
    """Attention's weights after sdpa's test of fully masked rows, where(any, p, 0), enter the product as
    an expression that the packing computes, not as a stored copy."""
    keep = torch.rand(3, 40, 1) > 0.2
    v = torch.randn(3, 50, 24)

    def f(p: torch.Tensor) -> torch.Tensor:
        return torch.bmm(torch.where(keep, p, 0.0), v)
    p = torch.randn(3, 40, 50)
    report = pt.explain(f, p, compile_options={"target": "cpu"})
    torch.testing.assert_close(report.result, f(p), rtol=1e-5, atol=1e-5)
    [kernel] = report.kernels
    assert "packed contraction" in kernel.source
    assert "bmm_a[" not in kernel.source, kernel.source


@pytest.mark.parametrize("cin, cout, groups, k, stride, padding, dilation, size", [
    (3, 8, 1, 3, 2, 1, 1, (15, 14)),   # windows: padding above and left; below and right only on odd sizes
    (3, 8, 1, 3, 2, 1, 1, (16, 16)),   # windows: no window point below or right of the image
    (4, 8, 1, 3, 3, (2, 1), (2, 1), (13, 11)),
    (8, 8, 1, 3, 1, 1, 1, (9, 7)),     # stride 1: the rows of the flattened copy and the gaps between them
    (6, 6, 6, 5, 1, 2, 1, (13, 11)),   # depthwise: the zero-padded copy's rows and columns
    (6, 6, 6, 3, 2, 1, 1, (12, 9)),
])
def test_padding_is_written_where_the_input_copy_does_not_write(
        monkeypatch: pytest.MonkeyPatch, cin: int, cout: int, groups: int, k: int, stride: int, padding: Any,
        dilation: Any, size: tuple[int, int]) -> None:
    """The padding of a convolution's input copy is written only outside the copied image: every other
    element must come from the copy. The intermediates are filled with NaN between two calls (they are
    reused from call to call), so an element the padding missed would show."""
    from polytri.frontend import torch_runtime
    graphs: list[Any] = []
    init = torch_runtime.CompiledGraph.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        graphs.append(self)
    monkeypatch.setattr(torch_runtime.CompiledGraph, "__init__", keep)
    w, b = torch.randn(cout, cin // groups, k, k), torch.randn(cout)

    def f(x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    x = torch.randn(2, cin, *size)
    torch._dynamo.reset()
    g = torch.compile(f, backend="polytri", options={"target": "cpu"})
    torch.testing.assert_close(g(x), f(x), rtol=1e-4, atol=1e-5)
    steps = [s for graph in graphs for s in graph.steps if isinstance(s, torch_runtime._KernelStep)]
    assert any(s._temps for s in steps)
    for s in steps:
        for t in s._temps.values():
            t.fill_(float("nan") if t.is_floating_point() else 7)
    torch.testing.assert_close(g(x), f(x), rtol=1e-4, atol=1e-5)


def test_a_strided_depthwise_convolution_begins_a_program_of_its_own() -> None:
    # unrolled, its reads 2 * y + ky are no function of the iteration: fused with the 1x1 convolution
    # before it, the scheduler's hyperplane problem ran for minutes (MobileNet's expand + depthwise 5x5)
    pw, dw = torch.randn(8, 4, 1, 1), torch.randn(8, 1, 5, 5)

    def f(x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(F.conv2d(x, pw))
        return F.conv2d(y, dw, stride=2, padding=2, groups=8)
    x = torch.randn(1, 4, 12, 12)
    report = pt.explain(f, x, compile_options={"target": "cpu"})
    torch.testing.assert_close(report.result, f(x), rtol=1e-4, atol=1e-5)
    forms = [[d.data["form"] for d in kern.lowering if d.kind == "convolution"] for kern in report.kernels]
    assert forms == [["implicit-gemm"], ["padded-unrolled"]], forms


def test_strided_convolutions_over_dynamic_image_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    # the output size (h - 1) // 2 + 1 is quasi-affine: a floor division that isl takes as it is
    w, b = torch.randn(4, 1, 3, 3), torch.randn(4)

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(F.conv2d(x, w, b, stride=2, padding=1, groups=4)).amax(1)
    builds = _count(monkeypatch, torch_backend, "plan_graph")
    g = torch.compile(f, backend="polytri", dynamic=True)
    for h, wd in [(9, 8), (12, 15), (7, 7)]:
        x = torch.randn(1, 4, h, wd)
        torch.testing.assert_close(g(x), f(x), rtol=1e-4, atol=1e-5)
    assert builds["n"] == 1
    x = torch.randn(1, 4, 10, 11)
    torch._dynamo.mark_dynamic(x, 2)
    report = pt.explain(f, x)
    assert report.kernels and report.fallback_ops == [], str(report)


def test_kernels_use_no_more_threads_than_torch_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the threads option, a kernel runs on the free cores but no more than
    ``torch.get_num_threads()``: a model that PyTorch runs on one thread runs on one here too, through the
    first (checked) call, the step launches and the graph's one C call alike; the option overrides it."""
    from polytri.runtime import cpu_share
    monkeypatch.setattr(cpu_share, "threads_now", lambda fixed: fixed or 2)  # two free cores
    used: list[tuple[object, int]] = []
    ended = cpu_share.CallRecord.ended
    monkeypatch.setattr(cpu_share.CallRecord, "ended", lambda self, key, threads, started: (
        used.append((key, threads)), ended(self, key, threads, started)))
    w = torch.randn(32, 32)

    def fn(x: torch.Tensor) -> torch.Tensor:  # more statements than one program takes: several kernels
        for _ in range(6):
            x = torch.softmax(x @ w, dim=1) - x.mean(dim=1, keepdim=True)
        return x
    x = torch.randn(4, 32)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        f = pt.jit(fn)
        for _ in range(3):
            torch.testing.assert_close(f(x), fn(x))
        assert None in {key for key, _ in used}, used  # the graph's run of kernels in one C call
        assert {n for _, n in used} == {1}, used
        used.clear()
        g = pt.jit(fn, compile_options={"threads": 2})
        for _ in range(3):
            g(x)
        assert used and {n for _, n in used} == {2}, used
    finally:
        torch.set_num_threads(before)
