"""The ``polytri`` command."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from polytri.tools.cli import main


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("polytri ")


@pytest.mark.cc
def test_demo_quick_prints_agreeing_table(tmp_path):
    import os
    env_cache = {"POLYTRI_CACHE_DIR": os.environ.get("POLYTRI_CACHE_DIR", str(tmp_path))}  # the run's cache
    proc = subprocess.run([sys.executable, "-m", "polytri.tools.cli", "demo", "--quick"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env_cache})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for kernel in ("gemm", "jacobi_2d", "blur"):
        row = next(line for line in out.splitlines() if line.startswith(kernel))
        assert row.rstrip().endswith("yes")
    shown = out[out.index("generated C for blur"):]
    assert "static void pt_blur_par0(" in shown and "for (int64_t" in shown  # the loop nest, not the wrapper
    assert "void pt_blur(" not in shown
    assert "compiled at the reference sizes" not in out  # --quick skips the large runs


def test_bench_help_lists_every_kernel_its_sizes_and_how_long_a_run_takes(capsys):
    from polytri.suite import KERNELS
    from polytri.suite.datasets import LARGE
    with pytest.raises(SystemExit) as ei:
        main(["bench", "--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    for name in KERNELS:
        assert re.search(rf"^  {name} ", out, re.M), name
    assert "NI=1000 NJ=1100 NK=1200" in out and LARGE["gemm"] == dict(NI=1000, NJ=1100, NK=1200)
    assert "a run takes:" in out and "large 22 minutes" in out
