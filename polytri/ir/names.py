"""Which names can name a program, parameter, array, scalar, iterator or statement: identifiers that
clash with nothing isl, the expression language, the generated C or the reference's Python use."""

from __future__ import annotations

import keyword
import re

from .. import dtypes
from ..errors import ProgramError

#: Names that would clash with isl notation, the expression language, the generated C (keywords, and
#: the macros and functions of the headers it includes that it uses) or the reference's generated Python.
ISL_WORDS = {"and", "or", "not", "implies", "mod", "floor", "ceil", "floord", "ceild", "min", "max", "exists",
             "infty", "rat", "true", "false", "NaN", "nan", "inf", "domain", "range"}
LANGUAGE_WORDS = {"where", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "erf", "round", "pow", "nanmax", "nanmin"} | set(dtypes.ALL) | set(dtypes.ALIASES)
C_WORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
    "bool", "NULL", "EOF", "INFINITY", "NAN", "HUGE", "HUGE_VAL", "HUGE_VALF", "HUGE_VALL", "DOMAIN", "SING",
    "OVERFLOW", "UNDERFLOW", "TLOSS", "PLOSS", "math_errhandling", "errno", "assert", "offsetof", "memcpy",
    "isnan", "isinf", "isfinite", "isnormal", "signbit", "fpclassify", "isgreater", "isgreaterequal", "isless",
    "islessequal", "islessgreater", "isunordered", "fabs", "fabsf", "expf", "logf", "sqrtf", "tanhf", "erff",
    "floorf", "ceilf", "powf", "fmod", "fmodf", "copysign", "copysignf",
}
PY_WORDS = {"np", "math", "int", "float", "type"}
RESERVED = ISL_WORDS | LANGUAGE_WORDS | C_WORDS | PY_WORDS
#: Macro families of <stdint.h> and <math.h>, and OpenMP's and the compiler's own names.
_RESERVED_PATTERN = re.compile(r"(U?INT(\d+|MAX|PTR)?_\w*|(SIZE|PTRDIFF|WCHAR|WINT|SIG_ATOMIC)_\w+|M_\w+|FP_\w+|"
                               r"MATH_\w+|omp_\w*|__\w*)")

def check_identifier(name: str, what: str) -> None:
    """Raise :class:`ProgramError` unless ``name`` can name a polytri object."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ProgramError(f"{what} name {name!r} is not a valid identifier")
    if name in RESERVED or _RESERVED_PATTERN.fullmatch(name):
        raise ProgramError(f"{what} name {name!r} is reserved (a function, dtype, or a word of isl, C or the "
                           f"generated code)")
    if re.fullmatch(r"c[0-9]+", name):
        raise ProgramError(f"{what} name {name!r} is reserved for the loop counters of generated code")
    if name.startswith("pt_") or name.startswith("_"):
        raise ProgramError(f"{what} name {name!r}: names starting with 'pt_' or '_' are reserved for generated code")
