"""One C call that runs a sequence of compiled kernels, each on addresses taken from one table of slots.

A compiled graph calls its kernels one after the other; between two of them Python gathered the next
one's addresses, allocated its outputs and bound its results, after the previous kernel had run through
the caches.  :func:`driver` is a small library of its own, built once per compiler: ``pt_run_steps``
calls each kernel's ``<function>_slots`` entry (:func:`.cgen.generate_c`) with the addresses that its
list of slot numbers picks from the table, its parameters, the thread count and its parallel-work
threshold.  The caller fills the table (inputs, new arrays) before the one call.

A kernel with indirect subscripts (an ``embedding``'s token ids) reads an index array whose values
must lie in range: before a step runs, ``pt_run_steps`` checks the ranges of values its list of
:class:`Range` gives (:meth:`polytri.runtime.index_check.IndexCheck.ranges`), on the step's own
arguments, and returns that step's number where a value is out of range: the steps before it have run,
it and the later ones have not (the caller then takes the checked way, which names the value).
``pt_check_ranges`` does the same for one kernel.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

from .build import build_library, default_flags

DRIVER_SOURCE = """/* polytri: runs several kernels' slot entries in one call */
#include <stdint.h>
typedef void (*pt_step_fn)(void *const *, const int64_t *, int, double);
/* count elements of argument arg (type: 0 int64, 1 int32, 2 uint8, 3 int8) from element start, each in
   [low, high) */
typedef struct { int64_t arg, type, start, count, low, high; } pt_range;

#define PT_RANGE_OF(T) { \\
    const T *v = (const T *)args[r->arg] + r->start; int64_t lo = r->high, hi = r->low; \\
    for (int64_t k = 0; k < r->count; k++) { \\
      const int64_t x = (int64_t)v[k]; lo = x < lo ? x : lo; hi = x > hi ? x : hi; } \\
    return r->count <= 0 || (lo >= r->low && hi < r->high); }

static int pt_in_range(const pt_range *r, void *const *args) {
  switch (r->type) {
    case 0: PT_RANGE_OF(int64_t)
    case 1: PT_RANGE_OF(int32_t)
    case 2: PT_RANGE_OF(uint8_t)
    case 3: PT_RANGE_OF(int8_t)
    default: return 0;
  }
}

/* -1 when every range holds, else the number of the first that does not */
int64_t pt_check_ranges(int64_t n, const pt_range *ranges, void *const *args) {
  for (int64_t k = 0; k < n; k++)
    if (!pt_in_range(&ranges[k], args)) return k;
  return -1;
}

/* -1 when every step ran, else the number of the step whose ranges did not hold (it and the later
   steps did not run) */
int64_t pt_run_steps(int64_t n, const pt_step_fn *fns, const int64_t *nargs, const int32_t *const *slot_of,
                     void *const *slots, const int64_t *const *params, int threads, const double *work,
                     const int64_t *nranges, const pt_range *const *ranges) {
  for (int64_t i = 0; i < n; i++) {
    void *a[nargs[i] > 0 ? nargs[i] : 1];
    for (int64_t j = 0; j < nargs[i]; j++) a[j] = slots[slot_of[i][j]];
    if (nranges[i] > 0 && pt_check_ranges(nranges[i], ranges[i], a) >= 0) return i;
    fns[i](a, params[i], threads, work[i]);
  }
  return -1;
}
"""


_LOADED: list[ctypes.CDLL] = []


class Range(ctypes.Structure):
    """One range of values to check (``pt_range``): ``count`` elements of argument ``arg`` of type ``type``
    (its position in :data:`polytri.runtime.index_check.RANGE_TYPES`) from element ``start``, each in
    ``[low, high)``."""

    _fields_ = [(name, ctypes.c_int64) for name in ("arg", "type", "start", "count", "low", "high")]


@functools.cache
def _library(cc: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_library(DRIVER_SOURCE, cc=cc, flags=default_flags(cc))))
    _LOADED.append(lib)  # loaded for good: the cached functions refer to it
    return lib


def driver(cc: str) -> Callable[..., int]:
    """``pt_run_steps(n, fns, nargs, slot_of, slots, params, threads, work, nranges, ranges)`` built with
    ``cc`` (cached on disk like the kernels); every argument but ``n`` and ``threads`` is the address of a
    C array.  Returns -1, or the number of the step whose index ranges did not hold."""
    fn = _library(cc).pt_run_steps
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 5, ctypes.c_int, *[ctypes.c_void_p] * 3]
    return fn


def range_check(cc: str) -> Callable[..., int]:
    """``pt_check_ranges(n, ranges, args)``: -1 when every range of the array of :class:`Range` at address
    ``ranges`` holds on the arguments at address ``args``, else the number of the first that does not."""
    fn = _library(cc).pt_check_ranges
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    return fn


__all__ = ["DRIVER_SOURCE", "Range", "driver", "range_check"]
