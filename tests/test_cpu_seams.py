"""Sequential loops run in blocks with their seams deferred (``cpu_codegen/seams.py``): which loops, the
records, and results equal to the reference bit for bit on 2 to 4 threads, where the blocks divide the
work, where they do not, and where the loop is too short for them."""

from __future__ import annotations

from typing import Any

import islpy as isl
import numpy as np
import pytest

import polytri as pt
from polytri.cpu_codegen.target import CpuTarget
from polytri.ir.program import Program
from polytri.pipeline import register_target
from polytri.schedule.dependences import Dependences
from polytri.schedule.legality import prove_legal
from polytri.schedule.loop_ast import Node, build_loop_ast
from polytri.schedule.schedule import Schedule, parallel_dimensions
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc


def _seams(k) -> list[dict[str, Any]]:
    return [d.data for d in k.decision_records if d.kind == "seams"]


def agree(k, prog: Program, args: dict[str, Any], what: str) -> None:
    want = copy_args(args)
    pt.reference(prog, **want)
    k(**args)
    for name, v in want.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(args[name], v, err_msg=f"{name}: {what}")


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_blur_rows_run_in_blocks_per_channel(threads: int) -> None:
    """Pluto fuses blur's two passes, the vertical one 4 rows behind: the rows of each channel run in
    blocks, the vertical pass's first 4 rows of each block after the barrier.  One channel (blocks only),
    channels that the team divides (one block each), channels it does not, rows too few for two blocks."""
    kernel = KERNELS["blur"]
    k = pt.compile(kernel.build(), options={"threads": threads, "min_parallel_work": 0})
    assert _seams(k) == [{"outer": "c0", "deferred": ("S1",), "window": 4, "rings": ("tmp",), "ahead": ("img",)}]
    for c, h, w in ((1, 40, 21), (3, 70, 37), (2, 9, 8), (4, 100, 5), (5, 33, 19), (1, 17, 300)):
        agree(k, kernel.build(), make_args(kernel, {"C": c, "H": h, "W": w}, seed=c * h),
               f"C={c} H={h} W={w}, {threads} threads")


def _passes(n: int) -> Program:
    """``n`` vertical passes of a (C, H, W) image, each reading the last one's rows ahead."""
    p = pt.Program(f"passes{n}", params=["C", "H", "W"])
    p.assume(f"H >= {2 * n + 1}")
    p.assume("W >= 1")
    p.array("a0", ("C", "H", "W"), "float32")
    for k in range(1, n + 1):
        p.array(f"a{k}", ("C", f"H - {2 * k}", "W"), "float32")
        with p.loop("c", 0, "C"), p.loop("y", 0, f"H - {2 * k}"), p.loop("x", 0, "W"):
            p.assign(f"a{k}[c, y, x] = a{k - 1}[c, y, x] + a{k - 1}[c, y + 1, x] * {k + 1} - a{k - 1}[c, y + 2, x]")
    return p


def _passes_args(n: int, c: int, h: int, w: int) -> dict[str, Any]:
    args: dict[str, Any] = {"a0": np.arange(c * h * w, dtype=np.float32).reshape(c, h, w) % 13, "C": c, "H": h, "W": w}
    args.update({f"a{k}": np.zeros((c, h - 2 * k, w), np.float32) for k in range(1, n + 1)})
    return args


def test_a_consumer_that_feeds_another_is_not_deferred() -> None:
    """Two vertical passes fused by rows: the second waits in each block's first 2 rows.  Three: the
    middle one reads rows ahead and is read rows later, so no statement may wait for the barrier; the
    loop keeps its channels' region.  Both right."""
    two = pt.compile(_passes(2), options={"threads": 2, "min_parallel_work": 0})
    assert _seams(two) == [{"outer": "c0", "deferred": ("S1",), "window": 2, "rings": ("a1",), "ahead": ("a0",)}]
    agree(two, _passes(2), _passes_args(2, 3, 40, 7), "two passes")
    three = pt.compile(_passes(3), options={"threads": 2, "min_parallel_work": 0})
    assert not _seams(three)
    assert [d.subject for d in three.decision_records if d.kind.startswith("region-")] == ["c0"]
    agree(three, _passes(3), _passes_args(3, 3, 40, 7), "three passes")


class FusedRowsCpu(CpuTarget):
    """The cpu target with a hand-written schedule: a two-pass image filter fused by rows, the vertical
    pass 2 rows behind, so that the outermost loop carries dependences and no loop around it is parallel."""

    def schedule(self, program: Program, deps: Dependences, opts: dict[str, Any], *, built: bool
                 ) -> tuple[Schedule, list[str], Node]:
        m = isl.UnionMap("[H, W] -> { S0[y, x] -> [y, 0, x]; S1[y, x] -> [y + 2, 1, x] }")
        prove_legal(m, deps, what=f"{program.name}: rows fused")
        s = Schedule(m, parallel_dimensions(m, deps), "fused rows", scalar=(False, True, False))
        return s, ["schedule: rows fused"], build_loop_ast(program, s, deps)


