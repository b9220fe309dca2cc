"""Property tests of the scheduler: random affine programs (1 to 3 statements, loop depth 1 to 3, an
optional time loop, triangular bounds, small constant offsets, reductions) get legal Pluto schedules with
permutable bands under every fusion policy, and compile to kernels that compute what ``pt.reference``
computes.  ``make fuzz`` runs the long variant (marked slow)."""

from __future__ import annotations

import warnings

import islpy as isl
import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import polytri as pt
from polytri.ir import to_program
from polytri.schedule.dependences import Dependences, compute_dependences
from polytri.schedule.legality import is_legal
from polytri.schedule.pluto import pluto_schedule
from polytri.schedule.schedule import Schedule

ITERS = ("i", "j", "k")
ARRAYS = ("A", "B", "C")
#: Arrays have extent N + 4 in every dimension; loops run within [2, N + 2) and subscripts add an offset
#: in [-2, 2] (or are constants in [0, 4]), so every access is in bounds.
OFFSETS = st.integers(-2, 2)
COEFFS = st.sampled_from(["0.5", "0.25", "-0.5", "0.75"])
FUSE = ("smart", "max", "none")


# -- random programs ----------------------------------------------------------------------------------
@st.composite
def subscripts(draw, rank: int, level: int) -> list[str]:
    """``rank`` subscripts over the first ``level`` iterators: iterator + offset, or a constant."""
    out = []
    for _ in range(rank):
        which = draw(st.integers(-1, level - 1))
        off = draw(OFFSETS)
        if which < 0:
            out.append(str(off + 2))
        else:
            out.append(ITERS[which] if off == 0 else f"{ITERS[which]} {'+' if off > 0 else '-'} {abs(off)}")
    return out


@st.composite
def statements(draw, ranks: dict[str, int], level: int) -> str:
    def access(name: str) -> str:
        return f"{name}[{', '.join(draw(subscripts(ranks[name], level)))}]"

    target = access(draw(st.sampled_from(ARRAYS)))
    op = draw(st.sampled_from(["=", "+="]))
    terms = [f"{draw(COEFFS)} * {access(draw(st.sampled_from(ARRAYS)))}"
             for _ in range(draw(st.integers(1, 3)))]
    return f"{target} {op} {' + '.join(terms)} + {draw(st.sampled_from(['0.125', '1.0']))}"


@st.composite
def bounds(draw, level: int) -> tuple[str, str]:
    """Bounds of the loop at ``level``: full, or triangular in the enclosing iterator."""
    if level == 0:
        return "2", "N + 2"
    outer = ITERS[level - 1]
    return draw(st.sampled_from([("2", "N + 2"), ("2", f"{outer} + 1"), (outer, "N + 2"), ("2", outer)]))


@st.composite
def programs(draw) -> list[tuple]:
    """A program as a list of builder operations: ``("loop", var, lo, hi)``, ``("end",)``,
    ``("assign", text)``, ``("array", name, rank)``, ``("time",)``."""
    ranks = {a: draw(st.integers(1, 3)) for a in ARRAYS}
    ops: list[tuple] = [("array", a, r) for a, r in ranks.items()]
    timed = draw(st.booleans())
    if timed:
        ops.append(("loop", "t", "0", "T"))
    n_stmts = draw(st.integers(1, 3))
    nests: list[list[int]] = []  # statement levels (1-based loop depth) per nest
    for s in range(n_stmts):
        level = draw(st.integers(1, 3))
        if s > 0 and draw(st.booleans()):
            nests[-1].append(level)
        else:
            nests.append([level])
    for levels in nests:
        depth = max(levels)
        # statements of one nest: each at its level, before or after the deeper loops (textual order kept)
        placed = [(lvl, draw(st.booleans())) for lvl in levels]
        ops += _nest(draw, ranks, placed, 0, depth)
    if timed:
        ops.append(("end",))
    return ops


def _nest(draw, ranks: dict[str, int], placed: list[tuple[int, bool]], level: int, depth: int) -> list[tuple]:
    """Loops ``level`` .. ``depth - 1`` holding the statements ``placed`` (level, before-the-inner-loop)."""
    lo, hi = draw(bounds(level))
    ops: list[tuple] = [("loop", ITERS[level], lo, hi)]
    here = level + 1
    inner = [p for p in placed if p[0] > here]
    ops += [("assign", draw(statements(ranks, here))) for lvl, before in placed if lvl == here and before]
    if inner:
        ops += _nest(draw, ranks, inner, here, depth)
    ops += [("assign", draw(statements(ranks, here))) for lvl, before in placed if lvl == here and not before]
    ops.append(("end",))
    return ops


