"""The estimate of global memory traffic (polytri/fusion/traffic.py, polytri/frontend/torch_traffic.py)
that pt.explain sets against the unfused total, per kernel."""

from __future__ import annotations

import pytest

import polytri as pt
from polytri.fusion.traffic import footprint_bytes, kernel_traffic, live_in
from polytri.ir import to_program


def _chain() -> pt.Program:
    p = pt.Program("chain", params=["N"])
    p.array("X", ("N",))
    p.array("T", ("N",))
    p.array("A", ("N",))
    p.array("Y", ("N",))
    with p.loop("i", 0, "N"):
        p.assign("T[i] = X[i] * 2.0")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = A[i] + T[i]")
    with p.loop("i", 0, "N"):
        p.assign("Y[i] = T[i] + 1.0")
    return p


def test_each_array_moves_once_per_direction_and_stored_temporaries_twice() -> None:
    prog = to_program(_chain())
    assert live_in(prog) == {"X", "A"}  # T is read after it is written; Y is never read
    t = kernel_traffic(prog, {"N": 100}, temporaries=("T",))
    got = {a.array: (a.bytes, a.why) for a in t.arrays}
    assert got == {"X": (800, "read"), "T": (1600, "temporary stored and read back"),
                   "A": (1600, "read and written"), "Y": (800, "written")}
    assert t.bytes == 4800


def test_temporaries_kept_local_or_recomputed_move_nothing() -> None:
    prog = to_program(_chain())
    t = kernel_traffic(prog, {"N": 10}, temporaries=("T",), local=("T",))
    assert {a.array: a.bytes for a in t.arrays}["T"] == 0
    k = pt.compile(_chain(), "cpu", options={"temporaries": ("T",)})  # T is recomputed where it is read
    t = kernel_traffic(k.program, {"N": 10}, temporaries=("T",), local=getattr(k, "local_arrays", ()))
    assert {a.array: (a.bytes, a.why) for a in t.arrays}["T"] == (0, "not accessed (recomputed where it is read)")


@pytest.mark.cc
def test_the_c_generator_reports_the_arrays_it_holds_in_local_buffers() -> None:
    p = pt.Program("rows", params=["N", "M"])
    p.array("X", ("N", "M"))
    p.array("E", ("N", "M"))
    p.array("s", ("N",))
    p.array("Y", ("N", "M"))
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "M"):
            p.assign("E[i, j] = exp(X[i, j])")
        p.assign("s[i] = 0.0")
        with p.loop("j", 0, "M"):
            p.assign("s[i] += E[i, j]")
        with p.loop("j", 0, "M"):
            p.assign("Y[i, j] = E[i, j] / s[i]")
    k = pt.compile(p, "cpu", options={"temporaries": ("E", "s"), "fuse": "outer", "tile": False})
    assert k.local_arrays == {"s"}, k.source  # E is recomputed where it is read: no array at all
    assert "pt_loc_s" in k.source and "pt_loc_E" not in k.source
    t = kernel_traffic(k.program, {"N": 4, "M": 8}, temporaries=("E", "s"), local=k.local_arrays)
    assert t.bytes == 2 * 4 * 8 * 8  # X read, Y written (float64)


torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.mark.cc
def test_explain_sets_each_kernel_against_one_kernel_per_operator() -> None:
    x, y = torch.randn(32, 16), torch.randn(32, 16)
    rep = pt.explain(lambda a, b: torch.sigmoid(a * b + 1.0) * torch.tanh(a - b), x, y)
    (k,) = rep.kernels
    size = 32 * 16 * 4
    assert k.bytes_moved == 3 * size  # a and b read, the result written: the intermediates are inlined
    # mul, add, sigmoid, sub, tanh, mul: 2 + 1 + 1 + 2 + 1 + 2 tensors read, 6 written
    assert k.unfused_bytes == (9 + 6) * size
    assert "estimated global memory traffic: 6.0 KiB, against 30.0 KiB unfused" in str(rep), str(rep)


@pytest.mark.cc
def test_a_softmax_on_the_cpu_moves_its_input_and_output_only() -> None:
    x = torch.randn(8, 64)
    (k,) = pt.explain(lambda a: torch.softmax(a, -1), x).kernels
    assert k.bytes_moved == 2 * x.numel() * 4 == k.unfused_bytes
    assert {a.why for a in k.traffic.arrays if a.bytes == 0} >= {"never stored (local buffers or registers)"}


@pytest.mark.cc
def test_symbolic_sizes_are_taken_at_the_example() -> None:
    x = torch.randn(24, 8)
    torch._dynamo.mark_dynamic(x, 0)
    rep = pt.explain(lambda a: torch.exp(a) + 1.0, x)
    (k,) = rep.kernels
    assert k.program.split("\n")[0].endswith("]") and "[]" not in k.program.split("\n")[0], k.program
    assert k.bytes_moved == 2 * x.numel() * 4 and k.unfused_bytes == 4 * x.numel() * 4


@pytest.mark.cc
def test_a_product_read_only_by_its_epilogue_is_never_stored() -> None:
    w1, b1, w2, b2 = torch.randn(64, 32), torch.randn(64), torch.randn(32, 64), torch.randn(32)
    x = torch.randn(16, 32)
    (k,) = pt.explain(lambda a: F.linear(F.gelu(F.linear(a, w1, b1)), w2, b2), x).kernels
    why = {a.array: (a.bytes, a.why) for a in k.traffic.arrays}
    assert why["t_addmm"] == (0, "never stored (summed in tiles that the product's epilogue reads)"), why
    assert k.bytes_moved < k.unfused_bytes  # eager writes and reads each layer's product and the gelu



@pytest.mark.interp
def test_on_nvgpu_a_product_read_only_from_registers_moves_nothing() -> None:
    w1, b1, w2, b2 = torch.randn(64, 32), torch.randn(64), torch.randn(32, 64), torch.randn(32)
    x = torch.randn(16, 32)
    rep = pt.explain(lambda a: F.linear(F.gelu(F.linear(a, w1, b1)), w2, b2), x, compile_options={"target": "nvgpu"})
    (k,) = rep.kernels
    why = {a.array: (a.bytes, a.why) for a in k.traffic.arrays}
    assert why["t_addmm"] == (0, "never stored (local buffers or registers)"), why


def test_a_temporary_counts_the_box_of_elements_the_program_touches() -> None:
    """A temporary of which the program uses a part (a block of columns per row, as the online softmax
    keeps) moves that part: footprint_bytes is the bounding box of the accessed elements."""
    p = pt.Program("part", params=["N", "B"])
    p.array("X", ("N", "N"))
    p.array("T", ("N", "N"))
    p.array("Y", ("N",))
    with p.loop("i", 0, "N"), p.loop("j", 0, "B"):
        p.assign("T[i, j] = X[i, j] * 2.0")
    with p.loop("i", 0, "N"), p.loop("j", 0, "B"):
        p.assign("Y[i] = Y[i] + T[i, j]")
    prog = to_program(p)
    assert footprint_bytes(prog, "T", {"N": 10, "B": 3}) == 10 * 3 * 8
    assert footprint_bytes(prog, "T", {"N": 10, "B": 0}) == 0
    t = kernel_traffic(prog, {"N": 10, "B": 3}, temporaries=("T",))
    assert {a.array: a.bytes for a in t.arrays}["T"] == 2 * 10 * 3 * 8
