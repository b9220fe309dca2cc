"""``@pt.kernel``: a restricted Python function becomes a :class:`~polytri.ir.program.Program`.

The subset (see ``docs/kernel.md``): ``for v in range(lo, hi[, step])`` with affine bounds and a literal
step, ``if``/``elif``/``else`` with affine conditions (``and``, ``or``, ``not`` and chained comparisons included), assignments or
augmented assignments to array elements, and scalar locals (``t = ...``, substituted where read); ``assert`` on the parameters at the top level becomes an
assumption (``Program.assume``).  Docstrings, ``pass`` and ``...`` are ignored.  The function is
never run: its source is read with :mod:`inspect`, parsed with :mod:`ast` and replayed on a
:class:`~polytri.ir.builder.ProgramBuilder`, so every check of the builder applies.  Every error points
at the offending line of the file, with a caret.

Arguments are declared by their annotations: ``pt.f64["N", "N"]`` (an array; shape entries are ints,
parameter names or affine strings), ``int`` (a parameter), ``float`` (a ``float64`` scalar), a bare
element type such as ``pt.f32`` (a scalar of that type) or ``bool``.  Names used in array shapes that are
not arguments become parameters too (after the ``int`` arguments), inferred from the shapes at call time.
"""


from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from .. import dtypes
from ..errors import ArgumentError, ParseError, PolytriError, public
from ..ir.program import Program
from ..runtime.args import bind
from .kernel_args import Signature, declare_arguments
from .kernel_body import Translator
from .kernel_source import read_source


def translate(fn: Callable[..., Any], name: str | None = None) -> tuple[Program, Signature]:
    """The program of a restricted Python function, and how its arguments map onto the program's."""
    fn_name: str = getattr(fn, "__name__", "kernel")
    label = name or fn_name
    src, fdef = read_source(fn, label)
    builder, sig = declare_arguments(fn, src, fdef, label)
    Translator(fn, src, fdef, builder, sig).body(fdef.body)
    return builder.build(), sig


# -- the decorated object ----------------------------------------------------------------------------
class Kernel:
    """A ``@pt.kernel`` function: ``.program`` is its IR; calling it compiles for the cpu (once per
    signature) and runs in place."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None):
        if not inspect.isfunction(fn):
            raise ParseError(f"@pt.kernel expects a Python function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.program, self._sig = translate(fn, name)
        self._signature = inspect.signature(fn)
        self._compiled: dict[tuple[tuple[str, int], ...], Any] = {}

    @property
    def kernels(self) -> dict[tuple[tuple[str, int], ...], Any]:
        """The compiled kernels so far, by signature ((dtype, ndim) of each array argument)."""
        return dict(self._compiled)

    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Map a call's positional and keyword arguments onto the program's argument names."""
        kwargs = dict(kwargs)
        implicit = {k: kwargs.pop(k) for k in list(kwargs) if k in self._sig.implicit}
        try:
            ba = self._signature.bind_partial(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{self.program.name}: {exc}") from None
        ba.apply_defaults()
        out = dict(ba.arguments)
        missing = [n for n in self._sig.arrays + self._sig.scalars if n not in out]
        if missing:
            raise ArgumentError(f"{self.program.name}: missing argument(s) {', '.join(missing)}")
        out.update(implicit)
        return out

    def _key(self, kw: dict[str, Any]) -> tuple[tuple[str, int], ...]:
        key = []
        for n in self._sig.arrays:
            x = kw[n]
            try:
                d = dtypes.of_array(x).name
            except PolytriError:
                d = str(getattr(x, "dtype", type(x).__name__))
            key.append((d, len(getattr(x, "shape", ()))))
        return tuple(key)

    @public
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        kw = self.bind(*args, **kwargs)
        key = self._key(kw)
        k = self._compiled.get(key)
        if k is None:
            bind(self.program, kw)  # check the arguments before paying for a build
            k = self.compile("cpu")
            self._compiled[key] = k
        k(**kw)

    @public
    def compile(self, target: str = "cpu", options: dict[str, Any] | None = None) -> Any:
        """``pt.compile(self.program, target, options)``."""
        from ..compiler import compile as compile_program
        return compile_program(self.program, target=target, options=options)

    @public
    def reference(self, *args: Any, **kwargs: Any) -> None:
        """Run the original-order interpreter (``pt.reference``) with this kernel's calling convention."""
        from ..reference import reference
        reference(self.program, **self.bind(*args, **kwargs))

    def __str__(self) -> str:
        """The program in polytri's text form."""
        from ..ir.textform import program_to_text
        return program_to_text(self.program)

    def __repr__(self) -> str:
        return f"<polytri.Kernel {self.program.name!r}: {len(self.program.statements)} statement(s)>"


@public
def kernel(fn: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Decorator: ``@pt.kernel`` or ``@pt.kernel(name="...")``; also ``pt.kernel(fn, name=...)``."""
    if fn is None:
        return public(lambda f: Kernel(f, name=name))
    return Kernel(fn, name=name)

