"""Drawing with matplotlib: the iteration-space slice (points, dependences, tiles) and the dependence graph
(an arc diagram with fusion groups).  Both draw into a given ``Axes`` so they can be combined."""

from __future__ import annotations

import math
from typing import Any

from .graph import GraphData
from .space import SpaceData

#: Colours of the dependence kinds, shared by both pictures.
KIND_COLORS = {"flow": "#1f5fbf", "anti": "#d9731a", "output": "#6b6b6b"}
TILE_COLORS = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99", "#8dd3c7", "#bebada",
               "#80b1d3", "#fccde5", "#d9d9d9", "#ccebc5")


#: Outline of every tile: solid and dark, so neighbouring tiles of one colour stay apart.
TILE_EDGE = "#222222"
#: Opacity of the tile fills (the outlines are opaque).
TILE_ALPHA = 0.55
#: Scale of the dependence graph (inches per unit of its layout, where statements are 2 units apart).
GRAPH_SCALE = 0.8
#: Statement texts in titles are wrapped at this many characters.
TITLE_WIDTH = 80


def _fill(colour: str, shade: int) -> tuple[float, float, float, float]:
    """``colour`` with the tile fills' opacity; ``shade`` 1 mixes it half with white (every other tile of
    one wave, so that tiles of one colour stay apart even where their outline is hidden by points)."""
    from matplotlib.colors import to_rgb
    r, g, b = to_rgb(colour)
    if shade:
        r, g, b = (1 + r) / 2, (1 + g) / 2, (1 + b) / 2
    return (r, g, b, TILE_ALPHA)


def tile_colours(data: SpaceData) -> list[tuple[float, float, float, float]]:
    """The fill of each tile of ``data.tiles``: one colour per wave (per tile without waves), the tiles of
    a wave alternately full and light."""
    rank: dict[int, int] = {}
    out = []
    for tile in data.tiles:
        k = rank[tile.wave] = rank.get(tile.wave, -1) + 1
        out.append(_fill(TILE_COLORS[(tile.wave - 1) % len(TILE_COLORS)], k % 2))
    return out


def _wrap(line: str) -> list[str]:
    """``line`` cut at spaces outside subscripts (``A[i, j - 1]`` stays whole) into lines of at most
    :data:`TITLE_WIDTH` characters where the words allow; continuations indented."""
    words, depth, start = [], 0, 0
    for k, ch in enumerate(line):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            words.append(line[start:k])
            start = k + 1
    words.append(line[start:])
    out = [words[0]]
    for word in words[1:]:
        if len(out[-1]) + 1 + len(word) > TITLE_WIDTH:
            out.append("    " + word)
        else:
            out[-1] += " " + word
    return out


def _wrapped(lines: list[str]) -> str:
    """The lines, each cut by :func:`_wrap`."""
    return "\n".join(part for line in lines for part in _wrap(line))


def _params_text(params: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _draw_space_marks(data: SpaceData, ax: Any) -> None:
    """Tile polygons, points, dependence arrows, then tile numbers (or, untiled, each point's number)."""
    from matplotlib.patches import FancyArrowPatch, Polygon

    for tile, colour in zip(data.tiles, tile_colours(data)):
        ax.add_patch(Polygon(tile.polygon, closed=True, facecolor=colour, edgecolor=TILE_EDGE,
                             linewidth=2.0, zorder=1, joinstyle="round"))
    ax.scatter([p[0] for p in data.points], [p[1] for p in data.points], s=14, color="black", zorder=3)
    for arrow in data.arrows:
        style = "--" if arrow.via else "-"
        ax.add_patch(FancyArrowPatch(arrow.source, arrow.target, arrowstyle="-|>", mutation_scale=9,
                                     color=KIND_COLORS[arrow.kind], linestyle=style, linewidth=0.9,
                                     shrinkA=3.5, shrinkB=3.5, zorder=2, alpha=0.85))
    for tile in data.tiles:
        cx = sum(p[0] for p in tile.points) / len(tile.points)
        cy = sum(p[1] for p in tile.points) / len(tile.points)
        ax.text(cx, cy, str(tile.number), ha="center", va="center", fontsize=11, fontweight="bold", zorder=5,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "#333333", "alpha": 0.9})
    if not data.tiles and len(data.points) <= 400:
        order = data.order
        for p in data.points:
            ax.annotate(str(order[p]), p, xytext=(3, 3), textcoords="offset points", fontsize=7, zorder=4,
                        color="#333333")


