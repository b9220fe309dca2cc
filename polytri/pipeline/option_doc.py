"""The options of a target as text: one entry per field of its options class, read from the class itself.

The same text serves ``help(pt.compile)`` (appended to its docstring when the built-in targets are
registered) and the API reference (a reST definition list, which Sphinx renders; see docs/api/).  Nothing
here lists an option by hand: a field added to an options class appears in both at once.
"""

from __future__ import annotations

import re
import textwrap
import types
import typing
from collections.abc import Iterable
from dataclasses import MISSING, fields
from typing import Any, Literal

from .options import option_docs
from .target import get_target

_MARKUP = re.compile(r"([*`|\\])")
_NOUNS = {bool: ("True", "False"), int: ("an int",), float: ("a number",), str: ("a string",)}
_PLURALS = {int: "ints", float: "numbers", str: "strings", bool: "booleans"}
WIDTH = 100
"""Column at which the descriptions are wrapped."""


def _alternatives(tp: Any) -> list[str]:
    """The values of the annotation ``tp``, one phrase each (the forms the options classes use)."""
    origin = typing.get_origin(tp)
    if tp is type(None):
        return ["None"]
    if origin is Literal:
        return [repr(a) for a in typing.get_args(tp)]
    if origin in (typing.Union, types.UnionType):
        return [phrase for a in typing.get_args(tp) for phrase in _alternatives(a)]
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return [f"a tuple of {_PLURALS.get(item, getattr(item, '__name__', str(item)))}"]
    return list(_NOUNS.get(tp, (getattr(tp, "__name__", str(tp)),)))


def accepted(tp: Any) -> str:
    """What values the annotation ``tp`` takes, in words: ``'auto', 'pluto' or 'original'``."""
    words = _alternatives(tp)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _plain(text: str) -> str:
    """``text`` with the characters reST reads as markup escaped (none of today's descriptions has one)."""
    return _MARKUP.sub(r"\\\1", text)


def option_entries(cls: type) -> list[tuple[str, str, str, str]]:
    """``(name, accepted values, default, description)`` of each field of the options class ``cls``."""
    hints = typing.get_type_hints(cls)
    docs = option_docs(cls)
    out = []
    for f in fields(cls):
        default = f.default if f.default is not MISSING else None
        out.append((f.name, accepted(hints[f.name]), repr(default), docs.get(f.name, "")))
    return out


def options_text(cls: type, title: str, *, indent: str = "") -> str:
    """A paragraph ``title`` and a definition list of the options of ``cls``: readable as plain text, valid
    reST.  ``indent`` prefixes every line (a docstring's indentation)."""
    lines = [f"{title}:", ""]
    for name, accepts, default, doc in option_entries(cls):
        lines.append(f"{name} (default {_plain(default)}; {_plain(accepts)})")
        lines += textwrap.wrap(_plain(doc) or "(undocumented)", WIDTH - len(indent), initial_indent="    ",
                               subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(indent + line if line else "" for line in lines) + "\n"


def targets_by_options(names: Iterable[str]) -> list[tuple[type, list[str]]]:
    """The targets ``names`` grouped by their options class, in the order of first appearance."""
    groups: dict[type, list[str]] = {}
    for name in names:
        groups.setdefault(get_target(name).options_class, []).append(name)
    return list(groups.items())


def target_options_text(names: Iterable[str], *, indent: str = "") -> str:
    """:func:`options_text` for each options class of the targets ``names``."""
    parts = []
    for cls, targets in targets_by_options(names):
        which = " and ".join(f"'{t}'" for t in targets)
        noun = "targets" if len(targets) > 1 else "target"
        title = f"Options of the {which} {noun} ({cls.__module__}.{cls.__qualname__})"
        parts.append(options_text(cls, title, indent=indent))
    return "\n".join(parts)
