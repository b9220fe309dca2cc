"""The polly column of `polytri bench` (polytri/tools/polly.py): flags per compiler family, the column left
out with a note when there is no clang with Polly (nothing installed), pt/polly and its summary, and, where a
clang with Polly is installed, a tiny kernel through it agreeing with the naive C.  Nothing here installs."""

from __future__ import annotations

import argparse
import subprocess
from typing import Any

import pytest

from polytri.cpu_codegen import build
from polytri.tools import bench, polly
from polytri.tools.peak import Peak


@pytest.fixture(autouse=True)
def _fresh_search():
    polly.find_polly.cache_clear()
    yield
    polly.find_polly.cache_clear()


def _identity(monkeypatch: pytest.MonkeyPatch, first_line: str) -> None:
    monkeypatch.setattr(build, "compiler_identity", lambda cc: first_line)


def test_default_flags_per_compiler_family(monkeypatch: pytest.MonkeyPatch) -> None:
    cap = build.cap_cflags()  # POLYTRI_MAX_ISA's, appended (none by default)
    assert build.default_flags("/nonexistent/cc") == build.DEFAULT_FLAGS + cap  # its build says why it failed
    _identity(monkeypatch, "gcc (Debian 12.2.0-14+deb12u1) 12.2.0")
    assert build.compiler_family("gcc") == "gcc"
    assert build.default_flags("gcc") == build.DEFAULT_FLAGS + cap  # gcc's builds unchanged
    _identity(monkeypatch, "cc (Debian 12.2.0-14+deb12u1) 12.2.0")
    assert build.default_flags("cc") == build.DEFAULT_FLAGS + cap
    _identity(monkeypatch, "Debian clang version 16.0.6 (15~deb12u1)")
    assert build.compiler_family("clang-16") == "clang"
    flags = build.default_flags("clang-16")
    assert not any(f.startswith("--param") for f in flags)
    assert flags == tuple(f for f in build.DEFAULT_FLAGS if not f.startswith("--param")) + cap  # the rest, in order
    assert "-march=native" in flags and "-O3" in flags


def test_polly_options_are_the_naive_columns() -> None:
    found = polly.Polly("clang-16", polly.POLLY_FLAGS, "Debian clang version 16.0.6")
    opts = found.options()
    assert {k: opts[k] for k in bench.VARIANTS["naive"]} == bench.VARIANTS["naive"]
    assert opts["cc"] == "clang-16"
    assert " ".join(opts["cflags"]) == "-mllvm -polly -mllvm -polly-parallel -fopenmp=libgomp"


def _args(**kw: Any) -> argparse.Namespace:
    base: dict[str, Any] = {"polly": None, "quick": True, "dataset": "bench"}
    return argparse.Namespace(**{**base, **kw})


def _no_clang(monkeypatch: pytest.MonkeyPatch, *, apt: bool, root: bool) -> list[Any]:
    """No clang on PATH; ``apt-get`` there or not; every subprocess recorded, none run."""
    ran: list[Any] = []

    def which(cmd: str, *a: Any, **k: Any) -> str | None:
        return "/usr/bin/apt-get" if apt and cmd == "apt-get" else None

    def run(cmd: Any, *a: Any, **k: Any) -> subprocess.CompletedProcess[str]:
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(polly.shutil, "which", which)
    monkeypatch.setattr(polly.subprocess, "run", run)
    monkeypatch.setattr(polly.os, "geteuid", lambda: 0 if root else 1000)
    return ran


def test_no_clang_leaves_the_column_out_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _no_clang(monkeypatch, apt=True, root=True)
    variants, notes = bench.polly_variants(_args())  # --quick, no --polly: nothing installed
    assert bench.POLLY not in variants and list(variants) == list(bench.VARIANTS)
    assert len(notes) == 1 and notes[0].startswith("no polly column: no clang on PATH"), notes
    assert "make polly" in notes[0]
    assert ran == []


def test_no_polly_looks_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail() -> None:
        raise AssertionError("looked for clang")

    monkeypatch.setattr(polly, "find_polly", fail)
    assert bench.polly_variants(_args(polly=False, quick=False, dataset="large")) == (dict(bench.VARIANTS), [])


@pytest.mark.parametrize("apt,root,why", [(False, True, "no apt-get"), (True, False, "needs root")])
def test_install_refused(monkeypatch: pytest.MonkeyPatch, apt: bool, root: bool, why: str) -> None:
    ran = _no_clang(monkeypatch, apt=apt, root=root)
    variants, notes = bench.polly_variants(_args(polly=True))
    assert bench.POLLY not in variants and why in notes[0], notes
    assert ran == []


