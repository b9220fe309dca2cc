"""The model zoo on this CPU: eager, Inductor and polytri side by side in one run (``polytri bench --models``).

Each model of :mod:`polytri.suite.models` at its benchmark size, for each dtype and thread count asked
(``bert`` and ``gpt2`` when ``transformers`` is installed; their token ids and attention mask stay
integers in bfloat16):

- compiled once by Inductor and once by polytri (``pt.jit``), each timed as a cold compile: both start
  from empty caches of their own (polytri's kernel cache and Inductor's FX graph cache point to fresh
  directories for the run; polytri's measured fork/join cost is kept, as on an installed machine);
- checked: float32 within 1e-3 of eager, bfloat16 no further from the float32 result than twice eager's
  own bfloat16 error;
- timed: ``--repeat`` rounds, each calling eager, Inductor and polytri :data:`CALLS` times in turn; the
  median of each backend's calls.  Interleaving spreads the load of a shared machine over all three.

The table gives both ratios (time of polytri over Inductor and over eager: below 1 is faster), the ops
polytri left to eager (from ``pt.explain`` of the compiled function), and geometric means per thread count.
Measure on a quiet machine (``uptime`` load below 1); the load average is printed with the table, and the
instruction sets each side ran (polytri's vector width and ``POLYTRI_MAX_ISA``, PyTorch's CPU capability):
``POLYTRI_MAX_ISA=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2``
compares both as on an AVX2-only machine.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: Calls of one backend in a row within a round.
CALLS = 3
DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class ModelRow:
    """One model at one dtype and thread count."""

    model: str
    dtype: str
    threads: int
    eager_ms: float
    inductor_ms: float
    polytri_ms: float
    inductor_compile_s: float
    polytri_compile_s: float
    kernels: int
    fallback: tuple[str, ...]
    equal: bool
    detail: str = ""

    @property
    def vs_inductor(self) -> float:
        return self.polytri_ms / self.inductor_ms

    @property
    def vs_eager(self) -> float:
        return self.polytri_ms / self.eager_ms


def median_ms(fns: Sequence[Callable[..., Any]], args: tuple[Any, ...], repeat: int) -> list[float]:
    """Median time of each function in ms, over ``repeat`` rounds that call each :data:`CALLS` times in turn."""
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn(*args)
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            for _ in range(CALLS):
                t0 = time.perf_counter()
                fn(*args)
                ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) * 1e3 for ts in times]


def _check(name: str, dtype: str, out: Any, eager: Any, reference: Any) -> tuple[bool, str]:
    """Whether polytri's ``out`` is right: float32 within 1e-3 of eager; bfloat16 within twice eager's
    error against the float32 ``reference``."""
    import torch
    if dtype == "float32":
        ok = torch.allclose(out, eager, rtol=1e-3, atol=1e-4)
        return ok, "" if ok else f"max difference {(out - eager).abs().max().item():.3g}"
    err = (out.double() - reference).abs().max().item()
    eager_err = (eager.double() - reference).abs().max().item()
    ok = err <= 2 * eager_err + 1e-6
    return ok, "" if ok else f"error {err:.3g} against eager's {eager_err:.3g}"


def run_model(name: str, dtype: str, threads: int, repeat: int, *, bench: bool = True) -> ModelRow:
    """Compile, check and time model ``name`` (benchmark size, else the tests') in ``dtype`` on ``threads``
    threads."""
    import torch
    import torch._dynamo

    import polytri as pt
    from polytri.suite.models import build_call, to_dtype

    torch.set_num_threads(threads)  # eager's and Inductor's kernels
    model, args = build_call(name, bench=bench)
    with torch.no_grad():
        reference = model(*args).double()
        if dtype == "bfloat16":
            model, args = model.to(torch.bfloat16), to_dtype(args, torch.bfloat16)
        eager = model(*args)
        torch._dynamo.reset()
        t0 = time.perf_counter()
        ind = torch.compile(model, backend="inductor")
        ind(*args)
        c_ind = time.perf_counter() - t0
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            poly = pt.jit(model, compile_options={"threads": threads})
            out = poly(*args)
            c_poly = time.perf_counter() - t0
            report = pt.explain(poly, *args)  # the graphs poly compiled, without compiling them again
        ok, detail = _check(name, dtype, out, eager, reference)
        t_eager, t_ind, t_poly = median_ms([model, ind, poly], args, repeat)
    return ModelRow(name, dtype, threads, t_eager, t_ind, t_poly, c_ind, c_poly, len(report.kernels),
                    tuple(report.fallback_ops), ok, detail)


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


HEADER = ("model", "dtype", "threads", "eager ms", "inductor ms", "polytri ms", "polytri/inductor",
          "polytri/eager", "compile s (inductor / polytri)", "kernels", "ops in eager", "right")


def cells(r: ModelRow) -> tuple[str, ...]:
    return (r.model, r.dtype, str(r.threads), f"{r.eager_ms:.2f}", f"{r.inductor_ms:.2f}", f"{r.polytri_ms:.2f}",
            f"{r.vs_inductor:.2f}x", f"{r.vs_eager:.2f}x", f"{r.inductor_compile_s:.1f} / {r.polytri_compile_s:.1f}",
            str(r.kernels), ", ".join(r.fallback) or "none", "yes" if r.equal else f"NO ({r.detail})")


def summary(rows: Sequence[ModelRow]) -> list[str]:
    """Geometric means of the time ratios and of the compile times, per dtype and thread count."""
    lines = []
    for dtype in DTYPES:
        for threads in sorted({r.threads for r in rows}):
            sel = [r for r in rows if r.dtype == dtype and r.threads == threads]
            if not sel:
                continue
            worst = max(sel, key=lambda r: r.vs_inductor)
            lines.append(f"{dtype}, {threads} thread(s): geomean time polytri/inductor "
                         f"{_geomean([r.vs_inductor for r in sel]):.2f}x (worst {worst.model} "
                         f"{worst.vs_inductor:.2f}x), polytri/eager {_geomean([r.vs_eager for r in sel]):.2f}x; "
                         f"cold compile geomean inductor {_geomean([r.inductor_compile_s for r in sel]):.1f} s, "
                         f"polytri {_geomean([r.polytri_compile_s for r in sel]):.1f} s")
    return lines


def render(rows: Sequence[ModelRow], markdown: bool) -> str:
    table = [HEADER, *(cells(r) for r in rows)]
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in table]
        lines.insert(1, "|" + "---|" * len(HEADER))
    else:
        widths = [max(len(row[c]) for row in table) for c in range(len(HEADER))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in table]
        lines.insert(1, "  ".join("-" * w for w in widths))
    load = os.getloadavg()
    return "\n".join([*lines, "", *summary(rows), instruction_sets(),
                      f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"])


def instruction_sets() -> str:
    """What each side ran: polytri's vector width and ``POLYTRI_MAX_ISA``, PyTorch's CPU capability
    (``ATEN_CPU_CAPABILITY`` caps it, and Inductor's code with it)."""
    import torch

    from polytri.cpu_codegen.blocking import vector_bytes
    from polytri.cpu_codegen.isa import max_isa
    return (f"instruction sets: polytri {8 * vector_bytes()}-bit vectors (POLYTRI_MAX_ISA={max_isa()}), "
            f"PyTorch {torch.backends.cpu.get_cpu_capability()}")


CACHE_VARIABLES = ("POLYTRI_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


@contextlib.contextmanager
def _fresh_caches() -> Iterator[Callable[[str], None]]:
    """A function that points polytri's and Inductor's caches to new empty folders (so that the next
    compiles are cold), keeping polytri's measured fork/join cost; the folders are removed and the
    variables restored at the end."""
    from polytri.cpu_codegen.fork_cost import fork_cost
    fork_cost(os.environ.get("CC") or "cc")  # read or measured once per process, before the caches move
    saved = {v: os.environ.get(v) for v in CACHE_VARIABLES}
    with tempfile.TemporaryDirectory(prefix="polytri-bench-models-") as root:
        def fresh(label: str) -> None:
            for v in CACHE_VARIABLES:
                os.environ[v] = os.path.join(root, label, v.lower())
        try:
            yield fresh
        finally:
            for v, value in saved.items():
                if value is None:
                    os.environ.pop(v, None)
                else:
                    os.environ[v] = value


#: The models of :data:`polytri.suite.models.MODELS` (named here so that the command line does not import
#: torch); those of :data:`TRANSFORMERS` need the ``transformers`` package.
MODELS = ("mlp", "mobilenet", "resnet", "vit", "bert", "gpt2")
TRANSFORMERS = ("bert", "gpt2")


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--only", nargs="*", choices=MODELS,
                        help="these models (default: every one; bert and gpt2 when transformers is installed)")
    parser.add_argument("--dtypes", nargs="*", choices=DTYPES, default=list(DTYPES), help="default: both")
    parser.add_argument("--threads", nargs="*", type=int, default=[1, 2], help="thread counts (default: 1 2)")
    parser.add_argument("--model-repeat", type=int, default=5, dest="model_repeat",
                        help=f"timed rounds per model (each calls every backend {CALLS} times)")


def run(args: argparse.Namespace, out: Any = None) -> int:
    """The table for ``args``; 1 when a model's result is wrong, else 0."""
    out = out or sys.stdout
    if args.model_repeat < 1 or any(t < 1 for t in args.threads):
        raise SystemExit("polytri bench --models: --model-repeat and --threads must be at least 1")
    rows = []
    with _fresh_caches() as fresh:
        for name in selected(args.only):
            for dtype in args.dtypes:
                for threads in args.threads:
                    print(f"  {name} {dtype} {threads} thread(s) ...", file=sys.stderr, flush=True)
                    fresh(f"{name}-{dtype}-{threads}")
                    rows.append(run_model(name, dtype, threads, args.model_repeat))
    print(render(rows, getattr(args, "markdown", False)), file=out, flush=True)
    return 0 if all(r.equal for r in rows) else 1


def selected(only: Sequence[str] | None) -> list[str]:
    """The models to run: ``only``, or every one; without ``transformers``, the transformers models are
    left out of the default with a line on stderr, and asking for one is an error that says what to install."""
    import importlib.util
    if importlib.util.find_spec("transformers") is not None:
        return list(only or MODELS)
    missing = [m for m in only or () if m in TRANSFORMERS]
    if missing:
        raise SystemExit(f"polytri bench --models: {', '.join(missing)} need(s) transformers: "
                         "pip install 'polytri[transformers]'")
    if not only:
        print(f"  {', '.join(TRANSFORMERS)}: left out (transformers is not installed: "
              "pip install 'polytri[transformers]')", file=sys.stderr, flush=True)
    return [m for m in only or MODELS if m not in TRANSFORMERS]
