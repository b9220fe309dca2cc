"""The Triton backend: every suite kernel in Triton's interpreter equals the reference; kernels compile ahead of
time for NVIDIA and AMD; contractions map to tl.dot and the matrix instructions."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from oracles import assert_suite_arrays_match

import polytri as pt
from polytri.codegen_triton.kernel import TritonKernel
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.interp


@functools.cache
def _program(name: str) -> pt.Program:
    return KERNELS[name].build()


@functools.cache
def _compiled(name: str, target: str = "nvgpu") -> TritonKernel:
    return pt.compile(_program(name), target=target)


def _check(name: str, params: dict[str, int], target: str = "nvgpu", kernel: TritonKernel | None = None,
           seed: int = 1) -> None:
    """The suite kernel ``name`` (or ``kernel``, compiled from it) agrees with the reference at ``params``."""
    k = KERNELS[name]
    args = make_args(k, params, seed=seed)
    want, got = copy_args(args), copy_args(args)
    pt.reference(_program(name), **want)
    (kernel or _compiled(name, target))(**got)
    assert_suite_arrays_match(name, params, args, got, want)


@pytest.mark.parametrize("name", list(KERNELS))
def test_suite_kernel_in_interpreter_matches_reference(name: str) -> None:
    """Sizes that are not multiples of any block side (masks at partial blocks and triangular edges)."""
    _check(name, KERNELS[name].small)


@pytest.mark.parametrize("name", list(KERNELS))
def test_parameters_smaller_than_one_block(name: str) -> None:
    _check(name, KERNELS[name].tiny)


def test_amdgpu_target_runs_in_interpreter() -> None:
    _check("jacobi_2d", KERNELS["jacobi_2d"].small, target="amdgpu")


def _matmul(dtype: str, acc: str, cast: str | None = None) -> pt.Program:
    p = pt.Program(f"mm_{dtype}", params=["M", "N", "K"])
    p.array("A", ("M", "K"), dtype)
    p.array("B", ("K", "N"), dtype)
    p.array("C", ("M", "N"), acc)
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"):
        p.assign("C[i, j] = 0")
        with p.loop("k", 0, "K"):
            if cast:
                p.assign(f"C[i, j] += {cast}(A[i, k]) * {cast}(B[k, j])")
            else:
                p.assign("C[i, j] += A[i, k] * B[k, j]")
    return p


CONTRACTIONS = {
    "float16": ("float32", "float32"),
    "bfloat16": ("float32", "float32"),
    "int8": ("int32", "int32"),
}


@functools.cache
def _mm_kernel(dtype: str) -> TritonKernel:
    acc, cast = CONTRACTIONS[dtype]
    return pt.compile(_matmul(dtype, acc, cast), target="nvgpu")


@pytest.mark.parametrize("dtype", list(CONTRACTIONS))
def test_contraction_uses_tl_dot_and_matches_reference(dtype: str) -> None:
    import torch
    k = _mm_kernel(dtype)
    assert "tl.dot(" in k.source
    acc = CONTRACTIONS[dtype][0]
    g = torch.Generator().manual_seed(0)
    M, N, K = 37, 21, 70  # K spans three K-tiles, none full
    if dtype == "int8":
        a = torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (K, N), generator=g, dtype=torch.int8)
    else:
        a = torch.randn(M, K, generator=g).to(getattr(torch, dtype))
        b = torch.randn(K, N, generator=g).to(getattr(torch, dtype))
    c = torch.full((M, N), 7, dtype=getattr(torch, acc))
    want = c.clone()
    pt.reference(_mm_kernel(dtype).program, A=a, B=b, C=want)
    k(A=a, B=b, C=c)
    if dtype == "int8":
        assert torch.equal(c, want)
    else:
        torch.testing.assert_close(c, want, rtol=1e-4, atol=1e-4)


AOT = {"sm_90": "wgmma", "sm_80": "mma.sync", "gfx942": "mfma"}


@pytest.mark.parametrize("arch", list(AOT))
@pytest.mark.parametrize("dtype", list(CONTRACTIONS))
def test_contraction_compiles_to_matrix_instructions(dtype: str, arch: str) -> None:
    text = _mm_kernel(dtype).asm(arch)
    assert AOT[arch] in text, f"{dtype} matmul for {arch}: no {AOT[arch]} instruction"


AOT_SAMPLE = ["gemm", "jacobi_2d", "seidel_2d", "covariance", "trisolv", "blur"]


@pytest.mark.parametrize("arch", list(AOT))
@pytest.mark.parametrize("name", AOT_SAMPLE)
def test_suite_sample_compiles_ahead_of_time(name: str, arch: str) -> None:
    text = _compiled(name).asm(arch)
    assert text.count("// kernel ") == len(_compiled(name).launches)
    assert (".entry" in text) if arch.startswith("sm_") else ("amdhsa" in text)


@pytest.mark.slow
@pytest.mark.parametrize("arch", list(AOT))
@pytest.mark.parametrize("name", [n for n in KERNELS if n not in AOT_SAMPLE])
def test_whole_suite_compiles_ahead_of_time(name: str, arch: str) -> None:
    test_suite_sample_compiles_ahead_of_time(name, arch)


def test_gfx1100_compiles_with_wmma() -> None:
    assert "wmma" in _mm_kernel("float16").asm("gfx1100")


def test_elementwise_kernel_is_one_launch_with_a_2d_grid() -> None:
    k = _compiled("jacobi_2d")
    assert "tl.program_id(1)" in k.source and "tl.arange" in k.source
    assert "    for c1 in range(" in k.source.split("def pt_host")[1]  # the time loop stays on the host


def test_reduction_uses_tl_sum() -> None:
    p = pt.Program("rowmax", params=["M", "N"])
    p.array("A", ("M", "N"), "float32")
    p.array("s", ("M",), "float32")
    p.array("m", ("M",), "float32")
    with p.loop("i", 0, "M"):
        p.assign("s[i] = 0.0")
        p.assign("m[i] = -1e30")
        with p.loop("j", 0, "N"):
            p.assign("s[i] += A[i, j] * A[i, j]")
        with p.loop("j", 0, "N"):
            p.assign("m[i] = max(m[i], A[i, j])")
    k = pt.compile(p, target="nvgpu")
    assert "tl.sum(" in k.source and "tl.max(" in k.source
    rng = np.random.default_rng(0)
    a = rng.standard_normal((19, 150)).astype(np.float32)
    s, m = np.zeros(19, np.float32), np.zeros(19, np.float32)
    k(A=a, s=s, m=m)
    np.testing.assert_allclose(s, (a * a).sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(m, a.max(axis=1))


def test_integer_semantics_match_the_reference() -> None:
    p = pt.Program("ints", params=["N"])
    p.array("a", ("N",), "int32")
    p.array("q", ("N",), "int32")
    p.array("r", ("N",), "int32")
    p.array("w", ("N",), "int8")
    with p.loop("i", 0, "N"):
        p.assign("q[i] = a[i] // 3 + (i - 5) // 2")
        p.assign("r[i] = a[i] % 3 + (i - 5) % 4")
        p.assign("w[i] = w[i] + 100")
    k = pt.compile(p, target="nvgpu")
    a = np.arange(-8, 9, dtype=np.int32)
    args = {"a": a, "q": np.zeros(17, np.int32), "r": np.zeros(17, np.int32), "w": np.full(17, 100, np.int8)}
    want, got = copy_args(args), copy_args(args)
    pt.reference(p, **want)
    k(**got)
    for n in ("q", "r", "w"):
        np.testing.assert_array_equal(got[n], want[n], err_msg=n)


def test_bfloat16_arithmetic_is_rounded_like_the_reference() -> None:
    import torch
    p = pt.Program("bfops", params=["N"])
    p.array("x", ("N",), "bfloat16")
    p.array("y", ("N",), "bfloat16")
    with p.loop("i", 0, "N"):
        p.assign("y[i] = x[i] * 3 + x[i] / 7 - exp(x[i])")
    k = pt.compile(p, target="nvgpu")
    # GPUs compute in bfloat16; the interpreter in float32 rounded to bfloat16 after every operation
    assert "tl.bfloat16" in k.source and k.interpreter_source.count("pt__round_bf16(") > 3
    x = torch.randn(100, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    y, want = torch.zeros_like(x), torch.zeros_like(x)
    pt.reference(p, x=x, y=want)
    k(x=x, y=y)
    assert torch.equal(y, want)


def test_numpy_and_torch_inputs_are_untouched_when_a_call_fails() -> None:
    k = _compiled("jacobi_1d")
    args = make_args(KERNELS["jacobi_1d"], KERNELS["jacobi_1d"].small)
    before = copy_args(args)
    with pytest.raises(pt.PolytriError):
        k(**{**args, "T": -1, "N": 3})
    for n, v in args.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, before[n])


def test_options_are_checked() -> None:
    p = _program("gemm")
    with pytest.raises(pt.OptionError, match="unknown option.*'tile'.*known: schedule"):
        pt.compile(p, target="nvgpu", options={"tile": True})
    with pytest.raises(pt.OptionError, match="unknown GPU architecture 'sm_12'"):
        pt.compile(p, target="nvgpu", options={"arch": "sm_12"})
    with pytest.raises(pt.OptionError, match="belongs to target 'amdgpu'"):
        pt.compile(p, target="nvgpu", options={"arch": "gfx942"})
    with pytest.raises(pt.OptionError, match="below tl.dot's minimum"):
        pt.compile(p, target="nvgpu", options={"dot_block": (8, 64, 32)})
    with pytest.raises(pt.OptionError, match="power of two"):
        pt.compile(p, target="nvgpu", options={"block": 24})
    with pytest.raises(pt.UnsupportedError, match="unknown architecture 'sm_99'"):
        _compiled("gemm").asm("sm_99")


def test_options_change_the_launch_model() -> None:
    k = pt.compile(_program("gemm"), target="nvgpu", options={"dot_block": (32, 64, 16), "num_warps": 2})
    assert "tl.arange(0, 16)" in k.source and k.model.num_warps == 2
    _check("gemm", KERNELS["gemm"].small, kernel=k, seed=2)


def test_explain_lists_kernels_and_grid_loops() -> None:
    text = _compiled("gemm").explain()
    assert "target nvgpu" in text and "gemm_k0: grid loops" in text and "launch model" in text


@pytest.mark.gpu
def test_runs_on_a_gpu() -> None:
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    k = _mm_kernel("float16")
    a = torch.randn(300, 200, device="cuda", dtype=torch.float16)
    b = torch.randn(200, 100, device="cuda", dtype=torch.float16)
    c = torch.zeros(300, 100, device="cuda")
    k(A=a, B=b, C=c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def _gpu_benchmark_module():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"
    spec = importlib.util.spec_from_file_location("polytri_gpu_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("build, params", [
    ("_softmax_program", {"M": 5, "N": 70}),
    ("_layernorm_program", {"M": 5, "N": 70}),
    ("_matmul_program", {"M": 9, "N": 17, "K": 33}),
])
def test_gpu_benchmark_programs_match_reference(build: str, params: dict[str, int]) -> None:
    """The programs benchmarks/gpu.py times on a GPU compute what the reference computes."""
    import torch
    mod = _gpu_benchmark_module()
    prog = getattr(mod, build)("float16") if build == "_matmul_program" else getattr(mod, build)()
    k = pt.compile(prog, target="nvgpu")
    g = torch.Generator().manual_seed(0)
    args = {}
    for a in k.program.arrays:
        shape = tuple(int(eval(str(pt_expr), {}, dict(params))) for pt_expr in _shape_text(a))
        args[a.name] = torch.randn(shape, generator=g).to(getattr(torch, a.dtype))
    want = {n: v.clone() for n, v in args.items()}
    pt.reference(prog, **want)
    k(**args)
    for n in args:
        torch.testing.assert_close(args[n], want[n], rtol=1e-3, atol=1e-3)


def _shape_text(a) -> list[str]:
    from polytri.ir.printer import expr_to_str
    return [expr_to_str(e) for e in a.shape]


def test_gpu_benchmark_exits_cleanly_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run")
    assert _gpu_benchmark_module().main([]) == 0
    assert "no CUDA/ROCm GPU" in capsys.readouterr().out
    assert _gpu_benchmark_module().main(["--models", "vit", "resnet"]) == 0


def test_gpu_benchmark_names_an_unknown_model(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _gpu_benchmark_module().main(["--models", "vit", "alexnet"])
    assert info.value.code == 2
    assert "unknown model(s) alexnet; the zoo has " in capsys.readouterr().err


def test_batched_contraction_with_transposed_operands_uses_tl_dot() -> None:
    import torch
    p = pt.Program("bmm_t", params=["Bt", "M", "N", "K"])
    p.array("A", ("Bt", "K", "M"), "float16")
    p.array("B", ("Bt", "N", "K"), "float16")
    p.array("C", ("Bt", "M", "N"), "float32")
    with p.loop("b", 0, "Bt"), p.loop("i", 0, "M"), p.loop("j", 0, "N"):
        p.assign("C[b, i, j] = 0.0")
        with p.loop("k", 0, "K"):
            p.assign("C[b, i, j] += float32(A[b, k, i]) * float32(B[b, j, k])")
    k = pt.compile(p, target="nvgpu")
    assert len(k.kernels) == 1 and "tl.dot(" in k.source and "tl.program_id(2)" in k.source
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(3, 33, 20, generator=g).half(), torch.randn(3, 17, 33, generator=g).half()
    c = torch.zeros(3, 20, 17)
    k(A=a, B=b, C=c)
    torch.testing.assert_close(c, torch.einsum("bki,bjk->bij", a.float(), b.float()), rtol=1e-4, atol=1e-4)


def test_an_internal_code_generation_failure_falls_back_to_the_original_order(monkeypatch: pytest.MonkeyPatch) -> None:
    import polytri.codegen_triton.module as gpu_module
    real = gpu_module.generate_module
    calls: list[int] = []

    def flaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 1:
            raise IndexError("simulated code generation bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(gpu_module, "generate_module", flaky)
    with pytest.warns(UserWarning, match="original order"):
        k = pt.compile(_program("jacobi_1d"), target="nvgpu")
    assert k.schedule_info.origin == "original"
    _check("jacobi_1d", KERNELS["jacobi_1d"].small, kernel=k, seed=2)


def test_the_sum_block_of_tl_dot_shrinks_to_a_short_constant_sum() -> None:
    from polytri.codegen_triton.block_fit import dot_k_block
    from polytri.ir.expr import Binary, Call, Const, Var

    c, n = Var("c5", "iter"), Var("N", "param")
    assert dot_k_block(Const(0), Const(3), 32) == 16
    assert dot_k_block(Const(0), Const(20), 32) == 32 and dot_k_block(Const(0), Const(20), 64) == 32
    assert dot_k_block(Const(0), n, 32) == 32  # unbounded: the model's
    # a window that slides with an outer counter: max(c, 0) .. min(c + 3, N), at most 3 wide
    lo = Call("max", (c, Const(0)))
    hi = Call("min", (Binary("+", c, Const(3)), n))
    assert dot_k_block(lo, hi, 32) == 16


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_round_is_to_nearest_even(dt: str) -> None:
    """``round`` in Triton (add and subtract 2**23 or 2**52) equals the reference's ``rint``, ties included,
    and leaves values past the trick's range alone; uint8 results wrap as on the cpu."""
    import torch
    p = pt.Program(f"rnd_{dt}", params=["N"])
    p.array("A", ("N",), dt)
    p.array("C", ("N",), dt)
    p.array("U", ("N",), "uint8")
    with p.loop("i", 0, "N"):
        p.assign("C[i] = round(A[i] * 2.0)")
        p.assign("U[i] = uint8(round(abs(A[i])))")
    values = [0.25, 0.75, -0.25, 1.25, -1.25, 2.5, -2.5, 0.49, 3.7, -3.7, 1e9 + 0.5, 3e15 + 0.5, 7.0, -0.0]
    a = torch.tensor(values, dtype=getattr(torch, dt))
    args = {"A": a, "C": torch.zeros_like(a), "U": torch.zeros(len(values), dtype=torch.uint8)}
    ref = {k: v.clone() for k, v in args.items()}
    pt.reference(p, **ref)
    pt.compile(p, "nvgpu")(**args)
    torch.testing.assert_close(args["C"], ref["C"], rtol=0, atol=0)
    torch.testing.assert_close(ref["C"], torch.round(a.double() * 2).to(a.dtype), rtol=0, atol=0)
    small = slice(0, 10)  # uint8 of a float past 255 is undefined in C: only values in range
    assert torch.equal(args["U"][small], ref["U"][small])


