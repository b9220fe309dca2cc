"""``polytri plot FILE.py[:NAME] -o out.png``: draw a program's iteration space and dependence graph.

The iteration-space picture is a 2-D slice of one statement's domain for small parameter values
(``--param N=8``; 8 by default): the two innermost iterators (or ``--axes t,i``), the others fixed
(``--fix t=2``; the middle of their range by default) and named in the title.  It shows the dependences
between the points of the slice and the schedule ``pt.compile`` chooses for the cpu target, as the title
says: its tiles outlined and numbered in execution order, or, untiled, the points numbered in execution
order (``--schedule pluto`` draws Pluto's schedule tiled with ``--tile-size``, 4 by default, whatever the
compiler chooses).  The dependence graph shows the statements, their flow, anti and output dependences,
and the fusion groups of the same schedule.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from ..errors import OptionError
from ..schedule.pluto import FUSION_POLICIES
from .space import SCHEDULES

PICTURE_TILE = 4
"""Tile side of ``--schedule pluto`` (or ``auto``) pictures without ``--tile-size``: small, to show several
tiles at the default parameter values."""

log = logging.getLogger("polytri.plot")


def _pairs(items: list[str], what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            try:
                out[key.strip()] = int(value)
            except ValueError:
                raise OptionError(f"{what} {part!r}: expected NAME=INTEGER, like {what} N=8") from None
            if not sep or not key.strip():
                raise OptionError(f"{what} {part!r}: expected NAME=INTEGER, like {what} N=8")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``polytri plot``."""
    parser.add_argument("spec", metavar="FILE.py[:NAME]", help="the program, as for `polytri compile`")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the picture to write; the suffix picks the format (.png, .pdf, .svg)")
    parser.add_argument("--what", choices=("both", "space", "graph"), default="both",
                        help="the iteration space, the dependence graph, or both side by side (default)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a parameter value (repeat, or comma-separate); missing ones are 8")
    parser.add_argument("--statement", default=None, help="the statement to draw (default: the first of the "
                                                          "deepest ones)")
    parser.add_argument("--axes", default=None, metavar="OUTER,INNER",
                        help="the two iterators to draw (default: the statement's two innermost)")
    parser.add_argument("--fix", action="append", default=[], metavar="ITER=VALUE",
                        help="value of an iterator that is not drawn (default: the middle of its range)")
    parser.add_argument("--schedule", choices=SCHEDULES, default="compiled",
                        help="the schedule drawn: 'compiled' (default), what pt.compile chooses for the cpu target "
                             "with the options below; or the compile option's 'pluto', 'auto', 'original', "
                             "tiled as the options below say whatever the compiler would do")
    parser.add_argument("--fuse", choices=FUSION_POLICIES, default=None,
                        help="fusion policy (default: the compiler's, 'smart')")
    parser.add_argument("--tile-size", type=int, default=None,
                        help="tile side for every band dimension (default: the compiler's model for the compiled "
                             f"schedule, {PICTURE_TILE} for the others)")
    parser.add_argument("--no-tile", action="store_true", help="draw the untiled schedule: points numbered in "
                                                               "execution order")
    parser.add_argument("--deps", default="flow", metavar="KINDS",
                        help="dependence kinds drawn as arrows: flow, anti, output, comma-separated (default flow)")
    parser.add_argument("--dpi", type=int, default=150, help="resolution of raster formats (default 150)")


def _check_output(path: str) -> None:
    """The picture can be written: a format matplotlib writes, in a folder that exists."""
    from matplotlib.figure import Figure
    formats = Figure().canvas.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix not in formats:
        raise OptionError(f"-o {path}: the picture's format is taken from its suffix, and {suffix or 'no suffix'!r} "
                          f"is not one matplotlib writes; use one of {', '.join(sorted(formats))}")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise OptionError(f"-o {path}: the folder {folder!r} does not exist")


def _schedule_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of :func:`~polytri.plot.plot_program` that pick the schedule: for ``compiled``, the
    compile options the flags give (none by default: pt.compile's defaults)."""
    if args.schedule != "compiled":
        return dict(schedule=args.schedule, fuse=args.fuse or "smart", tile=not args.no_tile,
                    tile_size=args.tile_size or PICTURE_TILE)
    options: dict[str, Any] = {}
    if args.fuse is not None:
        options["fuse"] = args.fuse
    if args.no_tile:
        options["tile"] = False
    if args.tile_size is not None:
        options["tile_size"] = args.tile_size
    return dict(schedule="compiled", options=options)


def run(args: argparse.Namespace) -> int:
    """Load the program, draw, save; print the path written."""
    import matplotlib
    matplotlib.use("Agg")  # files only: no display needed
    from ..tools.loader import load_program
    from .api import plot_program

    if args.tile_size is not None and args.tile_size < 1:
        raise OptionError(f"--tile-size must be a positive integer, got {args.tile_size}")
    _check_output(args.output)
    name, program = load_program(args.spec)
    options = dict(params=_pairs(args.param, "--param"), statement=args.statement,
                   axes=[a.strip() for a in args.axes.split(",")] if args.axes else None,
                   fixed=_pairs(args.fix, "--fix"), kinds=[k.strip() for k in args.deps.split(",") if k.strip()],
                   **_schedule_arguments(args))
    if args.what == "graph":
        options = {k: options[k] for k in ("schedule", "fuse", "tile", "tile_size", "options") if k in options}
    log.info("drawing %s", name)
    path = plot_program(program, args.output, what=args.what, dpi=args.dpi, **options)
    print(f"wrote {path}")
    return 0