def _image_filter() -> Program:
    p = pt.Program("filter2", params=["H", "W"])
    p.assume("H >= 3")
    p.assume("W >= 3")
    p.array("img", ("H", "W"), "float64")
    p.array("tmp", ("H", "W - 2"), "float64")
    p.array("out", ("H - 2", "W - 2"), "float64")
    with p.loop("y", 0, "H"), p.loop("x", 0, "W - 2"):
        p.assign("tmp[y, x] = img[y, x] + img[y, x + 1] * 2 + img[y, x + 2]")
    with p.loop("y", 0, "H - 2"), p.loop("x", 0, "W - 2"):
        p.assign("out[y, x] = tmp[y, x] - tmp[y + 1, x] * 3 + tmp[y + 2, x]")
    return p


@pytest.mark.parametrize("threads", [2, 3])
def test_an_outermost_sequential_loop_runs_in_blocks(threads: int) -> None:
    """With no parallel loop around it, the sequential loop's blocks are all the region's work: one
    region for the whole nest instead of one per row around the inner parallel loop."""
    register_target(FusedRowsCpu("cpu-fused-rows"))
    prog = _image_filter()
    k = pt.compile(prog, target="cpu-fused-rows", options={"threads": threads, "min_parallel_work": 0})
    assert _seams(k) == [{"outer": None, "deferred": ("S1",), "window": 2, "rings": ("tmp",), "ahead": ("img",)}]
    assert [d.subject for d in k.decision_records if d.kind.startswith("region-")] == ["c0"]
    rng = np.random.default_rng(threads)
    for h, w in ((3, 3), (8, 5), (50, 9), (101, 40)):
        args = {"img": rng.standard_normal((h, w)), "tmp": np.zeros((h, w - 2)), "out": np.zeros((h - 2, w - 2)),
                "H": h, "W": w}
        agree(k, prog, args, f"H={h} W={w}, {threads} threads")


def rows_program(offsets: tuple[int, ...]) -> Program:
    """A horizontal pass writing ``tmp``'s rows and a vertical one reading them at ``offsets``."""
    lo, hi = min(offsets), max(offsets)
    p = pt.Program("rows", params=["C", "H", "W"])
    p.assume(f"H >= {hi - lo + 1}")
    p.assume("W >= 1")
    p.array("img", ("C", "H", "W"), "float32")
    p.array("tmp", ("C", "H", "W"), "float32")
    p.array("out", ("C", f"H - {hi - lo}", "W"), "float32")
    with p.loop("c", 0, "C"), p.loop("y", 0, "H"), p.loop("x", 0, "W"):
        p.assign("tmp[c, y, x] = img[c, y, x] * 3 - 1")
    terms = " + ".join(f"tmp[c, y + {k - lo}, x] * {n + 2}" for n, k in enumerate(offsets))
    with p.loop("c", 0, "C"), p.loop("y", 0, f"H - {hi - lo}"), p.loop("x", 0, "W"):
        p.assign(f"out[c, y, x] = {terms}")
    return p


def rows_args(offsets: tuple[int, ...], c: int, h: int, w: int) -> dict[str, Any]:
    span = max(offsets) - min(offsets)
    return {"img": np.arange(c * h * w, dtype=np.float32).reshape(c, h, w) % 11, "tmp": np.zeros((c, h, w), np.float32),
            "out": np.zeros((c, h - span, w), np.float32), "C": c, "H": h, "W": w}


@pytest.mark.parametrize("offsets", [(0, 1), (0, 2, 4), (-2, 0, 3), (1, 6), (-5, -1)])
def test_rows_read_at_other_offsets(offsets: tuple[int, ...]) -> None:
    """A vertical pass reading the horizontal pass's rows at ``offsets`` (behind, ahead, both): whatever
    the window Pluto's shift leaves, every block agrees with the reference on 2 and 3 threads."""
    p = rows_program(offsets)
    for threads in (2, 3):
        k = pt.compile(p, options={"threads": threads, "min_parallel_work": 0})
        assert [d["deferred"] for d in _seams(k)] == [("S1",)]
        for c, h, w in ((1, 64, 9), (3, 41, 16), (2, 100, 3)):
            agree(k, p, rows_args(offsets, c, h, w), f"offsets {offsets}, C={c} H={h} W={w}, {threads} threads")