def test_install_runs_apt_get_then_looks_again(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    ran = _no_clang(monkeypatch, apt=True, root=True)  # apt-get "succeeds" but installs nothing
    variants, notes = bench.polly_variants(_args(quick=False, dataset="medium"))  # MEDIUM: installs by default
    assert ran == [polly.INSTALL_COMMAND]
    assert polly.INSTALL_COMMAND == ("apt-get", "install", "-y", "--no-install-recommends", "clang-16",
                                     "libpolly-16-dev", "libomp-16-dev")
    assert "installing clang and Polly" in capsys.readouterr().err
    assert bench.POLLY not in variants and "no clang on PATH" in notes[0]


def _limits(monkeypatch: pytest.MonkeyPatch, soft: int, hard: int) -> list[tuple[int, int]]:
    set_to: list[tuple[int, int]] = []
    monkeypatch.setattr(polly.resource, "getrlimit", lambda which: (soft, hard))
    monkeypatch.setattr(polly.resource, "setrlimit", lambda which, limits: set_to.append(limits))
    return set_to


def test_stack_limit_raised_for_pollys_packed_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    inf, mb = polly.resource.RLIM_INFINITY, 1 << 20
    set_to = _limits(monkeypatch, 8 * mb, inf)
    assert polly.raise_stack_limit() == "" and set_to == [(polly.STACK_BYTES, inf)]
    for soft in (inf, 128 * mb):  # never lowered
        set_to = _limits(monkeypatch, soft, inf)
        assert polly.raise_stack_limit() == "" and set_to == []
    set_to = _limits(monkeypatch, 8 * mb, 8 * mb)
    assert "stack limit is 8 MB" in polly.raise_stack_limit() and set_to == []


def test_found_polly_adds_the_column(monkeypatch: pytest.MonkeyPatch) -> None:
    found = polly.Polly("clang-16", polly.POLLY_FLAGS, "Debian clang version 16.0.6")
    monkeypatch.setattr(bench, "ensure_polly", lambda **kw: (found, ""))
    _limits(monkeypatch, 1 << 30, polly.resource.RLIM_INFINITY)
    variants, notes = bench.polly_variants(_args())
    assert list(variants) == [*bench.VARIANTS, bench.POLLY] and variants[bench.POLLY] == found.options()
    assert notes == ["polly column: clang-16 (Debian clang version 16.0.6) -mllvm -polly -mllvm -polly-parallel "
                     "-fopenmp=libgomp"]
    monkeypatch.setattr(bench, "raise_stack_limit", lambda: "the stack limit is 8 MB")
    assert bench.polly_variants(_args()) == (dict(bench.VARIANTS), ["no polly column: the stack limit is 8 MB"])


def _row(kernel: str, naive: float, pt: float, pl: float | None) -> bench.Row:
    row = bench.Row(kernel, {"N": 8}, "linear algebra", "float64", 1e6, None)
    row.times = {v: None for v in (*bench.VARIANTS, bench.POLLY, bench.LIBRARY)}
    row.times.update({"naive": naive, "polytri": pt, bench.POLLY: pl})
    return row


@pytest.mark.parametrize("markdown", [False, True])
def test_pt_over_polly_column_and_summary(markdown: bool) -> None:
    rows = [_row("gemm", 4.0, 1.0, 2.0), _row("lu", 1.0, 1.0, 0.5), _row("mvt", 1.0, 0.5, None)]
    variants = [*bench.VARIANTS, bench.POLLY]
    out = bench.render(rows, Peak(1.0, 1.0, 1.0, 2, 16.0), 1, markdown=markdown, variants=variants,
                       notes=["polly column: clang-16"])
    assert "note: polly column: clang-16" in out
    head = bench.header(variants)
    assert head.index("pt/polly") == head.index("pt/naive") + 1 and "polly ms" in head
    lines = out.splitlines()
    gemm = next(line for line in lines if line.lstrip("| ").startswith("gemm"))
    assert "4.00x" in gemm and "2.00x" in gemm  # pt/naive, pt/polly
    assert "polytri's default slower than clang+Polly on 1: lu (0.50x)" in out
    assert "geometric mean speed-up of polytri over clang+Polly: 1.00x over 2 kernels" in out
    plain = bench.render(rows, Peak(1.0, 1.0, 1.0, 2, 16.0), 1)  # without the column: as before
    assert "pt/polly" not in plain and "clang+Polly" not in plain


@pytest.mark.cc
@pytest.mark.slow   # clang's probes and builds: half a minute (make fuzz)
def test_gemm_through_polly_agrees_with_naive() -> None:
    found, why = polly.find_polly()
    if found is None:
        pytest.skip(f"no clang with Polly: {why}")
    assert "does not run Polly" in polly.probe(found.cc, ("-fopenmp=libgomp",))  # the check tells them apart
    variants = {"naive": bench.VARIANTS["naive"], bench.POLLY: found.options()}
    row = bench.run_kernel("gemm", dict(NI=24, NJ=20, NK=16), 1, threads=1, variants=variants)
    assert not row.errors and row.agree, (row.errors, row.mismatches)
    assert row.times[bench.POLLY] is not None
    from polytri.compiler import compile as pt_compile
    from polytri.ir.builder import to_program
    from polytri.suite import KERNELS
    k = pt_compile(to_program(KERNELS["gemm"].build()), target="cpu", options=found.options())
    built = next(d for d in k.decisions if d.startswith("built with"))
    assert built.startswith(f"built with {found.cc} ") and "-mllvm -polly" in built and "--param" not in built
