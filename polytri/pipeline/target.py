"""The interface between the driver (``pt.compile``) and a code generator.

A :class:`Target` owns what differs between machines: its options (a frozen dataclass, see
:mod:`.options`), the program rewrites that only pay there, how it schedules (a CPU tiles, a GPU blocks
its parallel loops itself), and how it turns a scheduled program into a callable kernel.  The driver runs
the stages every target shares (verification, recomputation of temporaries, dependences, the decisions
about loops, the safe fallback to the original order) and never asks which target it runs.

``cpu_codegen.target.CpuTarget`` and ``codegen_triton.backend.GpuTarget`` implement it; a new target is a
subclass registered with :func:`register_target`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, ClassVar

from ..errors import OptionError
from ..ir.program import Program
from ..schedule.dependences import Dependences
from ..schedule.loop_ast import Node
from ..schedule.schedule import Schedule
from .decisions import Decision
from .options import parse_options


class Target(abc.ABC):
    """A code generator: options, target-specific rewrites, scheduling, and code generation."""

    name: str
    """The name ``pt.compile(..., target=...)`` takes."""
    options_class: ClassVar[type]
    """The frozen dataclass of the target's options."""
    balance: float
    """Arithmetic operations per byte of memory traffic at which the machine is balanced (the
    recomputation cost model of :mod:`polytri.fusion.cost`)."""
    recompute_from_settled_inputs: ClassVar[bool] = False
    """Whether a temporary's producer may be recomputed where it reads arrays whose every write comes first
    (:func:`polytri.fusion.inline_producers`)."""
    source_suffix: ClassVar[str]
    """File name suffix of the generated source in ``POLYTRI_DUMP`` folders."""
    rewrite_name: ClassVar[str] = "rewrite"
    """What :meth:`rewrite` does, for warnings and decisions."""

    def __init__(self, name: str):
        self.name = name

    def check_options(self, options: Any) -> dict[str, Any]:
        """The options merged with their defaults and checked (:class:`~polytri.errors.OptionError`)."""
        return asdict(parse_options(self.options_class, options, f"target {self.name!r}"))

    def rewrite(self, program: Program, opts: dict[str, Any]) -> tuple[Program, Sequence[Decision | str], bool]:
        """Rewrites of whole statement groups that pay on this target, before any other stage: the program,
        the decisions, and whether the rewrite built the loops in the order they should run (the
        scheduler then keeps it).  The default rewrites nothing."""
        return program, [], False

    @abc.abstractmethod
    def schedule(self, program: Program, deps: Dependences, opts: dict[str, Any], *, built: bool
                 ) -> tuple[Schedule, Sequence[Decision | str], Node]:
        """The schedule to generate code from, proved legal, with the decisions and its loop AST."""

    @abc.abstractmethod
    def generate(self, program: Program, deps: Dependences, schedule: Schedule, ast: Node, *,
                 opts: dict[str, Any], decisions: list[Decision], scratch: frozenset[str],
                 dump: Callable[[str], None]) -> Any:
        """The compiled kernel of a scheduled program; ``dump(source)`` is called with the generated source
        as soon as it exists (before a build that may fail); ``scratch``: temporaries no read of which sees a
        value from before the call."""


_TARGETS: dict[str, Target] = {}


def register_target(target: Target) -> None:
    """Make ``target`` available to ``pt.compile`` under its name (replacing one of the same name)."""
    _TARGETS[target.name] = target


def target_names() -> tuple[str, ...]:
    """The names of the registered targets."""
    return tuple(_TARGETS)


def get_target(name: str) -> Target:
    """The registered target called ``name``."""
    if name not in _TARGETS:
        raise OptionError(f"unknown target {name!r}; known targets: {', '.join(_TARGETS)}")
    return _TARGETS[name]
