"""Argument validation at call time (issue 8, item 2): every class of bad argument is an ArgumentError
naming the argument, raised by the compiled kernel and the reference alike, with the user's arrays
untouched.  Non-contiguous but otherwise sound arrays are copied in and out (docs/reliability.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import polytri as pt
from polytri.ir import to_program
from polytri.runtime.args import bind


def _program() -> pt.Program:
    p = pt.Program("argv", params=["N", "T"])
    p.array("A", ("N", "N"), "float64")
    p.array("B", ("N",), "float64")
    p.scalar("s", "float64")
    with p.loop("t", 0, "T"):
        with p.loop("i", 0, "N"):
            p.assign("B[i] = B[i] + A[i, i] * s")
    return p


@pytest.fixture(scope="module")
def kernel():  # type: ignore[no-untyped-def]
    return pt.compile(_program())


def _good() -> dict[str, Any]:
    return {"A": np.arange(16.0).reshape(4, 4), "B": np.full(4, 7.0), "s": 2.0, "T": 1}


def _overlapping() -> np.ndarray:
    base = np.zeros(8)
    return np.lib.stride_tricks.as_strided(base, shape=(4, 4), strides=(8, 8))


def _misaligned() -> np.ndarray:
    raw = np.zeros(4 * 8 + 1, np.uint8)
    x = raw[1:].view(np.float64)
    assert not x.flags.aligned
    return x


def _sparse() -> torch.Tensor:
    return torch.eye(4, dtype=torch.float64).to_sparse()


BAD: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]], list[str]]] = [
    ("missing", lambda a: {k: v for k, v in a.items() if k != "A"}, ["missing", "A"]),
    ("unknown", lambda a: {**a, "Q": 3}, ["unknown", "Q", "expected"]),
    ("shapes disagree", lambda a: {**a, "B": np.zeros(5)}, ["'B'", "extent 5"]),
    ("shape vs parameter", lambda a: {**a, "N": 3}, ["N=3"]),
    ("wrong rank", lambda a: {**a, "A": np.zeros(16)}, ["'A'", "rank 2"]),
    ("wrong dtype", lambda a: {**a, "B": np.zeros(4, np.float32)}, ["'B'", "float64", "float32"]),
    ("unsupported dtype", lambda a: {**a, "B": np.zeros(4, np.int16)}, ["'B'", "int16"]),
    ("byte order", lambda a: {**a, "B": np.zeros(4, ">f8")}, ["'B'", "byte order"]),
    ("misaligned", lambda a: {**a, "B": _misaligned()}, ["'B'", "aligned"]),
    ("self-overlapping strides", lambda a: {**a, "A": _overlapping()}, ["'A'", "overlap", "strides"]),
    ("broadcast", lambda a: {**a, "B": torch.zeros(1, dtype=torch.float64).expand(4)}, ["'B'", "stride 0"]),
    ("masked", lambda a: {**a, "B": np.ma.masked_array(np.zeros(4), mask=[0, 1, 0, 0])}, ["'B'", "mask"]),
    ("sparse", lambda a: {**a, "A": _sparse()}, ["'A'", "sparse", "to_dense"]),
    ("lazy negation", lambda a: {**a, "B": torch._neg_view(torch.zeros(4, dtype=torch.float64))},
     ["'B'", "negated"]),
    ("wrong device", lambda a: {**a, "B": torch.zeros(4, dtype=torch.float64, device="meta")},
     ["'B'", "meta", "cpu target"]),
    ("not an array", lambda a: {**a, "A": [[0.0] * 4] * 4}, ["'A'", "list"]),
    ("negative parameter", lambda a: {**a, "T": -1}, ["'T'", "-1", "negative"]),
    ("non-int parameter", lambda a: {**a, "T": 1.5}, ["'T'", "int"]),
    ("missing parameter", lambda a: {k: v for k, v in a.items() if k != "T"}, ["T", "infer"]),
    ("scalar type", lambda a: {**a, "s": "2"}, ["'s'", "number"]),
    ("complex scalar", lambda a: {**a, "s": 1 + 2j}, ["'s'", "real number", "complex"]),
    ("aliasing arrays", lambda a: {**a, "B": a["A"][0]}, ["'A'", "'B'", "overlap"]),
]


@pytest.mark.cc
@pytest.mark.parametrize("label, mutate, needles", BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_name_the_culprit_and_write_nothing(kernel, label, mutate, needles) -> None:  # type: ignore[no-untyped-def]
    for run in (kernel, lambda **kw: pt.reference(_program(), **kw)):
        args = mutate(_good())
        before = {k: (v.clone() if isinstance(v, torch.Tensor) and v.layout == torch.strided and v.device.type == "cpu"
                      else np.array(v, copy=True)) for k, v in args.items()
                  if isinstance(v, np.ndarray) or (isinstance(v, torch.Tensor) and v.device.type == "cpu"
                                                   and v.layout == torch.strided and not v.is_neg())}
        with pytest.raises(pt.ArgumentError) as info:
            run(**args)
        msg = str(info.value)
        for needle in needles:
            assert needle in msg, f"{label}: {msg}"
        for k, v in before.items():
            now = args[k]
            assert np.array_equal(np.asarray(now), np.asarray(v)), f"{label}: {k} was modified by a rejected call"


@pytest.mark.cc
def test_the_good_call_is_accepted(kernel) -> None:  # type: ignore[no-untyped-def]
    """Control for the table above."""
    for run in (kernel, lambda **kw: pt.reference(_program(), **kw)):
        args = _good()
        run(**args)
        np.testing.assert_array_equal(args["B"], [7.0, 17.0, 27.0, 37.0])


def test_devices_of_a_gpu_call_must_agree() -> None:
    """A GPU target accepts CPU tensors (Triton's interpreter) or device tensors, not a mixture."""
    prog = to_program(_program())
    args = {"A": torch.zeros(4, 4, dtype=torch.float64), "B": torch.zeros(4, dtype=torch.float64), "s": 1.0, "T": 1}
    assert bind(prog, args, device="cuda").params == {"N": 4, "T": 1}
    args["B"] = torch.zeros(4, dtype=torch.float64, device="meta")
    with pytest.raises(pt.ArgumentError) as info:
        bind(prog, args, device="cuda")
    assert "'B'" in str(info.value) and "meta" in str(info.value) and "'A'" in str(info.value)


@pytest.mark.cc
@pytest.mark.parametrize("make", [
    lambda: np.zeros((4, 8))[:, ::2],                       # strided rows
    lambda: np.zeros((4, 4)).T,                             # Fortran order
    lambda: np.zeros((4, 4))[::-1],                         # negative stride
    lambda: torch.zeros(4, 4, dtype=torch.float64).T,       # transposed tensor
    lambda: torch.zeros(16, dtype=torch.float64).as_strided((4, 4), (1, 4)),  # column-major view
], ids=["strided", "fortran", "reversed", "torch-T", "torch-colmajor"])
def test_non_contiguous_arrays_are_copied_in_and_out(kernel, make) -> None:  # type: ignore[no-untyped-def]
    """Copy-in/copy-out policy: any layout whose elements are distinct works, and results land in the
    caller's view."""
    a = make()
    a[...] = torch.arange(16.0, dtype=torch.float64).reshape(4, 4) if isinstance(a, torch.Tensor) else \
        np.arange(16.0).reshape(4, 4)
    b = np.full(4, 7.0)
    kernel(A=a, B=b, s=2.0, T=1)
    np.testing.assert_array_equal(b, [7.0, 17.0, 27.0, 37.0])
    bt = torch.full((8,), 7.0, dtype=torch.float64)[::2]
    kernel(A=a, B=bt, s=1.0, T=2)
    np.testing.assert_array_equal(bt.numpy(), [7.0, 17.0, 27.0, 37.0])


def test_size_one_dimensions_with_any_stride_are_accepted() -> None:
    prog = to_program(_program())
    a = torch.zeros(4, 4, dtype=torch.float64)
    b = torch.zeros(4, 1, dtype=torch.float64).T[0]  # stride of a size-1 dimension is irrelevant
    assert bind(prog, {"A": a, "B": b, "s": 1.0, "T": 0}).params["N"] == 4
    odd = torch.zeros(4, dtype=torch.float64).as_strided((1, 4), (99, 1))
    p = pt.Program("one", params=["N"])
    p.array("X", (1, "N"), "float64")
    with p.loop("i", 0, "N"):
        p.assign("X[0, i] = 1.0")
    assert bind(to_program(p), {"X": odd}).params == {"N": 4}