def test_module_source_runs_without_polytri(tmp_path) -> None:
    """``k.module_source()`` saved to a file runs in a process that imports only Triton and torch (here in
    Triton's interpreter, on CPU tensors) and gives the reference's result."""
    import subprocess
    import sys
    import textwrap

    import torch
    name = "jacobi_1d"
    kernel = _compiled(name)
    (tmp_path / "generated.py").write_text(kernel.module_source())
    params = {"T": 3, "N": 40}
    args = make_args(KERNELS[name].build(), params, seed=4)
    ref = copy_args(args)
    pt.reference(KERNELS[name].build(), **ref)
    torch.save({k: torch.as_tensor(v) for k, v in args.items() if hasattr(v, "shape")}, tmp_path / "in.pt")
    arrays = [a.name for a in kernel.program.arrays]
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(tmp_path)!r})
        import generated
        assert "polytri" not in sys.modules
        a = torch.load({str(tmp_path / 'in.pt')!r})
        generated.run({", ".join(f"a[{n!r}]" for n in arrays)}, {", ".join(str(params[p]) for p in kernel.program.params)})
        torch.save(a, {str(tmp_path / 'out.pt')!r})
    """)
    env = {**__import__("os").environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = torch.load(tmp_path / "out.pt")
    for n in arrays:
        np.testing.assert_allclose(out[n].numpy(), np.asarray(ref[n]), rtol=1e-6, atol=1e-6, err_msg=n)


def test_operand_masks_of_a_rectangular_product_are_the_bounds_own() -> None:
    """tl.dot's operand masks: on a rectangular block, the rows' and columns' own bound tests, which Triton
    sees as constant over runs of lanes (the loads vectorize, seen on an H200 as 0.31x -> 0.78x of cuBLAS);
    the reduction of the block's mask only where the block is not known to be rectangular."""
    src = _mm_kernel("float16").source
    rows = re.search(r"pt__rows\d+ = (.*)", src)
    assert rows and "c1 < pt_M" in rows.group(1) and "axis=1" not in rows.group(1), src
    p = pt.Program("lower", params=["N"])
    p.array("A", ("N", "N"), "float16")
    p.array("B", ("N", "N"), "float16")
    p.array("C", ("N", "N"), "float32")
    with p.loop("i", 0, "N"), p.loop("j", 0, "i + 1"):
        p.assign("C[i, j] = 0.0")
        with p.loop("k", 0, "N"):
            p.assign("C[i, j] += float32(A[i, k]) * float32(B[k, j])")
    k = pt.compile(p, target="nvgpu")
    assert "tl.dot(" in k.source and re.search(r"pt__rows\d+ = tl.max\(", k.source), k.source
    g = np.random.default_rng(0)
    args = {n: g.standard_normal((19, 19)).astype(t) for n, t in (("A", np.float16), ("B", np.float16),
                                                                    ("C", np.float32))}
    want = {n: v.copy() for n, v in args.items()}
    pt.reference(p, **want)
    k(**args)
    np.testing.assert_allclose(args["C"], want["C"], rtol=1e-4, atol=1e-4)
