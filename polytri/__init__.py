"""polytri: a pure-Python polyhedral loop optimizer.

Build a program with :class:`Program` (or ``@kernel``), check it against :func:`reference`, and
:func:`compile` it for the CPU (C/OpenMP).  See DESIGN.md and docs/ for the whole picture.
"""

from . import dtypes
from .compiler import compile
from .errors import (
                     ArgumentError,
                     BoundsError,
                     CompilationError,
                     NameResolutionError,
                     NotAffineError,
                     OptionError,
                     ParseError,
                     PolytriError,
                     ProgramError,
                     TypeCheckError,
                     UnsupportedError,
)
from .ir.builder import ProgramBuilder as Program
from .reference import reference
from .schedule.dependences import Dependences, dependences

__version__ = "0.1.0"

__all__ = [
    "ArgumentError", "BoundsError", "CompilationError", "Dependences", "NameResolutionError", "NotAffineError",
    "OptionError", "ParseError", "PolytriError", "Program", "ProgramError", "TypeCheckError", "UnsupportedError",
    "compile", "dependences", "dtypes", "reference",
]
