"""The plotting entry points: figures from programs."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import OptionError
from ..ir.builder import to_program
from ..schedule.dependences import compute_dependences
from .draw import draw_graph, draw_space, fit_graph
from .graph import dependence_graph
from .space import iteration_space, picture_schedule

log = logging.getLogger("polytri.plot")

#: Size in inches of the iteration-space picture (alone, or the left column of both).
SPACE_SIZE = (6.4, 7.0)
#: Inches around the dependence graph's own size (:func:`~polytri.plot.draw.fit_graph`) in its figure.
GRAPH_MARGIN = 0.6


def _pyplot() -> Any:
    import matplotlib.pyplot as plt  # imported late: matplotlib is slow to import
    return plt


def plot_iteration_space(program: object, *, ax: Any = None, params: Mapping[str, int] | None = None,
                         statement: str | None = None, axes: Sequence[str] | None = None,
                         fixed: Mapping[str, int] | None = None, schedule: str = "pluto", fuse: str = "smart",
                         tile: bool = True, tile_size: int | None = 4,
                         kinds: Sequence[str] = ("flow",), options: Mapping[str, Any] | None = None) -> Any:
    """Draw a 2-D slice of a statement's iteration space (see :func:`polytri.plot.iteration_space` for
    the arguments) into ``ax`` or a new figure; return the figure."""
    data = iteration_space(program, params=params, statement=statement, axes=axes, fixed=fixed,
                           schedule=schedule, fuse=fuse, tile=tile, tile_size=tile_size, kinds=kinds,
                           options=options)
    if ax is None:
        fig, ax = _pyplot().subplots(figsize=SPACE_SIZE, layout="constrained")
    draw_space(data, ax)
    return ax.figure


def plot_dependence_graph(program: object, *, ax: Any = None, schedule: str = "pluto", fuse: str = "smart",
                          tile: bool = True, tile_size: int | None = 4, options: Mapping[str, Any] | None = None
                          ) -> Any:
    """Draw the statement dependence graph with the fusion groups of the schedule into ``ax`` or a new
    figure; return the figure."""
    prog = to_program(program)
    deps = compute_dependences(prog)
    sched, _ = picture_schedule(prog, deps, schedule=schedule, fuse=fuse, tile=tile, tile_size=tile_size,
                                options=options)
    data = dependence_graph(prog, deps, sched)
    alone = ax is None
    if alone:
        fig, ax = _pyplot().subplots(layout="constrained")
    draw_graph(data, ax)
    if alone:
        width, height = fit_graph(ax)
        ax.figure.set_size_inches(width + GRAPH_MARGIN, height + GRAPH_MARGIN)
    return ax.figure


def plot_program(program: object, path: str, *, what: str = "both", dpi: int = 150, **options: Any) -> str:
    """Save the pictures of ``program`` to ``path`` (``.png``, ``.pdf``, ``.svg``: by matplotlib):
    ``what`` is ``space``, ``graph`` or ``both`` (side by side); ``options`` go to
    :func:`plot_iteration_space` (``schedule``, ``fuse``, ``tile``, ``tile_size`` and ``options`` also to the
    graph; ``schedule="compiled"`` draws what ``pt.compile`` chose)."""
    plt = _pyplot()
    graph_opts = {k: options[k] for k in ("schedule", "fuse", "tile", "tile_size", "options") if k in options}
    if what == "space":
        fig = plot_iteration_space(program, **options)
    elif what == "graph":
        fig = plot_dependence_graph(program, **graph_opts)
    elif what == "both":
        fig, (left, right) = plt.subplots(1, 2, figsize=(SPACE_SIZE[0] + 5.0, SPACE_SIZE[1]), layout="constrained")
        plot_iteration_space(program, ax=left, **options)
        plot_dependence_graph(program, ax=right, **graph_opts)
        # the graph's column as wide as the graph needs at its scale (top-aligned, no taller than it needs)
        width, height = fit_graph(right)
        right.get_subplotspec().get_gridspec().set_width_ratios([SPACE_SIZE[0], width])
        fig.set_size_inches(SPACE_SIZE[0] + width + GRAPH_MARGIN, max(SPACE_SIZE[1], height + GRAPH_MARGIN))
    else:
        raise OptionError(f"what must be 'space', 'graph' or 'both', got {what!r}")
    import matplotlib
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # SVG text stays text (editable, searchable)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    log.info("wrote %s", path)
    return path