def build(ops: list[tuple]) -> tuple[pt.Program, str]:
    """The program, and the equivalent builder code (for the failure report)."""
    timed = any(op[0] == "loop" and op[1] == "t" for op in ops)
    params = ["T", "N"] if timed else ["N"]
    p = pt.Program("random", params=params)
    code = [f"p = pt.Program('random', params={params})"]
    stack = []
    indent = ""
    for op in ops:
        if op[0] == "array":
            shape = ("N + 4",) * op[2]
            p.array(op[1], shape)
            code.append(f"p.array({op[1]!r}, {shape})")
        elif op[0] == "loop":
            cm = p.loop(op[1], op[2], op[3])
            cm.__enter__()
            stack.append(cm)
            code.append(f"{indent}with p.loop({op[1]!r}, {op[2]!r}, {op[3]!r}):")
            indent += "    "
        elif op[0] == "end":
            stack.pop().__exit__(None, None, None)
            indent = indent[:-4]
        else:
            p.assign(op[1])
            code.append(f"{indent}p.assign({op[1]!r})")
    assert not stack
    return p, "\n".join(code)


# -- checks -------------------------------------------------------------------------------------------
def _relation(n: int, cond: str) -> isl.Map:
    a = ", ".join(f"a{d}" for d in range(n))
    b = ", ".join(f"b{d}" for d in range(n))
    return isl.Map(f"{{ [{a}] -> [{b}] : {cond} }}")


def assert_bands_permutable(s: Schedule, deps: Dependences) -> None:
    """Every dependence not carried before a band is non-negative along each of the band's rows."""
    t = deps.all.apply_domain(s.map).apply_range(s.map)
    maps: list[isl.Map] = []
    t.foreach_map(maps.append)
    if not maps:
        return
    (td,) = maps
    for b in s.bands:
        prefix = " and ".join([f"a{d} = b{d}" for d in range(b.first)] or ["0 = 0"])
        live = td.intersect(_relation(s.ndim, prefix).align_params(td.get_space()))
        for d in b.dims:
            back = live.intersect(_relation(s.ndim, f"b{d} < a{d}").align_params(td.get_space()))
            assert back.is_empty(), f"band {b}: dependences go backwards along dimension {d}: {back}"


def check(ops: list[tuple], n: int, t: int) -> None:
    p, code = build(ops)
    note(code)
    prog = to_program(p)
    deps = compute_dependences(prog)
    sizes = {"N": n, "T": t} if "T" in prog.params else {"N": n}
    rng = np.random.default_rng(n + 10 * t)
    args = {a.name: rng.uniform(-1.0, 1.0, (n + 4,) * len(a.shape)) for a in prog.arrays}
    want = {k: v.copy() for k, v in args.items()}
    pt.reference(p, **want, **sizes)
    for fuse in FUSE:
        s = pluto_schedule(prog, deps, fuse=fuse)
        note(f"fuse={fuse}: {s.map}\nbands {s.bands}")
        assert is_legal(s.map, deps), f"fuse={fuse}: illegal schedule {s.map}"
        assert s.map.domain().is_equal(prog.domain)
        assert_bands_permutable(s, deps)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback to the original order
            k = pt.compile(p, options={"schedule": "pluto", "fuse": fuse})
        assert k.schedule.is_equal(s.map)
        got = {k_: v.copy() for k_, v in args.items()}
        k(**got, **sizes)
        for name in args:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12,
                                       err_msg=f"fuse={fuse}: array {name} with {sizes}\n{code}")


SIZES = st.tuples(st.integers(5, 7), st.integers(2, 3))


@pytest.mark.cc
@settings(derandomize=True, database=None, max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), SIZES)
def test_random_programs_schedule_legally_and_match_the_reference(ops: list[tuple], size: tuple[int, int]) -> None:
    check(ops, *size)


@pytest.mark.cc
@pytest.mark.slow
@settings(derandomize=True, database=None, max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), SIZES)
def test_random_programs_fuzz(ops: list[tuple], size: tuple[int, int]) -> None:
    check(ops, *size)


def test_generator_covers_the_features() -> None:
    """The strategy really produces what the property claims to test (guards against a vacuous fuzz)."""
    seen: set[str] = set()

    @settings(derandomize=True, database=None, max_examples=60, deadline=None)
    @given(programs())
    def collect(ops: list[tuple]) -> None:
        assigns = [op[1] for op in ops if op[0] == "assign"]
        loops = [op for op in ops if op[0] == "loop"]
        if any(op[1] == "t" for op in loops):
            seen.add("time")
        if any("+=" in a for a in assigns):
            seen.add("reduction")
        if any(op[2] in ITERS or any(it in op[3] for it in ITERS) for op in loops):
            seen.add("triangular")
        if len(assigns) == 3:
            seen.add("three statements")
        stack: list[str] = []
        deepest = 0
        for op in ops:
            if op[0] == "loop":
                stack.append(op[1])
            elif op[0] == "end":
                stack.pop()
            deepest = max(deepest, sum(v != "t" for v in stack))
        if deepest == 3:
            seen.add("depth 3")
        build(ops)  # every generated program is accepted by the builder (bounds proved by verify later)

    collect()
    assert seen == {"time", "reduction", "triangular", "three statements", "depth 3"}, seen
