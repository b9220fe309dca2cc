"""``POLYTRI_MAX_ISA`` (polytri/cpu_codegen/isa.py): the instruction sets of the generated C capped below
this CPU's, and the CPU's instruction sets in every cache key of code built with ``-march=native``."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import polytri as pt
import polytri.cpu_codegen.build as build_module
import polytri.cpu_codegen.isa as isa_module
from polytri.cpu_codegen.blocking import blocking, tiles_permitted, vector_bytes
from polytri.cpu_codegen.build import build_library, default_flags
from polytri.dtypes import FLOAT32
from polytri.errors import OptionError

pytestmark = pytest.mark.cc

def _clear_caches() -> None:
    """The variable's cached reading, the flags, and every choice cached from them (isa's dependents)."""
    isa_module.max_isa.cache_clear()
    isa_module._clear()


@pytest.fixture
def cap(monkeypatch: pytest.MonkeyPatch):
    """Sets ``POLYTRI_MAX_ISA`` for the test (the caches that read it are cleared before and after)."""
    def set_cap(value: str) -> None:
        monkeypatch.setenv(isa_module.VARIABLE, value)
        _clear_caches()
    yield set_cap
    monkeypatch.delenv(isa_module.VARIABLE, raising=False)
    _clear_caches()


def test_an_unknown_cap_is_an_error_naming_the_variable(cap) -> None:
    cap("sse9")
    with pytest.raises(OptionError, match=r"POLYTRI_MAX_ISA='sse9': expected one of native, avx512, avx2"):
        isa_module.cpu_flags()


def test_native_keeps_every_flag_and_adds_no_compiler_flag(cap) -> None:
    cap("")
    assert isa_module.max_isa() == "native"
    assert isa_module.cpu_flags() == isa_module._proc_flags()
    assert isa_module.cap_cflags() == ()
    assert default_flags("cc") == build_module.DEFAULT_FLAGS


def test_avx512_cap_leaves_out_amx_only(cap) -> None:
    cap("avx512")
    flags = isa_module.cpu_flags()
    assert flags == frozenset(f for f in isa_module._proc_flags() if not f.startswith("amx"))
    assert isa_module.cap_cflags() == ("-mno-amx-tile",) and not tiles_permitted()
    assert default_flags("cc")[-1] == "-mno-amx-tile"


def _gemm() -> pt.Program:
    p = pt.Program("capped", params=["M", "N", "K"])
    p.array("C", ("M", "N"), "float32")
    p.array("A", ("M", "K"), "float32")
    p.array("B", ("K", "N"), "float32")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"), p.loop("k", 0, "K"):
        p.assign("C[i, j] += A[i, k] * B[k, j]")
    return p


def test_avx2_cap_builds_32_byte_code_on_a_wider_machine(cap) -> None:
    """Under ``avx2`` the flags lose AVX-512 and AMX, the vectors are 32 bytes (6 x 16 float32 blocks), the
    compiler is told not to emit AVX-512, and a packed gemm built so is right and uses no ``zmm``
    register."""
    cap("avx2")
    if "avx2" not in isa_module.cpu_flags():
        pytest.skip("needs AVX2")
    assert not any(f.startswith(("avx512", "amx")) for f in isa_module.cpu_flags())
    assert vector_bytes() == 32 and blocking(FLOAT32).mr == 6 and not tiles_permitted()
    assert default_flags("cc")[-3:] == ("-mno-avx512f", "-mno-amx-tile", "-mno-avxvnni")
    rng = np.random.default_rng(0)
    M, N, K = 37, 45, 70
    A, B = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    C = np.zeros((M, N), np.float32)
    k = pt.compile(_gemm(), "cpu")
    assert "6 x 16 register blocks" in k.source
    k(C=C, A=A, B=B, M=M, N=N, K=K)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    if shutil.which("objdump") is None:
        pytest.skip("objdump is not installed")
    text = subprocess.run(["objdump", "-d", str(k.library)], capture_output=True, text=True, check=True).stdout
    assert "ymm" in text and "zmm" not in text


def test_the_machine_s_instruction_sets_are_part_of_the_library_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two machines that share a cache folder never load each other's ``-march=native`` libraries; code
    built without ``-march=native`` is shared."""
    source = "int pt_isa_key(void) { return 7; }\n"
    flags = ("-O1", "-fPIC", "-shared")
    here = build_library(source, cc="cc", flags=flags + ("-march=native",))
    plain = build_library(source, cc="cc", flags=flags)
    monkeypatch.setattr(build_module, "isa_flags", lambda: ["avx", "avx2", "sse"])
    assert build_library(source, cc="cc", flags=flags + ("-march=native",)) != here
    assert build_library(source, cc="cc", flags=flags) == plain


def test_reductions_and_skinny_products_take_the_cap_s_vector(cap) -> None:
    """Under ``avx2`` a float32 reduction keeps 8 partial results per vector, not 16, and the 4 rows of a
    skinny product keep 2 vectors each (8 of AVX2's 16 registers), not 4: the partial results of a linear
    layer on a batch of 4 stayed in memory, loaded and stored at every step."""
    torch = pytest.importorskip("torch")
    from polytri.frontend.torch_ops_reduce import chains_of, lanes_of
    cap("avx2")
    if "avx2" not in isa_module.cpu_flags():
        pytest.skip("needs AVX2")
    assert lanes_of(torch.float32) == 8 and lanes_of(torch.float64) == 4 and lanes_of(torch.int32) == 0
    assert chains_of(512, 8) == 4 and chains_of(512, 8, inside=4) == 2 and chains_of(512, 8, inside=8) == 1
    assert chains_of(64, 8) == 1  # fewer than 16 vectors: one chain
    lin = torch.nn.Linear(512, 32).eval()
    x = torch.randn(4, 512)
    with torch.no_grad():
        report = pt.explain(lin, x, compile_options={"target": "cpu"})
        torch.testing.assert_close(report.result, lin(x), rtol=1e-4, atol=1e-5)
    partials = [d.data["partials"] for k in report.kernels for d in k.lowering if d.kind == "reduction-lanes"]
    assert partials == [16], partials


def test_an_artifact_exported_under_a_smaller_cap_loads_on_the_whole_machine(cap, tmp_path) -> None:
    """Loading plans the graph again as the exporting machine did (its vector decides a reduction's
    lanes): exported as for an AVX2 machine, the MLP loads and runs where AVX-512 is there too, with the
    libraries built for AVX2 (before, the plan differed and no kernel of the artifact matched it)."""
    torch = pytest.importorskip("torch")
    cap("avx2")
    if "avx2" not in isa_module.cpu_flags():
        pytest.skip("needs AVX2")
    model = torch.nn.Sequential(torch.nn.Linear(512, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).eval()
    x = torch.randn(4, 512)
    with torch.no_grad():
        want = model(x)
        pt.export(model, (x,), tmp_path / "mlp")
    cap("")
    manifest = (tmp_path / "mlp" / "manifest.json").read_text()
    assert '"avx512f"' not in manifest and '"avx2"' in manifest
    torch.testing.assert_close(pt.load(tmp_path / "mlp")(x), want, rtol=1e-4, atol=1e-5)
    assert isa_module.cpu_flags() == isa_module._proc_flags()  # the machine's own flags again after loading
