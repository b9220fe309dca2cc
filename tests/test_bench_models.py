"""``polytri bench --models`` runs end to end on the smallest case and fills every column, so it cannot rot
(no timing is judged here)."""

from __future__ import annotations

import os
import re

import pytest

from polytri.tools.bench_models import CACHE_VARIABLES, HEADER
from polytri.tools.cli import main

pytestmark = pytest.mark.cc


@pytest.mark.slow   # Inductor's first compile in a process: 20 s (make fuzz)
def test_models_benchmark_row_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    before = {v: os.environ.get(v) for v in CACHE_VARIABLES}
    assert main(["bench", "--models", "--only", "mlp", "--dtypes", "float32", "--threads", "1",
                 "--model-repeat", "1"]) == 0
    assert {v: os.environ.get(v) for v in CACHE_VARIABLES} == before  # the run's fresh caches are gone
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("mlp"))
    cells = dict(zip(HEADER, re.split(r"\s{2,}", row.strip())))
    assert cells["dtype"] == "float32" and cells["threads"] == "1" and cells["right"] == "yes"
    assert cells["ops in eager"] == "none" and int(cells["kernels"]) >= 1
    for col in ("eager ms", "inductor ms", "polytri ms"):
        assert float(cells[col]) > 0
    assert re.match(r"^\d+\.\d\dx$", cells["polytri/inductor"])
    assert "float32, 1 thread(s): geomean time polytri/inductor" in out and "load average" in out
    assert re.search(r"instruction sets: polytri (256|512|128)-bit vectors \(POLYTRI_MAX_ISA=native\), PyTorch \w+", out)


def test_models_benchmark_rejects_bad_counts() -> None:
    with pytest.raises(SystemExit, match="at least 1"):
        main(["bench", "--models", "--threads", "0"])


def test_the_command_line_names_every_zoo_model_without_importing_torch() -> None:
    import subprocess
    import sys

    from polytri.suite.models import MODELS as ZOO_MODELS
    from polytri.suite.models import TRANSFORMERS as ZOO_TRANSFORMERS
    from polytri.tools.bench_models import MODELS, TRANSFORMERS
    assert sorted(MODELS) == sorted(ZOO_MODELS) and sorted(TRANSFORMERS) == sorted(ZOO_TRANSFORMERS)
    code = "import sys; from polytri.tools.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_without_transformers_its_models_are_left_out_or_an_error(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from polytri.tools import bench_models
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    assert bench_models.selected(None) == ["mlp", "mobilenet", "resnet", "vit"]
    assert "bert, gpt2: left out (transformers is not installed" in capsys.readouterr().err
    assert bench_models.selected(["vit"]) == ["vit"]
    with pytest.raises(SystemExit, match=r"gpt2 need\(s\) transformers: pip install 'polytri\[transformers\]'"):
        bench_models.selected(["mlp", "gpt2"])
    monkeypatch.setattr(importlib.util, "find_spec", real)
    if real("transformers") is not None:
        assert bench_models.selected(None) == list(bench_models.MODELS)
