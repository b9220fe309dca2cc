"""Pictures: the data behind them (points, dependences, tiles, graph) and the files ``polytri plot`` writes."""

from __future__ import annotations

from pathlib import Path

import pytest

import polytri as pt
from polytri.errors import OptionError
from polytri.plot import dependence_graph, iteration_space, picture_schedule, plot_program
from polytri.plot.geometry import area, clip, contains
from polytri.schedule.dependences import compute_dependences
from polytri.suite import KERNELS
from polytri.tools.cli import main
from polytri.tools.loader import load_program

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(spec: str) -> pt.Program:
    return load_program(str(EXAMPLES / spec))[1]


def overlap(p: tuple, q: tuple) -> float:
    """Area of the intersection of two counter-clockwise convex polygons."""
    poly = list(p)
    n = len(q)
    for k in range(n):
        (x0, y0), (x1, y1) = q[k], q[(k + 1) % n]
        a, b = (y1 - y0), -(x1 - x0)  # outside of a ccw edge: a*x + b*y > c
        poly = clip(poly, a, b, a * x0 + b * y0)
        if len(poly) < 3:
            return 0.0
    return abs(area(poly))


def check_tiles(data) -> None:
    """The tiles partition the slice; each polygon holds its own points and no other's; polygons do not
    overlap; tiles are numbered in execution order; no dependence goes to an earlier tile."""
    owner = {p: t.number for t in data.tiles for p in t.points}
    assert sorted(owner) == sorted(data.points) and len(owner) == sum(len(t.points) for t in data.tiles)
    for t in data.tiles:
        for p in data.points:
            assert contains(t.polygon, p) == (owner[p] == t.number), (t.number, p)
    for i, t in enumerate(data.tiles):
        for u in data.tiles[i + 1:]:
            assert overlap(t.polygon, u.polygon) < 1e-9, (t.number, u.number)
    assert [t.coords for t in data.tiles] == sorted(t.coords for t in data.tiles)
    first = {t.number: min(data.time[p] for p in t.points) for t in data.tiles}
    assert [first[n] for n in sorted(first)] == sorted(first.values())
    for a in data.arrows:
        assert owner[a.source] <= owner[a.target], a
        assert data.time[a.source] < data.time[a.target], a


def test_seidel_1d_slice_dependences_and_skewed_tiles():
    data = iteration_space(example("stencils.py:seidel_1d"), params={"T": 6, "N": 12})
    assert data.axes == ("i", "t") and data.fixed == {} and data.statement.name == "S0"
    assert sorted(data.points) == sorted((i, t) for t in range(6) for i in range(1, 11))
    deltas = {(a.target[0] - a.source[0], a.target[1] - a.source[1]) for a in data.arrows}
    assert deltas == {(1, 0), (0, 1), (-1, 1)}  # A[i-1] this step; A[i], A[i+1] the step before
    assert all(a.kind == "flow" and a.via is None for a in data.arrows)
    assert data.schedule.origin == "pluto+tiled" and data.tile_size == 4
    assert len(data.tiles) > 4
    check_tiles(data)
    assert data.waves  # the wavefront lets some tiles of the slice run together
    waves = {}
    for t in data.tiles:
        waves.setdefault(t.wave, []).append(t.number)
    assert all(ns == list(range(ns[0], ns[0] + len(ns))) for ns in waves.values())  # one wave, consecutive


def test_jacobi_flow_through_the_copy_and_fixed_outer_iterator():
    data = iteration_space(example("jacobi_1d.py"), params={"T": 5, "N": 10})
    assert {a.via for a in data.arrows} == {"S1"}  # S0 -> S1 (B) -> S0 (A)
    deltas = {(a.target[0] - a.source[0], a.target[1] - a.source[1]) for a in data.arrows}
    assert deltas == {(-1, 1), (0, 1), (1, 1)}
    check_tiles(data)
    j2d = iteration_space(example("stencils.py:jacobi_2d"), params={"T": 4, "N": 9}, axes=("t", "i"),
                          fixed={"j": 3}, tile_size=3)
    assert j2d.axes == ("i", "t") and j2d.fixed == {"j": 3} and j2d.tile_size == 3
    check_tiles(j2d)
    default = iteration_space(example("stencils.py:jacobi_2d"), params={"T": 4, "N": 9})
    assert default.axes == ("j", "i") and default.fixed == {"t": 1}  # middle of 0..3


