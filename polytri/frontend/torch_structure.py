"""Kernels shared by segments of the same structure: a model's repeated blocks compile once.

The lowering names a segment's arrays after the graph's nodes (``t_convolution_10``, ``t_in_arg45_1``),
so the programs of two identical blocks differ only in those names and in the program's name.  The
*structural form* of a program renames its arrays by their position, keeping their stems readable
(``a3_t_convolution_padded``: the node name without its digits), and names the program after a digest
of the renamed text.  Two segments with equal structural forms compute the same thing on their own
arrays, so one kernel, compiled from the structural form, serves both (the runtime passes each its
arrays in the same order); :class:`StructureCache` keeps the kernels of one graph's compilation by
structural form.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..ir.builder import ProgramBuilder
from ..ir.program import Program
from ..ir.split_divisions import split_divisions
from ..ir.subscripts import simplify_subscripts
from ..ir.textform import parse_program


@dataclass(frozen=True)
class Structure:
    """A program's structural form and the renaming of its arrays."""

    program: Program
    names: dict[str, str]
    """Each array's name in the original program -> its name in :attr:`program`."""

    def renamed(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """``names`` (arrays of the original program, or others, kept) in the structural form."""
        return tuple(self.names.get(n, n) for n in names)

    def original_text(self, text: str) -> str:
        """``text`` written about the structural form (the kernel's source, a decision) with the arrays
        named as in the original program: what a report of this segment shows.  Only for display: the
        names are found as text (inside identifiers such as ``pt_a3_t_addmm`` too)."""
        if not self.names:
            return text
        back = {v: k for k, v in self.names.items()}
        pattern = re.compile(r"(?<![0-9A-Za-z])(" + "|".join(map(re.escape, sorted(back, key=len, reverse=True)))
                             + r")(?![0-9A-Za-z])")
        return pattern.sub(lambda m: back[m.group(1)], text)

    def original_array(self, name: str) -> str:
        """The original name of array ``name`` of the structural form."""
        return next((k for k, v in self.names.items() if v == name), name)


def structure(program: ProgramBuilder | Program) -> Structure:
    """The structural form of ``program`` (see the module docstring)."""
    text = str(program)
    arrays = [a.name for a in program.arrays]
    names = {name: f"a{k}_{re.sub(r'[0-9]+', '', name).strip('_') or 'v'}" for k, name in enumerate(arrays)}
    if arrays:
        pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(arrays, key=len, reverse=True)) + r")\b")
        text = pattern.sub(lambda m: names[m.group(1)], text)
    head, _, body = text.partition("\n")
    digest = hashlib.sha256(body.encode()).hexdigest()[:12]
    head = re.sub(r"^program \S+", f"program blk_{digest}", head)
    return Structure(split_divisions(simplify_subscripts(parse_program(f"{head}\n{body}"))), names)


class StructureCache:
    """The kernels made so far by ``kernels`` (program, target, options), by structural form: a segment
    whose form was compiled already takes that kernel."""

    def __init__(self, kernels: Callable[[Any, str, dict[str, Any]], Any]):
        self.kernels = kernels
        self.made: dict[tuple[str, str, str], Any] = {}

    def __call__(self, form: Structure, target: str, options: dict[str, Any]) -> Any:
        key = (str(form.program), target, repr(sorted(options.items())))
        if key not in self.made:
            self.made[key] = self.kernels(form.program, target, options)
        return self.made[key]


__all__ = ["Structure", "StructureCache", "structure"]
