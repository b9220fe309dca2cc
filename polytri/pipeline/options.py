"""Compile options as typed, frozen dataclasses, and the one validator every entry point shares.

Each target declares its options as a frozen dataclass (:class:`CpuOptions`, :class:`GpuOptions`): a field's
type says what values it takes, its default is the default, and the docstring written under it is its
documentation (:func:`option_docs` reads it from the source, as documentation tools do).  A field whose
values need more than its type (a power of two, a range) names a check in its ``metadata``.

:func:`parse_options` is the validator of ``pt.compile``, ``pt.jit``, the ``torch.compile`` backend and the
command line: unknown names and ill-typed values raise :class:`~polytri.errors.OptionError` naming the
option, the target and what it accepts.
"""

from __future__ import annotations

import ast
import functools
import inspect
import shlex
import textwrap
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import OptionError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Schedule = Literal["auto", "pluto", "original"]
Fusion = Literal["smart", "max", "none", "outer"]


def positive(name: str, v: int) -> None:
    if v < 1:
        raise OptionError(f"option {name!r} must be a positive int, got {v!r}")


def _non_negative(name: str, v: float) -> None:
    if not v >= 0:  # NaN too
        raise OptionError(f"option {name!r} must be a number at least 0, got {v!r}")


def _power_of_two(name: str, v: int) -> None:
    if v < 1 or v & (v - 1):
        raise OptionError(f"option {name!r} must be a power of two, got {v!r}")


def _dot_block(name: str, v: tuple[int, ...]) -> None:
    if len(v) != 3:
        raise OptionError(f"option {name!r} must be (M, N, K), got {v!r}")
    for side in v:
        _power_of_two(name, side)


def checked(fn: Callable[[str, Any], None]) -> dict[str, Any]:
    """The ``metadata`` of a field whose values also pass ``fn(name, value)`` (run on values other than
    ``None`` once the type matched): ``field(default=None, metadata=checked(positive))``."""
    return {"check": fn}


def _names(v: Any) -> Any:
    """One name, or any collection of names, as a tuple (``temporaries="T"``)."""
    if v is None or isinstance(v, str):
        return () if v is None else (v,)
    return tuple(sorted(v)) if isinstance(v, (set, frozenset)) else v


def _flags(v: Any) -> Any:
    """Compiler flags written as one string, split as a shell would."""
    return tuple(shlex.split(v)) if isinstance(v, str) else v


@dataclass(frozen=True)
class CpuOptions:
    """Options of the ``cpu`` target (C with OpenMP)."""

    schedule: Schedule = "auto"
    """'pluto' (the affine scheduler), 'original' (the input order), or 'auto': Pluto unless it moves a
    statement's outermost parallel loop inward, walks memory with more strided streams than the input
    order, or runs a statement behind a guard on an innermost loop's counter where the input order does
    not"""
    fuse: Fusion = "smart"
    """fusion policy of the scheduler: 'smart', 'max', 'none' or 'outer'"""
    tile: bool | None = None
    """tile the permutable bands of the Pluto schedule: True, False, or None (schedule='auto' decides,
    where tiling is the only parallelism or, chosen at each call, where a loop's reuse outgrows the L2
    cache; 'pluto' alone does not tile)"""
    tile_size: int | None = field(default=None, metadata=checked(positive))
    """tile side for every band dimension (default: from a model of the L2 cache)"""
    openmp: bool = True
    """parallelize the outermost parallel loop of each nest with OpenMP"""
    simd: bool = True
    """mark innermost parallel loops '#pragma omp simd' and use the SIMD math functions of glibc's libmvec
    where it links"""
    microkernel: bool = True
    """run gemm-like contraction nests as packed panels and a register-blocked micro-kernel (BLIS-style,
    generated C)"""
    fma: bool = False
    """the micro-kernel fuses each product into its sum (one rounding, as BLAS libraries do): faster, no
    longer bit-identical to pt.reference (which rounds the product, then the sum)"""
    jam: bool = True
    """under schedule='auto', run the rows of sums kept in order 8 at a time (unroll-and-jam), their
    chains of additions interleaved; each sum still adds its terms in order"""
    split: bool = True
    """under schedule='auto', split a loop whose carried dependences all meet one iteration into the
    iterations before, at and after it (index-set splitting): the pieces carry nothing, so they vectorize
    and run in parallel"""
    threads: int | None = field(default=None, metadata=checked(positive))
    """OpenMP thread count (default: OMP_NUM_THREADS if set, else the cores other processes leave free,
    measured at each call)"""
    min_parallel_work: float | None = field(default=None, metadata=checked(_non_negative))
    """smallest work (operations) per run of a parallel loop that opens an OpenMP region; smaller runs
    stay on the calling thread (default: measured on this machine at first use; 0: every parallel loop)"""
    cc: str | None = None
    """C compiler (default: $CC or 'cc')"""
    cflags: tuple[str, ...] = field(default=(), metadata={"normalize": _flags})
    """extra compiler flags, appended to the defaults (a string is split as a shell would)"""
    temporaries: tuple[str, ...] = field(default=(), metadata={"normalize": _names})
    """arrays whose contents after the call do not matter: their producers may be recomputed in their
    consumers instead of stored (see polytri.fusion)"""


