"""How many threads a CPU kernel should use now: the cores that other processes leave free.

A parallel loop split statically over every core runs at the speed of its slowest thread.  When another
process keeps one core busy, the thread that shares that core gets half of it or less, and a kernel on
two threads runs slower than on one (measured on a 2-core machine with ``yes > /dev/null`` beside it:
1.3x to 1.75x slower on PolyBench's MEDIUM stencils and factorizations, whatever OpenMP's schedule or
waiting policy).  So, unless the caller fixed the thread count (the ``threads`` option or
``OMP_NUM_THREADS``), each call uses ``cores - busy``, where ``busy`` is the number of cores that other
processes kept busy lately, rounded:

* over the last window of at least :data:`WINDOW` seconds: CPU time of the whole machine (``/proc/stat``)
  minus this process's own (``getrusage``: its own threads, OpenMP's spinning workers included, never
  count as others), divided by the window;
* when the last sample is older than :data:`STALE` seconds (or on the first call), or when a child of this
  process ended during the window (the C compiler polytri ran: its CPU time is known only as a total at
  its end, so the window cannot tell it from another process's), from the number of runnable tasks at
  this instant (``procs_running``) less this process's own running threads (the caller, and OpenMP
  workers still spinning after an earlier call).  Counted as another process's, a compile made the
  kernels called within a second after it run on one thread (`polytri bench`, syrk at PolyBench's MEDIUM
  size on two idle cores: 1.45-1.6 ms against 0.75 ms).

Reading ``/proc/stat`` costs some microseconds, so a decision is reused for :data:`WINDOW` seconds.  Where
``/proc/stat`` cannot be read (not Linux), the answer is 0: OpenMP's own default.
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("polytri.cpu")

WINDOW = 0.1
"""Seconds a decision is reused, and the shortest window measured (``/proc/stat`` counts in 10 ms ticks)."""
STALE = 1.0
"""Seconds after which the last sample says nothing about now."""


@dataclass(frozen=True)
class StatSample:
    """One reading of the machine's CPU counters."""

    busy: float
    """Seconds of CPU time the whole machine spent outside idle and iowait, since boot."""
    running: int
    """Runnable tasks at this instant (the reading thread included)."""


def read_proc_stat(path: str = "/proc/stat") -> StatSample | None:
    """``/proc/stat``'s busy time and running tasks, or ``None`` where it cannot be read."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    busy, running = None, None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(v) for v in fields[1:]]
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
            busy = (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
        elif fields and fields[0] == "procs_running":
            running = int(fields[1])
    return None if busy is None or running is None else StatSample(busy, running)


def own_running_threads() -> int:
    """Threads of this process that are running or runnable now (at least the caller)."""
    count = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        count += state == "R"
    return max(count, 1)


def own_cpu_seconds() -> float:
    """CPU time of this process, all its threads, so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu_seconds() -> float:
    """CPU time of this process's children that have ended (the C compiler it ran for its kernels)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class CpuShare:
    """The measurement behind :func:`threads_now`, with its sources injectable for tests."""

    def __init__(self, read: Callable[[], StatSample | None] = read_proc_stat,
                 own: Callable[[], float] = own_cpu_seconds, clock: Callable[[], float] = time.monotonic,
                 cores: Callable[[], int] = usable_cores, own_running: Callable[[], int] = own_running_threads,
                 children: Callable[[], float] = children_cpu_seconds):
        self._read, self._own, self._clock, self._cores = read, own, clock, cores
        self._own_running, self._children = own_running, children
        self._lock = threading.Lock()
        self._last: tuple[float, float, StatSample, float] | None = None
        """(wall clock, own CPU seconds, machine sample, ended children's CPU seconds) of the last reading."""
        self._threads = 0

    def threads(self) -> int:
        """Threads to use now (``0``: no measurement, OpenMP's default)."""
        now = self._clock()
        with self._lock:
            if self._last is not None and now - self._last[0] < WINDOW:
                return self._threads
            sample = self._read()
            if sample is None:
                return 0
            own, children = self._own(), self._children()
            cores = self._cores()
            if self._last is None or now - self._last[0] > STALE or children != self._last[3]:
                busy = max(sample.running - self._own_running(), 0)
            else:
                wall0, own0, sample0, _ = self._last
                others = (sample.busy - sample0.busy) - (own - own0)
                busy = round(max(others, 0.0) / (now - wall0))
            threads = max(1, cores - busy)
            if threads != self._threads:
                log.debug("CPU kernels use %d of %d cores: %d busy with other processes", threads, cores,
                          cores - threads)
            self._last, self._threads = (now, own, sample, children), threads
            return threads


_SHARE = CpuShare()


def threads_now(fixed: int | None) -> int:
    """The thread count for one call: ``fixed`` when the caller chose one, OpenMP's default (0) when
    ``OMP_NUM_THREADS`` is set, else the cores other processes leave free (see the module's text)."""
    if fixed:
        return fixed
    if os.environ.get("OMP_NUM_THREADS"):
        return 0
    return _SHARE.threads()


__all__ = ["CpuShare", "StatSample", "children_cpu_seconds", "threads_now"]
