"""Decisions as records: what a stage chose, about what, and why, as data that ``explain()`` renders.

A :class:`Decision` carries its ``stage`` (``fusion``, ``schedule``, ``loops``, ``codegen``, ...), a
``kind`` that code may test (``recompute``, ``online-softmax``, ``parallel``, ...), its ``subject`` (a
statement, an array, a loop), the sentence ``explain()`` prints, and the figures behind it in ``data``.
Code that needs to know what was decided reads ``kind`` and ``data``, never the sentence.

Stages that do not produce records yet hand over sentences; :func:`as_record` files them under their
stage with kind ``note``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Decision:
    """One decision of a compilation."""

    stage: str
    """The stage that made it."""
    kind: str
    """What sort of decision it is; ``note`` for a sentence without structure."""
    subject: str
    """What it is about: a statement, an array, a loop, or ``program``."""
    text: str
    """The sentence ``explain()`` prints."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """The figures behind it (costs, counts, names)."""

    def __str__(self) -> str:
        return self.text


def as_record(d: Decision | str, stage: str) -> Decision:
    """``d`` itself, or a sentence filed under ``stage`` as a ``note`` about the program."""
    return d if isinstance(d, Decision) else Decision(stage, "note", "program", d)


def under(d: Decision | str, stage: str, prefix: str) -> Decision:
    """``d`` as a record of ``stage`` whose sentence starts with ``prefix`` (``fusion: ...``)."""
    rec = as_record(d, stage)
    return replace(rec, text=prefix + rec.text)


def records(ds: Iterable[Decision | str], stage: str) -> list[Decision]:
    """:func:`as_record` of each."""
    return [as_record(d, stage) for d in ds]
