"""The CPU benchmark (polytri/tools/bench.py, `polytri bench`, benchmarks/cpu.py) still runs, fills its table and
checks every variant against the naive C, so that it cannot rot (the polly column: tests/test_bench_polly.py)."""

from __future__ import annotations

import re

import pytest

from polytri.tools import bench
from polytri.tools.cli import main as cli_main

pytestmark = pytest.mark.cc

NUM = re.compile(r"^\d+(\.\d+)?$")


def _rows(out: str) -> dict[str, dict[str, str]]:
    rows = {}
    for line in out.splitlines():
        fields = re.split(r"\s{2,}", line.strip())
        if fields and fields[0] in ("gemm", "jacobi_2d"):
            assert len(fields) == len(bench.HEADER), line
            rows[fields[0]] = dict(zip(bench.HEADER, fields))
    return rows


def test_bench_quick_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--quick", "--filter", "gemm|jacobi_2d", "--repeat", "1", "--no-polly"]) == 0
    out = capsys.readouterr().out
    assert "this machine is shared and noisy" in out
    assert re.search(r"FMA \d+\.\d GFLOP/s fp32", out) and re.search(r"triad \d+\.\d GB/s", out), out
    rows = _rows(out)
    assert set(rows) == {"gemm", "jacobi_2d"}, out
    for name, row in rows.items():
        assert row["check"] == "agree", (name, row)
        for v in bench.VARIANTS:
            assert NUM.match(row[f"{v} ms"]) and float(row[f"{v} ms"]) > 0, (name, v, row)
        assert NUM.match(row[f"{bench.LIBRARY} ms"]), (name, row)  # torch for gemm, numpy for jacobi_2d
        assert re.fullmatch(r"\d+\.\d\dx", row["pt/naive"]), (name, row)
        assert NUM.match(row["pt GFLOP/s"]) and float(row["pt GFLOP/s"]) > 0, (name, row)
        assert NUM.match(row[bench.COMPILE]) and float(row[bench.COMPILE]) > 0, (name, row)
    assert rows["gemm"]["pt vs peak"].endswith("% FMA fp32")
    assert rows["jacobi_2d"]["pt vs peak"].endswith("% triad")
    assert "MISMATCH" not in out and "ERROR" not in out
    assert re.search(r"polytri's default compiles \(fresh cache\) in over 2 s on \d+: ", out), out


def test_bench_compile_line_names_the_slow_kernels() -> None:
    def row(name: str, seconds: float | None) -> bench.Row:
        return bench.Row(name, {}, "stencil", "float64", 1.0, None, compile_s=seconds)

    line = bench.compile_line([row("adi", 2.4), row("gemm", 0.6), row("deriche", 3.1), row("lu", None)])
    assert line.startswith("polytri's default compiles (fresh cache) in over 2 s on 2: deriche (3.10 s), adi (2.40 s)")
    assert "gemm" not in line and "lu" not in line
    assert ": none (load average" in bench.compile_line([row("gemm", 0.6)])


def test_bench_cli_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bench", "--quick", "--filter", "^jacobi_1d$", "--repeat", "1", "--markdown", "--no-polly"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| kernel |"))
    assert lines[head + 1].startswith("|---")
    assert lines[head + 2].startswith("| jacobi_1d |") and lines[head + 2].endswith("| agree |")


def test_bench_reports_mismatch(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def wrong(args: dict, threads: int):  # a "library equivalent" that computes something else
        def run() -> None:
            args["A"] += 1.0
        return run

    monkeypatch.setitem(bench.LIBRARY_EQUIVALENTS, "jacobi_1d", ("wrong on purpose", wrong))
    assert bench.main(["--quick", "--filter", "^jacobi_1d$", "--repeat", "1", "--no-polly"]) == 1
    out = capsys.readouterr().out
    assert f"DIFFERS: {bench.LIBRARY}" in out and f"MISMATCH jacobi_1d {bench.LIBRARY}" in out


def test_bench_rejects_unknown_kernel() -> None:
    with pytest.raises(SystemExit):
        bench.main(["--filter", "no_such_kernel"])


def test_peak_microbenchmarks_tiny() -> None:
    for dtype in ("float32", "float64"):
        assert bench.fma_peak(dtype, seconds=0.005, repeat=1) > 0
    assert bench.triad_bandwidth(mbytes=1.0, repeat=2) > 0
    assert bench.fma_peak("float32", seconds=0.005, repeat=1, threads=1) > 0
