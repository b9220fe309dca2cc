"""When recomputing a temporary pays: the operations it adds against the global memory traffic it saves,
at the machine's balance.

A temporary kept in global memory is written once and read back: twice its size (the compulsory traffic
of :mod:`.traffic`).  Recomputed in its consumers instead, its producer's expression runs once per read
instead of once: with ``reads`` accesses reading each element at one instance each (an injective access;
a broadcast read would repeat it an unbounded number of times), ``(reads - 1) * ops`` more operations
per element, where ``ops`` counts the producer's arithmetic nodes (its reads hit the cache its first
evaluation brought its inputs into; constants are free).  That pays when the operations take no longer
than the traffic: ``extra <= balance * 2 * itemsize``.  The blur's horizontal pass (9 operations, read 5
times: 36 more per element, against 8 bytes of float32 traffic) pays on the CPU, where it was measured
1.4x faster than two passes (fusion.md).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Operations per byte of global memory traffic each target sustains: peak arithmetic over bandwidth.
#: The CPU here: about 200 GFLOP/s of float32 on 2 cores against a 26 GB/s triad (measured here, docs/performance.md), 8.  GPUs
#: from vendor figures (not measured here): an H100, 67 TFLOP/s of fp32 outside the tensor cores against
#: 3.35 TB/s, 20; an MI300X, 163 TFLOP/s of fp32 against 5.3 TB/s, 30.
BALANCE = {"cpu": 8.0, "nvgpu": 20.0, "amdgpu": 30.0}


@dataclass(frozen=True)
class Recomputation:
    """The cost of recomputing a temporary where it is read, per element."""

    extra_ops: int
    """Operations added: the producer's expression once more per read beyond the first."""
    saved_bytes: int
    """Global memory traffic saved: the element written and read back."""
    balance: float
    """Operations per byte the target sustains."""

    @property
    def pays(self) -> bool:
        return self.extra_ops <= self.balance * self.saved_bytes

    def __str__(self) -> str:
        return (f"{self.extra_ops} more operation(s) per element against {self.saved_bytes} bytes of global "
                f"memory traffic saved, at {self.balance:g} operations per byte")


def recomputation(ops: int, reads: int, itemsize: int, balance: float) -> Recomputation:
    """The cost of a producer of ``ops`` arithmetic operations recomputed at ``reads`` injective reads."""
    return Recomputation(max(0, reads - 1) * ops, 2 * itemsize, balance)
