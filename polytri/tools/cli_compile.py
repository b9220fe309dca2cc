"""``polytri compile FILE.py[:NAME]``: compile a program from a file and print what was asked for.

Sections (``--show``, comma-separated or repeated):

* ``c``: the generated C as a reader wants it: the kernel's function first, then the functions it
  calls (parallel loops, micro-kernels), without the ~150 lines of generic helpers and includes;
* ``c-file``: the whole C file as compiled (``k.source``);
* ``triton``: the generated Triton source (``k.source``) of the GPU targets;
* ``ir``: the program in polytri's canonical text form;
* ``deps``: its exact flow, anti and output dependences;
* ``schedule``: the final schedule, one line per time dimension (loop or scalar, band, parallel), and
  the scheduler's decisions;
* ``explain``: ``k.explain()``, the whole report;
* ``all``: every section the target has.

Without ``--show``: ``c`` for the cpu target, ``triton`` for the GPU targets.  Without ``--target`` the
target is ``cpu``, or ``nvgpu`` when only ``triton`` is asked for.
"""

from __future__ import annotations

import argparse
import ast
import logging
import time
from typing import Any

from ..errors import OptionError

log = logging.getLogger("polytri.cli")

SECTIONS = ("c", "c-file", "triton", "ir", "deps", "schedule", "explain")
GPU_TARGETS = ("nvgpu", "amdgpu")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polytri compile``."""
    parser.add_argument("spec", metavar="FILE.py[:NAME]",
                        help="a Python file defining @pt.kernel functions, Programs or functions returning one; "
                             "NAME picks one when there are several")
    parser.add_argument("--target", choices=("cpu", "nvgpu", "amdgpu"), default=None,
                        help="code generator (default: cpu; nvgpu when only --show triton is asked)")
    parser.add_argument("--show", action="append", default=[], metavar="WHAT",
                        help=f"what to print: {', '.join(SECTIONS)} or all; comma-separated or repeated "
                             f"(default: the generated source)")
    parser.add_argument("-O", "--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a compile option, as in pt.compile(options={KEY: VALUE}): -O tile=True -O "
                             "tile_size=32 -O fuse=max; values are Python literals (bare words are strings)")
    parser.add_argument("--list", action="store_true", help="list the programs the file defines and exit")


def parse_value(text: str) -> Any:
    """A Python literal (``True``, ``32``, ``'max'``, ``('-O2',)``); ``true/false/none`` in any case;
    anything else is the string itself."""
    low = text.strip().lower()
    if low in ("true", "false", "none"):
        return {"true": True, "false": False, "none": None}[low]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_options(items: list[str]) -> dict[str, Any]:
    """``["tile=True", "fuse=max"]`` -> ``{"tile": True, "fuse": "max"}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OptionError(f"-O {item!r}: expected KEY=VALUE, like -O tile=True")
        out[key.strip()] = parse_value(value)
    return out


def _asked(items: list[str]) -> list[str]:
    """The words of ``--show``, checked."""
    asked = [w.strip().lower() for item in items for w in item.split(",") if w.strip()]
    for word in asked:
        if word != "all" and word not in SECTIONS:
            raise OptionError(f"--show {word!r}: choose among {', '.join(SECTIONS)} or all")
    return asked


def parse_sections(items: list[str], target: str | None) -> tuple[list[str], str]:
    """The sections to print, in a fixed order, and the target (inferred when ``None``)."""
    asked = _asked(items)
    if target is None:
        target = "nvgpu" if asked and set(asked) == {"triton"} else "cpu"
    code = "c" if target == "cpu" else "triton"
    if not asked:
        return [code], target
    if "all" in asked:
        return ["ir", "deps", "schedule", code], target
    for c in ("c", "c-file"):
        if c in asked and target != "cpu":
            raise OptionError(f"--show {c}: target {target!r} generates Triton, not C; use --show triton or "
                              f"--target cpu")
    if "triton" in asked and target == "cpu":
        raise OptionError("--show triton: the cpu target generates C; use --target nvgpu (or amdgpu)")
    return [s for s in SECTIONS if s in asked], target


def _schedule_text(kernel: Any) -> str:
    from ..runtime.compiled import schedule_lines
    s = kernel.schedule_info
    lines = schedule_lines(s, [st.name for st in kernel.program.statements])
    decisions = getattr(kernel, "decisions", None) or s.decisions  # the kernel's, when it exposes them
    if decisions:
        lines += ["", "decisions:"] + [f"  - {d}" for d in decisions]
    return "\n".join(lines)


def _dependences_text(kernel: Any) -> str:
    """Flow, anti and output dependences, one pair of statements a line, in program order."""
    from ..schedule.schedule import map_text
    names = [st.name for st in kernel.program.statements]
    lines = []
    for kind in ("flow", "anti", "output"):
        m = getattr(kernel.dependences, kind)
        text = ["none"] if m.is_empty() else map_text(m, names)
        lines += [f"{kind + ':':7s} {text[0]}"] + [f"        {t}" for t in text[1:]]
    return "\n".join(lines)


def c_reading_view(source: str, function: str) -> str:
    """``source`` (a cpu kernel's C file) with its function ``function`` first, then the static functions
    it calls, and the generic helpers (includes, min/max, rounding) left out."""
    from ..cpu_codegen.prelude import prelude
    helpers = prelude()
    banner, _, rest = source.partition(helpers)
    start = rest.find(f"\nvoid {function}(")
    if start < 0:  # not the layout this view knows: show the file as it is
        return source
    main, called = rest[start + 1:], rest[:start].strip("\n")
    note = (f"/* ({len(helpers.splitlines())} lines of includes and generic helpers left out: --show c-file "
            f"prints the whole file, as compiled) */")
    return "\n\n".join(part for part in (f"{banner}{main.rstrip()}", called, note) if part)


def render(kernel: Any, sections: list[str]) -> str:
    """The requested sections of a compiled kernel, with a header line each when there are several."""
    from ..ir.textform import program_to_text
    texts = {
        "c": lambda: c_reading_view(kernel.source, f"pt_{kernel.program.name}"),
        "c-file": lambda: kernel.source,
        "triton": lambda: kernel.source,
        "ir": lambda: program_to_text(kernel.program),
        "deps": lambda: _dependences_text(kernel),
        "schedule": lambda: _schedule_text(kernel),
        "explain": lambda: kernel.explain(),
    }
    if len(sections) == 1:
        return texts[sections[0]]().rstrip("\n")
    parts = [f"==== {name} ====\n{texts[name]().rstrip()}" for name in sections]
    return "\n\n".join(parts)


def run(args: argparse.Namespace) -> int:
    """Load, compile and print; a :class:`~polytri.errors.PolytriError` propagates to the caller."""
    from ..compiler import compile as pt_compile
    from .loader import entries, load_module, load_program, split_spec

    if args.list:
        path, _ = split_spec(args.spec)
        for e in entries(load_module(path)):
            print(f"{e.name}\t{e.kind}")
        return 0
    sections, target = parse_sections(args.show, args.target)
    options = parse_options(args.option)
    name, program = load_program(args.spec)
    log.info("compiling %s (%d statements) for %s, options %s", name, len(program.statements), target,
             options or "default")
    t0 = time.perf_counter()
    kernel = pt_compile(program, target=target, options=options)
    log.info("compiled %s in %.2f s", name, time.perf_counter() - t0)
    print(render(kernel, sections))
    return 0
