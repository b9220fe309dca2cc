"""Drawing with matplotlib: the iteration-space slice (points, dependences, tiles) and the dependence graph
(an arc diagram with fusion groups).  Both draw into a given ``Axes`` so they can be combined."""

from __future__ import annotations

from typing import Any

from .graph import GraphData
from .space import SpaceData

#: Colours of the dependence kinds, shared by both pictures.
KIND_COLORS = {"flow": "#1f5fbf", "anti": "#d9731a", "output": "#6b6b6b"}
TILE_COLORS = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99", "#8dd3c7", "#bebada",
               "#80b1d3", "#fccde5", "#d9d9d9", "#ccebc5")


def _params_text(params: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _draw_space_marks(data: SpaceData, ax: Any) -> None:
    """Tile polygons, points, dependence arrows, then tile numbers (or, untiled, each point's number)."""
    from matplotlib.patches import FancyArrowPatch, Polygon

    for tile in data.tiles:
        colour = TILE_COLORS[(tile.wave - 1) % len(TILE_COLORS)]
        ax.add_patch(Polygon(tile.polygon, closed=True, facecolor=colour, edgecolor="#333333",
                             linewidth=1.4, alpha=0.55, zorder=1, joinstyle="round"))
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


def _space_legend(data: SpaceData) -> list[Any]:
    """Legend entries: one per dependence kind drawn, then the tiles (and waves) or the instances."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    kinds = sorted({(a.kind, a.via is not None) for a in data.arrows})
    for kind, via in kinds:
        label = f"{kind} dependence" + (" through another statement" if via else "")
        handles.append(Line2D([], [], color=KIND_COLORS[kind], linestyle="--" if via else "-", label=label))
    if not data.tiles:
        handles.append(Line2D([], [], color="black", marker="o", linestyle="", markersize=4,
                              label="instance, numbered in execution order"))
        return handles
    what = "tile, numbered in execution order"
    handles.append(Patch(facecolor=TILE_COLORS[0], edgecolor="#333333", alpha=0.55, label=what))
    if data.waves:
        handles.append(Patch(facecolor=TILE_COLORS[0], edgecolor="#333333", alpha=0.55, hatch="",
                             label="one colour: one wave of tiles that may run in parallel"))
    return handles


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
    sched = data.schedule.origin
    sizes = [strip.size for strip in data.strips]
    if sizes:
        sched += f", tile size {sizes[0]}" if len(set(sizes)) == 1 else f", tiles {' x '.join(map(str, sizes))}"
    sched += ", as pt.compile chose it" if data.compiled else " (asked for; pt.compile may choose another)"
    return (f"{data.program}: {st.name}[{its}]   ({_params_text(data.params)})\n"
            f"{st.name}: {st.text()}\nschedule: {sched}")


def draw_space(data: SpaceData, ax: Any) -> None:
    """Points, dependence arrows, tile outlines and execution numbers of a slice, into ``ax``."""
    _draw_space_marks(data, ax)
    handles = _space_legend(data)
    _space_axes(data, ax)
    ax.set_title(_space_title(data), fontsize=10)
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1, fontsize=8,
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
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=8, frameon=False, ncol=1)
    texts = "\n".join(f"{s.name}: {s.text()}" for s in data.statements)
    ax.set_title(f"{data.program}: statement dependence graph, fusion groups\n"
                 f"schedule: {data.schedule.origin}; forward arcs above, backward below\n{texts}",
                 fontsize=9)
