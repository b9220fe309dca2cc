"""Progress lines of the command line: a compilation that runs longer than a few seconds says which stage
it is in, on stderr (logger ``polytri.progress``), instead of staying silent until it ends.

The threshold is ``POLYTRI_PROGRESS`` seconds (default 3; ``0`` reports every stage as it begins, ``off``
reports nothing).  A stage still running is reported again every :data:`REPEAT` seconds.  Only the
``polytri`` command installs the reporter: ``pt.compile`` called from a Python program prints nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Iterator

from ..errors import OptionError
from ..pipeline.stages import StageStart, add_stage_watcher, remove_stage_watcher
from .logconfig import show

log = logging.getLogger("polytri.progress")

ENV = "POLYTRI_PROGRESS"
DEFAULT_AFTER = 3.0
"""Seconds a compilation runs before its first progress line, unless ``POLYTRI_PROGRESS`` says otherwise."""
REPEAT = 10.0
"""Seconds between two lines about the same stage."""


def threshold(value: str | None = None) -> float | None:
    """Seconds before the first progress line, from ``value`` or ``POLYTRI_PROGRESS``; ``None``: off."""
    text = (os.environ.get(ENV, "") if value is None else value).strip().lower()
    if not text:
        return DEFAULT_AFTER
    if text in ("off", "never", "none"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0 or math.isinf(seconds):
        raise OptionError(f"{ENV}: expected a number of seconds at least 0, or 'off', got {text!r}")
    return seconds


def _line(start: StageStart, elapsed: float) -> str:
    return (f"compiling {start.program}: {start.stage} stage running, {elapsed:.1f} s so far "
            f"({len(start.done)} stage{'' if len(start.done) == 1 else 's'} done)")


class ProgressReporter:
    """A stage watcher (:func:`~polytri.pipeline.stages.add_stage_watcher`) that logs a line for each stage
    running after ``after`` seconds of its compilation, and again every ``repeat`` seconds while it runs."""

    def __init__(self, after: float, repeat: float = REPEAT):
        self.after = after
        self.repeat = repeat

    @contextlib.contextmanager
    def __call__(self, start: StageStart) -> Iterator[None]:
        began = time.perf_counter() - start.elapsed  # when the compilation began
        ended = threading.Event()
        if start.elapsed >= self.after:  # reported now, in order, before the stage does anything
            log.info("%s", _line(start, start.elapsed))
            wait_first = self.repeat
        else:
            wait_first = self.after - start.elapsed
        watcher = threading.Thread(target=self._watch, args=(start, began, ended, wait_first), daemon=True)
        watcher.start()
        try:
            yield
        finally:
            ended.set()
            watcher.join()

    def _watch(self, start: StageStart, began: float, ended: threading.Event, wait: float) -> None:
        """Report ``start``'s stage after ``wait`` seconds, then every :attr:`repeat`, until ``ended``."""
        while not ended.wait(wait):
            log.info("%s", _line(start, time.perf_counter() - began))
            wait = self.repeat


@contextlib.contextmanager
def reporting(after: float | None = None) -> Iterator[None]:
    """Progress lines for the compilations inside the block, after ``after`` seconds (default: from
    ``POLYTRI_PROGRESS``); the ``polytri.progress`` logger shows them on stderr unless it was configured."""
    seconds = threshold() if after is None else after
    if seconds is None:
        yield
        return
    show(log.name, logging.INFO)
    reporter = ProgressReporter(seconds)
    add_stage_watcher(reporter)
    try:
        yield
    finally:
        remove_stage_watcher(reporter)
