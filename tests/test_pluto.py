"""The Pluto-style scheduler (polytri/schedule/pluto.py): golden schedules of classic kernels, compared as
exact isl maps with Pluto's published results, fusion policies, bands, parallel flags and the report.

Every golden program is also compiled with its Pluto schedule and compared with ``pt.reference``.
"""

from __future__ import annotations

import itertools
import warnings

import islpy as isl
import numpy as np
import pytest
import sympy

import polytri as pt
from polytri.ir import to_program
from polytri.ir.affine import evaluate
from polytri.ir.program import Program, params_prefix
from polytri.schedule.dependences import Dependences, compute_dependences
from polytri.schedule.legality import is_legal
from polytri.schedule.pluto import SchedulingError, pluto_schedule
from polytri.schedule.schedule import Schedule
from polytri.suite import build_fdtd_2d, build_jacobi_1d, build_jacobi_2d, build_seidel_2d, copy_args


# -- helpers ------------------------------------------------------------------------------------------
def schedule_of(p: pt.Program, fuse: str = "smart") -> tuple[Program, Dependences, Schedule]:
    prog = to_program(p)
    deps = compute_dependences(prog)
    return prog, deps, pluto_schedule(prog, deps, fuse=fuse)


def expected(prog: Program, text: str) -> isl.UnionMap:
    """``text`` restricted to the program's domain and context (as the scheduler's maps are)."""
    return isl.UnionMap(text).intersect_domain(prog.domain).intersect_params(prog.context)


def rows_map(prog: Program, s: Schedule, order: list[int] | None = None) -> isl.UnionMap:
    """The schedule rebuilt from its per-statement row texts (``Schedule.rows``), dimensions in ``order``."""
    order = list(range(s.ndim)) if order is None else order
    union = isl.UnionMap.empty(prog.context.get_space())
    for st in prog.statements:
        dims = ", ".join(s.rows[d][st.name] for d in order)
        m = isl.Map(f"{params_prefix(prog.params)}{{ {st.name}[{', '.join(st.iterators)}] -> [{dims}] }}")
        union = union.union(isl.UnionMap.from_map(m.intersect_domain(st.domain)))
    return union.intersect_params(prog.context)


def band_orders(s: Schedule) -> list[list[int]]:
    """Every order of the time dimensions that only permutes rows inside permutable bands."""
    orders = []
    for perms in itertools.product(*(itertools.permutations(b.dims) for b in s.bands)):
        order = list(range(s.ndim))
        for b, perm in zip(s.bands, perms):
            order[b.first:b.first + b.width] = perm
        orders.append(order)
    return orders


def describe(prog: Program, s: Schedule) -> str:
    return "\n".join(f"  {st.name}: ({', '.join(r[st.name] for r in s.rows)})" for st in prog.statements) + \
        f"\n  bands {s.bands}, scalar {s.scalar}, parallel {s.parallel}\n  map {s.map}"


def assert_golden(p: pt.Program, text: str, *, fuse: str = "smart", exact_order: bool = True) -> Schedule:
    """The Pluto schedule of ``p`` is exactly ``text`` (as an isl map on the domain).  With
    ``exact_order=False`` the rows of each permutable band may come in any order (the order inside a band
    is a free, locality-driven choice; the hyperplanes are Pluto's result)."""
    prog, deps, s = schedule_of(p, fuse)
    want = expected(prog, text)
    assert s.origin == "pluto"
    assert len(s.rows) == s.ndim == len(s.scalar)
    assert rows_map(prog, s).is_equal(s.map), f"Schedule.rows disagree with Schedule.map:\n{describe(prog, s)}"
    if exact_order:
        assert s.map.is_equal(want), f"\ngot:\n{describe(prog, s)}\nwant: {want}"
    else:
        assert any(rows_map(prog, s, order).is_equal(want) for order in band_orders(s)), \
            f"\nno order of the band rows gives the expected schedule\ngot:\n{describe(prog, s)}\nwant: {want}"
    assert is_legal(s.map, deps)
    assert_bands_permutable(s, deps)
    return s


def time_deps(s: Schedule, deps: Dependences) -> isl.Map | None:
    t = deps.all.apply_domain(s.map).apply_range(s.map)
    maps: list[isl.Map] = []
    t.foreach_map(maps.append)
    assert len(maps) <= 1
    return maps[0] if maps else None


