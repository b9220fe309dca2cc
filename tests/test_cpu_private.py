"""Array contraction in C (polytri.cpu_codegen.private): a temporary used only inside one iteration of a
loop lives in a buffer local to that iteration, exactly where isl and the loop AST prove it safe."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.ir.builder import to_program

pytestmark = pytest.mark.cc


def _rows(width: int = 8, *, read_first: bool = False, mirrored: bool = False, param_width: bool = False
          ) -> pt.Program:
    """Per row: ``t = 2 x + 1`` (two statements, so t is not recomputed in its readers), ``s`` the row
    sum of ``t``, ``y = t / s``."""
    p = pt.Program("rows", params=["N", "M"] if param_width else ["N"])
    w = "M" if param_width else width
    p.array("x", ("N", w), "float32")
    p.array("t", ("N", w), "float32")
    p.array("s", ("N",), "float32")
    p.array("y", ("N", w), "float32")
    p.array("z", ("N",), "float32")
    with p.loop("i", 0, "N"):
        if read_first:
            p.assign("z[i] = t[i, 0]")
        with p.loop("j", 0, w):
            p.assign("t[i, j] = x[i, j] * 2")
        with p.loop("j", 0, w):
            p.assign("t[i, j] = t[i, j] + 1")
        p.assign("s[i] = 0")
        with p.loop("j", 0, w):
            p.assign("s[i] = s[i] + t[i, j]")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, w):
            p.assign("y[i, j] = t[N - 1 - i, j] / s[i]" if mirrored else "y[i, j] = t[i, j] / s[i]")
    return p


def _run(p: pt.Program, options: dict, n: int = 5, width: int = 8) -> tuple[object, dict, dict]:
    rng = np.random.default_rng(0)
    sizes = {"N": n, "M": width} if "M" in to_program(p).params else {"N": n}
    args = {"x": rng.standard_normal((n, width)).astype(np.float32) + 3,
            "t": np.full((n, width), np.nan, np.float32), "s": np.full(n, np.nan, np.float32),
            "y": np.zeros((n, width), np.float32), "z": np.zeros(n, np.float32), **sizes}
    want = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    got = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    pt.reference(p, **want)
    kern = pt.compile(p, options={"fuse": "outer", **options})  # one nest: every row in one iteration
    kern(**got)
    return kern, want, got


@pytest.mark.parametrize("openmp", [True, False])
def test_row_temporaries_live_in_local_buffers(openmp: bool) -> None:
    kern, want, got = _run(_rows(), {"temporaries": ["t", "s"], "openmp": openmp})
    assert "pt_loc_t[8]" in kern.source and "pt_loc_s[1]" in kern.source
    np.testing.assert_array_equal(got["y"], want["y"])
    assert np.isnan(got["t"]).all() and np.isnan(got["s"]).all()  # the global arrays are never touched


def test_arrays_not_declared_temporary_stay_in_memory() -> None:
    kern, want, got = _run(_rows(), {"temporaries": ["s"]})
    assert "pt_loc_t" not in kern.source and "pt_loc_s[1]" in kern.source
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["t"], want["t"])


def test_a_temporary_read_before_it_is_written_stays_in_memory() -> None:
    kern, want, got = _run(_rows(read_first=True), {"temporaries": ["t", "s"]})
    assert "pt_loc_t" not in kern.source and "pt_loc_s[1]" in kern.source
    np.testing.assert_array_equal(got["y"], want["y"])
    np.testing.assert_array_equal(got["z"], want["z"])  # the values from before the call (NaN)


def test_a_temporary_read_across_iterations_stays_in_memory() -> None:
    kern, want, got = _run(_rows(mirrored=True), {"temporaries": ["t", "s"]})
    assert "pt_loc_t" not in kern.source
    np.testing.assert_array_equal(got["y"], want["y"])


def test_parametric_and_large_slices_stay_in_memory() -> None:
    kern, want, got = _run(_rows(param_width=True), {"temporaries": ["t", "s"]})
    assert "pt_loc_t" not in kern.source and "pt_loc_s[1]" in kern.source
    np.testing.assert_array_equal(got["y"], want["y"])
    big = 70000  # 280 KB a row: over the 256 KiB of local buffers a loop may take
    kern, want, got = _run(_rows(big), {"temporaries": ["t", "s"]}, n=3, width=big)
    assert "pt_loc_t" not in kern.source and "pt_loc_s[1]" in kern.source
    np.testing.assert_array_equal(got["y"], want["y"])


def test_torch_softmax_keeps_its_exponentials_in_a_row_buffer() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 256)
    x[3, 70] = float("nan")
    x[5, 200] = float("inf")
    fn = lambda t: torch.softmax(t, dim=-1)  # noqa: E731
    report = pt.explain(fn, x)
    (kernel,) = report.kernels
    assert "pt_loc_t__softmax_exp[256]" in kernel.source
    torch.testing.assert_close(pt.jit(fn)(x), fn(x), equal_nan=True)


def test_row_max_and_sum_with_several_accumulators_match_eager() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(6, 512)
    x[1, 37] = float("nan")  # a NaN in the second vector of partial maxima, then in the last one
    x[2, 511] = float("nan")
    x[4, :] = -float("inf")
    fn = lambda t: (t.amax(-1), t.sum(-1))  # noqa: E731
    (kernel,) = pt.explain(fn, x).kernels
    from polytri.frontend.torch_ops_reduce import lanes_of
    assert f"_lanes[{4 * lanes_of(torch.float32)}]" in kernel.source  # four vectors of partial results
    got, want = pt.jit(fn)(x), fn(x)
    torch.testing.assert_close(got[0], want[0], equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(got[1], want[1], equal_nan=True)
