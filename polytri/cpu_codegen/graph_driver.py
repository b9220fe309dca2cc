"""One C call that runs a sequence of compiled kernels, each on addresses taken from one table of slots.

A compiled graph calls its kernels one after the other; between two of them Python gathered the next
one's addresses, allocated its outputs and bound its results, after the previous kernel had run through
the caches.  :func:`driver` is a small library of its own, built once per compiler: ``pt_run_steps``
calls each kernel's ``<function>_slots`` entry (:func:`.cgen.generate_c`) with the addresses that its
list of slot numbers picks from the table, its parameters, the thread count and its parallel-work
threshold.  The caller fills the table (inputs, new arrays) before the one call.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

from .build import build_library, default_flags

DRIVER_SOURCE = """/* polytri: runs several kernels' slot entries in one call */
#include <stdint.h>
typedef void (*pt_step_fn)(void *const *, const int64_t *, int, double);
void pt_run_steps(int64_t n, const pt_step_fn *fns, const int64_t *nargs, const int32_t *const *slot_of,
                  void *const *slots, const int64_t *const *params, int threads, const double *work) {
  for (int64_t i = 0; i < n; i++) {
    void *a[nargs[i] > 0 ? nargs[i] : 1];
    for (int64_t j = 0; j < nargs[i]; j++) a[j] = slots[slot_of[i][j]];
    fns[i](a, params[i], threads, work[i]);
  }
}
"""


_LOADED: list[ctypes.CDLL] = []


@functools.cache
def driver(cc: str) -> Callable[..., None]:
    """``pt_run_steps(n, fns, nargs, slot_of, slots, params, threads, work)`` built with ``cc`` (cached on
    disk like the kernels); every argument but ``n`` and ``threads`` is the address of a C array."""
    lib = ctypes.CDLL(str(build_library(DRIVER_SOURCE, cc=cc, flags=default_flags(cc))))
    fn = lib.pt_run_steps
    fn.restype = None
    fn.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 5, ctypes.c_int, ctypes.c_void_p]
    _LOADED.append(lib)  # loaded for good: the cached function refers to it
    return fn


__all__ = ["DRIVER_SOURCE", "driver"]