def space_legend(data: SpaceData) -> list[tuple[Any, str]]:
    """Legend entries ``(handle, label)``: one per dependence kind drawn, then the tiles (an outline) and
    their waves (a tuple of swatches, one colour per wave), or the instances."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    entries: list[tuple[Any, str]] = []
    kinds = sorted({(a.kind, a.via is not None) for a in data.arrows})
    for kind, via in kinds:
        label = f"{kind} dependence" + (" through another statement" if via else "")
        entries.append((Line2D([], [], color=KIND_COLORS[kind], linestyle="--" if via else "-"), label))
    if not data.tiles:
        entries.append((Line2D([], [], color="black", marker="o", linestyle="", markersize=4),
                        "instance, numbered in execution order"))
        return entries
    entries.append((Patch(facecolor="white", edgecolor=TILE_EDGE, linewidth=2.0),
                    "tile (outlined), numbered in execution order"))
    if data.waves:
        swatches = tuple(Patch(facecolor=_fill(c, 0), edgecolor=TILE_EDGE, linewidth=1.0) for c in TILE_COLORS[:3])
        entries.append((swatches, "one colour: one wave of tiles that may run in parallel (every other tile "
                                  "lighter)"))
    return entries


def _legend(ax: Any, entries: list[tuple[Any, str]], **kw: Any) -> Any:
    """``ax.legend`` of ``(handle, label)`` entries; a tuple of patches is drawn as swatches side by side."""
    from matplotlib.legend_handler import HandlerTuple
    return ax.legend(handles=[h for h, _ in entries], labels=[label for _, label in entries],
                     handler_map={tuple: HandlerTuple(ndivide=None, pad=0.0)}, **kw)


def _space_axes(data: SpaceData, ax: Any) -> None:
    """Axis labels, integer ticks, equal aspect, limits around the points and the grid."""
    from matplotlib.ticker import MaxNLocator

    xs = [p[0] for p in data.points]
    ys = [p[1] for p in data.points]
    x_it, y_it = data.axes
    ax.set_xlabel(f"{x_it} (inner iterator)" if y_it else x_it)
    ax.set_ylabel(f"{y_it} (outer iterator)" if y_it else "")
    if not y_it:
        ax.set_yticks([])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_aspect("equal")
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    ax.set_ylim(min(ys) - 0.8, max(ys) + 0.8)
    ax.grid(True, color="#e4e4e4", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)


def _space_title(data: SpaceData) -> str:
    """Program, statement instance (fixed iterators shown with their value), parameters and schedule."""
    st = data.statement
    its = ", ".join(f"{i}={data.fixed[i]}" if i in data.fixed else i for i in st.iterators)
    sched = data.schedule.label
    sizes = [strip.size for strip in data.strips]
    if sizes:
        sched += f", tile size {sizes[0]}" if len(set(sizes)) == 1 else f", tiles {' x '.join(map(str, sizes))}"
    sched += ", as pt.compile chose it" if data.compiled else " (asked for; pt.compile may choose another)"
    return _wrapped([f"{data.program}: {st.name}[{its}]   ({_params_text(data.params)})", f"{st.name}: {st.text()}",
                     f"schedule: {sched}"])


#: Points between the bottom of the iteration space's axes and its legend: room for the tick labels and
#: the x label (10-point text, ticks and pads).
LEGEND_GAP = 44.0


def draw_space(data: SpaceData, ax: Any) -> None:
    """Points, dependence arrows, tile outlines and execution numbers of a slice, into ``ax``."""
    from matplotlib.transforms import offset_copy
    _draw_space_marks(data, ax)
    entries = space_legend(data)
    _space_axes(data, ax)
    ax.set_title(_space_title(data), fontsize=10)
    # below the x axis's tick labels and label, whatever the height of the axes: an offset in points
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-LEGEND_GAP, units="points")
    _legend(ax, entries, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, ncol=1, fontsize=8,
            frameon=False)


def draw_graph(data: GraphData, ax: Any) -> None:
    """The statements left to right in schedule order, dependence arcs (forward above, backward below,
    self-dependences as loops, arrays in the labels) and a coloured box per fusion group, into ``ax``."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

    pos = {s.name: (2.0 * k, 0.0) for k, s in enumerate(data.statements)}
    rads = {"flow": 0.55, "anti": 0.4, "output": 0.25}
    chords = {"flow": 0.56, "anti": 0.4, "output": 0.24}
    top, bottom = 1.0, -0.8
    handles: list[Any] = []
    for number, group in enumerate(data.groups, start=1):
        x0 = min(pos[n][0] for n in group.statements) - 0.6
        x1 = max(pos[n][0] for n in group.statements) + 0.6
        colour = TILE_COLORS[(number - 1) % len(TILE_COLORS)]
        ax.add_patch(FancyBboxPatch((x0, -0.4), x1 - x0, 0.8, boxstyle="round,pad=0.05,rounding_size=0.2",
                                    facecolor=colour, alpha=0.5, edgecolor="#333333", linewidth=1.0, zorder=0))
        plural = "s" if group.shared_loops != 1 else ""
        loops = (f"{group.shared_loops} loop{plural}" if len(group.statements) == 1
                 else f"{group.shared_loops} shared loop{plural}")
        handles.append(Patch(facecolor=colour, alpha=0.5, edgecolor="#333333",
                             label=f"nest {number} ({', '.join(group.statements)}): {loops}"))
    for name, (x, y) in pos.items():
        ax.text(x, y, name, ha="center", va="center", fontsize=11, fontweight="bold", zorder=4,
                bbox={"boxstyle": "round,pad=0.35", "facecolor": "white", "edgecolor": "black"})
    self_labels: dict[str, list[tuple[str, str]]] = {}
    for e in data.edges:
        (x0, _), (x1, _) = pos[e.source], pos[e.target]
        colour = KIND_COLORS[e.kind]
        label = ", ".join(e.arrays)
        if e.source == e.target:  # nested loops above the node, one per kind; arrays listed above them
            c = chords[e.kind]
            ax.add_patch(FancyArrowPatch((x0 - c / 2, 0.32), (x0 + c / 2, 0.32), connectionstyle="arc3,rad=-1.6",
                                         arrowstyle="-|>", mutation_scale=8, color=colour, linewidth=1.1,
                                         shrinkA=0, shrinkB=0, zorder=3))
            self_labels.setdefault(e.source, []).append((f"{e.kind}: {label}", colour))
            continue
        forward = x1 > x0
        y = 0.3 if forward else -0.3
        ax.add_patch(FancyArrowPatch((x0, y), (x1, y), connectionstyle=f"arc3,rad={-rads[e.kind]}",
                                     arrowstyle="-|>", mutation_scale=10, color=colour, linewidth=1.2,
                                     shrinkA=4, shrinkB=4, zorder=2))
        height = rads[e.kind] * abs(x1 - x0) / 2  # apex of the arc
        ly = y + height if forward else y - height
        ax.text((x0 + x1) / 2, ly, label, fontsize=8, color=colour, ha="center", va="center", zorder=3,
                bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.9})
        top, bottom = max(top, ly + 0.3), min(bottom, ly - 0.3)
    for name, labels in self_labels.items():
        x = pos[name][0]
        for k, (text, colour) in enumerate(reversed(labels)):
            ly = 0.32 + 0.8 * chords["flow"] + 0.05 + 0.16 * k
            ax.text(x, ly, text, fontsize=7, color=colour, ha="center", va="bottom", zorder=3)
            top = max(top, ly + 0.35)
    ax.set_xlim(-1.2, 2.0 * (len(pos) - 1) + 1.2)
    ax.set_ylim(bottom - 0.2, top)
    ax.set_aspect("equal")
    ax.axis("off")
    kinds = sorted({e.kind for e in data.edges}, key=list(KIND_COLORS).index)
    handles += [Line2D([], [], color=KIND_COLORS[k], label=f"{k} dependence") for k in kinds]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=8, frameon=False,
              ncol=max(1, min(3, math.ceil(len(handles) / 6))))
    ax.set_title(_wrapped([f"{data.program}: statement dependence graph, fusion groups",
                           f"schedule: {data.schedule.label}; forward arcs above, backward below"]
                          + [f"{s.name}: {s.text()}" for s in data.statements]), fontsize=9)
    ax.set_anchor("N")


def fit_graph(ax: Any) -> tuple[float, float]:
    """The size in inches the dependence graph drawn in ``ax`` needs at :data:`GRAPH_SCALE`: its layout,
    widened to its title or legend where they are wider (the x limits then widened to match), with its
    title and legend above and below.  A figure (or column) of that size draws every graph at one scale,
    so a graph of one statement is not blown up to the figure's size."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    extras = [a.get_window_extent(renderer) for a in (ax.title, ax.get_legend()) if a is not None]
    width = max([GRAPH_SCALE * (x1 - x0)] + [e.width / fig.dpi for e in extras])
    grow = width / GRAPH_SCALE - (x1 - x0)
    ax.set_xlim(x0 - grow / 2, x1 + grow / 2)
    height = GRAPH_SCALE * (y1 - y0) + sum(e.height / fig.dpi for e in extras)
    return width, height
