"""Random affine programs for property-based testing (hypothesis strategies) and the differential check.

A drawn :class:`ProgramSpec` is plain data: loops (nested, triangular, an optional time loop), several
statements (assignments and ``+=`` reductions) over arrays of mixed dtypes.  It builds a
:class:`polytri.Program`, prints the equivalent builder code for a failure report, makes arguments,
and knows by brute force (Python loops, independent of isl) which statement instances would leave
their arrays.  :func:`check` compiles the program for every target of :data:`TARGETS` under several
option sets and compares each kernel with :func:`polytri.reference`; out-of-bounds sizes must be
rejected identically by all of them, before anything is written.

Requires ``hypothesis`` (a test dependency); nothing else in polytri imports this module.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

import polytri as pt

from ..errors import BoundsError, ParameterBoundsError

#: Targets every random program is compiled for; a GPU target joins by adding its name (and an entry in
#: :data:`OPTIONS`; kernels of other targets are called with the same numpy arguments).
TARGETS = ["cpu", "nvgpu"]

#: Option sets per target: the default, the original order without OpenMP, max fusion with small tiles on
#: two threads with every parallel region open.
#: The C is built with ``-Wall -Wextra -Werror``: generated code must compile warning-free.
OPTIONS: dict[str, list[dict[str, Any]]] = {
    "cpu": [{"cflags": "-Wall -Wextra -Werror"},
            {"schedule": "original", "openmp": False, "simd": False, "cflags": "-Wall -Wextra -Werror"},
            {"schedule": "pluto", "fuse": "max", "tile": True, "tile_size": 2, "threads": 2,
             "min_parallel_work": 0, "cflags": "-Wall -Wextra -Werror"}],
}

ITERS = ("i", "j", "k")
ARRAYS = ("A", "B", "C")
#: Array names drawn besides ``ARRAYS``: each once collided with a name of the generated C.
TRICKY_NAMES = ("threads", "num_threads", "int64_t", "uint16_t", "main")
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
INT_DTYPES = ("int64", "int32", "int8")
#: Relative tolerance of float comparisons per dtype (the C and the reference round identically; the
#: slack only absorbs a different but equally valid libm).
RTOL = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}


@dataclass(frozen=True)
class AccessSpec:
    """``array[index...]`` with each subscript an affine Python/polytri expression text."""

    array: str
    """Array name."""
    index: tuple[str, ...]
    """Subscript texts, e.g. ``("i + 1", "2")``."""

    def text(self) -> str:
        return f"{self.array}[{', '.join(self.index)}]"


@dataclass(frozen=True)
class StmtSpec:
    """``target op value``; ``reads`` lists every access of ``value`` (and the target for ``+=``)."""

    target: AccessSpec
    """The written element."""
    op: str
    """``=`` or ``+=``."""
    value: str
    """Right-hand side text."""
    reads: tuple[AccessSpec, ...]
    """Accesses read by the statement."""

    def text(self) -> str:
        return f"{self.target.text()} {self.op} {self.value}"


@dataclass(frozen=True)
class LoopSpec:
    """``for var in [lo, hi)`` around ``body``."""

    var: str
    """Iterator."""
    lo: str
    """Lower bound text (affine in parameters and enclosing iterators)."""
    hi: str
    """Upper bound text."""
    body: tuple[LoopSpec | StmtSpec, ...]
    """Loops and statements, in order."""


@dataclass(frozen=True)
class ArraySpec:
    """An array declaration: every dimension has extent ``N + pad``."""

    name: str
    """Array name."""
    rank: int
    """Number of dimensions."""
    dtype: str
    """Element type."""
    pad: int
    """Extent of each dimension minus ``N``."""


@dataclass(frozen=True)
class ProgramSpec:
    """A random program as data."""

    params: tuple[str, ...]
    """``("N",)`` or ``("T", "N")``."""
    arrays: tuple[ArraySpec, ...]
    """Declarations."""
    body: tuple[LoopSpec | StmtSpec, ...]
    """Top-level loops."""

    def statements(self) -> Iterator[StmtSpec]:
        """Statements in program order (their names are ``S0, S1, ...`` in this order)."""
        def rec(nodes: tuple[LoopSpec | StmtSpec, ...]) -> Iterator[StmtSpec]:
            for n in nodes:
                if isinstance(n, StmtSpec):
                    yield n
                else:
                    yield from rec(n.body)
        return rec(self.body)

    def build(self) -> pt.Program:
        """The program, through the public builder."""
        p = pt.Program("fuzz", params=list(self.params))
        for a in self.arrays:
            p.array(a.name, (f"N + {a.pad}",) * a.rank, a.dtype)

        def rec(nodes: tuple[LoopSpec | StmtSpec, ...]) -> None:
            for n in nodes:
                if isinstance(n, StmtSpec):
                    p.assign(n.text())
                else:
                    with p.loop(n.var, n.lo, n.hi):
                        rec(n.body)
        rec(self.body)
        return p

    def code(self) -> str:
        """Equivalent builder code, for failure reports."""
        lines = [f"p = pt.Program('fuzz', params={list(self.params)})"]
        lines += [f"p.array({a.name!r}, {(f'N + {a.pad}',) * a.rank}, {a.dtype!r})" for a in self.arrays]

        def rec(nodes: tuple[LoopSpec | StmtSpec, ...], indent: str) -> None:
            for n in nodes:
                if isinstance(n, StmtSpec):
                    lines.append(f"{indent}p.assign({n.text()!r})")
                else:
                    lines.append(f"{indent}with p.loop({n.var!r}, {n.lo!r}, {n.hi!r}):")
                    rec(n.body, indent + "    ")
        rec(self.body, "")
        return "\n".join(lines)

    def make_args(self, sizes: dict[str, int], seed: int) -> dict[str, Any]:
        """Random arrays: floats in [-1, 1], integers in [-5, 5]; bfloat16 arrays are torch tensors."""
        rng = np.random.default_rng(seed)
        out: dict[str, Any] = {}
        for a in self.arrays:
            shape = (sizes["N"] + a.pad,) * a.rank
            if a.dtype in INT_DTYPES:
                out[a.name] = rng.integers(-5, 6, shape).astype(a.dtype)
            elif a.dtype == "bfloat16":
                import torch
                out[a.name] = torch.from_numpy(rng.uniform(-1.0, 1.0, shape)).to(torch.bfloat16)
            else:
                out[a.name] = rng.uniform(-1.0, 1.0, shape).astype(a.dtype)
        return out

    def instances_out_of_bounds(self, sizes: dict[str, int]) -> dict[int, tuple[bool, bool]]:
        """Brute force, independent of isl: for each statement (by index), whether it runs at all with
        ``sizes`` and whether one of its instances accesses an element outside its array."""
        extent = {a.name: sizes["N"] + a.pad for a in self.arrays}
        index = {id(s): k for k, s in enumerate(self.statements())}
        found = {k: (False, False) for k in index.values()}

        def rec(nodes: tuple[LoopSpec | StmtSpec, ...], env: dict[str, int]) -> None:
            for n in nodes:
                if isinstance(n, StmtSpec):
                    k = index[id(n)]
                    oob = any(not 0 <= _affine(e, env) < extent[acc.array]
                              for acc in (n.target, *n.reads) for e in acc.index)
                    found[k] = (True, found[k][1] or oob)
                else:
                    for v in range(_affine(n.lo, env), _affine(n.hi, env)):
                        rec(n.body, {**env, n.var: v})
        rec(self.body, dict(sizes))
        return found


def _affine(text: str, env: dict[str, int]) -> int:
    """Value of a generated affine text (``i + 1``, ``N + 2``, ``3``): sums of names and integers."""
    total, sign = 0, 1
    for tok in text.split():
        if tok in ("+", "-"):
            sign = 1 if tok == "+" else -1
        else:
            total += sign * (int(tok) if tok.lstrip("-").isdigit() else env[tok])
    return total


# -- strategies ----------------------------------------------------------------------------------------
@st.composite
def _subscript(draw: st.DrawFn, level: int, offsets: st.SearchStrategy[int], in_bounds: bool) -> str:
    """An iterator among the first ``level`` plus an offset, or a small constant."""
    which = draw(st.integers(-1, level - 1))
    if which < 0:
        return str(draw(st.integers(0, 3) if in_bounds else st.integers(0, 4)))
    off = draw(offsets)
    it = ITERS[which]
    return it if off == 0 else f"{it} {'+' if off > 0 else '-'} {abs(off)}"


@st.composite
def _statement(draw: st.DrawFn, arrays: tuple[ArraySpec, ...], level: int,
               offsets: st.SearchStrategy[int], in_bounds: bool) -> StmtSpec:
    def access(a: ArraySpec) -> AccessSpec:
        return AccessSpec(a.name, tuple(draw(_subscript(level, offsets, in_bounds)) for _ in range(a.rank)))

    target_arr = draw(st.sampled_from(arrays))
    target = access(target_arr)
    is_int = target_arr.dtype in INT_DTYPES
    sources = [a for a in arrays if (a.dtype in INT_DTYPES) or not is_int]
    reads: list[AccessSpec] = []
    terms: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        r = access(draw(st.sampled_from(sources)))
        reads.append(r)
        shape = draw(st.integers(0, 3))
        coef = draw(st.sampled_from(["2", "-1", "3"] if is_int else ["0.5", "0.25", "-0.5", "0.75"]))
        if shape == 0:
            terms.append(f"{coef} * {r.text()}")
        elif shape == 1 and reads[:-1]:
            terms.append(f"{draw(st.sampled_from(['min', 'max']))}({r.text()}, {reads[0].text()})")
        elif shape == 2:
            terms.append(f"where({r.text()} < {coef}, {r.text()}, {coef})")
        else:
            terms.append(r.text())
    op = draw(st.sampled_from(["=", "+="]))
    if op == "+=":
        reads.append(target)
    const = draw(st.sampled_from(["1", "2"] if is_int else ["0.125", "1.0"]))
    return StmtSpec(target, op, " + ".join(terms) + f" + {const}", tuple(reads))


@st.composite
def _nest(draw: st.DrawFn, arrays: tuple[ArraySpec, ...], levels: list[tuple[int, bool]], level: int,
          offsets: st.SearchStrategy[int], lo0: str, hi0: str, in_bounds: bool) -> LoopSpec:
    """Loop ``level`` and the loops inside it, holding statements at the given (level, before) places."""
    if level == 0:
        lo, hi = lo0, hi0
    else:
        outer = ITERS[level - 1]
        lo, hi = draw(st.sampled_from([(lo0, hi0), (lo0, f"{outer} + 1"), (outer, hi0), (lo0, outer)]))
    here = level + 1
    body: list[LoopSpec | StmtSpec] = []
    body += [draw(_statement(arrays, here, offsets, in_bounds)) for lvl, before in levels if lvl == here and before]
    inner = [x for x in levels if x[0] > here]
    if inner:
        body.append(draw(_nest(arrays, inner, here, offsets, lo0, hi0, in_bounds)))
    body += [draw(_statement(arrays, here, offsets, in_bounds)) for lvl, before in levels if lvl == here and not before]
    return LoopSpec(ITERS[level], lo, hi, tuple(body))


@st.composite
def programs(draw: st.DrawFn, *, in_bounds: bool = True, dtypes: tuple[str, ...] | None = None) -> ProgramSpec:
    """Random affine programs: 1 to 3 arrays of rank 1 to 3 and mixed dtypes, 1 to 3 statements in
    nests of depth 1 to 3 with triangular bounds, an optional time loop, reductions.

    ``in_bounds``: every access is provably inside its array (extent ``N + 4``, loops in ``[2, N + 2)``,
    offsets in ``[-2, 2]``).  Otherwise extents, loop bounds and offsets are drawn so that some programs
    leave their arrays always, some for some sizes only, some never."""
    palette = dtypes or (FLOAT_DTYPES + INT_DTYPES)
    n_arrays = draw(st.integers(1, 3))
    names = [draw(st.sampled_from([ARRAYS[k], TRICKY_NAMES[k]])) for k in range(n_arrays)]
    arrays = tuple(ArraySpec(names[k], draw(st.integers(1, 3)), draw(st.sampled_from(palette)),
                             4 if in_bounds else draw(st.integers(0, 4))) for k in range(n_arrays))
    offsets = st.integers(-2, 2) if in_bounds else st.integers(-1, 1)
    lo0, hi0 = ("2", "N + 2") if in_bounds else (draw(st.sampled_from(["1", "2", "0"])),
                                                  draw(st.sampled_from(["M", "N", "M + 1", "N + 1"])))
    sizes = ("N", "M") if "M" in hi0 else ("N",)
    nests: list[list[int]] = []
    for s in range(draw(st.integers(1, 3))):
        level = draw(st.integers(1, 3))
        if s > 0 and draw(st.booleans()):
            nests[-1].append(level)
        else:
            nests.append([level])
    body = tuple(draw(_nest(arrays, [(lvl, draw(st.booleans())) for lvl in levels], 0, offsets, lo0, hi0,
                            in_bounds))
                 for levels in nests)
    if draw(st.booleans()):
        return ProgramSpec(("T", *sizes), arrays, (LoopSpec("t", "0", "T", body),))
    return ProgramSpec(sizes, arrays, body)


#: Parameter values for :func:`check` (each program uses some of them).
SIZES = st.fixed_dictionaries({"N": st.integers(0, 6), "M": st.integers(0, 8), "T": st.integers(0, 3)})


# -- the differential check ----------------------------------------------------------------------------
def _compare(name: str, got: Any, want: Any, dtype: str, what: str) -> None:
    g, w = (np.asarray(x.float() if hasattr(x, "float") else x) for x in (got, want))
    if dtype in RTOL:
        np.testing.assert_allclose(g, w, rtol=RTOL[dtype], atol=RTOL[dtype], equal_nan=True,
                                   err_msg=f"{what}: array {name} differs from the reference")
    else:
        np.testing.assert_array_equal(g, w, err_msg=f"{what}: array {name} differs from the reference")


def _copy(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v.clone() if hasattr(v, "clone") else v.copy() for k, v in args.items()}


def kernels(spec: ProgramSpec, targets: list[str] | None = None) -> list[tuple[str, Any]] | BoundsError:
    """``(description, kernel)`` for every target and option set, or the compile-time BoundsError."""
    prog = spec.build()
    out = []
    for target in targets or TARGETS:
        for opts in OPTIONS.get(target, [{}]):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a fallback to the original order is allowed
                    out.append((f"{target} {opts}", pt.compile(prog, target=target, options=opts)))
            except BoundsError as exc:
                if out:
                    raise AssertionError(f"{target} {opts}: BoundsError after other compiles succeeded") from exc
                return exc
    return out


def check(spec: ProgramSpec, sizes: dict[str, int] | list[dict[str, int]], *, seed: int = 0,
          targets: list[str] | None = None) -> None:
    """Compile ``spec`` for every target; at each of ``sizes``, compare every kernel with the reference,
    or (where the brute force finds an access out of bounds) check that all of them reject the call
    without writing anything."""
    prog = spec.build()
    compiled = kernels(spec, targets)
    for k, one in enumerate([sizes] if isinstance(sizes, dict) else sizes):
        _check_at(spec, prog, compiled, {p: one[p] for p in spec.params}, seed + k)


def _check_at(spec: ProgramSpec, prog: pt.Program, compiled: list[tuple[str, Any]] | BoundsError,
              sizes: dict[str, int], seed: int) -> None:
    oob = spec.instances_out_of_bounds(sizes)
    if isinstance(compiled, BoundsError):
        # "always out of bounds": the named statement leaves its array whenever it runs
        culprit = [k for k in oob if str(compiled).startswith(f"statement S{k} ")]
        assert culprit, f"the BoundsError names no statement: {compiled}"
        runs, bad = oob[culprit[0]]
        assert bad or not runs, f"compile-time BoundsError, but S{culprit[0]} runs in bounds with {sizes}: {compiled}"
        return
    args = spec.make_args(sizes, seed)
    dtypes_of = {a.name: a.dtype for a in spec.arrays}
    runners = [("reference", lambda **kw: pt.reference(prog, **kw))] + compiled
    if any(bad for _, bad in oob.values()):
        for what, run in runners:
            work = _copy(args)
            try:
                run(**work, **sizes)
            except ParameterBoundsError:
                pass
            else:
                raise AssertionError(f"{what}: an out-of-bounds call with {sizes} was not rejected")
            for name in args:
                _compare(name, work[name], args[name], dtypes_of[name], f"{what} (rejected call)")
        return
    want = _copy(args)
    pt.reference(prog, **want, **sizes)
    for what, run in compiled:
        got = _copy(args)
        run(**got, **sizes)
        for name in args:
            _compare(name, got[name], want[name], dtypes_of[name], f"{what} with {sizes}")
