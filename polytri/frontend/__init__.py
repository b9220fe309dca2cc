"""Front ends: programs written as restricted Python (``@pt.kernel``).

See ``docs/kernel.md`` for the subset of Python a kernel may use.
"""

from .annotations import ArraySpec, ArrayType, bf16, bool_, f16, f32, f64, i8, i32, i64, u8
from .kernel import Kernel, kernel

__all__ = ["ArraySpec", "ArrayType", "Kernel", "bf16", "bool_", "f16", "f32", "f64", "i8", "i32", "i64", "kernel", "u8"]
