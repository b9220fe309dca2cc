"""Ahead-of-time export (``pt.export`` / ``pt.load``): round trips, a fresh process with no C compiler, the
shape checks, and damaged or foreign artifacts."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import polytri as pt
from polytri.cpu_codegen.kernel_parts import kernel_parts
from polytri.frontend.torch_cache import compile_cached
from polytri.suite.models import build

pytestmark = pytest.mark.cc  # exporting builds C kernels


@pt.kernel
def saxpy(N: int, a: pt.f32[1], x: pt.f32["N"], y: pt.f32["N"]):  # noqa: F821 (a size by name)
    for i in range(N):
        y[i] = y[i] + a[0] * x[i]


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.b(torch.relu(self.a(x))), -1)


def _mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return MLP().eval(), torch.randn(4, 16)


def _saxpy_args(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(n)
    return {"a": np.array([1.5], np.float32), "x": rng.standard_normal(n).astype(np.float32),
            "y": rng.standard_normal(n).astype(np.float32)}


def test_program_round_trip_every_size(tmp_path: Path) -> None:
    path = pt.export(saxpy, _saxpy_args(5), tmp_path / "saxpy")
    kernel = pt.load(path)
    for n in (1, 37):
        args = _saxpy_args(n)
        expected = {k: v.copy() for k, v in args.items()}
        pt.reference(saxpy, **expected)
        kernel(**args)
        np.testing.assert_allclose(args["y"], expected["y"], rtol=1e-6)


def test_mlp_round_trip_and_shape_errors(tmp_path: Path) -> None:
    model, x = _mlp()
    run = pt.load(pt.export(model, (x,), tmp_path / "mlp"))
    torch.testing.assert_close(run(x), model(x).detach())
    with pytest.raises(pt.ArgumentError, match=r"input 0 \(x\).*float32\[4, 16\]; got float32\[8, 16\]"):
        run(torch.randn(8, 16))
    with pytest.raises(pt.ArgumentError, match=r"float32\[4, 16\]; got float64\[4, 16\]"):
        run(x.double())
    with pytest.raises(pt.ArgumentError, match="takes 1 input"):
        run(x, x)


def test_dynamic_batch(tmp_path: Path) -> None:
    model, x = _mlp()
    run = pt.load(pt.export(model, (x,), tmp_path / "mlp", dynamic={0: {0: "batch"}}))
    assert "float32[batch, 16]" in repr(run)
    for batch in (2, 9):
        y = torch.randn(batch, 16)
        torch.testing.assert_close(run(y), model(y).detach())
    with pytest.raises(pt.ArgumentError, match=r"float32\[batch, 16\]; got float32\[2, 15\]"):
        run(torch.randn(2, 15))


def with_flip(x: torch.Tensor) -> torch.Tensor:
    return torch.flip(torch.relu(x), [0]) * 2


def test_eager_ops_stay_in_the_exported_graph(tmp_path: Path) -> None:
    x = torch.randn(5, 3)
    run = pt.load(pt.export(with_flip, x, tmp_path / "flip"))
    torch.testing.assert_close(run(x), with_flip(x))


def test_fresh_process_without_a_c_compiler(tmp_path: Path) -> None:
    """The MLP, a small CNN (conv, batch norm, ReLU, pooling, linear) and a program, exported here, loaded
    and run in a process whose PATH has no C compiler and whose cache is empty."""
    model, x = _mlp()
    cnn, image = build("resnet")
    pt.export(model, (x,), tmp_path / "mlp")
    pt.export(cnn, (image,), tmp_path / "cnn")
    pt.export(saxpy, None, tmp_path / "saxpy")
    torch.save({"x": x, "y": model(x).detach(), "image": image, "logits": cnn(image).detach()}, tmp_path / "io.pt")
    script = textwrap.dedent(f"""
        import shutil, numpy as np, torch, polytri as pt
        assert shutil.which("cc") is None and shutil.which("gcc") is None
        io = torch.load({str(tmp_path / 'io.pt')!r})
        torch.testing.assert_close(pt.load({str(tmp_path / 'mlp')!r})(io["x"]), io["y"])
        torch.testing.assert_close(pt.load({str(tmp_path / 'cnn')!r})(io["image"]), io["logits"],
                                   rtol=1e-4, atol=1e-4)
        y = np.ones(7, np.float32)
        pt.load({str(tmp_path / 'saxpy')!r})(a=np.array([2.0], np.float32), x=np.arange(7, dtype=np.float32), y=y)
        assert y.tolist() == [1 + 2 * i for i in range(7)], y
        print("ok")
    """)
    env = {"PATH": str(tmp_path / "no-bin"), "HOME": os.environ.get("HOME", "/tmp"),
           "POLYTRI_CACHE_DIR": str(tmp_path / "empty-cache"), "PYTHONPATH": str(Path(pt.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    return pt.export(saxpy, None, tmp_path / "saxpy")


def _edit_manifest(path: Path, **fields: object) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    manifest.update(fields)
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(("fields", "message"), [
    ({"polytri_version": "0.0.1"}, "exported by polytri 0.0.1"),
    ({"target": "nvgpu"}, "exported for target 'nvgpu'"),
    ({"isa": ["avx_from_the_future"]}, "built for a CPU with avx_from_the_future"),
    ({"format": 99}, "artifact format 99"),
])
def test_foreign_artifacts(artifact: Path, fields: dict[str, object], message: str) -> None:
    _edit_manifest(artifact, **fields)
    with pytest.raises(pt.ArtifactError, match=message):
        pt.load(artifact)


def test_damaged_artifacts(artifact: Path) -> None:
    library = next((artifact / "kernels").glob("*.so"))
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))
    with pytest.raises(pt.ArtifactError, match=r"file kernels/.*\.so is damaged"):
        pt.load(artifact)
    library.unlink()
    with pytest.raises(pt.ArtifactError, match=r"file kernels/.*\.so is missing"):
        pt.load(artifact)
    (artifact / "manifest.json").write_text("{not json")
    with pytest.raises(pt.ArtifactError, match="manifest.json is damaged"):
        pt.load(artifact)
    with pytest.raises(pt.ArtifactError, match="no such artifact"):
        pt.load(artifact.parent / "elsewhere")


def test_failed_export_writes_nothing(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)).train()
    with pytest.raises(pt.UnsupportedError, match=r"model.eval\(\)"):
        pt.export(model, torch.randn(3, 4), tmp_path / "bn")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.txt").write_text("mine")
    with pytest.raises(pt.ArtifactError, match="not a polytri artifact"):
        pt.export(saxpy, None, tmp_path / "data")
    assert (tmp_path / "data" / "keep.txt").read_text() == "mine"


def test_export_replaces_an_artifact(artifact: Path) -> None:
    before = json.loads((artifact / "manifest.json").read_text())
    pt.export(saxpy, None, artifact, compile_options={"schedule": "original"})
    after = json.loads((artifact / "manifest.json").read_text())
    assert (before["options"], after["options"]) == ({}, {"schedule": "original"})
    assert [p.name for p in artifact.parent.iterdir()] == [artifact.name]


def test_disk_cache_keeps_the_parallel_threshold() -> None:
    """A kernel read back from the torch frontend's disk cache opens parallel regions at the same work as
    the one compiled (it used to come back with the threshold 0: every region opened)."""
    b = pt.Program("scale2d", params=["N"])
    b.array("A", ("N", "N"))
    b.array("B", ("N", "N"))
    with b.loop("i", 0, "N"), b.loop("j", 0, "N"):
        b.assign("B[i, j] = 2 * A[i, j]")
    first = compile_cached(b, "cpu", {"min_parallel_work": 12345.0})
    again = compile_cached(b, "cpu", {"min_parallel_work": 12345.0})
    assert kernel_parts(first)["min_parallel_work"] == 12345.0
    assert again is not first and again.min_parallel_work == 12345.0


def test_benchmark_row() -> None:
    """benchmarks/aot.py still runs: one row with every column filled."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("polytri_bench_aot", Path(__file__).parents[1] / "benchmarks/aot.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cells = [c.strip() for c in bench.row("mlp", False, 1).strip("|").split("|")]
    assert cells[0] == "mlp" and len(cells) == 8
    assert all(re.fullmatch(r"[\d.]+( s|x)?", c) for c in cells[2:]), cells
