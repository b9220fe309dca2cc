"""The API reference (docs/api/, built by ``make docs``) and ``help(pt.compile)``: every option of every
target is rendered from its options class, and every public name of ``polytri`` has an entry."""

from __future__ import annotations

import pydoc
import re
from dataclasses import fields
from pathlib import Path

import polytri as pt
from polytri.frontend.torch_options import TorchOptions
from polytri.pipeline import get_target, target_names
from polytri.pipeline.option_doc import accepted, options_text, target_options_text

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"


def entries(text: str) -> list[str]:
    """The option names of a rendered list: the first word of each line that starts an entry."""
    return re.findall(r"^\s*(\w+) \(default ", text, flags=re.M)


def test_help_of_compile_lists_every_option_of_every_built_in_target() -> None:
    text = pydoc.render_doc(pt.compile, renderer=pydoc.plaintext)
    for name in ("cpu", "nvgpu", "amdgpu"):
        assert f"'{name}'" in text
    listed = entries(text)
    expected = [f.name for name in ("cpu", "nvgpu") for f in fields(get_target(name).options_class)]
    assert listed == expected
    assert "fma (default False; True or False)" in text


def test_targets_sharing_an_options_class_are_listed_once() -> None:
    text = target_options_text(target_names())
    assert "Options of the 'nvgpu' and 'amdgpu' targets" in text
    assert text.count("fp32_dot (default") == 1


def test_the_frontend_options_render_from_their_class() -> None:
    text = options_text(TorchOptions, "Options of the PyTorch frontend")
    assert entries(text) == [f.name for f in fields(TorchOptions)]
    assert "fuse (default None; 'smart', 'max', 'none', 'outer' or None)" in text


def test_accepted_values_in_words() -> None:
    assert accepted(bool | None) == "True, False or None"
    assert accepted(tuple[str, ...]) == "a tuple of strings"
    assert accepted(int) == "an int"


def test_every_public_name_has_an_entry_in_the_reference() -> None:
    pages = "\n".join(p.read_text() for p in API.glob("*.rst"))
    for name in pt.__all__:
        obj = getattr(pt, name)
        module = getattr(obj, "__module__", "")
        qualname = getattr(obj, "__qualname__", "")  # none for an instance (pt.f64)
        canonical = f"{module}.{qualname}" if qualname else f"polytri.{name}"
        whole_module = re.search(rf"automodule:: {re.escape(module)}\n   :members:\n", pages)
        assert f"polytri.{name}" in pages or canonical in pages or whole_module, \
            f"polytri.{name} has no entry in docs/api/*.rst: add one"
    for kernel in ("polytri.cpu_codegen.kernel.CpuKernel", "polytri.codegen_triton.kernel.TritonKernel"):
        assert f"autoclass:: {kernel}" in pages
    assert "polytri-options:: polytri.frontend.torch_options.TorchOptions" in pages


def test_the_pytorch_guide_lists_every_frontend_option_and_the_error_it_prints() -> None:
    from polytri.frontend.torch_options import check_options

    text = (ROOT / "docs" / "pytorch.md").read_text()
    table = text[text.index("## Options"):text.index("Unknown options are an error")]
    for f in fields(TorchOptions):
        assert f"`{f.name}`" in table, f.name
    try:
        check_options({"tile_sizes": 32})
    except pt.OptionError as exc:
        assert f"```text\n{exc}\n```" in text
    else:
        raise AssertionError("an unknown option was accepted")