def _relation(n: int, cond: str) -> isl.Map:
    a = ", ".join(f"a{d}" for d in range(n))
    b = ", ".join(f"b{d}" for d in range(n))
    return isl.Map(f"{{ [{a}] -> [{b}] : {cond} }}")


def assert_bands_permutable(s: Schedule, deps: Dependences) -> None:
    """Pluto's guarantee: every dependence not carried before a band has a non-negative distance along
    each of the band's rows (so the band can be tiled and its rows permuted)."""
    td = time_deps(s, deps)
    if td is None:
        return
    n = s.ndim
    for b in s.bands:
        assert not any(s.scalar[d] for d in b.dims), f"band {b} contains a scalar dimension"
        prefix = " and ".join([f"a{d} = b{d}" for d in range(b.first)] or ["0 = 0"])
        live = td.intersect(_relation(n, prefix).align_params(td.get_space()))
        for d in b.dims:
            back = live.intersect(_relation(n, f"b{d} < a{d}").align_params(td.get_space()))
            assert back.is_empty(), f"band {b}: a dependence goes backwards along dimension {d}: {back}"


def coefficient(prog: Program, s: Schedule, dim: int, stmt: str, iterator: str) -> int:
    """Coefficient of ``iterator`` in row ``dim`` of statement ``stmt``."""
    st = prog.statement(stmt)
    aff = isl.Aff(f"{params_prefix(prog.params)}{{ {stmt}[{', '.join(st.iterators)}] -> [({s.rows[dim][stmt]})] }}")
    return aff.get_coefficient_val(isl.dim_type.in_, st.iterators.index(iterator)).to_python()


def execution_order(m: isl.UnionMap) -> isl.UnionMap:
    """Pairs of instances ``a -> b`` that ``m`` runs with ``a`` strictly before ``b`` (independent of
    redundant dimensions)."""
    return m.lex_lt_union_map(m)


