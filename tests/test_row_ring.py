"""Rows kept in a ring per thread where a loop runs in blocks (``cpu_codegen/row_ring.py``): which arrays,
the records, and results equal to the reference bit for bit with the thresholds lowered so that small
arrays take the ring (rows of odd widths, blocks of every length, windows past the ring's 8 rows), and a
read of a value from before the loop keeps the array out of the ring."""

from __future__ import annotations

import numpy as np
import pytest
from test_cpu_seams import agree, rows_args, rows_program

import polytri as pt
from polytri.cpu_codegen import cgen, row_ring
from polytri.cpu_codegen.cexpr import index_expr
from polytri.cpu_codegen.row_ahead import find_ahead
from polytri.ir.builder import to_program
from polytri.ir.expr import Binary, Const, Var
from polytri.ir.program import Statement
from polytri.schedule.loop_ast import Block, For, If, Run
from polytri.suite import KERNELS, make_args

pytestmark = pytest.mark.cc


@pytest.fixture
def tiny_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A last-level cache of 0 bytes and a level-2 cache of 1 MiB: every ring is allocated."""
    monkeypatch.setattr(cgen, "cache_sizes", lambda: {1: 32 << 10, 2: 1 << 20, 3: 0})


def _rings(k) -> list[tuple[str, ...]]:
    return [d.data["rings"] for d in k.decision_records if d.kind == "seams"]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_blur_keeps_tmp_in_a_ring(tiny_cache: None, threads: int) -> None:
    """The suite's blur: ``tmp``'s rows live in the ring and go out with streamed stores; the vertical
    pass reads them from the ring, except in each block's first 4 rows (after the barrier, from ``tmp``).
    On one thread, where no region opens, the whole loop is one block."""
    kernel = KERNELS["blur"]
    k = pt.compile(kernel.build(), options={"threads": threads, "min_parallel_work": 0})
    assert _rings(k) == [("tmp",)]
    assert "pt__ring_tmp[(y + 4) & 7][x]" in k.source and "free(pt__ring_tmp);" in k.source
    for c, h, w in ((1, 40, 21), (3, 70, 37), (2, 9, 8), (4, 100, 5), (1, 17, 300), (3, 130, 1031)):
        agree(k, kernel.build(), make_args(kernel, {"C": c, "H": h, "W": w}, seed=c * h),
               f"C={c} H={h} W={w}, {threads} threads")


def test_a_ring_too_big_for_the_level_2_cache_is_not_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no level-2 cache to hold it, the ring's test of its size compares with 0 bytes (computed once)
    and the blocks, storing to ``tmp``, compute right.  Which path ran is not observed from Python."""
    monkeypatch.setattr(cgen, "cache_sizes", lambda: {1: 32 << 10, 2: 0, 3: 0})
    kernel = KERNELS["blur"]
    k = pt.compile(kernel.build(), options={"threads": 2, "min_parallel_work": 0})
    assert "* 4.0 <= 0.0;" in k.source  # the test of the ring's size, computed once
    agree(k, kernel.build(), make_args(kernel, {"C": 3, "H": 64, "W": 40}, seed=1), "no ring")


@pytest.mark.parametrize("offsets", [(0, 1), (0, 2, 4), (-2, 0, 3), (-5, -1), (0, 9)])
def test_rows_read_at_other_offsets_from_the_ring(tiny_cache: None, offsets: tuple[int, ...]) -> None:
    """A vertical pass reading the horizontal pass's rows at ``offsets``: the ring holds the rows of the
    window and one more, rounded up to a power of two (2 rows for a window of 1, 16 for 9)."""
    p = rows_program(offsets)
    k = pt.compile(p, options={"threads": 2, "min_parallel_work": 0})
    assert _rings(k) == [("tmp",)]
    window = next(d.data["window"] for d in k.decision_records if d.kind == "seams")
    assert window == max(offsets) - min(offsets) and f"& {(1 << window.bit_length()) - 1}]" in k.source
    for c, h, w in ((1, 64, 9), (3, 41, 16), (2, 100, 3)):
        agree(k, p, rows_args(offsets, c, h, w), f"offsets {offsets}, C={c} H={h} W={w}")


def test_a_row_from_before_the_loop_keeps_the_array_out_of_the_ring(tiny_cache: None) -> None:
    """The horizontal pass writes every row of ``tmp`` but the first, which the vertical pass reads as
    the caller left it: a ring would hold no such row, so ``tmp`` stays in memory; the loop still runs
    in blocks."""
    p = pt.Program("rows_before", params=["C", "H", "W"])
    p.assume("H >= 3")
    p.assume("W >= 1")
    p.array("img", ("C", "H", "W"), "float32")
    p.array("tmp", ("C", "H", "W"), "float32")
    p.array("out", ("C", "H - 1", "W"), "float32")
    with p.loop("c", 0, "C"), p.loop("y", 1, "H"), p.loop("x", 0, "W"):
        p.assign("tmp[c, y, x] = img[c, y, x] * 3 - 1")
    with p.loop("c", 0, "C"), p.loop("y", 0, "H - 1"), p.loop("x", 0, "W"):
        p.assign("out[c, y, x] = tmp[c, y, x] + tmp[c, y + 1, x] * 2")
    k = pt.compile(p, options={"threads": 2, "min_parallel_work": 0})
    assert _rings(k) == [()]
    assert "pt__ring" not in k.source
    for c, h, w in ((1, 64, 9), (3, 41, 16)):
        args = {"img": np.arange(c * h * w, dtype=np.float32).reshape(c, h, w) % 7,
                "tmp": np.full((c, h, w), 5, np.float32), "out": np.zeros((c, h - 1, w), np.float32),
                "C": c, "H": h, "W": w}
        agree(k, p, args, f"C={c} H={h} W={w}")


