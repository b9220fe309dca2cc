"""Scalar conversions with polytri's semantics, on numpy scalars (used by the reference and by argument
binding): 16-bit floats are float32 values rounded to 16 bits; integer conversions wrap around."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np


def _round_bf16(x: Any) -> np.float32:
    """Round a float32 value to the nearest bfloat16 (ties to even), returned as float32."""
    bits = np.array(x, dtype=np.float32).view(np.uint32)
    if np.isnan(np.float32(x)):
        return np.float32(x)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    # indexing a 0-d array with () gives its numpy scalar; numpy's stubs type the result as an array
    return cast(np.float32, bits.astype(np.uint32).view(np.float32)[()])


def _round_f16(x: Any) -> np.float32:
    return np.float32(np.float16(np.float32(x)))


def _to_int(nptype: type) -> Callable[[Any], Any]:
    def conv(x: Any) -> Any:
        if isinstance(x, (float, np.floating)):
            x = math.trunc(float(x)) if math.isfinite(float(x)) else 0
        return np.array(int(x) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64).astype(np.int64).astype(nptype)[()]
    return conv


CASTS: dict[str, Callable[[Any], Any]] = {
    "bool": lambda x: np.bool_(x),
    "int8": _to_int(np.int8),
    "uint8": _to_int(np.uint8),
    "int32": _to_int(np.int32),
    "int64": _to_int(np.int64),
    "float16": _round_f16,
    "bfloat16": lambda x: _round_bf16(np.float32(x)),
    "float32": np.float32,
    "float64": np.float64,
}