def test_untiled_and_original_order():
    data = iteration_space(example("matmul.py"), params={"M": 3, "N": 4, "K": 5}, schedule="original")
    assert data.tiles == () and data.strips == () and data.fixed == {"i": 1}
    assert data.points == tuple((k, j) for j in range(4) for k in range(5))  # j outer, k inner
    assert [data.order[p] for p in data.points] == list(range(1, 21))
    tiled = iteration_space(example("matmul.py"), params={"M": 3, "N": 8, "K": 8}, tile_size=4)
    assert len(tiled.tiles) == 4
    check_tiles(tiled)


def test_every_suite_kernel_slices_consistently():
    """The tile invariants on the whole suite at small sizes (2-D slices of the deepest statement)."""
    for name in ("gemm", "lu", "cholesky", "fdtd_2d", "heat_3d", "syrk", "trisolv"):
        prog = KERNELS[name].build()
        data = iteration_space(prog, params={p: 6 for p in prog.build().params}, tile_size=2)
        if data.tiles:
            check_tiles(data)


def test_errors():
    prog = example("stencils.py:jacobi_2d")
    with pytest.raises(OptionError, match="has no parameter M"):
        iteration_space(prog, params={"M": 3})
    with pytest.raises(OptionError, match="pick two distinct iterators of S0"):
        iteration_space(prog, axes=("t", "k"))
    with pytest.raises(OptionError, match="no iterator k to fix"):
        iteration_space(prog, fixed={"k": 1})
    with pytest.raises(OptionError, match="unknown dependence kind 'input'"):
        iteration_space(prog, kinds=("input",))
    with pytest.raises(OptionError, match="is empty"):
        iteration_space(prog, params={"T": 3, "N": 6}, fixed={"t": 5})


