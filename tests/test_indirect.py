"""Indirect subscripts (polytri/ir/indirect.py): reads at values of integer index arrays, in the builder,
the text form, the verifier, the dependences, the reference, the C and Triton printers, and the call-time
check of the index values."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polytri as pt
from polytri.ir.textform import parse_program

TARGETS = ["cpu", pytest.param("nvgpu", marks=pytest.mark.interp)]


def _embedding() -> pt.Program:
    p = pt.Program("emb", params=["B", "V", "H"])
    p.array("W", ("V", "H"), "float32")
    p.array("ids", ("B",), "int64")
    p.array("out", ("B", "H"), "float32")
    with p.loop("i", 0, "B"), p.loop("j", 0, "H"):
        p.assign("out[i, j] = W[ids[i], j] * 2.0")
    return p


def _args(ids: list[int]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"W": rng.standard_normal((7, 5)).astype(np.float32), "ids": np.array(ids, dtype=np.int64),
            "out": np.zeros((len(ids), 5), np.float32)}


def test_the_access_map_ranges_over_the_whole_dimension_and_the_text_form_round_trips() -> None:
    prog = _embedding().build()
    reads = str(prog.reads)
    assert "ids[i]" in reads and "W[x0, j]" in reads and "0 <= x0 < V" in reads
    assert parse_program(str(prog)) == prog


@pytest.mark.parametrize("target", TARGETS)
def test_embedding_equals_numpy_and_the_reference(target: str) -> None:
    prog = _embedding()
    want, got = _args([3, 0, 6, 6]), _args([3, 0, 6, 6])
    pt.reference(prog, **want)
    np.testing.assert_array_equal(want["out"], want["W"][want["ids"]] * 2)
    pt.compile(prog, target=target)(**got)
    np.testing.assert_array_equal(got["out"], want["out"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bad", [7, -1])
def test_an_index_out_of_range_is_a_clear_error_and_nothing_is_written(target: str, bad: int) -> None:
    prog = _embedding()
    kernel = pt.compile(prog, target=target)
    for run in (kernel, lambda **kw: pt.reference(prog, **kw)):
        args = _args([3, bad, 0])
        with pytest.raises(pt.IndexValueError, match=rf"index array 'ids'.* equal {bad}, out of range for "
                                                     r"dimension 0 of array 'W' \(size 7\)") as err:
            run(**args)
        assert isinstance(err.value, IndexError)
        assert not args["out"].any()


@pytest.mark.parametrize("target", TARGETS)
def test_wrapped_negative_indices_on_two_dimensions_and_an_affine_one(target: str) -> None:
    p = pt.Program("pick", params=["N", "R", "C"])
    p.array("A", ("R", "C", 3), "float64")
    p.array("r", ("N",), "int32")
    p.array("c", ("N",), "int64")
    p.array("out", ("N", 2), "float64")
    with p.loop("i", 0, "N"), p.loop("k", 0, 2):
        p.assign("out[i, k] = A[where(r[i] < 0, r[i] + R, r[i]), where(c[i] < 0, c[i] + C, c[i]), k + 1]")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6, 3))
    r, c = np.array([0, -1, 3, -4], np.int32), np.array([5, -6, 2, 0])
    got = np.zeros((4, 2))
    pt.compile(p, target=target)(A=a, r=r, c=c, out=got)
    np.testing.assert_array_equal(got, a[r, c, 1:])
    with pytest.raises(pt.IndexValueError, match="'r'"):
        pt.compile(p, target=target)(A=a, r=np.array([0, -5, 0, 0], np.int32), c=c, out=got)


def test_only_the_values_the_program_reads_are_checked() -> None:
    """The triangle j <= i is not a box: the garbage above the diagonal of ``ids`` is never read."""
    p = pt.Program("tri", params=["N", "V"])
    p.array("W", ("V",), "float64")
    p.array("ids", ("N", "N"), "int64")
    p.array("out", ("N", "N"), "float64")
    with p.loop("i", 0, "N"), p.loop("j", 0, "i + 1"):
        p.assign("out[i, j] = W[ids[i, j]]")
    w = np.arange(5.0)
    ids = np.tril(np.arange(16).reshape(4, 4) % 5) + np.triu(np.full((4, 4), 99), 1)
    want, got = np.zeros((4, 4)), np.zeros((4, 4))
    pt.reference(p, W=w, ids=ids, out=want)
    pt.compile(p)(W=w, ids=ids, out=got)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, np.tril(w[np.tril(ids)]))


def _producer_then_gather(*, anti: bool) -> pt.Program:
    """``A`` written by one loop and read at ``A[idx[i]]`` by another (after it, or before it with
    ``anti``): fusing the loops would read elements not yet written (or already overwritten)."""
    p = pt.Program("dep_anti" if anti else "dep_flow", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    p.array("idx", ("N",), "int64")
    p.array("out", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("out[i] = A[idx[i]]" if anti else "A[i] = B[i] * 2.0")
    with p.loop("k", 0, "N"):
        p.assign("A[k] = B[k] * 2.0" if anti else "out[k] = A[idx[k]] + 1.0")
    return p


@pytest.mark.parametrize("anti", [False, True])
@pytest.mark.parametrize("target", TARGETS)
def test_the_over_approximation_forbids_fusing_a_write_with_an_indirect_read(target: str, anti: bool) -> None:
    p = _producer_then_gather(anti=anti)
    deps = pt.dependences(p)
    every_pair = isl.UnionMap("[N] -> { S0[i] -> S1[k] : 0 <= i < N and 0 <= k < N }")
    assert (deps.anti if anti else deps.flow).is_equal(every_pair)  # any k may touch any element
    n = 9
    args = {"A": np.arange(n, dtype=np.float64), "B": np.arange(n) + 10.0,
            "idx": np.arange(n)[::-1].copy(), "out": np.zeros(n)}
    want = {k: v.copy() for k, v in args.items()}
    pt.reference(p, **want)
    for fuse in ("max", "smart"):
        got = {k: v.copy() for k, v in args.items()}
        pt.compile(p, target=target, options={"fuse": fuse})(**got)
        np.testing.assert_array_equal(got["out"], want["out"])
        np.testing.assert_array_equal(got["A"], want["A"])


def test_malformed_indirect_subscripts_are_rejected() -> None:
    p = pt.Program("bad", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("f", ("N",), "float32")
    p.array("ids", ("N",), "int64")
    with p.loop("i", 0, "N"):
        with pytest.raises(pt.TypeCheckError, match="index array 'f' has dtype float32"):
            p.assign("A[i] = A[f[i]]")
        with pytest.raises(pt.NotAffineError, match="index arrays are read at affine subscripts"):
            p.assign("A[i] = A[ids[ids[i]]]")
        with pytest.raises(pt.NotAffineError):
            p.assign("A[ids[i]] = 1.0")
        p.assign("ids[i] = i")
        p.assign("A[i] = A[ids[i]]")
    with pytest.raises(pt.ProgramError, match="index array 'ids' .* is written by statement S0"):
        pt.compile(p)


def test_one_index_check_built_for_the_parameters_checks_every_later_call() -> None:
    from polytri.runtime.index_check import IndexCheck
    prog = _embedding().build()
    check = IndexCheck(prog, {"B": 3, "V": 7, "H": 5})
    assert [(s.statement.name, s.dim, s.extent) for s in check.subscripts] == [("S0", 0, 7)]
    check(_args([3, 6, 0]), {})
    for bad in (7, -1):
        with pytest.raises(pt.IndexValueError, match=rf"equal {bad}, out of range"):
            check(_args([3, bad, 0]), {})
    check(_args([0, 0, 6]), {})


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_block_of_an_index_array_is_checked_by_its_least_and_greatest_values(kind: str) -> None:
    """A subscript that is a block of one index array (here a column, whose neighbour holds garbage the
    program never reads) is checked by the block's least and greatest values alone; a value out of range
    still gets the full message."""
    import torch

    from polytri.runtime.index_check import IndexCheck
    p = pt.Program("col", params=["N", "V"])
    p.array("W", ("V",), "float64")
    p.array("ids", ("N", 2), "int64")
    p.array("out", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("out[i] = W[ids[i, 1]]")
    check = IndexCheck(p.build(), {"N": 4, "V": 5})
    assert [s.block for s in check.subscripts] == [("ids", (slice(0, 4), 1))]
    as_array = torch.from_numpy if kind == "torch" else np.asarray
    ids = np.array([[99, 0], [-7, 4], [99, 2], [99, 1]])
    check({"W": as_array(np.zeros(5)), "ids": as_array(ids), "out": as_array(np.zeros(4))}, {})
    ids[2, 1] = 5
    with pytest.raises(pt.IndexValueError, match="equal 5, out of range"):
        check({"W": as_array(np.zeros(5)), "ids": as_array(ids), "out": as_array(np.zeros(4))}, {})


def test_a_wrapped_block_of_an_index_array_is_checked_by_its_least_and_greatest_values() -> None:
    """``where(x < 0, x + 5, x)`` (a negative index counted from the end) is in range for -5 <= x < 5."""
    from polytri.runtime.index_check import IndexCheck
    p = pt.Program("wrap", params=["N"])
    p.array("W", (5,), "float64")
    p.array("ids", ("N",), "int64")
    p.array("out", ("N",), "float64")
    with p.loop("i", 0, "N"):
        p.assign("out[i] = W[where(ids[i] < 0, ids[i] + 5, ids[i])]")
    check = IndexCheck(p.build(), {"N": 3})
    assert [(s.block, s.low) for s in check.subscripts] == [(("ids", (slice(0, 3),)), -5)]
    check({"W": np.zeros(5), "ids": np.array([-5, 4, 0]), "out": np.zeros(3)}, {})
    for bad in (-6, 5):
        with pytest.raises(pt.IndexValueError, match=f"equal {bad + 5 if bad < 0 else bad}, out of range"):
            check({"W": np.zeros(5), "ids": np.array([0, bad, 1]), "out": np.zeros(3)}, {})
