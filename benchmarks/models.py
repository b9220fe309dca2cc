"""The model zoo on this CPU: eager, Inductor and polytri side by side (the same as ``polytri bench --models``).

    .venv/bin/python benchmarks/models.py                       # every model, float32 and bfloat16, 1 and 2 threads
    .venv/bin/python benchmarks/models.py --only resnet --dtypes float32 --threads 1
"""

from __future__ import annotations

import sys

from polytri.tools.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "--models", *sys.argv[1:]]))
