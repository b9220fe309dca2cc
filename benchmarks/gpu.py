"""GPU benchmark: polytri's Triton kernels against torch (cuBLAS, cuDNN) and torch.compile (Inductor).

    python benchmarks/gpu.py [--quick] [--variants] [--models [MODEL ...]]

On a machine without a GPU it prints why and exits 0.  Every row is measured in one run with
``triton.testing.do_bench`` (median of repeated launches, L2 flushed between them) and reported as a ratio
to the reference column, as the methodology of ``polytri bench`` asks: absolute times drift, ratios less.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import Any

import polytri as pt
from polytri.suite import KERNELS


def _matmul_program(dtype: str) -> pt.Program:
    p = pt.Program("matmul", params=["M", "N", "K"])
    p.array("A", ("M", "K"), dtype)
    p.array("B", ("K", "N"), dtype)
    p.array("C", ("M", "N"), "float32")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"):
        p.assign("C[i, j] = 0.0")
        with p.loop("k", 0, "K"):
            p.assign("C[i, j] += float32(A[i, k]) * float32(B[k, j])")
    return p


def _softmax_program() -> pt.Program:
    p = pt.Program("softmax", params=["M", "N"])
    p.array("x", ("M", "N"), "float32")
    p.array("y", ("M", "N"), "float32")
    p.array("mx", ("M",), "float32")
    p.array("s", ("M",), "float32")
    with p.loop("i", 0, "M"):
        p.assign("mx[i] = -3.0e38")
        with p.loop("j", 0, "N"):
            p.assign("mx[i] = max(mx[i], x[i, j])")
        p.assign("s[i] = 0.0")
        with p.loop("j", 0, "N"):
            p.assign("s[i] += exp(x[i, j] - mx[i])")
        with p.loop("j", 0, "N"):
            p.assign("y[i, j] = exp(x[i, j] - mx[i]) / s[i]")
    return p


def _layernorm_program() -> pt.Program:
    p = pt.Program("layernorm", params=["M", "N"])
    p.array("x", ("M", "N"), "float32")
    p.array("w", ("N",), "float32")
    p.array("b", ("N",), "float32")
    p.array("y", ("M", "N"), "float32")
    p.array("mean", ("M",), "float32")
    p.array("var", ("M",), "float32")
    with p.loop("i", 0, "M"):
        p.assign("mean[i] = 0.0")
        with p.loop("j", 0, "N"):
            p.assign("mean[i] += x[i, j]")
        p.assign("mean[i] = mean[i] / N")
        p.assign("var[i] = 0.0")
        with p.loop("j", 0, "N"):
            p.assign("var[i] += (x[i, j] - mean[i]) * (x[i, j] - mean[i])")
        p.assign("var[i] = var[i] / N")
        with p.loop("j", 0, "N"):
            p.assign("y[i, j] = (x[i, j] - mean[i]) / sqrt(var[i] + 1e-5) * w[j] + b[j]")
    return p


def _row(name: str, ours: float, ref: float, ref_name: str, goal: str) -> str:
    return f"{name:28s} {ours * 1e3:10.3f} {ref * 1e3:10.3f}  {ref / ours:6.2f}x of {ref_name:10s} goal {goal}"


# launch-model choices tried by --variants, beside the model's own: (dot_block, num_warps, num_stages) for
# the matmul, the block side for the row reductions
MATMUL_VARIANTS = [((128, 128, 64), 8, 3), ((128, 128, 64), 4, 4), ((128, 256, 64), 8, 3),
                   ((128, 256, 64), 8, 4), ((256, 128, 64), 8, 3), ((64, 128, 64), 4, 4), ((128, 128, 32), 4, 4),
                   ((128, 128, 128), 8, 2)]
ROW_VARIANTS = [4, 8, 16, 64]


def _variants(build: Callable[[], pt.Program], target: str, options: list[dict], run: Callable[[Any], None],
              check: Callable[[], None], ref: float, ref_name: str,
              bench: Callable[[Callable[[], object]], float]) -> list[str]:
    """One row per entry of ``options``: the program compiled with those options, checked, timed, as a ratio
    to ``ref``; a variant that does not compile or run says why."""
    rows = []
    for opts in options:
        try:
            k = pt.compile(build(), target=target, options=opts)
            run(k)
            check()
            t = bench(lambda: run(k))  # noqa: B023 (called before the next iteration)
        except Exception as exc:
            rows.append(f"  {opts}: failed: {str(exc).splitlines()[0][:120]}")
            continue
        rows.append(_row("  " + " ".join(f"{v}" for v in opts.values()), t, ref, ref_name, "-"))
    return rows


def _zoo_rows(bench: Callable[[Callable[[], object]], float], names: list[str]) -> Iterator[str]:
    """Each zoo model on the GPU, one row as each is measured (a compile takes tens of seconds): polytri's
    time as a ratio to Inductor's and to eager's, with both cold compile times.  float32 runs with tf32
    off everywhere (cuBLAS, cuDNN), as polytri computes it."""
    import time
    import warnings

    import torch
    import torch._dynamo

    from polytri.frontend.torch_backend import polytri_backend
    from polytri.suite.models import ZOO, build
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield (f"{'model':18s} {'polytri ms':>10s} {'Inductor':>9s} {'eager':>9s}  {'/Inductor':>9s} {'/eager':>7s}"
           f"  compile s (polytri / Inductor)")
    for name in names or sorted(ZOO):
        for dtype in (torch.float32, torch.bfloat16):
            model, x = build(name, bench=True)
            model, x = model.cuda().to(dtype), x.cuda().to(dtype)
            torch._dynamo.reset()
            with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                want = model(x)
                compiled = {}
                for label, backend in (("inductor", "inductor"), ("polytri", polytri_backend)):
                    fn = torch.compile(model, backend=backend)
                    t0 = time.perf_counter()
                    got = fn(x)
                    torch.cuda.synchronize()
                    compiled[label] = (fn, time.perf_counter() - t0, got)
                times = {"eager": bench(lambda: model(x))}  # noqa: B023 (called in this iteration)
                for label, (fn, _, _) in compiled.items():
                    times[label] = bench(lambda: fn(x))  # noqa: B023
            fallbacks = [str(w.message) for w in caught if "polytri" in str(w.message)]
            err = (compiled["polytri"][2].double() - want.double()).abs().max().item()
            note = f"  max |polytri - eager| {err:.2g}" + (f"  FALLBACK: {fallbacks[0][:80]}" if fallbacks else "")
            ours = times["polytri"]
            yield (f"{name + ' ' + str(dtype).split('.')[-1]:18s} {ours * 1e3:10.3f} "
                   f"{times['inductor'] * 1e3:9.3f} {times['eager'] * 1e3:9.3f}  "
                   f"{ours / times['inductor']:8.2f}x {ours / times['eager']:6.2f}x  "
                   f"{compiled['polytri'][1]:6.1f} / {compiled['inductor'][1]:5.1f}{note}")


def _check_models(parser: argparse.ArgumentParser, names: list[str]) -> None:
    """Exit with a usage error naming the models of ``names`` that the zoo does not have."""
    from polytri.suite.models import ZOO
    unknown = sorted(set(names) - set(ZOO))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(sorted(ZOO))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--variants", action="store_true",
                        help="also time the fp16 matmul under other launch-model choices (tile, warps, stages), "
                             "the data that the launch model's defaults are checked against")
    parser.add_argument("--models", nargs="*", metavar="MODEL",
                        help="also the model zoo (polytri.suite.models, benchmark sizes) in float32 and bfloat16: "
                             "eager, Inductor and torch.compile(backend='polytri'); the models named, or all")
    args = parser.parse_args(argv)
    _check_models(parser, args.models or [])
    import torch
    if not torch.cuda.is_available():
        print("benchmarks/gpu.py: no CUDA/ROCm GPU on this machine (torch.cuda.is_available() is False); "
              "nothing to measure. The Triton kernels are checked here in the interpreter and ahead of time "
              "(k.asm('sm_90')) by the tests.")
        return 0
    from triton.testing import do_bench
    target = "amdgpu" if torch.version.hip else "nvgpu"
    dev = "cuda"
    n = 2048 if args.quick else 4096
    rows: list[str] = []

    def bench(fn: Callable[[], object]) -> float:
        return do_bench(fn, return_mode="median") / 1e3

    # matmul fp16, fp32 accumulation
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)
    c = torch.empty(n, n, device=dev)
    mm = pt.compile(_matmul_program("float16"), target=target)
    ours = bench(lambda: mm(A=a, B=b, C=c))
    torch.testing.assert_close(c, (a @ b).float(), rtol=2e-2, atol=1e-1)
    cublas = bench(lambda: a @ b)
    rows.append(_row(f"matmul fp16 {n}^3", ours, cublas, "cuBLAS", ">= 0.90x"))
    if args.variants:
        opts = [{"dot_block": d, "num_warps": w, "num_stages": st} for d, w, st in MATMUL_VARIANTS]
        rows += _variants(lambda: _matmul_program("float16"), target, opts, lambda k: k(A=a, B=b, C=c),
                          lambda: torch.testing.assert_close(c, (a @ b).float(), rtol=2e-2, atol=1e-1),
                          cublas, "cuBLAS", bench)

    # separable blur 3 x H x W
    h = w = 2048 if args.quick else 4096
    img = torch.randn(3, h, w, device=dev)
    tmp = torch.empty(3, h, w - 4, device=dev)
    out = torch.empty(3, h - 4, w - 4, device=dev)
    # the suite's binomial blur, the horizontal pass recomputed in the vertical one: one kernel
    blur = pt.compile(KERNELS["blur"].build(), target=target, options={"temporaries": ["tmp"]})
    ours = bench(lambda: blur(img=img, tmp=tmp, out=out))
    taps = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0], device=dev) / 16
    kh, kv = taps.view(1, 1, 1, 5), taps.view(1, 1, 5, 1)

    def eager_blur(x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.conv2d(x.unsqueeze(1), kh)
        return torch.nn.functional.conv2d(x, kv).squeeze(1)
    compiled_blur = torch.compile(eager_blur)
    compiled_blur(img)
    torch.testing.assert_close(out, eager_blur(img), rtol=1e-4, atol=1e-4)
    rows.append(_row(f"blur 3x{h}x{w}", ours, bench(lambda: compiled_blur(img)), "Inductor", ">= 5x"))

    # softmax over rows
    x = torch.randn(8192, 4096 if not args.quick else 1024, device=dev)
    y = torch.empty_like(x)
    mx = torch.empty(x.shape[0], device=dev)
    s = torch.empty(x.shape[0], device=dev)
    sm = pt.compile(_softmax_program(), target=target)
    ours = bench(lambda: sm(x=x, y=y, mx=mx, s=s))
    compiled_softmax = torch.compile(lambda t: torch.softmax(t, dim=1))
    compiled_softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-4, atol=1e-5)
    inductor = bench(lambda: compiled_softmax(x))
    rows.append(_row("softmax 8192 rows", ours, inductor, "Inductor", ">= 1x"))
    if args.variants:
        rows += _variants(_softmax_program, target, [{"block": b} for b in ROW_VARIANTS],
                          lambda k: k(x=x, y=y, mx=mx, s=s),
                          lambda: torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-4, atol=1e-5),
                          inductor, "Inductor", bench)

    # layer norm over rows
    w_, b_ = torch.randn(x.shape[1], device=dev), torch.randn(x.shape[1], device=dev)
    mean, var = torch.empty(x.shape[0], device=dev), torch.empty(x.shape[0], device=dev)
    ln = pt.compile(_layernorm_program(), target=target)
    ours = bench(lambda: ln(x=x, w=w_, b=b_, y=y, mean=mean, var=var))
    compiled_ln = torch.compile(lambda t: torch.nn.functional.layer_norm(t, (t.shape[1],), w_, b_))
    compiled_ln(x)
    torch.testing.assert_close(y, compiled_ln(x), rtol=1e-3, atol=1e-3)
    inductor = bench(lambda: compiled_ln(x))
    rows.append(_row("layernorm 8192 rows", ours, inductor, "Inductor", ">= 1x"))
    if args.variants:
        rows += _variants(_layernorm_program, target, [{"block": b} for b in ROW_VARIANTS],
                          lambda k: k(x=x, w=w_, b=b_, y=y, mean=mean, var=var),
                          lambda: torch.testing.assert_close(y, compiled_ln(x), rtol=1e-3, atol=1e-3),
                          inductor, "Inductor", bench)

    print(f"polytri {pt.__version__} on {torch.cuda.get_device_name()} (target {target}), median times")
    print(f"{'kernel':28s} {'polytri ms':>10s} {'ref ms':>10s}  ratio")
    print("\n".join(rows))
    if args.models is not None:
        print("\nmodel zoo (time ratios: polytri over the reference, lower is better)")
        for row in _zoo_rows(bench, args.models):
            print(row, flush=True)
    print("not measured yet: attention (its single-kernel online-softmax fusion is the fusion issue's work)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
