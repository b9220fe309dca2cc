"""Rows kept in a ring per thread where a loop runs in blocks (``cpu_codegen/row_ring.py``): which arrays,
the records, and results equal to the reference bit for bit with the thresholds lowered so that small
arrays take the ring (rows of odd widths, blocks of every length, windows past the ring's 8 rows), and a
read of a value from before the loop keeps the array out of the ring."""

from __future__ import annotations

import numpy as np
import pytest
from test_cpu_seams import agree, rows_args, rows_program

import polytri as pt
from polytri.cpu_codegen import cgen
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