def test_blur_fetches_the_next_row_of_img_and_copies_tmp_by_chunks(tiny_cache: None) -> None:
    """The horizontal pass's next row of ``img`` (its 5 taps: one span of the row, 4 elements past the
    chunk) is fetched in each chunk of the vertical pass, where the next row is in the block; the ring's
    row goes out to ``tmp`` chunk by chunk there.  Where the level-1 cache cannot hold the rows fetched
    (0 bytes here), the test fails and the results are the same."""
    kernel = KERNELS["blur"]
    k = pt.compile(kernel.build(), options={"threads": 2, "min_parallel_work": 0})
    seams = next(d for d in k.decision_records if d.kind == "seams")
    assert seams.data["ahead"] == ("img",) and "the next row of img fetched while its readers run" in seams.text
    assert "if (c1 + 1 < pt__hi && 0 < W - 4 && " in k.source
    assert "pt__p < pt__min_int64_t(pt__e, W - 4) + 4; pt__p += 16) __builtin_prefetch(&img[c0][c1 + 1][pt__p + 0], 0, 3);" in k.source
    assert "pt__stream(&tmp[c0][c1][pt__s], &pt__ring_tmp[(c1) & 7][pt__s], pt__max_int64_t(pt__e - pt__s, 0) * 4);" in k.source
    for c, h, w in ((3, 70, 37), (1, 17, 1100)):
        agree(k, kernel.build(), make_args(kernel, {"C": c, "H": h, "W": w}, seed=h), f"C={c} H={h} W={w}")


def test_no_fetch_where_the_level_1_cache_is_too_small(tiny_cache: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(row_ring, "cache_sizes", lambda: {1: 0, 2: 1 << 20, 3: 0})
    kernel = KERNELS["blur"]
    k = pt.compile(kernel.build(), options={"threads": 2, "min_parallel_work": 0})
    assert "* 4.0 <= 0.0) {" in k.source
    agree(k, kernel.build(), make_args(kernel, {"C": 2, "H": 50, "W": 600}, seed=3), "no fetch")


def _producer_loops(lower: str, guard: bool = False) -> tuple[Statement, Run, For, For]:
    """A producer ``t[y, x] = a[y, x] + a[y + 1, x] + a[y + 1, x + 2] + a[y + 3, x + 1] + w[x]`` in a loop
    over ``x`` from ``lower`` (C text, ``y`` for the counter of the rows) directly in the rows' loop, or
    under a guard."""
    p = pt.Program("producer", params=["H", "W"])
    p.array("a", ("H + 3", "W + 2"), "float32")
    p.array("w", ("W",), "float32")
    p.array("t", ("H", "W"), "float32")
    with p.loop("y", 0, "H"), p.loop("x", 0, "W"):
        p.assign("t[y, x] = a[y, x] + a[y + 1, x] + a[y + 1, x + 2] + a[y + 3, x + 1] + w[x]")
    st = to_program(p).statements[0]
    y, x = Var("c0", "iter"), Var("c1", "iter")
    run = Run(st.name, (y, x))
    inner = For("c1", 1, Var("c0", "iter") if lower == "y" else Const(int(lower)), Binary("<", x, Var("W", "param")),
                1, run, True, True)
    body = If(Binary(">=", y, Const(1)), inner, None) if guard else Block((inner,))
    seq = For("c0", 0, Const(0), Binary("<", y, Var("H", "param")), 1, body, False, False)
    return st, run, seq, inner


def test_the_rows_fetched_ahead_are_the_new_ones() -> None:
    """Rows ``y``, ``y + 1`` and ``y + 3`` of ``a`` at the next iteration are ``y + 1``, ``y + 2`` and
    ``y + 4``: the first is read now (in the cache), the others are fetched, ``y + 2``'s taps (offsets
    0 and 2) as one span; ``w`` does not move with the rows.  None where the producer's loop starts at
    the row's counter or runs under a guard."""
    st, run, seq, inner = _producer_loops("0")
    ahead = find_ahead(st, run, seq, inner, lambda a: 4)
    assert ahead is not None
    got = {(r.array, tuple(index_expr(e).text for e in r.head), r.first, r.span) for r in ahead.reads}
    assert got == {("a", ("c0 + 1 + 1",), 0, 2), ("a", ("c0 + 1 + 3",), 1, 0)}
    assert find_ahead(*_producer_loops("y"), lambda a: 4) is None
    assert find_ahead(*_producer_loops("0", guard=True), lambda a: 4) is None
