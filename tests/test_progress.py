"""Progress of the command line: a long compilation says which stage runs (POLYTRI_PROGRESS), and the
demo prints each row of its tables as soon as it is done."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import polytri as pt
from polytri.errors import OptionError
from polytri.pipeline import StageStart, add_stage_watcher, remove_stage_watcher
from polytri.tools import demo, progress

ROOT = Path(__file__).resolve().parents[1]


def scale_program(name: str = "progress_scale") -> pt.Program:
    p = pt.Program(name, params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = 2.0 * A[i]")
    return p


def test_threshold_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.threshold() == progress.DEFAULT_AFTER
    assert progress.threshold("0") == 0.0
    assert progress.threshold("2.5") == 2.5
    assert progress.threshold("off") is None
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(OptionError, match="POLYTRI_PROGRESS"):
            progress.threshold(bad)


@pytest.mark.cc
def test_a_threshold_of_zero_reports_every_stage_as_it_begins(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="polytri.progress")
    reporter = progress.ProgressReporter(after=0.0)
    add_stage_watcher(reporter)
    try:
        k = pt.compile(scale_program(), target="cpu")
    finally:
        remove_stage_watcher(reporter)
    lines = [r.getMessage() for r in caplog.records if r.name == "polytri.progress"]
    stages = [name for name, _ in k.stage_times]
    assert [line.split(": ")[1].split(" stage running")[0] for line in lines] == stages
    assert lines[0].startswith("compiling progress_scale: verify stage running, ") and "(0 stages done)" in lines[0]
    assert "(1 stage done)" in lines[1]


def test_a_stage_still_running_is_reported_when_the_threshold_passes(caplog: pytest.LogCaptureFixture) -> None:
    """The watcher's loop, run in this thread: a line when its wait ends, none once the stage has ended."""
    caplog.set_level(logging.INFO, logger="polytri.progress")
    ended = threading.Event()

    class EndAtFirstLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            ended.set()

    handler = EndAtFirstLine()
    progress.log.addHandler(handler)
    try:
        start = StageStart("slow", "schedule", 0.5, ("verify", "rewrite", "inline", "dependences"))
        progress.ProgressReporter(after=3.0)._watch(start, began=0.0, ended=ended, wait=0.0)
    finally:
        progress.log.removeHandler(handler)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "polytri.progress"]
    assert line.startswith("compiling slow: schedule stage running, ") and line.endswith("(4 stages done)")


def test_a_stage_that_raises_leaves_its_watchers() -> None:
    left = []

    @contextlib.contextmanager
    def watcher(start: StageStart) -> Iterator[None]:
        try:
            yield
        finally:
            left.append(start.stage)

    add_stage_watcher(watcher)
    try:
        p = scale_program("progress_bad")
        with pytest.raises(OptionError):
            pt.compile(p, target="cpu", options={"temporaries": "nosuch"})  # fails in the verify stage
    finally:
        remove_stage_watcher(watcher)
    assert left == ["verify"]


@pytest.mark.cc
def test_the_command_line_prints_progress_lines_on_stderr(tmp_path: Path) -> None:
    env = {**os.environ, "POLYTRI_PROGRESS": "0", "POLYTRI_CACHE_DIR": str(tmp_path)}
    env.pop("POLYTRI_LOG", None)
    proc = subprocess.run([sys.executable, "-m", "polytri.tools.cli", "compile", str(ROOT / "examples" / "jacobi_1d.py"),
                           "--show", "schedule"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "polytri.progress: compiling jacobi_1d: schedule stage running" in proc.stderr
    assert "progress" not in proc.stdout
    quiet = subprocess.run([sys.executable, "-m", "polytri.tools.cli", "compile", str(ROOT / "examples" / "jacobi_1d.py"),
                            "--show", "schedule"], capture_output=True, text=True, cwd=tmp_path,
                           env={**env, "POLYTRI_PROGRESS": "off"}, timeout=300)
    assert quiet.returncode == 0 and "progress" not in quiet.stderr, quiet.stderr


@pytest.mark.cc
def test_the_demo_prints_each_row_when_it_is_done(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                                                  ) -> None:
    """When the second kernel is compiled, the first kernel's row is already out."""
    monkeypatch.setattr(demo, "SHOWCASE", (("gemm", {"NI": 4, "NJ": 4, "NK": 4}), ("jacobi_2d", {"T": 2, "N": 6})))
    monkeypatch.setattr(demo, "run_torch_blur", lambda size: True)
    seen: list[str] = []
    compile_ = demo.pt_compile

    def spying(prog: object, **kwargs: object) -> object:
        seen.append(capsys.readouterr().out)
        return compile_(prog, **kwargs)

    monkeypatch.setattr(demo, "pt_compile", spying)
    assert demo.run_demo(show_source=False, bench=False) == 0
    before_first, before_second = seen
    assert "kernel" in before_first and not any(line.startswith("gemm") for line in before_first.splitlines())
    row = next(line for line in before_second.splitlines() if line.startswith("gemm"))
    assert row.endswith("yes")
    assert np.isfinite(float(row.split()[-2]))
