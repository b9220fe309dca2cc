"""Every ```python block of README.md and docs/*.md runs, and the README's commands work.

Blocks of one file run in order, in one namespace, in a temporary working directory.  Other fences
(```console, ```text, ```bash, ...) are not executed.  A block may be skipped only by an explicit marker
on the line just before its fence, and the skip is reported:

* ``<!-- docs-test: skip REASON -->``: never run (say why);
* ``<!-- docs-test: requires NAME -->``: run only when ``NAME`` imports (a module, or a dotted
  attribute such as ``polytri.jit``); the blocks after it still run.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(skip|requires)\s+(.+?)\s*-->\s*$")

pytestmark = pytest.mark.cc  # the examples build C kernels


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    """1-based line of the opening fence."""
    lang: str
    code: str
    marker: tuple[str, str] | None
    """(``skip`` | ``requires``, argument) from the line before the fence."""


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    k = 0
    while k < len(lines):
        m = FENCE.match(lines[k])
        if not m:
            k += 1
            continue
        start, lang = k, m.group(1)
        k += 1
        body: list[str] = []
        while k < len(lines) and not lines[k].startswith("```"):
            body.append(lines[k])
            k += 1
        if k == len(lines):
            raise AssertionError(f"{path.name}:{start + 1}: unterminated code fence")
        prev = lines[start - 1].strip() if start > 0 else ""
        mm = MARKER.match(prev)
        out.append(Block(path, start + 1, lang, "\n".join(body) + "\n", (mm.group(1), mm.group(2)) if mm else None))
        k += 1
    return out


def available(name: str) -> bool:
    """Whether ``name`` (``module`` or ``module.attribute``) can be imported."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def skip_reason(block: Block) -> str | None:
    if block.marker is None:
        return None
    kind, arg = block.marker
    if kind == "skip":
        return f"{block.path.name}:{block.line}: marked skip: {arg}"
    return None if available(arg) else f"{block.path.name}:{block.line}: requires {arg}, not available"


def test_markers_parse(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("text\n<!-- docs-test: skip needs a GPU -->\n```python\nraise SystemExit\n```\n\n"
                   "```console\n$ ls\n```\n<!-- docs-test: requires no_such_module_xyz -->\n```python\n1/0\n```\n"
                   "<!-- docs-test: requires polytri.compile -->\n```python\nx = 1\n```\n")
    found = blocks(doc)
    assert [(b.lang, b.line, b.marker) for b in found] == [
        ("python", 3, ("skip", "needs a GPU")), ("console", 7, None),
        ("python", 11, ("requires", "no_such_module_xyz")), ("python", 15, ("requires", "polytri.compile"))]
    assert [skip_reason(b) is None for b in found] == [False, True, False, True]


def test_every_doc_is_collected():
    names = {p.name for p in DOCS}
    assert {"README.md", "index.md", "getting-started.md", "guide.md", "architecture.md", "scheduler.md",
            "performance.md", "troubleshooting.md", "environment.md"} <= names
    assert sum(1 for p in DOCS for b in blocks(p) if b.lang == "python") >= 15


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POLYTRI_CACHE_DIR", os.environ.get("POLYTRI_CACHE_DIR", str(tmp_path / "cache")))
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    ran = 0
    for block in blocks(path):
        if block.lang != "python" or skip_reason(block):
            continue
        # a real file, so that @pt.kernel (which reads its function's source) and tracebacks find the text
        source = tmp_path / f"{path.stem.replace('-', '_')}_line{block.line}.py"
        source.write_text(block.code)
        code = compile(block.code, str(source), "exec")
        try:
            exec(code, namespace)
        except Exception as exc:
            raise AssertionError(f"{path.name}, block at line {block.line} failed: {type(exc).__name__}: {exc}") \
                from exc
        ran += 1
    if ran == 0 and not any(b.lang == "python" for b in blocks(path)):
        pytest.skip(f"{path.name} has no python block")


SKIPPED = [b for p in DOCS for b in blocks(p) if b.lang == "python" and skip_reason(b)]


@pytest.mark.parametrize("block", SKIPPED, ids=lambda b: f"{b.path.name}:{b.line}")
def test_marked_blocks_are_reported(block):
    pytest.skip(skip_reason(block) or "")


def readme_commands() -> list[str]:
    """The ``$ polytri ...`` lines of the README's console blocks."""
    out = []
    for b in blocks(ROOT / "README.md"):
        if b.lang == "console":
            out += [ln[2:].split("  #")[0].strip() for ln in b.code.splitlines() if ln.startswith("$ polytri ")]
    return out


def test_readme_commands_work(tmp_path):
    """From the README alone: compile the example, print its C and Triton code and schedule, draw its tiles."""
    commands = readme_commands()
    assert any("--show c" in c for c in commands) and any("--show triton" in c for c in commands)
    assert any(c.startswith("polytri plot") for c in commands)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "POLYTRI_CACHE_DIR": os.environ.get("POLYTRI_CACHE_DIR", str(tmp_path / "cache"))}
    for command in commands:
        argv = shlex.split(command)
        proc = subprocess.run([sys.executable, "-m", "polytri.tools.cli", *argv[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{command}: {proc.stderr}"
        assert proc.stdout.strip(), command
        if "--show c" in command:
            assert "void pt_jacobi_1d(" in proc.stdout
        if "--show triton" in command:
            assert "import triton" in proc.stdout and "tl." in proc.stdout
        if command.startswith("polytri plot"):
            out = tmp_path / argv[argv.index("-o") + 1]
            assert out.read_bytes()[:4] == b"\x89PNG"
