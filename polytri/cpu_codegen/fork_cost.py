"""What a parallel region costs on this machine, measured once: the smallest work worth parallelizing.

A parallel loop of ``W`` operations takes ``W t`` on one thread and about ``W t / p + o`` on ``p``
threads, where ``t`` is the time of one operation and ``o`` the fork, static split and join of an OpenMP
region.  It pays when ``W > o / (t (1 - 1/p))``; the generated code parallelizes a region only above
:data:`MARGIN` times that break-even (uneven work, memory bandwidth shared by the threads and cache misses
make the real speed-up lower than ``p``).

Both figures come from a probe built with the kernels' compiler and flags, at first use: ``o`` is the
time of a region whose loop has one iteration per thread, ``t`` the time per operation of the same loop
run on one thread over an array that stays in the L2 cache (32768 doubles, ``a[i] = a[i] * 0.5 + 1.0``:
a load, two arithmetic operations and a store, four operations in :func:`.parallel_plan.weight`'s count).  Each is the minimum over many trials, which a busy machine can
only make larger, never smaller, and the probe stops after :data:`PROBE_BUDGET` seconds.  A third figure
is the cost of waking the workers after they idled (a region opened after a sleep, less ``o``), which
:class:`polytri.runtime.cpu_share.CallRecord` weighs against a short call's time on one thread.  The
result is kept in polytri's cache, per compiler and core count (``fork_cost.json``; delete the file to
measure again; an entry without the third figure is measured again), unless the machine was busy when
it was taken (:func:`contended`).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
from dataclasses import asdict, dataclass
from functools import cache

from ..runtime.cpu_share import usable_cores
from .build import DEFAULT_FLAGS, atomic_write, build_library, cache_dir, compiler_identity

log = logging.getLogger("polytri.cpu")

MARGIN = 2.0
"""Parallelize only above this multiple of the break-even work."""
PROBE_OPS = 4
"""Operations of one iteration of the probe's loop (a load counts as one, as in :func:`.parallel_plan.weight`)."""

PROBE_SOURCE = r"""
#include <omp.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static double pt_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void pt_probe_body(double *restrict a, int64_t n) {
  #pragma omp for schedule(static)
  for (int64_t i = 0; i < n; i += 1) a[i] = a[i] * 0.5 + 1.0;
}

/* Seconds per call of the loop over n elements, as a region of `threads` threads (0: no region),
   the minimum over `trials` trials of `reps` calls; after `budget` seconds the trial in progress ends
   with the calls it made and no other starts (a busy machine makes each region slow). */
double pt_probe(double *a, int64_t n, int threads, int reps, int trials, double budget) {
  double best = 1e30;
  const double start = pt_now();
  for (int k = 0; k < trials; k += 1) {
    double t0 = pt_now();
    int r = 0;
    while (r < reps) {
      if (threads > 0) {
        #pragma omp parallel num_threads(threads)
        pt_probe_body(a, n);
      } else {
        pt_probe_body(a, n);
      }
      r += 1;
      if (pt_now() - start > budget) break;
    }
    double t = (pt_now() - t0) / r;
    if (t < best) best = t;
    if (pt_now() - start > budget) break;
  }
  return best;
}

/* Seconds a region of `threads` threads takes to open and join after `idle_us` microseconds of sleep,
   the most of `trials`: the workers have stopped spinning and must be woken. */
double pt_wake(int threads, int idle_us, int trials) {
  double worst = 0.0;
  for (int k = 0; k < trials; k += 1) {
    usleep((useconds_t)idle_us);
    const double t0 = pt_now();
    #pragma omp parallel num_threads(threads)
    { (void)omp_get_thread_num(); }
    const double t = pt_now() - t0;
    if (t > worst) worst = t;
  }
  return worst;
}
"""


@dataclass(frozen=True)
class ForkCost:
    """The measured figures and the threshold derived from them."""

    threads: int
    """Threads of the measured region (the usable cores)."""
    region_seconds: float
    """Fork, split and join of one region (``o``)."""
    op_seconds: float
    """One operation on one thread (``t``)."""
    wake_seconds: float
    """A region opened after :data:`WAKE_IDLE_S` seconds of sleep, less a region's cost: waking the
    workers (:class:`polytri.runtime.cpu_share.CallRecord`); 0 on one core."""

    @property
    def min_work(self) -> float:
        """Smallest work (operations) per region that the generated code parallelizes."""
        if self.threads <= 1:
            return float("inf")
        return MARGIN * self.region_seconds / (self.op_seconds * (1.0 - 1.0 / self.threads))


