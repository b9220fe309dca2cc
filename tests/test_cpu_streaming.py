"""Non-temporal stores on the cpu target (``cpu_codegen/streaming.py``): which stores stream, the records,
and results equal to the plain stores' bit for bit, with the threshold lowered so that small arrays take
the streamed path (unaligned rows, ragged chunks, guards, several types, two threads)."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
from polytri.cpu_codegen import cgen
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc


@pytest.fixture
def tiny_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A last-level cache of 0 bytes: every streamed store's loop takes the streamed path."""
    monkeypatch.setattr(cgen, "cache_sizes", lambda: {1: 32 << 10, 2: 1 << 20, 3: 0})


def _streams(k) -> dict[str, dict]:
    return {d.subject: d.data for d in k.decision_records if d.kind == "stream-stores"}


def _two_passes(dtype: str) -> pt.Program:
    """A horizontal then a vertical 3-tap pass, as two nests (the input order)."""
    p = pt.Program("passes", params=["H", "W"])
    p.assume("H >= 3")
    p.assume("W >= 3")
    p.array("img", ("H", "W"), dtype)
    p.array("tmp", ("H", "W - 2"), dtype)
    p.array("out", ("H - 2", "W - 2"), dtype)
    with p.loop("y", 0, "H"), p.loop("x", 0, "W - 2"):
        p.assign("tmp[y, x] = img[y, x] + img[y, x + 1] * 2 + img[y, x + 2]")
    with p.loop("y", 0, "H - 2"), p.loop("x", 0, "W - 2"):
        p.assign("out[y, x] = tmp[y, x] - tmp[y + 1, x] + tmp[y + 2, x]")
    return p


def _inputs(dtype: str, h: int, w: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(h * w)
    np_type = np.float32 if dtype == "bfloat16" else np.dtype(dtype)
    img = rng.integers(-20, 20, size=(h, w)).astype(np_type)
    return {"img": img, "tmp": np.full((h, w - 2), 7, np_type), "out": np.full((h - 2, w - 2), 7, np_type)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64"])
@pytest.mark.parametrize("threads", [1, 2])
def test_streamed_stores_equal_plain_stores(tiny_cache: None, dtype: str, threads: int) -> None:
    """Both nests stream (each writes an array that it does not read); rows of odd widths start at every
    alignment, and a row of 1031 elements ends in a ragged chunk."""
    streamed = pt.compile(_two_passes(dtype), options={"schedule": "original", "threads": threads, "min_parallel_work": 0})
    plain = pt.compile(_two_passes(dtype), options={"schedule": "original", "threads": threads, "simd": False, "min_parallel_work": 0})
    assert set(_streams(streamed)) == {"tmp", "out"} and not _streams(plain)
    assert "pt__stream(" in streamed.source
    for h, w in ((5, 3), (9, 37), (6, 1033)):
        got, want = _inputs(dtype, h, w), _inputs(dtype, h, w)
        streamed(**got, H=h, W=w)
        plain(**want, H=h, W=w)
        pt.reference(_two_passes(dtype), **(ref := _inputs(dtype, h, w)), H=h, W=w)
        for name in ("tmp", "out"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name} at H={h} W={w}")
            np.testing.assert_array_equal(got[name], ref[name], err_msg=f"{name} at H={h} W={w}")


def test_an_array_read_in_the_nest_does_not_stream(tiny_cache: None) -> None:
    """The suite's blur, fused by Pluto: ``tmp`` is read a few rows after it is written, in the same nest,
    so only ``out`` streams; its statement runs under a guard on the rows, which the copy repeats."""
    k = pt.compile(KERNELS["blur"].build())
    assert set(_streams(k)) == {"out"}
    assert "if (c1 >= 4) pt__stream(&out[c0][c1 - 4][pt__s]" in k.source
    args = make_args(KERNELS["blur"], {"C": 2, "H": 11, "W": 600})
    want = copy_args(args)
    pt.reference(KERNELS["blur"].build(), **want)
    k(**args)
    for n in ("tmp", "out"):
        np.testing.assert_allclose(args[n], want[n], rtol=1e-6, err_msg=n)


def test_stores_stream_only_past_the_last_level_cache() -> None:
    """With the machine's own cache the loop tests the bytes written against its size: small arrays take
    the plain path (both paths are in the source), and the record says when the streamed one runs."""
    k = pt.compile(_two_passes("float32"), options={"schedule": "original"})
    assert "pt__stream_pays(" in k.source
    assert all("last-level cache" in d.text for d in k.decision_records if d.kind == "stream-stores")
    args = _inputs("float32", 8, 40)
    k(**args, H=8, W=40)
    ref = _inputs("float32", 8, 40)
    pt.reference(_two_passes("float32"), **ref, H=8, W=40)
    np.testing.assert_array_equal(args["out"], ref["out"])


@pytest.mark.parametrize("last, streamed", [(True, {"s"}), (False, set())])
def test_no_streaming_where_the_array_is_written_twice_or_read(tiny_cache: None, last: bool, streamed: set) -> None:
    """A target that the nest also reads, or writes from two statements, keeps plain stores; a streamable
    store streams only at the end of the loop's body (the others run first, in a loop of their own)."""
    p = pt.Program("twice", params=["M", "N"])
    p.array("a", ("M", "N"))
    p.array("b", ("M", "N"))
    p.array("s", ("M", "N"))
    with p.loop("j", 0, "M"), p.loop("i", 0, "N"):
        if not last:
            p.assign("s[j, i] = a[j, i] + 3")
        p.assign("b[j, i] = a[j, i] * 2")
        p.assign("b[j, i] = b[j, i] + 1")
        if last:
            p.assign("s[j, i] = a[j, i] + 3")
    k = pt.compile(p)
    assert set(_streams(k)) == streamed
    args = {n: np.arange(3 * 50, dtype=np.float64).reshape(3, 50) + (n == "a") for n in ("a", "b", "s")}
    want = {n: v.copy() for n, v in args.items()}
    k(**args)
    pt.reference(p, **want)
    for n in ("b", "s"):
        np.testing.assert_array_equal(args[n], want[n])


def test_an_outermost_streamed_loop_fences_its_own_stores(tiny_cache: None) -> None:
    """Without OpenMP a one-dimensional loop is itself the outermost loop: its chunks end with the fence."""
    p = pt.Program("scale", params=["N"])
    p.array("a", ("N",))
    p.array("b", ("N",))
    with p.loop("i", 0, "N"):
        p.assign("b[i] = a[i] * 2")
    k = pt.compile(p, options={"openmp": False})
    assert set(_streams(k)) == {"b"}
    assert k.source.count("pt__stream_fence();") == 1
    a = np.arange(1001, dtype=np.float64)
    b = np.zeros(1001)
    k(a=a, b=b)
    np.testing.assert_array_equal(b, a * 2)
