"""The scheduler benchmark (benchmarks/schedule.py) still runs and fills every column, so it cannot rot."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "schedule.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("polytri_bench_schedule", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


NUM = re.compile(r"^\d+(\.\d+)?$")


def test_schedule_benchmark_rows(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    assert bench.main(["--kernels", "gemm,jacobi_1d", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    header = bench.HEADER
    rows = {}
    for line in out.splitlines():
        fields = re.split(r"\s{2,}", line.strip())
        if fields and fields[0] in ("gemm", "jacobi_1d"):
            rows[fields[0]] = dict(zip(header, fields))
            assert len(fields) == len(header), line
    assert set(rows) == {"gemm", "jacobi_1d"}, out
    for name, row in rows.items():
        assert "error" not in row.values(), (name, row)
        for col in ("stmts", "deps s", "pt s", "pt bands", "pt max", "isl s", "isl bands", "isl max"):
            assert NUM.match(row[col]), (name, col, row[col])
        assert float(row["pt s"]) > 0 and float(row["isl s"]) > 0
        assert int(row["pt bands"]) >= 1 and int(row["isl bands"]) >= 1, (name, row)
        for col in ("pt par", "isl par"):
            assert re.match(r"^\d+( \(\d+\))?$", row[col]), (name, col, row[col])
        assert re.match(r"^[\d+|()]+$", row["isl widths"]), (name, row["isl widths"])
        assert row["pt outer"] in ("yes", "no") and row["isl outer"] in ("yes", "no")
        assert row["sched ratio"].endswith("x")
    # both schedulers find gemm's 3-wide permutable band and tile-able (2-D skewed) jacobi_1d band
    assert rows["gemm"]["isl max"] == "3" and rows["jacobi_1d"]["isl max"] == "2"
    assert "this machine is shared and noisy" in out
    assert "errors: none" in out


def test_schedule_benchmark_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load()
    assert bench.main(["--kernels", "jacobi_1d", "--repeat", "1", "--markdown"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("| kernel |") and lines[1].startswith("|---")
    assert lines[2].startswith("| jacobi_1d |") and "error" not in lines[2]


def test_schedule_benchmark_rejects_unknown_kernel() -> None:
    bench = _load()
    with pytest.raises(SystemExit):
        bench.main(["--kernels", "no_such_kernel"])


def test_frameworks_benchmark_rows() -> None:
    """benchmarks/frameworks.py still runs: a PyTorch row and (with the jax extra) a JAX row, every cell."""
    spec = importlib.util.spec_from_file_location("polytri_bench_frameworks", BENCH.parent / "frameworks.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = [bench.torch_row("softmax_matmul", 1)]
    pytest.importorskip("jax")
    rows.append(bench.jax_row("softmax_matmul", 1))
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 6 and cells[0] == "softmax_matmul", row
        assert all(re.fullmatch(r"(Inductor |XLA )?[\d.]+x?", c) for c in cells[2:]), row
