"""Sanitizer mode (issue 8, item 7): ``POLYTRI_SANITIZE=1`` builds the generated C with AddressSanitizer and
UndefinedBehaviorSanitizer; the suite's kernels run under them at small sizes in a subprocess whose Python
has libasan preloaded (ctypes loads the kernels into an unsanitized interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polytri.suite import KERNELS

pytestmark = pytest.mark.cc


def _runtime(name: str) -> str | None:
    out = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    return out if os.path.isabs(out) and os.path.exists(out) else None


LIBASAN = _runtime("libasan.so")
needs_asan = pytest.mark.skipif(LIBASAN is None, reason="gcc's libasan is not installed")


def sanitized(script: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a Python with libasan preloaded and POLYTRI_SANITIZE=1."""
    env = {**os.environ, "POLYTRI_SANITIZE": "1", "LD_PRELOAD": str(LIBASAN),
           "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=str(Path(__file__).parent))


_RAW = """
import ctypes, sys
import numpy as np
from polytri.cpu_codegen.build import DEFAULT_FLAGS, build_library
lib = ctypes.CDLL(str(build_library(sys.argv[1], cc="cc", flags=DEFAULT_FLAGS)))
a = np.zeros(5)
lib.f(ctypes.c_void_p(a.ctypes.data), ctypes.c_int64(int(sys.argv[2])))
print("finished")
"""

_OVERFLOW = "#include <stdint.h>\nvoid f(double *a, int64_t n) { for (int64_t i = 0; i <= n; i++) a[i] = 1.0; }\n"
_SHIFT = "#include <stdint.h>\nvoid f(double *a, int64_t n) { a[0] = (double)(1 << (int)n); }\n"


@needs_asan
@pytest.mark.parametrize("source, n, report", [
    (_OVERFLOW, 5, "AddressSanitizer: heap-buffer-overflow"),
    (_SHIFT, 40, "runtime error: shift exponent"),
], ids=["asan", "ubsan"])
def test_the_sanitizers_are_active(source: str, n: int, report: str) -> None:
    """Controls: a kernel with a bug aborts with the sanitizer's report; the same kernel within bounds runs."""
    bad = sanitized(_RAW, source, str(n))
    assert bad.returncode != 0 and report in bad.stderr and "finished" not in bad.stdout, bad.stderr[-2000:]
    good = sanitized(_RAW, source, "3")
    assert good.returncode == 0 and "finished" in good.stdout, good.stderr[-2000:]


_SUITE = """
import json, sys
import numpy as np
import polytri as pt
from polytri.cpu_codegen.build import sanitize_flags
from polytri.suite import KERNELS, copy_args, make_args
assert sanitize_flags(), "POLYTRI_SANITIZE was not seen"
names, option_sets, which = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
for name in names:
    k = KERNELS[name]
    prog = k.build()
    for opts in option_sets:
        kernel = pt.compile(prog, options=opts)
        assert b"__asan_init" in open(kernel.library, "rb").read(), "not an instrumented library"
        for size in which.split(","):
            params = getattr(k, size) or k.small
            args = make_args(k, params)
            want, got = copy_args(args), copy_args(args)
            pt.reference(prog, **want)
            kernel(**got)
            for n, v in got.items():
                if isinstance(v, np.ndarray):
                    np.testing.assert_allclose(v, want[n], rtol=1e-4, atol=1e-6, err_msg=f"{name} {opts} {n}")
    print(name, "ok", flush=True)
"""

#: The packed micro-kernel (gemm), a wavefront over tiles carried beside the untiled schedule (lu) and
#: float32 stencils in parallel regions (blur); every kernel under every option set runs in `make fuzz`.
FAST = ["gemm", "lu", "blur"]
OPTION_SETS = [{}, {"schedule": "original", "openmp": False}, {"tile": True, "tile_size": 4}]


def _run_suite(names: list[str], option_sets: list[dict], sizes: str, extra: str = "") -> None:
    proc = sanitized(_SUITE + extra, json.dumps(names), json.dumps(option_sets), sizes)
    done = [line.split()[0] for line in proc.stdout.splitlines() if line.endswith(" ok") and line != "mixed ok"]
    assert proc.returncode == 0, f"finished: {done}\n{proc.stderr[-4000:]}"
    assert done == names
    if extra:
        assert "mixed ok" in proc.stdout, proc.stderr[-4000:]


@needs_asan
def test_some_suite_kernels_and_mixed_dtypes_are_clean_under_sanitizers() -> None:
    _run_suite(FAST, [{}], "tiny", extra=_MIXED)


@needs_asan
@pytest.mark.slow
@pytest.mark.parametrize("name", list(KERNELS))
def test_every_suite_kernel_is_clean_under_sanitizers(name: str) -> None:
    _run_suite([name], OPTION_SETS, "tiny,small")


_MIXED = """
import numpy as np, torch
import polytri as pt
p = pt.Program("mixed", params=["N"])
for name, dt in (("H", "float16"), ("G", "bfloat16"), ("I", "int8"), ("L", "int64"), ("F", "float32")):
    p.array(name, ("N",), dt)
with p.loop("i", 0, "N"):
    p.assign("H[i] = H[i] * 0.5 + float16(I[i])")
    p.assign("G[i] = G[i] + bfloat16(F[i]) * 2.0")
    p.assign("I[i] = I[i] * 3 + int8(L[i] // 2)")
    p.assign("L[i] = L[i] % 3 - max(L[i], 1)")
    p.assign("F[i] = where(F[i] < 0.0, -F[i], sqrt(F[i]))")
args = {"H": np.linspace(-2, 2, 9).astype(np.float16), "G": torch.linspace(-1, 1, 9, dtype=torch.bfloat16),
        "I": np.arange(-4, 5, dtype=np.int8) * 30, "L": np.arange(-4, 5, dtype=np.int64), "F": np.linspace(-1, 3, 9, dtype=np.float32)}
want = {k: v.clone() if hasattr(v, "clone") else v.copy() for k, v in args.items()}
pt.reference(p, **want)
pt.compile(p)(**args)
for k in args:
    a, b = (np.asarray(x.float()) if hasattr(x, "float") else x for x in (args[k], want[k]))
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-6, err_msg=k)
# regression (found by this test on blur at its tiny size): an inner extent of 0 made the view's
# variable-length array type of non-positive size, undefined behaviour UBSan reports
q = pt.Program("empty_inner", params=["N", "M"])
q.array("Z", ("N", "M"), "float64")
q.array("R", ("N",), "float64")
with q.loop("i", 0, "N"):
    q.assign("R[i] = R[i] + 1.0")
    with q.loop("j", 0, "M"):
        q.assign("Z[i, j] = R[i]")
r = np.zeros(3)
pt.compile(q)(Z=np.zeros((3, 0)), R=r)
assert (r == 1.0).all()
print("mixed ok")
"""



_PACKED = """
import numpy as np
import polytri as pt
from polytri.cpu_codegen.contraction import blocking
from polytri.dtypes import FLOAT32
b = blocking(FLOAT32)
p = pt.Program("mk", params=["M", "N", "K"])
p.array("C", ("M", "N"), "float32")
p.array("A", ("M", "K"), "float32")
p.array("B", ("K", "N"), "float32")
with p.loop("i", 0, "M"):
    with p.loop("k", 0, "K"):
        with p.loop("j", 0, "N"):
            p.assign("C[i, j] += A[i, k] * B[k, j]")
kernel = pt.compile(p)
assert "packed contraction" in kernel.source
assert b"__asan_init" in open(kernel.library, "rb").read(), "not an instrumented library"
rng = np.random.default_rng(0)
for m, n, k in ((1, 1, 1), (b.mr + 1, b.nr - 1, b.kc + 1), (2 * b.mr - 1, b.nc + b.nr + 1, 3)):
    args = dict(C=rng.standard_normal((m, n)).astype("float32"), A=rng.standard_normal((m, k)).astype("float32"),
                B=rng.standard_normal((k, n)).astype("float32"), M=m, N=n, K=k)
    want = {key: (v.copy() if isinstance(v, np.ndarray) else v) for key, v in args.items()}
    pt.reference(p, **want)
    kernel(**args)
    np.testing.assert_array_equal(args["C"], want["C"])
# an epilogue run on each block from a tile of its sums (C a temporary, zeroed, one block of k)
e = pt.Program("mke", params=["M", "N"])
e.array("C", ("M", "N"), "float32")
e.array("A", ("M", 40), "float32")
e.array("B", (40, "N"), "float32")
e.array("Y", ("M", "N"), "float32")
with e.loop("i", 0, "M"), e.loop("j", 0, "N"):
    e.assign("C[i, j] = 0")
with e.loop("i", 0, "M"), e.loop("j", 0, "N"), e.loop("k", 0, 40):
    e.assign("C[i, j] += A[i, k] * B[k, j]")
with e.loop("i", 0, "M"), e.loop("j", 0, "N"):
    e.assign("Y[i, j] = max(C[i, j], 0.0) * 2.0")
for threads in (1, 2):
    tiled = pt.compile(e, options={"fuse": "none", "temporaries": "C", "threads": threads})
    assert "from the tile" in tiled.source
    for m, n in ((1, 1), (b.mr + 1, b.nr - 1), (2 * b.mr - 1, b.nc + b.nr + 1)):
        args = dict(C=np.zeros((m, n), "float32"), A=rng.standard_normal((m, 40)).astype("float32"),
                    B=rng.standard_normal((40, n)).astype("float32"), Y=np.zeros((m, n), "float32"), M=m, N=n)
        want = {key: (v.copy() if isinstance(v, np.ndarray) else v) for key, v in args.items()}
        pt.reference(e, **want)
        tiled(**args)
        np.testing.assert_array_equal(args["Y"], want["Y"])
print("packed ok")
"""


@needs_asan
def test_packed_contractions_are_clean_under_sanitizers() -> None:
    """The micro-kernel's panels, ragged edges and row split, and the tiles an epilogue reads, stay within
    bounds (AddressSanitizer)."""
    proc = sanitized(_PACKED)
    assert proc.returncode == 0 and "packed ok" in proc.stdout, proc.stderr[-4000:]


def _has_bf16_tiles() -> bool:
    from polytri.cpu_codegen.blocking import tiles_permitted, vector_bytes
    from polytri.cpu_codegen.dot_product import BF16_TILES
    return BF16_TILES.available() and vector_bytes() == 64 and tiles_permitted()


_TILES = """
import torch
import polytri as pt
p = pt.Program("bfmm", params=["M", "N", "K"])
p.array("C", ("M", "N"), "float32")
p.array("A", ("M", "K"), "bfloat16")
p.array("B", ("K", "N"), "bfloat16")
with p.loop("i", 0, "M"), p.loop("k", 0, "K"), p.loop("j", 0, "N"):
    p.assign("C[i, j] += float32(A[i, k]) * float32(B[k, j])")
for opts in ({"threads": 2}, {"cflags": "-DPT_NO_TILE_PERMISSION"}):
    kernel = pt.compile(p, options=opts)
    assert "pt__ukernel_bf16amxadd(" in kernel.source
    for m, n, k in ((1, 1, 1), (33, 31, 257), (65, 600, 33)):
        A, B = torch.randn(m, k).to(torch.bfloat16), torch.randn(k, n).to(torch.bfloat16)
        C = torch.randn(m, n)
        want = C + A.float() @ B.float()
        kernel(C=C, A=A, B=B, M=m, N=n, K=k)
        assert (C - want).abs().max() <= 1e-4 * want.abs().max(), (m, n, k)
print("tiles ok")
"""


@needs_asan
@pytest.mark.slow  # two instrumented builds: 17 s from a cold cache at load 7 on 2 cores
@pytest.mark.skipif(not _has_bf16_tiles(), reason="needs AMX bfloat16 tiles")
def test_bfloat16_tiles_are_clean_under_sanitizers() -> None:
    """The tiles' panels (runs of 32 values of k, padded with zeros) and their fallback stay within bounds."""
    proc = sanitized(_TILES)
    assert proc.returncode == 0 and "tiles ok" in proc.stdout, proc.stderr[-4000:]


_RING = """
import numpy as np
import polytri as pt
from polytri.cpu_codegen import cgen
from polytri.suite import KERNELS, copy_args, make_args
cgen.cache_sizes = lambda: {1: 32 << 10, 2: 1 << 20, 3: 0}   # every ring allocated, the next row fetched
kernel = KERNELS["blur"]
for threads in (1, 2, 3):
    k = pt.compile(kernel.build(), options={"threads": threads, "min_parallel_work": 0})
    assert "pt__ring_tmp" in k.source and "__builtin_prefetch(&img[" in k.source, "no ring or no fetch"
    for c, h, w in ((1, 40, 21), (3, 70, 37), (2, 9, 8), (1, 17, 300)):
        args = make_args(kernel, {"C": c, "H": h, "W": w}, seed=h)
        want = copy_args(args)
        pt.reference(kernel.build(), **want)
        k(**args)
        for n, v in want.items():
            if isinstance(v, np.ndarray):
                np.testing.assert_array_equal(args[n], v, err_msg=f"{n}: C={c} H={h} W={w}, {threads} threads")
print("finished")
"""


@needs_asan
def test_blur_with_its_ring_and_the_next_row_fetched_is_clean_under_sanitizers() -> None:
    """The ring of rows (``row_ring.py``), its chunked copy-out and the prefetch of the next row
    (``row_ahead.py``) take the thresholds' small-array path: the pointers they form stay in bounds."""
    proc = sanitized(_RING)
    assert proc.returncode == 0 and "finished" in proc.stdout, proc.stderr[-4000:]
