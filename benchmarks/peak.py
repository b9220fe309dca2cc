"""Peak microbenchmarks alone: FMA throughput (GFLOP/s, fp32 and fp64) and triad bandwidth (GB/s), with
every thread and with one.

    python benchmarks/peak.py [--quick]

Hand-written C built with the generated kernels' compiler and flags (``polytri/tools/peak.py``, ``PEAK_SOURCE``).
"""

from __future__ import annotations

import sys

from polytri.tools.bench import peak_main

if __name__ == "__main__":
    sys.exit(peak_main(sys.argv[1:]))
