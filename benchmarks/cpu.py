"""CPU benchmarks side by side: the suite's kernels as naive C, with OpenMP, polytri's default, Pluto tiled,
and numpy/torch, beside the machine's measured FMA and triad peaks.

    python benchmarks/cpu.py [--filter 'gemm|jacobi'] [--repeat 5] [--quick] [--markdown]

The same as ``polytri bench``; the code lives in ``polytri/tools/bench.py`` so that the installed command has it.
``benchmarks/README.md`` explains every column.
"""

from __future__ import annotations

import sys

from polytri.tools.bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
