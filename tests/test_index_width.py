"""Index arithmetic never overflows: parameters near and past 2**31 give the reference's results on every
target.  The Triton backend computes counters, bounds and offsets in int32 only where every value of the
call provably fits, and runs the module's int64 variant elsewhere; the C backend uses int64_t throughout."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.codegen_triton.index_width import INT32_MAX, index_extreme, lane_margin
from polytri.schedule.dependences import compute_dependences
from polytri.schedule.loop_ast import build_loop_ast
from polytri.schedule.schedule import original_schedule

#: Parameter values around the int32 and uint32 limits (and one small value).
LARGE = [2**31 - 4, 2**31 - 1, 2**31 + 5, 2**32 + 3]
TARGETS = [pytest.param("cpu", marks=pytest.mark.cc), pytest.param("nvgpu", marks=pytest.mark.interp)]


def _shift_1d() -> pt.Program:
    """A loop from N to N + 4 that writes A[i - N] and, in int64, i itself."""
    p = pt.Program("shift_1d", params=["N"])
    p.array("A", (4,), "float32")
    p.array("I", (4,), "int64")
    with p.loop("i", "N", "N + 4"):
        p.assign("A[i - N] = A[i - N] + 1.0")
        p.assign("I[i - N] = i")
    return p


def _shift_2d() -> pt.Program:
    """Two shifted loops, an int64 value computed from both counters, and a shifted sum."""
    p = pt.Program("shift_2d", params=["N", "M"])
    p.array("B", (3, 5), "int64")
    p.array("X", (3, 20), "float64")
    p.array("S", (3,), "float64")
    with p.loop("i", "N", "N + 3"):
        with p.loop("j", "M", "M + 5"):
            p.assign("B[i - N, j - M] = 2 * i + j")
        with p.loop("k", "M", "M + 20"):
            p.assign("S[i - N] = S[i - N] + X[i - N, k - M]")
    return p


def _run(prog: pt.Program, target: str, params: dict[str, int], seed: int = 0,
         options: dict[str, object] | None = None) -> None:
    rng = np.random.default_rng(seed)
    arrays = {a.name: rng.integers(0, 9, size=[s.value for s in a.shape]).astype(a.dtype) for a in prog.arrays}
    want = {n: v.copy() for n, v in arrays.items()}
    got = {n: v.copy() for n, v in arrays.items()}
    pt.reference(prog, **want, **params)
    pt.compile(prog, target=target, options=options)(**got, **params)
    for n in arrays:
        np.testing.assert_array_equal(got[n], want[n], err_msg=f"{prog.name} {target} {params}: array {n}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", LARGE)
def test_1d_loop_past_the_int32_limit(target: str, n: int) -> None:
    _run(_shift_1d(), target, {"N": n})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("n", "m"), [(2**31 - 4, 5), (7, 2**31 - 1), (2**31 + 5, 2**32 + 3), (2**32 + 3, 2**31 - 4)])
def test_2d_loops_past_the_int32_limit(target: str, n: int, m: int) -> None:
    _run(_shift_2d(), target, {"N": n, "M": m})


@pytest.mark.interp
@pytest.mark.parametrize(("n", "m"), [(7, 2**31 - 1), (2**32 + 3, 2**31 - 4)])
def test_chunked_loops_from_a_parameter_past_the_int32_limit_in_the_input_order(n: int, m: int) -> None:
    # the input order keeps loops from M to M + 4: a chunk's counter (a Python int in the interpreter) plus
    # an int32 tl.arange was computed in int32, and B came out wrong without an error
    _run(_shift_2d(), "nvgpu", {"N": n, "M": m}, options={"schedule": "original"})


@pytest.mark.interp
def test_the_width_follows_the_parameters() -> None:
    k = pt.compile(_shift_1d(), target="nvgpu")
    assert k.index_type({"N": 5}) == "int32"
    assert k.index_type({"N": 2**31 - 100}) == "int64"  # blocks of lanes run past N + 4
    assert k.index_type({"N": -(2**31)}) == "int64"
    assert "pt_N = pt_N + tl.zeros((), tl.int32)" in k.source and "tl.program_id(0) * " in k.source
    assert "pt__v3 = c0.to(tl.int64)" in k.source  # I[i - N] = i: an int64 value
    wide = k.source_for("int64")
    assert "pt_N = pt_N + tl.zeros((), tl.int64)" in wide and "tl.program_id(0).to(tl.int64)" in wide


@pytest.mark.interp
def test_int64_values_of_int32_counters_are_computed_in_int64() -> None:
    """Small counters, a large product: the index width is int32, the value's arithmetic int64."""
    p = pt.Program("square", params=["N"])
    p.array("I", (4,), "int64")
    with p.loop("i", "N", "N + 4"):
        p.assign("I[i - N] = i * i + N * 3")
    k = pt.compile(p, target="nvgpu")
    assert k.index_type({"N": 100_000}) == "int32"
    _run(p, "nvgpu", {"N": 100_000})


def _extreme(builder: pt.Program, params: dict[str, int], margin: int = 1024) -> float:
    p = builder.build()
    deps = compute_dependences(p)
    return index_extreme(p, build_loop_ast(p, original_schedule(p, deps), deps), params, margin=margin)


def test_offsets_of_large_arrays_need_int64() -> None:
    """Row-major offsets count, not only subscripts: an N x N array of more than 2**31 elements."""
    p = pt.Program("square_copy", params=["N"])
    p.array("A", ("N", "N"), "float32")
    p.array("B", ("N", "N"), "float32")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("B[i, j] = A[i, j]")
    assert _extreme(p, {"N": 30_000}) <= INT32_MAX
    assert _extreme(p, {"N": 50_000}) > INT32_MAX


@pytest.mark.interp
def test_the_int64_variant_compiles_ahead_of_time() -> None:
    k = pt.compile(_shift_2d(), target="nvgpu")
    assert lane_margin(k.model) >= max(k.model.dot_block)
    def integer_params(ptx: str) -> list[str]:  # the kernels' parameters that are not pointers
        return [line.split()[1] for line in ptx.splitlines() if line.strip().startswith(".param") and ".ptr" not in line]
    narrow, wide = integer_params(k.asm("sm_90")), integer_params(k.asm("sm_90", index="int64"))
    assert narrow and set(narrow) == {".u32"} and set(wide) == {".u64"} and len(wide) == len(narrow)