@dataclass(frozen=True)
class GpuOptions:
    """Options of the ``nvgpu`` and ``amdgpu`` targets (Triton)."""

    schedule: Schedule = "auto"
    """'pluto', 'original', or 'auto' (Pluto unless it moves an outermost parallel loop inward)"""
    fuse: Literal["auto", "smart", "max", "none", "outer"] = "auto"
    """fusion policy of the scheduler: 'smart', 'max', 'none', 'outer', or 'auto': 'smart' or 'none',
    whichever keeps the most grid loops, then makes the fewest launches"""
    arch: str | None = None
    """architecture the launch model targets and asm() defaults to: sm_80, sm_90 (nvgpu, default sm_90);
    gfx90a, gfx942, gfx1100 (amdgpu, default gfx942)"""
    block: int | None = field(default=None, metadata=checked(_power_of_two))
    """block side of elementwise kernels, a power of two (default: the model's)"""
    dot_block: tuple[int, ...] | None = field(default=None, metadata=checked(_dot_block))
    """(M, N, K) tile of tl.dot contractions, powers of two (default: the model's)"""
    num_warps: int | None = field(default=None, metadata=checked(_power_of_two))
    """warps per program, a power of two (default: the model's)"""
    num_stages: int | None = field(default=None, metadata=checked(positive))
    """software pipeline stages of tl.dot loops, at least 1 (default: the model's)"""
    temporaries: tuple[str, ...] = field(default=(), metadata={"normalize": _names})
    """arrays whose contents after the call do not matter: their producers may be recomputed in their
    consumers instead of stored (see polytri.fusion)"""
    fp32_dot: Literal["ieee", "tf32"] = "ieee"
    """float32 contractions: 'ieee' (exact products, as the reference) or 'tf32' (tensor cores, 10-bit
    mantissa products)"""


OptionsT = TypeVar("OptionsT", bound="DataclassInstance")


@functools.cache
def option_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of the dataclass ``cls``, one line each."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def option_table(cls: type) -> dict[str, tuple[Any, str]]:
    """``{name: (default, description)}`` of an options class (the form ``explain`` and the CLI list)."""
    docs = option_docs(cls)
    return {f.name: (f.default if f.default is not MISSING else None, docs.get(f.name, "")) for f in fields(cls)}


def _accepts(tp: Any, v: Any) -> bool:
    """Whether ``v`` is a value of the annotation ``tp`` (the forms the option classes use)."""
    origin = typing.get_origin(tp)
    if tp is type(None):
        return v is None
    if origin is Literal:
        return isinstance(v, str) and v in typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(a, v) for a in typing.get_args(tp))
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return isinstance(v, tuple) and all(_accepts(item, x) for x in v)
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if tp is float:  # an int is a float too, as in Python's numeric tower
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, tp)


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is type(None):
        return "None"
    if origin is Literal:
        return " or ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return ", ".join(_describe(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"a tuple of {_describe(typing.get_args(tp)[0])}"
    return {bool: "True or False", int: "an int", float: "a number", str: "a string"}.get(tp, getattr(tp, "__name__", str(tp)))


def _normalized(spec: Any, v: Any) -> Any:
    """The forms users write for a value: a list for a tuple, and what the field's ``normalize`` accepts."""
    v = spec.metadata.get("normalize", lambda x: x)(v)
    return tuple(v) if isinstance(v, list) else v


def parse_options(cls: type[OptionsT], options: Mapping[str, Any] | None, owner: str) -> OptionsT:
    """The options of the dataclass ``cls`` from a user's mapping: defaults filled in, every value checked;
    ``owner`` names whose options they are in the messages (``target 'cpu'``)."""
    given = dict(options or {})
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(map(repr, unknown))} for {owner}; known: "
                          f"{', '.join(known)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, v in given.items():
        v = _normalized(known[name], v)
        if not _accepts(hints[name], v):
            raise OptionError(f"option {name!r} must be {_describe(hints[name])}, got {v!r} ({owner})")
        check = known[name].metadata.get("check")
        if check is not None and v is not None:
            check(name, v)
        values[name] = v
    return cls(**values)
