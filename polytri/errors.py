"""The one error hierarchy of polytri.

Every error a user can trigger is a :class:`PolytriError`.  Messages name the culprit (statement, array,
parameter, option) and, where a piece of source text is involved, show it with a caret under the
offending column.
"""

from __future__ import annotations


class PolytriError(Exception):
    """Base class of every error polytri raises on purpose."""


class ParseError(PolytriError):
    """Statement or expression text that is not in polytri's expression language."""


class NameResolutionError(PolytriError):
    """A name in a statement that is not an array, scalar, parameter, iterator or function."""


class NotAffineError(PolytriError):
    """A subscript, loop bound or condition that is not affine in iterators and parameters."""


class TypeCheckError(PolytriError):
    """An operation applied to values of the wrong type, or a subscript of the wrong rank."""


class ProgramError(PolytriError):
    """A malformed program: duplicate names, empty loops stack misuse, bad declarations."""


class BoundsError(PolytriError):
    """An access that isl cannot prove to stay inside its array for every parameter value."""


class ArgumentError(PolytriError):
    """A call with missing, unknown or mismatching arguments (shape, dtype, parameter value)."""


class ParameterBoundsError(BoundsError, ArgumentError):
    """A call whose parameter values would make an access leave its array; raised before anything runs
    (an :class:`ArgumentError` and a :class:`BoundsError`)."""


class IndexValueError(ArgumentError, IndexError):
    """An index array holding a value that makes an indirect subscript leave its array; raised when the
    kernel is called, before anything runs (an :class:`ArgumentError` and an ``IndexError``)."""


class OptionError(PolytriError):
    """An unknown compile option or an option with a bad value."""


class UnsupportedError(PolytriError):
    """A feature or target that polytri does not implement (yet); the message says which."""


class MissingExtraError(UnsupportedError):
    """An optional dependency that is not installed (JAX for ``polytri.jax``); the message names the
    ``pip install polytri[...]`` extra that provides it."""


class CompilationError(PolytriError):
    """The generated code failed to build; the message carries the compiler's output."""


class ArtifactError(PolytriError):
    """An exported artifact that cannot be loaded: damaged, incomplete, or made for another polytri version,
    target or CPU; the message says which file or field."""


def caret(text: str, column: int | None, *, width: int = 1) -> str:
    """Return ``text`` with a caret line under ``column`` (0-based), for error messages."""
    if column is None or column < 0:
        return f"    {text}"
    return f"    {text}\n    {' ' * column}{'^' * max(1, width)}"


def public(fn):
    """Decorate a public entry point: a :class:`PolytriError` reaches the user without polytri's
    internal frames (set ``POLYTRI_DEBUG=1`` to keep them)."""
    import functools
    import os

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except PolytriError as exc:
            if os.environ.get("POLYTRI_DEBUG", "") not in ("", "0"):
                raise
            raise exc.with_traceback(None) from None  # polytri frames hidden: POLYTRI_DEBUG=1 shows them

    return wrapper