def test_dependence_graph_and_fusion_groups():
    prog = example("jacobi_1d.py")
    deps = compute_dependences(prog)
    g = dependence_graph(prog, deps, picture_schedule(prog, deps)[0])
    assert [(e.source, e.target, e.kind, e.arrays) for e in g.edges if e.kind == "flow"] == [
        ("S0", "S1", "flow", ("B",)), ("S1", "S0", "flow", ("A",))]
    assert [(gr.statements, gr.shared_loops) for gr in g.groups] == [(("S0", "S1"), 2)]
    p = pt.Program("two_nests", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = 1.0")
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[N - 1 - i]")
    prog = p.build()
    deps = compute_dependences(prog)
    for schedule in ("original", "pluto"):
        sched, _ = picture_schedule(prog, deps, schedule=schedule, fuse="none")
        g = dependence_graph(prog, deps, sched)
        assert [(gr.statements, gr.shared_loops) for gr in g.groups] == [(("S0",), 1), (("S1",), 1)]
        assert [(e.source, e.target, e.kind) for e in g.edges] == [("S0", "S1", "flow")]


def test_plot_files(tmp_path):
    out = plot_program(example("jacobi_1d.py"), str(tmp_path / "j.png"), params={"T": 4, "N": 8})
    data = Path(out).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    svg = plot_program(example("matmul.py"), str(tmp_path / "m.svg"), what="graph")
    assert "nest 1 (S0): 3 loops" in Path(svg).read_text()
    with pytest.raises(OptionError, match="what must be"):
        plot_program(example("matmul.py"), str(tmp_path / "x.png"), what="nothing")


def test_plot_command(tmp_path, capsys):
    target = tmp_path / "seidel.svg"
    assert main(["plot", f"{EXAMPLES / 'stencils.py'}:seidel_1d", "-o", str(target), "--param", "T=4,N=8",
                 "--what", "space", "--schedule", "pluto"]) == 0
    assert capsys.readouterr().out == f"wrote {target}\n"
    text = target.read_text()
    assert "seidel_1d: S0[t, i]" in text and "T=4, N=8" in text and "tile size 4" in text
    assert main(["plot", str(EXAMPLES / "matmul.py"), "-o", str(tmp_path / "x.png"), "--param", "N"]) == 1
    assert "expected NAME=INTEGER" in capsys.readouterr().err
    assert main(["plot", str(EXAMPLES / "matmul.py"), "-o", str(tmp_path / "x.png"), "--axes", "i,q"]) == 1
    assert "pick two distinct iterators" in capsys.readouterr().err


def _tile_prefix(umap, ndim: int):
    """The maps of a union map with every output dimension from ``ndim`` on projected out."""
    import islpy as isl
    maps = []
    umap.foreach_map(maps.append)
    return [m.project_out(isl.dim_type.out, ndim, m.dim(isl.dim_type.out) - ndim) for m in maps]


@pytest.mark.cc
def test_the_picture_draws_the_schedule_pt_compile_chose_for_jacobi_1d():
    prog = example("jacobi_1d.py")
    k = pt.compile(prog, target="cpu")
    data = iteration_space(prog, params={"T": 8, "N": 8}, schedule="compiled")
    assert data.compiled and data.schedule.origin == k.schedule_info.origin
    assert data.schedule.map.is_equal(k.schedule)


@pytest.mark.cc
def test_the_picture_of_a_tiled_choice_has_the_compiled_tiles():
    """seidel_1d: pt.compile tiles (the wavefront over tiles is its only parallelism); the picture's tiles,
    drawn with the band's own point loops, are the compiled schedule's tiles, in the same order."""
    prog = example("stencils.py:seidel_1d")
    k = pt.compile(prog, target="cpu")
    data = iteration_space(prog, params={"T": 6, "N": 12}, schedule="compiled")
    assert data.schedule.origin == "pluto+tiled" and data.compiled
    info = k.schedule_info
    assert info.origin == "pluto+tiled" and info.tiled   # its map is the tiled one
    assert info.alternative is not None and info.alternative.condition == "tile-count"
    last = max(strip.tile for strip in data.strips) + 1
    compiled, drawn = _tile_prefix(k.schedule, last), _tile_prefix(data.schedule.map, last)
    assert len(compiled) == len(drawn) and all(a.is_equal(b) for a, b in zip(compiled, drawn))
    check_tiles(data)


def test_polytri_plot_draws_the_compiled_schedule_by_default(tmp_path):
    from polytri.plot.command import _schedule_arguments
    from polytri.tools.cli import build_parser

    def parsed(*flags):
        return _schedule_arguments(build_parser().parse_args(["plot", "x.py", "-o", "x.png", *flags]))

    assert parsed() == {"schedule": "compiled", "options": {}}
    assert parsed("--tile-size", "8", "--fuse", "max") == {"schedule": "compiled",
                                                           "options": {"tile_size": 8, "fuse": "max"}}
    assert parsed("--no-tile") == {"schedule": "compiled", "options": {"tile": False}}
    assert parsed("--schedule", "pluto") == {"schedule": "pluto", "fuse": "smart", "tile": True, "tile_size": 4}
    target = tmp_path / "jacobi.svg"
    assert main(["plot", str(EXAMPLES / "jacobi_1d.py"), "-o", str(target), "--what", "space"]) == 0
    # the input order, with its time tiles where two run side by side (a version of the kernel)
    assert "schedule: original/time-tiled by tile count, as pt.compile chose it" in target.read_text()


# -- the pictures themselves ---------------------------------------------------------------------------
def _drawn(fig):
    """``fig`` laid out and drawn (Agg), with its renderer."""
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def test_tiles_and_waves_have_distinct_legend_swatches_and_neighbours_distinct_fills():
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    from polytri.plot.draw import TILE_EDGE, space_legend, tile_colours
    data = iteration_space(example("stencils.py:jacobi_2d"), params={"T": 8, "N": 10}, schedule="pluto")
    assert data.waves
    entries = dict((label.split(" ")[0], handle) for handle, label in space_legend(data))
    tile, waves = entries["tile"], entries["one"]
    assert isinstance(tile, Patch) and to_rgba(tile.get_facecolor()) == to_rgba("white")
    assert to_rgba(tile.get_edgecolor()) == to_rgba(TILE_EDGE)
    assert isinstance(waves, tuple) and len({p.get_facecolor() for p in waves}) == len(waves) > 1
    assert all(p.get_facecolor() != tile.get_facecolor() for p in waves)
    fills = tile_colours(data)
    by_wave: dict[int, list] = {}
    for t, colour in zip(data.tiles, fills):
        by_wave.setdefault(t.wave, []).append(colour)
    assert any(len(c) > 1 for c in by_wave.values())
    for colours in by_wave.values():  # consecutive tiles of one wave: another shade
        assert all(a != b for a, b in zip(colours, colours[1:]))
    firsts = [c[0] for c in by_wave.values()]
    assert len(set(firsts)) == len(firsts)  # one colour per wave (fewer waves here than colours)


@pytest.mark.parametrize(("spec", "params"), [("stencils.py:seidel_1d", {"T": 3, "N": 12}),
                                              ("stencils.py:jacobi_2d", {"T": 8, "N": 10})])
def test_the_legend_is_below_the_axis_labels_not_over_them(spec, params):
    from polytri.plot import plot_iteration_space
    fig = plot_iteration_space(example(spec), params=params, schedule="pluto")
    renderer = _drawn(fig)
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    xaxis = ax.xaxis.get_tightbbox(renderer)  # tick labels and the x label
    assert legend.y1 < xaxis.y0, (legend, xaxis)
    assert not legend.overlaps(ax.get_window_extent(renderer))
    assert legend.y0 >= 0  # inside the figure
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_the_dependence_graph_is_drawn_at_one_scale_and_its_figure_grows_with_the_statements():
    import matplotlib.pyplot as plt

    from polytri.plot import plot_dependence_graph
    from polytri.plot.draw import GRAPH_SCALE

    def measured(prog):
        fig = plot_dependence_graph(prog)
        _drawn(fig)
        ax = fig.axes[0]
        x0, x1 = ax.get_xlim()
        scale = ax.get_position().width * fig.get_figwidth() / (x1 - x0)  # inches per unit of the layout
        size = tuple(fig.get_size_inches())
        plt.close(fig)
        return scale, size

    def chain(n):
        p = pt.Program(f"chain{n}", params=["N"])
        for k in range(n):
            p.array(f"A{k}", ("N",), "float64")
        with p.loop("i", 1, "N"):
            for k in range(1, n):
                p.assign(f"A{k}[i] = A{k - 1}[i] + A{k}[i - 1]")
        return p

    one, many = measured(example("stencils.py:seidel_1d")), measured(chain(8))
    assert one[0] == pytest.approx(GRAPH_SCALE, rel=0.15) and many[0] == pytest.approx(GRAPH_SCALE, rel=0.15)
    assert one[1][0] < 6 and one[1][1] < 6  # one statement: a small picture, not a blown-up box
    assert many[1][0] > one[1][0] + 4  # 7 statements: wider


def test_both_pictures_keep_the_graph_at_its_scale(tmp_path, monkeypatch):
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from polytri.plot.draw import GRAPH_SCALE
    seen = {}
    savefig = Figure.savefig

    def spy(fig, *args, **kw):
        _drawn(fig)
        right = fig.axes[1]
        x0, x1 = right.get_xlim()
        seen["scale"] = right.get_position().width * fig.get_figwidth() / (x1 - x0)
        return savefig(fig, *args, **kw)

    matplotlib.use("Agg")
    monkeypatch.setattr(Figure, "savefig", spy)
    plot_program(example("stencils.py:seidel_1d"), str(tmp_path / "s.png"), params={"T": 4, "N": 8})
    plt.close("all")
    assert seen["scale"] == pytest.approx(GRAPH_SCALE, rel=0.2)
