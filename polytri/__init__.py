"""polytri: a pure-Python polyhedral loop optimizer.

Build a program with :class:`Program` (or ``@kernel``), check it against :func:`reference`, and
:func:`compile` it for the CPU (C/OpenMP).  See docs/ for the whole picture.
"""

import os as _os

from . import dtypes
from .aot import export, load
from .compiler import compile
from .errors import (
    ArgumentError,
    ArtifactError,
    BoundsError,
    CompilationError,
    IndexValueError,
    NameResolutionError,
    NotAffineError,
    OptionError,
    ParameterBoundsError,
    ParseError,
    PolytriError,
    ProgramError,
    TypeCheckError,
    UnsupportedError,
)
from .frontend import Kernel, bf16, bool_, f16, f32, f64, i8, i32, i64, kernel, u8
from .frontend.jit import explain, jit
from .ir.builder import ProgramBuilder as Program
from .reference import reference
from .runtime.identity import VERSION as _VERSION
from .schedule.dependences import Dependences, dependences

__version__ = _VERSION

if _os.environ.get("POLYTRI_LOG"):  # the named loggers, for Python users as for the command line
    import warnings as _warnings

    from .tools.logconfig import configure as _configure
    try:
        _configure()
    except PolytriError as _exc:
        _warnings.warn(f"polytri: {_exc}; logging left as it is", stacklevel=2)

def __getattr__(name: str) -> object:
    """``polytri.jax`` and ``polytri.tf`` without an explicit import (they import JAX and TensorFlow only
    when used)."""
    if name in ("jax", "tf"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'polytri' has no attribute {name!r}")


__all__ = [
    "ArgumentError", "ArtifactError", "BoundsError", "CompilationError", "Dependences", "IndexValueError", "NameResolutionError", "NotAffineError",
    "OptionError", "ParameterBoundsError", "ParseError", "PolytriError", "Program", "ProgramError",
    "TypeCheckError", "UnsupportedError",
    "compile", "dependences", "dtypes", "explain", "export", "jit", "load", "reference",
    "Kernel", "kernel", "f64", "f32", "f16", "bf16", "i8", "u8", "i32", "i64", "bool_",
]
