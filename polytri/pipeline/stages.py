"""The stages of a compilation as events: each is timed, and hooks see what each one produced.

The driver runs every stage inside :meth:`StageClock.stage`; when a stage ends, its time is recorded
(``explain()`` lists the times) and every hook added with :func:`add_stage_hook` is called with a
:class:`StageEvent`.  Hooks are how a test verifies the program after every rewrite, or a user watches
a long compile: ``add_stage_hook(lambda e: print(e.stage, e.seconds))``.  A watcher added with
:func:`add_stage_watcher` is told when a stage begins, and when it ends, normally or by an exception (the
command line's progress lines, :mod:`polytri.tools.progress`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("polytri.compile")


@dataclass(frozen=True)
class StageEvent:
    """One finished stage of one compilation."""

    program: str
    """The name of the program compiled."""
    stage: str
    """The stage's name (``verify``, ``rewrite``, ``inline``, ``dependences``, ``schedule``, ``generate``)."""
    seconds: float
    """Wall time of the stage."""
    value: Any
    """What the stage produced: a program, dependences, ``(schedule, decisions, loop AST)``, a kernel."""


@dataclass(frozen=True)
class StageStart:
    """One stage of one compilation, as it begins."""

    program: str
    """The name of the program compiled."""
    stage: str
    """The stage's name."""
    elapsed: float
    """Seconds since the compilation began."""
    done: tuple[str, ...]
    """The stages of this compilation that have ended, in order."""


StageHook = Callable[[StageEvent], None]
StageWatcher = Callable[[StageStart], contextlib.AbstractContextManager[Any]]
_HOOKS: list[StageHook] = []
_WATCHERS: list[StageWatcher] = []


def add_stage_hook(hook: StageHook) -> None:
    """Call ``hook`` after every stage of every compilation (in this process)."""
    _HOOKS.append(hook)


def remove_stage_hook(hook: StageHook) -> None:
    """Stop calling ``hook``."""
    _HOOKS.remove(hook)


def add_stage_watcher(watcher: StageWatcher) -> None:
    """Enter ``watcher(start)``, a context manager, when each stage of each compilation begins, and leave it
    when the stage ends, whether it returned or raised (in this process)."""
    _WATCHERS.append(watcher)


def remove_stage_watcher(watcher: StageWatcher) -> None:
    """Stop calling ``watcher``."""
    _WATCHERS.remove(watcher)


class StageClock:
    """Times the stages of one compilation and reports them to the hooks."""

    def __init__(self, program: str):
        self.program = program
        self.times: list[tuple[str, float]] = []
        self.started = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[list[Any]]:
        """``with clock.stage("schedule") as out: out.append(result)``: times the block; the value put in
        ``out`` goes to the hooks."""
        out: list[Any] = []
        start = time.perf_counter()
        begun = StageStart(self.program, name, start - self.started, tuple(n for n, _ in self.times))
        with contextlib.ExitStack() as watching:
            for watcher in list(_WATCHERS):
                watching.enter_context(watcher(begun))
            yield out
        seconds = time.perf_counter() - start
        self.times.append((name, seconds))
        log.debug("%s: stage %s took %.3f s", self.program, name, seconds)
        event = StageEvent(self.program, name, seconds, out[0] if out else None)
        for hook in list(_HOOKS):
            hook(event)
