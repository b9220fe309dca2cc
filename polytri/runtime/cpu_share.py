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

After an idle spell the cores themselves are slow to start: OpenMP's workers have stopped spinning and
sleep, and waking them costs what the machine makes it cost (on the 2-core virtual machine polytri is
developed on, a region 5 ms after the last one opened in 1.5 us, 30 ms after in 1.9 ms and 100 ms after
in 7.8 ms; the zoo's ResNet took 11.7 ms a call after 100 ms of sleep, 1.66 ms on one thread).  So a call that
comes :data:`IDLE_GAP` seconds or more after the last one ended runs on one thread when it would take
less on one thread than waking the workers costs (:class:`CallRecord`: the caller's least time per
call, times its threads; the waking cost is measured with a region's, ``fork_cost.py``).
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
                 children: Callable[[], float] = children_cpu_seconds,
                 env: Callable[[], str | None] = lambda: os.environ.get("OMP_NUM_THREADS")):
        self._read, self._own, self._clock, self._cores = read, own, clock, cores
        self._own_running, self._children, self._env = own_running, children, env
        self._lock = threading.Lock()
        self._last: tuple[float, float, StatSample, float] | None = None
        """(wall clock, own CPU seconds, machine sample, ended children's CPU seconds) of the last reading."""
        self._decided = (float("-inf"), 0)
        """(wall clock, threads) of the last decision, read without the lock (one tuple, replaced whole)."""

    def threads(self) -> int:
        """Threads to use now (``0``: OpenMP's default, when ``OMP_NUM_THREADS`` is set or nothing can be
        measured).  A decision, and the look at the environment, are reused for :data:`WINDOW` seconds: a
        kernel call costs some microseconds in Python, reading ``os.environ`` half of one."""
        now = self._clock()
        decided_at, threads = self._decided
        if now - decided_at < WINDOW:
            return threads
        with self._lock:
            decided_at, threads = self._decided  # another thread may have decided while this one waited
            if now - decided_at < WINDOW:
                return threads
            threads = 0 if self._env() else self._measure(now)
            self._decided = (now, threads)
            return threads

    def _measure(self, now: float) -> int:
        """The cores other processes leave free now (0 where ``/proc/stat`` cannot be read); called under
        the lock."""
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
        if threads != self._decided[1]:
            log.debug("CPU kernels use %d of %d cores: %d busy with other processes", threads, cores,
                      cores - threads)
        self._last = (now, own, sample, children)
        return threads


_SHARE = CpuShare()

IDLE_GAP = 0.02
"""Seconds since the last call's end after which OpenMP's workers are taken to be asleep: on the
development machine a region 5 ms after the last one opened in 1.5 us (median of 15), after 10 ms in
0.04-5.9 ms (ten trials, four slow), after 30 ms in 1.8-5.8 ms.  Interleaved benchmarks call a kernel
every few milliseconds (jacobi-1d's round at PolyBench's LARGE size: about 6.5 ms, the sum of its
variants' medians in the run of ``f3cbf83``), with its workers awake."""
MAX_KEYS = 256
"""Parameter values a :class:`CallRecord` keeps times for."""
_LAST_END = [float("-inf")]
"""When the last timed call of a CPU kernel of this process ended (``time.perf_counter``)."""


def threads_now(fixed: int | None) -> int:
    """The thread count for one call: ``fixed`` when the caller chose one, OpenMP's default (0) when
    ``OMP_NUM_THREADS`` is set, else the cores other processes leave free (see the module's text)."""
    if fixed:
        return fixed
    return _SHARE.threads()


class CallRecord:
    """One caller's calls (a kernel, a graph's launch), for the rule on idle cores (see the module's
    text): the least time a call took at each key (the parameter values), times the threads it ran on,
    an upper bound of one thread's time.  ``wake`` is the cost of waking the workers (0: unknown, the
    rule is off)."""

    def __init__(self, wake: float, clock: Callable[[], float] = time.perf_counter):
        self.wake, self.clock = wake, clock
        """``clock()`` is the time a caller passes to :meth:`ended` as the call's start."""
        self._alone: dict[object, float] = {}

    def threads(self, fixed: int | None, key: object = None, limit: int = 0) -> int:
        """:func:`threads_now`, at most ``limit`` (if positive) where the caller fixed no count (a
        framework's own thread setting: ``torch.get_num_threads()``), or 1 where the workers have idled
        :data:`IDLE_GAP` seconds and the call takes less on one thread than waking them costs."""
        n = threads_now(fixed)
        if not fixed and limit > 0 and n > limit:
            n = limit
        if fixed or n <= 1 or not self.wake:
            return n
        alone = self._alone.get(key)
        if alone is None or alone >= self.wake:
            return n
        idle = self.clock() - _LAST_END[0]
        if idle < IDLE_GAP:
            return n
        log.debug("a call after %.1f ms of idle cores runs on one thread (%.3f ms alone, waking %.3f ms)",
                  1e3 * idle, 1e3 * alone, 1e3 * self.wake)
        return 1

    def ended(self, key: object, threads: int, started: float) -> None:
        """Record a call that started at ``started`` (:attr:`clock`'s time) on ``threads`` threads."""
        now = self.clock()
        _LAST_END[0] = now
        alone = (now - started) * max(threads, 1)
        if alone < self._alone.get(key, float("inf")):
            if len(self._alone) >= MAX_KEYS:   # many sizes (shapes that change at every call): start afresh
                self._alone.clear()
            self._alone[key] = alone


__all__ = ["CallRecord", "CpuShare", "IDLE_GAP", "StatSample", "children_cpu_seconds", "threads_now"]