WAKE_IDLE_S = 0.1
"""Sleep before the probe's region that measures waking the workers (s)."""
WAKE_TRIALS = 3
"""That region's trials, the probe sleeping ``WAKE_TRIALS x WAKE_IDLE_S`` seconds.  The most is kept: on
the development machine (a 2-core VM) ten single trials took 0.06-0.19 ms for the first four and
3.8-7.8 ms for the other six; choosing one thread where waking was cheap loses at most half the call, the
other way round the whole wake."""
PROBE_BUDGET = 0.1
"""Seconds each of the probe's three measurements may take at most (about 50 ms on a quiet machine; on
a busy one, 5000 regions took a minute before this bound)."""


def contended() -> bool:
    """Whether other work keeps half the cores or more busy (the load average): a measurement taken then
    overstates a region's cost, and is used by this process without being kept."""
    try:
        return os.getloadavg()[0] >= usable_cores() / 2
    except OSError:
        return False


def measure(cc: str) -> ForkCost:
    """Run the probe (about 50 ms, once the probe is built, at most 3 x :data:`PROBE_BUDGET`; and on two
    cores or more the waking regions' :data:`WAKE_TRIALS` x :data:`WAKE_IDLE_S` of sleep)."""
    lib = ctypes.CDLL(str(build_library(PROBE_SOURCE, cc=cc, flags=DEFAULT_FLAGS + ("-fopenmp",))))
    probe = lib.pt_probe
    probe.restype = ctypes.c_double
    probe.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_double]
    threads = usable_cores()
    n = 32768  # 256 KiB of doubles: in L2
    buf = (ctypes.c_double * n)()
    region = probe(buf, threads, threads, 200, 25, PROBE_BUDGET) - probe(buf, threads, 0, 200, 25, PROBE_BUDGET)
    per_op = probe(buf, n, 0, 20, 25, PROBE_BUDGET) / (n * PROBE_OPS)
    wake = 0.0
    if threads > 1:
        lib.pt_wake.restype = ctypes.c_double
        lib.pt_wake.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        wake = max(lib.pt_wake(threads, int(WAKE_IDLE_S * 1e6), WAKE_TRIALS) - max(region, 0.0), 0.0)
    return ForkCost(threads, max(region, 0.0), max(per_op, 1e-12), wake)


def _kept(cc: str) -> tuple[dict, str, ForkCost | None]:
    """polytri's cache of the figures, this compiler's and machine's key in it, and their entry (``None``:
    none, or one of an older layout)."""
    path = cache_dir() / "cpu" / "fork_cost.json"
    key = f"{compiler_identity(cc)}|{usable_cores()}"
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        entries = {}
    entries = entries if isinstance(entries, dict) else {}
    if isinstance(entries.get(key), dict):
        try:
            return entries, key, ForkCost(**entries[key])
        except TypeError:
            pass
    return entries, key, None


def known_wake(cc: str) -> float:
    """The cost of waking the workers (:func:`fork_cost`'s, measured at first use where polytri's cache does
    not hold it yet), or 0 where it cannot be measured (a kernel loaded from an artifact on a machine
    without the compiler)."""
    try:
        return fork_cost(cc).wake_seconds
    except Exception as exc:  # the probe does not build or load: the rule on idle cores stays off
        log.debug("waking the workers not measured: %s", exc)
        return 0.0


@cache
def fork_cost(cc: str) -> ForkCost:
    """The figures for compiler ``cc`` on this machine: from polytri's cache, else measured and kept."""
    path = cache_dir() / "cpu" / "fork_cost.json"
    entries, key, found = _kept(cc)
    if found is not None:
        return found
    cost = measure(cc)
    log.info("measured a parallel region's cost: %.2f us; one operation %.3f ns; regions below %.0f "
             "operations run on one thread; waking the workers after %.0f ms: %.2f ms", cost.region_seconds * 1e6,
             cost.op_seconds * 1e9, cost.min_work, WAKE_IDLE_S * 1e3, cost.wake_seconds * 1e3)
    if contended():
        log.info("the machine is busy (load average %.1f): the region's cost is measured again by the next "
                 "process", os.getloadavg()[0])
        return cost
    entries[key] = asdict(cost)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(entries, indent=1))
    except OSError as exc:  # a read-only cache: measured again next process
        log.debug("could not keep %s: %s", path, exc)
    return cost


__all__ = ["ForkCost", "fork_cost", "known_wake", "measure"]
