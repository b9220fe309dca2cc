"""The stages of a compilation as events: each is timed, and hooks see what each one produced.

The driver runs every stage inside :meth:`StageClock.stage`; when a stage ends, its time is recorded
(``explain()`` lists the times) and every hook added with :func:`add_stage_hook` is called with a
:class:`StageEvent`.  Hooks are how a test verifies the program after every rewrite, or a user watches
a long compile: ``add_stage_hook(lambda e: print(e.stage, e.seconds))``.
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


StageHook = Callable[[StageEvent], None]
_HOOKS: list[StageHook] = []


def add_stage_hook(hook: StageHook) -> None:
    """Call ``hook`` after every stage of every compilation (in this process)."""
    _HOOKS.append(hook)


def remove_stage_hook(hook: StageHook) -> None:
    """Stop calling ``hook``."""
    _HOOKS.remove(hook)


class StageClock:
    """Times the stages of one compilation and reports them to the hooks."""

    def __init__(self, program: str):
        self.program = program
        self.times: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[list[Any]]:
        """``with clock.stage("schedule") as out: out.append(result)``: times the block; the value put in
        ``out`` goes to the hooks."""
        out: list[Any] = []
        start = time.perf_counter()
        yield out
        seconds = time.perf_counter() - start
        self.times.append((name, seconds))
        log.debug("%s: stage %s took %.3f s", self.program, name, seconds)
        event = StageEvent(self.program, name, seconds, out[0] if out else None)
        for hook in list(_HOOKS):
            hook(event)