def inputs(prog: Program, sizes: dict[str, int], seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    args: dict = {}
    for a in prog.arrays:
        args[a.name] = rng.uniform(-1.0, 1.0, tuple(evaluate(e, sizes) for e in a.shape)).astype(a.dtype)
    for sc in prog.scalars:
        args[sc.name] = np.dtype(sc.dtype).type(0.75)
    args.update({q: v for q, v in sizes.items() if q in prog.params})
    return args


def assert_compiled_matches_reference(p: pt.Program, sizes: dict[str, int], *, fuse: str = "smart") -> None:
    """``pt.compile`` with the Pluto schedule (no fallback) computes what ``pt.reference`` computes."""
    prog, _, s = schedule_of(p, fuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to the original order would warn
        k = pt.compile(p, options={"schedule": "pluto", "fuse": fuse})
    assert k.schedule.is_equal(s.map), "the kernel does not use the Pluto schedule"
    for seed in (0, 1):
        args = inputs(prog, sizes, seed)
        want = copy_args(args)
        got = copy_args(args)
        pt.reference(p, **want)
        k(**got)
        changed = False
        for a in prog.arrays:
            np.testing.assert_allclose(got[a.name], want[a.name], rtol=1e-12, atol=1e-12,
                                       err_msg=f"{prog.name} (fuse={fuse}): array {a.name} with {sizes}")
            changed |= not np.array_equal(want[a.name], args[a.name])
        assert changed, f"{prog.name}: the reference changed nothing with {sizes}"


# -- programs -----------------------------------------------------------------------------------------
def matmul() -> pt.Program:
    p = pt.Program("matmul", params=["NI", "NJ", "NK"])
    p.array("C", ("NI", "NJ"))
    p.array("A", ("NI", "NK"))
    p.array("B", ("NK", "NJ"))
    with p.loop("i", 0, "NI"):
        with p.loop("j", 0, "NJ"):
            with p.loop("k", 0, "NK"):
                p.assign("C[i, j] += A[i, k] * B[k, j]")
    return p


# the suite's PolyBench programs are the classic cases of Pluto's published results
jacobi_1d = build_jacobi_1d
jacobi_2d = build_jacobi_2d
seidel_2d = build_seidel_2d


fdtd_2d = build_fdtd_2d


def shift(*, far: bool) -> pt.Program:
    """S1 consumes S0's value of the same iteration; S0 consumes S1's of one (and, with ``far``, two)
    iterations before.  Distances along j: S0 -> S1 is the shift s of S1, S1 -> S0 is 1 - s (and 2 - s).
    With ``far`` the bound ``w`` is minimal (1) only for s = 1, which leaves S1(j) -> S0(j + 1) at
    distance 0: S1 goes first at equal times, Pluto's ``(i, j, 1) / (i, j + 1, 0)``.  Without it s = 0
    and s = 1 tie (w = 1) and the lexicographic minimum takes the smaller shift."""
    p = pt.Program("shift", params=["N", "M"])
    p.array("A", ("N", "M"))
    p.array("B", ("N", "M"))
    with p.loop("i", 0, "N"):
        with p.loop("j", 2, "M"):
            p.assign("A[i, j] = 0.5 * B[i, j - 1]" + (" + 0.25 * B[i, j - 2]" if far else ""))
            p.assign("B[i, j] = 0.5 * A[i, j] + 1.0")
    return p


def independent_nests(depth2: int) -> pt.Program:
    """Two loop nests with no dependence between them: a 2-D one, then a ``depth2``-D one."""
    p = pt.Program("independent", params=["N", "M"])
    p.array("A", ("N", "M"))
    p.array("B", ("N", "M"))
    p.array("x", ("N",))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "M"):
            p.assign("A[i, j] = 2.0 * A[i, j] + 1.0")
    with p.loop("i", 0, "N"):
        if depth2 == 2:
            with p.loop("j", 0, "M"):
                p.assign("B[i, j] = B[i, j] * B[i, j]")
        else:
            p.assign("x[i] = 3.0 * x[i] - 1.0")
    return p


def producer_consumer() -> pt.Program:
    """B = f(A) then C = g(B) elementwise: fusable without any shift."""
    p = pt.Program("prodcons", params=["N"])
    for a in "ABC":
        p.array(a, ("N", "N"))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("B[i, j] = 2.0 * A[i, j]")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("C[i, j] = B[i, j] + 1.0")
    return p


# -- golden schedules ---------------------------------------------------------------------------------
MATMUL = "[NI, NJ, NK] -> { S0[i, j, k] -> [i, j, k] }"
JACOBI_1D = "[T, N] -> { S0[t, i] -> [t, 2t + i, 0]; S1[t, i] -> [t, 2t + i + 1, 1] }"
JACOBI_2D = "[T, N] -> { S0[t, i, j] -> [t, 2t + i, 2t + j, 0]; S1[t, i, j] -> [t, 2t + i + 1, 2t + j + 1, 1] }"
SEIDEL_2D = "[T, N] -> { S0[t, i, j] -> [t, t + i, 2t + i + j] }"
SHIFT = "[N, M] -> { S0[i, j] -> [i, j, 1]; S1[i, j] -> [i, j + 1, 0] }"
SHIFT_TIE = "[N, M] -> { S0[i, j] -> [i, j, 0]; S1[i, j] -> [i, j, 1] }"

SIZES = {
    "matmul": dict(NI=5, NJ=6, NK=7),
    "jacobi_1d": dict(T=3, N=11),
    "jacobi_2d": dict(T=3, N=7),
    "seidel_2d": dict(T=3, N=7),
    "fdtd_2d": dict(T=3, NX=5, NY=6),
    "shift": dict(N=4, M=9),
}


def test_matmul_is_i_j_k_in_one_band() -> None:
    # Pluto's hyperplanes are i, j, k in one permutable band; the order inside the band is the locality
    # pass's choice (Pluto's intra-tile optimization also moves k out of the innermost position).
    s = assert_golden(matmul(), MATMUL, exact_order=False)
    assert s.bands == (type(s.bands[0])(0, 3),)
    assert s.scalar == (False, False, False)


def test_matmul_parallel_flags() -> None:
    prog, deps, s = schedule_of(matmul())
    row_of = {s.rows[d]["S0"]: d for d in range(s.ndim)}
    assert set(row_of) == {"i", "j", "k"}
    assert s.parallel[row_of["i"]] and s.parallel[row_of["j"]]
    assert not s.parallel[row_of["k"]]
    assert [b.dims for b in s.bands] == [range(0, 3)]


def test_jacobi_1d_is_skewed_and_shifted() -> None:
    s = assert_golden(jacobi_1d(), JACOBI_1D)
    assert [(b.first, b.width) for b in s.bands] == [(0, 2)]
    assert s.scalar == (False, False, True)


def test_jacobi_2d_is_skewed_and_shifted() -> None:
    s = assert_golden(jacobi_2d(), JACOBI_2D)
    assert [(b.first, b.width) for b in s.bands] == [(0, 3)]
    assert s.scalar == (False, False, False, True)


def test_seidel_2d_is_skewed() -> None:
    s = assert_golden(seidel_2d(), SEIDEL_2D)
    assert [(b.first, b.width) for b in s.bands] == [(0, 3)]
    assert s.parallel == (False, False, False)  # a wavefront would be needed: no dimension is parallel


def test_fdtd_2d_has_one_skewed_permutable_band() -> None:
    prog, deps, s = schedule_of(fdtd_2d())
    assert is_legal(s.map, deps)
    assert_bands_permutable(s, deps)
    assert rows_map(prog, s).is_equal(s.map)
    band = s.bands[0]
    assert (band.first, band.width) == (0, 3), describe(prog, s)  # one outer band over (t, i, j): all fused
    assert not any(s.scalar[:3])
    assert all(s.scalar[3:]), describe(prog, s)
    for st in prog.statements:
        assert s.rows[0][st.name] == "t", describe(prog, s)
        if len(st.iterators) == 3:  # the band spans (t, i, j): full rank
            m = sympy.Matrix([[coefficient(prog, s, d, st.name, it) for it in st.iterators] for d in band.dims])
            assert m.rank() == 3, describe(prog, s)
    skewed = [st.name for st in prog.statements
              if all(coefficient(prog, s, d, st.name, "t") > 0 for d in (1, 2))]
    assert skewed, f"no statement is skewed by t in both inner band rows:\n{describe(prog, s)}"


def test_shift_orders_the_consumer_first() -> None:
    s = assert_golden(shift(far=True), SHIFT)
    assert [(b.first, b.width) for b in s.bands] == [(0, 2)]
    assert s.parallel[0] and not s.parallel[1]


def test_shift_tie_takes_the_smaller_shift() -> None:
    # Without B[i, j - 2] the shift 0 and the shift 1 both bound the distances by 1: lexmin keeps 0.
    assert_golden(shift(far=False), SHIFT_TIE)


GOLDEN = {
    "matmul": (matmul, "smart"),
    "jacobi_1d": (jacobi_1d, "smart"),
    "jacobi_2d": (jacobi_2d, "smart"),
    "seidel_2d": (seidel_2d, "smart"),
    "fdtd_2d": (fdtd_2d, "smart"),
    "shift": (lambda: shift(far=True), "smart"),
}


@pytest.mark.cc
@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_cases_compile_to_the_reference(name: str) -> None:
    build, fuse = GOLDEN[name]
    assert_compiled_matches_reference(build(), SIZES[name], fuse=fuse)


@pytest.mark.cc
def test_shift_tie_compiles_to_the_reference() -> None:
    assert_compiled_matches_reference(shift(far=False), SIZES["shift"])


# -- fusion policies ----------------------------------------------------------------------------------
def test_fuse_none_distributes_independent_nests() -> None:
    prog, deps, s = schedule_of(independent_nests(2), fuse="none")
    assert s.scalar[0] and s.rows[0] == {"S0": "0", "S1": "1"}, describe(prog, s)
    assert s.bands and s.bands[0].first == 1
    want = expected(prog, "[N, M] -> { S0[i, j] -> [0, i, j]; S1[i, j] -> [1, i, j] }")
    assert execution_order(s.map).is_equal(execution_order(want)), describe(prog, s)
    assert all(s.parallel[d] for d in s.bands[0].dims)


def test_fuse_max_fuses_independent_nests_into_one_band() -> None:
    s = assert_golden(independent_nests(2), "[N, M] -> { S0[i, j] -> [i, j, 0]; S1[i, j] -> [i, j, 1] }",
                      fuse="max")
    assert [(b.first, b.width) for b in s.bands] == [(0, 2)]


def test_fuse_max_fuses_nests_of_different_depths() -> None:
    prog, deps, s = schedule_of(independent_nests(1), fuse="max")
    assert not s.scalar[0] and s.rows[0] == {"S0": "i", "S1": "i"}, describe(prog, s)
    assert is_legal(s.map, deps)


def test_fuse_smart_separates_nests_of_different_depths() -> None:
    prog, deps, s = schedule_of(independent_nests(1), fuse="smart")
    assert s.scalar[0] and s.rows[0] == {"S0": "0", "S1": "1"}, describe(prog, s)
    want = expected(prog, "[N, M] -> { S0[i, j] -> [0, i, j]; S1[i] -> [1, i, 0] }")
    assert execution_order(s.map).is_equal(execution_order(want)), describe(prog, s)
    assert any(d.kind == "fusion-cut" and d.data["reason"] == "smart-depths" and d.data["groups"] == (("S0",), ("S1",))
               for d in s.decisions), s.decisions


def test_fuse_smart_fuses_nests_of_equal_depth() -> None:
    assert_golden(independent_nests(2), "[N, M] -> { S0[i, j] -> [i, j, 0]; S1[i, j] -> [i, j, 1] }",
                  fuse="smart")


@pytest.mark.parametrize("fuse", ["smart", "max"])
def test_producer_consumer_is_fused(fuse: str) -> None:
    assert_golden(producer_consumer(), "[N] -> { S0[i, j] -> [i, j, 0]; S1[i, j] -> [i, j, 1] }", fuse=fuse)


def test_producer_consumer_is_distributed_without_fusion() -> None:
    prog, deps, s = schedule_of(producer_consumer(), fuse="none")
    want = expected(prog, "[N] -> { S0[i, j] -> [0, i, j]; S1[i, j] -> [1, i, j] }")
    assert execution_order(s.map).is_equal(execution_order(want)), describe(prog, s)
    assert is_legal(s.map, deps)


@pytest.mark.cc
@pytest.mark.parametrize("fuse", ["smart", "max", "none"])
@pytest.mark.parametrize("build", [lambda: independent_nests(1), lambda: independent_nests(2), producer_consumer],
                         ids=["depths-2-1", "depths-2-2", "producer-consumer"])
def test_fusion_policies_compile_to_the_reference(build, fuse: str) -> None:
    assert_compiled_matches_reference(build(), dict(N=5, M=6), fuse=fuse)


def diagonal_swap() -> pt.Program:
    """S0 gathers a row into the diagonal, S1 writes the transposed element.  The first hyperplane found
    is ``S0: i, S1: j`` (it bounds the distance of ``S1[i, j] -> S0[j, i]`` by 0); after the band both
    statements are full rank while ``S0[a, a] -> S1[a, a]`` and ``S1[a, b] -> S0[b, a]`` (a < b) remain at
    distance 0: a cycle between the statements that no cut separates.  A linearly dependent row (for
    example ``S0: 2i``, ``S1: i + j + 1``) carries one direction and lets a cut order the other.
    (Found by the fuzz of test_schedule_properties.py; the scheduler used to raise SchedulingError.)"""
    p = pt.Program("diag", params=["N"])
    p.array("A", ("N", "N"))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign("A[i, i] = A[i, j]")
            p.assign("A[j, i] = 1.0")
    return p


def test_scheduler_breaks_a_zero_distance_cycle_after_full_rank() -> None:
    prog, deps, s = schedule_of(diagonal_swap())
    assert is_legal(s.map, deps), describe(prog, s)
    assert_bands_permutable(s, deps)
    assert rows_map(prog, s).is_equal(s.map)
    assert s.map.is_injective()


@pytest.mark.cc
def test_zero_distance_cycle_compiles_to_the_reference() -> None:
    assert_compiled_matches_reference(diagonal_swap(), {"N": 6})


def test_unknown_fusion_policy_is_rejected() -> None:
    prog = to_program(matmul())
    with pytest.raises(SchedulingError, match="unknown fusion policy 'maximal'"):
        pluto_schedule(prog, compute_dependences(prog), fuse="maximal")


# -- the report ---------------------------------------------------------------------------------------
@pytest.mark.cc
def test_explain_shows_the_band() -> None:
    k = pt.compile(matmul())  # the default options keep Pluto's schedule for matmul (no parallelism lost)
    text = k.explain()
    assert "schedule (pluto)" in text
    assert "band 0 (permutable)" in text
    assert "permutable" in text and "parallel" in text and "sequential" in text
    for dim in range(3):
        assert f"t{dim}: loop" in text


def test_constant_sizes_beyond_the_default_distance_bound_still_schedule() -> None:
    """A reduction over 2048 constant iterations has dependence distances up to 2047: the bounding
    function's constant must be allowed to exceed them (it was capped at 256: 'no hyperplane')."""
    import warnings

    import polytri as pt
    p = pt.Program("red", params=[])
    p.array("S", (2048,), "float32")
    p.array("X", (2048, 2048), "float32")
    with p.loop("i", 0, 2048):
        p.assign("S[i] = 0")
    with p.loop("i", 0, 2048), p.loop("r", 0, 2048):
        p.assign("S[i] = S[i] + X[i, r]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = pt.compile(p, target="cpu", options={"schedule": "pluto"})
    assert k.schedule_info.origin == "pluto"
