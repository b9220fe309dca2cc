"""``polytri compile``, the FILE.py[:NAME] loader and the logging set-up."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import polytri as pt
from polytri.errors import OptionError, UnsupportedError
from polytri.tools.cli import main
from polytri.tools.cli_compile import parse_options, parse_sections
from polytri.tools.loader import LoadError, load_program, split_spec
from polytri.tools.logconfig import parse_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

TWO_KERNELS = '''
import polytri as pt

@pt.kernel
def copy(A: pt.f64["N"], B: pt.f64["N"], N: int):  # noqa: F821
    for i in range(N):
        B[i] = A[i]

def scale() -> pt.Program:
    p = pt.Program("scale", params=["N"])
    p.array("A", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = 2 * A[i]")
    return p

def helper(x):
    return x
'''


def write(tmp_path: Path, text: str, name: str = "kernels.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polytri.tools.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, **(env or {})})


# -- FILE.py[:NAME] ------------------------------------------------------------------------------------
def test_split_spec():
    assert split_spec("a/b.py") == ("a/b.py", None)
    assert split_spec("a/b.py:gemm") == ("a/b.py", "gemm")
    with pytest.raises(LoadError, match="expected FILE.py"):
        split_spec("a/b.txt")
    with pytest.raises(LoadError, match="expected FILE.py"):
        split_spec("a/b.py:1bad")


def test_load_single_kernel_and_builder_function():
    name, prog = load_program(str(EXAMPLES / "jacobi_1d.py"))
    assert (name, prog.name, [s.name for s in prog.statements]) == ("jacobi_1d", "jacobi_1d", ["S0", "S1"])
    name, prog = load_program(str(EXAMPLES / "matmul.py"))
    assert (name, prog.name, prog.params) == ("matmul", "matmul", ("M", "N", "K"))


def test_load_several_needs_a_name(tmp_path):
    path = write(tmp_path, TWO_KERNELS)
    with pytest.raises(LoadError, match=r"defines 2 programs \(copy, scale\); pick one with .*:NAME"):
        load_program(path)
    assert load_program(f"{path}:copy")[1].name == "copy"
    assert load_program(f"{path}:scale")[1].name == "scale"
    with pytest.raises(LoadError, match=r"has no 'nope'; the programs it defines: copy, scale"):
        load_program(f"{path}:nope")
    with pytest.raises(LoadError, match=r"'helper' is a function, not a @pt.kernel"):
        load_program(f"{path}:helper")


def test_load_module_level_program_and_unannotated_function(tmp_path):
    path = write(tmp_path, '''
        import polytri as pt
        p = pt.Program("fill", params=["N"])
        p.array("A", ("N",), "float32")
        with p.loop("i", 0, "N"):
            p.assign("A[i] = 1.0")

        def other():
            return 3
    ''')
    assert load_program(path) == ("p", load_program(f"{path}:p")[1])
    with pytest.raises(LoadError, match=r"other\(\) returned int, not a polytri Program"):
        load_program(f"{path}:other")


def test_load_errors(tmp_path):
    with pytest.raises(LoadError, match="no such file"):
        load_program(str(tmp_path / "missing.py"))
    empty = write(tmp_path, "x = 1\n", "empty.py")
    with pytest.raises(LoadError, match="defines no @pt.kernel function"):
        load_program(empty)
    broken = write(tmp_path, "import polytri\n\nraise RuntimeError('boom in user code')\n", "broken.py")
    with pytest.raises(LoadError) as info:
        load_program(broken)
    msg = str(info.value)
    assert "importing the file failed" in msg and "RuntimeError: boom in user code" in msg
    assert "broken.py\", line 3" in msg and "loader.py" not in msg  # the user's frame, not polytri's


def test_kernel_errors_keep_their_class(tmp_path):
    path = write(tmp_path, '''
        import polytri as pt

        @pt.kernel
        def bad(A: pt.f64["N", "N"], N: int):  # noqa: F821
            for i in range(N):
                for j in range(N):
                    A[i * j, j] = 1.0
    ''')
    with pytest.raises(pt.NotAffineError, match="not affine"):
        load_program(path)


# -- options -------------------------------------------------------------------------------------------
def test_parse_options_and_sections():
    assert parse_options(["tile=True", "tile_size=32", "fuse=max", "cflags=('-O2',)", "openmp=false"]) == {
        "tile": True, "tile_size": 32, "fuse": "max", "cflags": ("-O2",), "openmp": False}
    with pytest.raises(OptionError, match="expected KEY=VALUE"):
        parse_options(["tile"])
    assert parse_sections([], None) == (["c"], "cpu")
    assert parse_sections(["triton"], None) == (["triton"], "nvgpu")
    assert parse_sections([], "amdgpu") == (["triton"], "amdgpu")
    assert parse_sections(["c,deps", "ir"], None) == (["c", "ir", "deps"], "cpu")
    assert parse_sections(["all"], "cpu") == (["ir", "deps", "schedule", "c"], "cpu")
    with pytest.raises(OptionError, match="generates Triton, not C"):
        parse_sections(["c"], "nvgpu")
    with pytest.raises(OptionError, match="the cpu target generates C"):
        parse_sections(["triton"], "cpu")
    with pytest.raises(OptionError, match="choose among"):
        parse_sections(["asm"], None)


def test_log_spec():
    assert parse_spec("debug") == {"polytri": logging.DEBUG}
    assert parse_spec("schedule=info, polytri.cpu=debug,tiling") == {
        "polytri.schedule": logging.INFO, "polytri.cpu": logging.DEBUG, "polytri.tiling": logging.DEBUG}
    with pytest.raises(OptionError, match="unknown level 'loud'"):
        parse_spec("schedule=loud")


# -- the command ---------------------------------------------------------------------------------------
def test_compile_without_building_sections(capsys, tmp_path):
    """ir and deps come from a compiled kernel too; check their content against the library."""
    assert main(["compile", str(EXAMPLES / "matmul.py"), "--show", "ir,deps"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("==== ir ====\nprogram matmul [M, N, K]")
    assert "==== deps ====\nflow:   [M, N, K] -> { S0[i, j, k] -> S0[i' = i, j' = j, k' = 1 + k]" in out


@pytest.mark.cc
def test_compile_prints_c_and_schedule(capsys):
    assert main(["compile", str(EXAMPLES / "jacobi_1d.py"), "--show", "c-file"]) == 0
    out = capsys.readouterr().out
    k = pt.compile(load_program(str(EXAMPLES / "jacobi_1d.py"))[1])
    assert out == k.source.rstrip("\n") + "\n"
    # --show c: the kernel's function first, the helpers left out (and said so)
    assert main(["compile", str(EXAMPLES / "jacobi_1d.py"), "--show", "c"]) == 0
    view = capsys.readouterr().out
    assert view.splitlines()[1].startswith("void pt_jacobi_1d(")
    # two versions (the input order and its time tiles), each with its parallel regions
    assert "static void pt_jacobi_1d_v0_par0(" in view and "PT_HELPER" not in view and "#include" not in view
    assert view.rstrip().endswith("--show c-file prints the whole file, as compiled) */")
    spec = str(EXAMPLES / "matmul.py")
    assert main(["compile", spec, "--show", "schedule", "-O", "schedule=pluto", "-O", "tile=True",
                 "-O", "tile_size=8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("schedule (pluto+tiled):")
    assert "band 0 tiled 8x8x8" in out
    assert "t0: loop    band 0 (permutable)" in out


def test_compile_triton_target(capsys):
    """Prints the Triton source when the backend exists, else the UnsupportedError, exit 1, no traceback."""
    spec = str(EXAMPLES / "matmul.py")
    try:
        kernel = pt.compile(load_program(spec)[1], target="nvgpu")
    except UnsupportedError as exc:
        assert main(["compile", spec, "--target", "nvgpu", "--show", "triton"]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == f"polytri: error: UnsupportedError: {exc}\n"
    else:
        assert main(["compile", spec, "--target", "nvgpu", "--show", "triton"]) == 0
        assert capsys.readouterr().out == kernel.source.rstrip("\n") + "\n"


def test_compile_errors_exit_1_without_traceback(capsys, monkeypatch):
    assert main(["compile", str(EXAMPLES / "matmul.py"), "-O", "unroll=4"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("polytri: error: OptionError: unknown option(s) 'unroll'") and "Traceback" not in err
    assert main(["compile", str(EXAMPLES / "stencils.py")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("polytri: error: LoadError: ") and "pick one with" in err
    monkeypatch.setenv("POLYTRI_DEBUG", "1")  # the exception itself reaches the caller
    with pytest.raises(OptionError, match="unknown option"):
        main(["compile", str(EXAMPLES / "matmul.py"), "-O", "unroll=4"])


def test_compile_list(capsys):
    assert main(["compile", str(EXAMPLES / "stencils.py"), "--list"]) == 0
    assert capsys.readouterr().out == "seidel_1d\tkernel\njacobi_2d\tkernel\n"


@pytest.mark.cc
def test_verbose_debug_log_and_dump(tmp_path):
    spec = f"{EXAMPLES / 'stencils.py'}:seidel_1d"
    proc = run_cli("compile", "-v", spec, "--show", "ir", env={"POLYTRI_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert "polytri.cli: compiling seidel_1d (1 statements) for cpu" in proc.stderr
    assert "polytri.cli: compiled seidel_1d in" in proc.stderr
    assert "polytri.schedule: seidel_1d: hyperplane" in proc.stderr  # the scheduler's progress
    proc = run_cli("compile", spec, "--show", "ir",
                   env={"POLYTRI_LOG": "schedule=debug", "POLYTRI_DUMP": str(tmp_path / "dump"),
                        "POLYTRI_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert "polytri.schedule: seidel_1d: hyperplane" in proc.stderr
    assert "polytri.cli:" not in proc.stderr  # only the logger asked for
    dumped = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert dumped == [f"seidel_1d.{s}" for s in ("dependences.txt", "ir.txt", "kernel.c", "loop_ast.txt",
                                                 "schedule.txt")]
    quiet = run_cli("compile", spec, "--show", "ir", env={"POLYTRI_CACHE_DIR": str(tmp_path / "cache")})
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_help_lists_the_commands():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for command in ("demo", "compile", "plot", "bench"):
        assert command in proc.stdout
    assert "POLYTRI_LOG" in proc.stdout


@pytest.mark.cc
def test_a_reader_that_closes_the_output_ends_the_command_with_one_line() -> None:
    """``polytri compile ... | head -1``: no BrokenPipeError traceback, a non-zero status."""
    env = {k: v for k, v in os.environ.items() if k != "POLYTRI_DEBUG"}
    proc = subprocess.Popen([sys.executable, "-m", "polytri.tools.cli", "compile", str(EXAMPLES / "jacobi_1d.py"),
                             "--show", "c"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait() != 0
    assert err.strip().splitlines() == ["polytri: output closed by the reader (broken pipe)"], err


@pytest.mark.parametrize(("output", "message"), [
    ("/nonexistent/dir/x.png", "the folder '/nonexistent/dir' does not exist"),
    ("x.txt", "'txt' is not one matplotlib writes; use one of"),
])
def test_a_picture_that_cannot_be_written_is_one_line(tmp_path: Path, output: str, message: str) -> None:
    proc = run_cli("plot", str(EXAMPLES / "jacobi_1d.py"), "-o", output, cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr, proc.stderr
