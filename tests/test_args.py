"""Binding call arguments: parameter inference, explicit parameters, torch tensors, views and scalars."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import polytri as pt
from polytri.ir import to_program
from polytri.runtime.args import bind


def _shapes_program() -> pt.Program:
    p = pt.Program("shapes", params=["N", "M"])
    p.array("X", ("N + 1",), "float64")
    p.array("Y", ("M", "N"), "float64")
    with p.loop("i", 0, "N + 1"):
        p.assign("X[i] = 2 * i + N")
    with p.loop("j", 0, "M"):
        with p.loop("i", 0, "N"):
            p.assign("Y[j, i] = 10 * M + i")
    return p


def _expected_shapes(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    x = 2.0 * np.arange(n + 1) + n
    y = np.broadcast_to(10.0 * m + np.arange(n), (m, n))
    return x, y


def _runners(p: pt.Program) -> list[Any]:
    k = pt.compile(p)
    return [k, lambda **kw: pt.reference(p, **kw)]


def test_bind_infers_parameters_from_shapes() -> None:
    prog = to_program(_shapes_program())
    b = bind(prog, {"X": np.zeros(6), "Y": np.zeros((3, 5))})
    assert b.params == {"N": 5, "M": 3}
    assert set(b.arrays) == {"X", "Y"} and b.scalars == {}
    # an explicit value that agrees with the shapes is accepted, also as a numpy integer
    assert bind(prog, {"X": np.zeros(6), "Y": np.zeros((3, 5)), "N": np.int64(5)}).params == {"N": 5, "M": 3}
    with pytest.raises(pt.ArgumentError, match="extent 4 in dimension 1"):
        bind(prog, {"X": np.zeros(6), "Y": np.zeros((3, 4))})  # X says N = 5, Y says N = 4


@pytest.mark.cc
def test_inferred_parameters_drive_the_computation() -> None:
    p = _shapes_program()
    for run in _runners(p):
        x, y = np.zeros(6), np.zeros((3, 5))
        run(X=x, Y=y)
        ex, ey = _expected_shapes(5, 3)
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)


@pytest.mark.cc
def test_empty_extent_infers_zero() -> None:
    p = _shapes_program()
    for run in _runners(p):
        x, y = np.zeros(1), np.zeros((4, 0))
        run(X=x, Y=y)
        np.testing.assert_array_equal(x, [0.0])  # N = 0: X[0] = 2 * 0 + 0


def test_scaled_extent_inference() -> None:
    p = pt.Program("scaled", params=["N"])
    p.array("A", ("2 * N",), "float64")
    p.array("B", ("N - 1",), "float64")
    prog = to_program(p)
    assert bind(prog, {"A": np.zeros(8), "B": np.zeros(3)}).params == {"N": 4}
    with pytest.raises(pt.ArgumentError, match="'A'|'B'"):
        bind(prog, {"A": np.zeros(8), "B": np.zeros(4)})
    # 7 is no 2 * N, but N can still be learnt from B, and then A is the mismatch
    with pytest.raises(pt.ArgumentError, match="'A'"):
        bind(prog, {"A": np.zeros(7), "B": np.zeros(3)})


def _time_program() -> pt.Program:
    p = pt.Program("timed", params=["T", "N"])
    p.array("A", ("N",), "int64")
    with p.loop("t", 0, "T"):
        with p.loop("i", 0, "N"):
            p.assign("A[i] += t + 1")
    return p


@pytest.mark.cc
def test_explicit_parameters() -> None:
    p = _time_program()
    for run in _runners(p):
        a = np.zeros(4, np.int64)
        run(A=a, T=3)
        np.testing.assert_array_equal(a, np.full(4, 6))
        run(A=a, T=np.int32(2), N=4)
        np.testing.assert_array_equal(a, np.full(4, 9))
        run(A=a, T=0)
        np.testing.assert_array_equal(a, np.full(4, 9))
        with pytest.raises(pt.ArgumentError, match="T"):
            run(A=a)  # T appears in no shape
        with pytest.raises(pt.ArgumentError, match="N"):
            run(A=a, T=1, N=3)  # contradicts the shape
        np.testing.assert_array_equal(a, np.full(4, 9))


@pytest.mark.cc
def test_torch_tensors_are_written_in_place_zero_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _shapes_program()
    k = pt.compile(p)
    base = torch.zeros(10, dtype=torch.float64)
    x = base[2:8]                      # contiguous view with a storage offset
    y = torch.zeros(3, 5, dtype=torch.float64)
    ptrs = (x.data_ptr(), y.data_ptr())
    # a contiguous tensor is passed by pointer: nothing is copied back after the call
    import polytri.cpu_codegen.kernel as kernel_module

    def no_copy_back(*args: Any) -> None:
        raise AssertionError("a contiguous tensor was copied instead of being used in place")

    monkeypatch.setattr(kernel_module, "_write_back", no_copy_back, raising=False)
    k(X=x, Y=y)
    assert (x.data_ptr(), y.data_ptr()) == ptrs
    ex, ey = _expected_shapes(5, 3)
    np.testing.assert_array_equal(base[2:8].numpy(), ex)            # the caller's storage holds the result
    np.testing.assert_array_equal(base[:2].numpy(), [0, 0])         # and nothing around the view changed
    np.testing.assert_array_equal(base[8:].numpy(), [0, 0])
    np.testing.assert_array_equal(y.numpy(), ey)


def test_reference_on_torch_tensors() -> None:
    p = _shapes_program()
    base = torch.zeros(10, dtype=torch.float64)
    x, y = base[2:8], torch.zeros(3, 5, dtype=torch.float64)
    pt.reference(p, X=x, Y=y)
    ex, ey = _expected_shapes(5, 3)
    np.testing.assert_array_equal(base[2:8].numpy(), ex)
    np.testing.assert_array_equal(base[8:].numpy(), [0, 0])
    np.testing.assert_array_equal(y.numpy(), ey)


def _transpose_program() -> pt.Program:
    p = pt.Program("tr", params=["N", "M"])
    p.array("A", ("N", "M"), "float32")
    p.array("B", ("N", "M"), "float32")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "M"):
            p.assign("B[i, j] = B[i, j] + A[i, j] * 2.0 + float32(100 * i + j)")
    return p


def _transpose_expected(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, m = a.shape
    return b + a * 2 + (100 * np.arange(n)[:, None] + np.arange(m)[None, :]).astype(np.float32)


@pytest.mark.cc
def test_non_contiguous_numpy_views() -> None:
    p = _transpose_program()
    for run in _runners(p):
        abase = np.arange(60, dtype=np.float32).reshape(6, 10)
        bbase = np.arange(200, dtype=np.float32).reshape(10, 20) * -1
        borig = bbase.copy()
        a = abase[::2, 1::3]             # (3, 3) strided view
        b = bbase[1:4, ::-7]             # (3, 3) view with a negative stride
        assert not a.flags.c_contiguous and not b.flags.c_contiguous
        want = _transpose_expected(a.copy(), b.copy())
        run(A=a, B=b)
        np.testing.assert_array_equal(b, want)
        # only the viewed elements of the base changed
        mask = np.zeros(bbase.shape, bool)
        mask[1:4, ::-7] = True
        np.testing.assert_array_equal(bbase[~mask], borig[~mask])
        np.testing.assert_array_equal(abase, np.arange(60, dtype=np.float32).reshape(6, 10))


@pytest.mark.cc
def test_fortran_order_and_transposed_numpy() -> None:
    p = _transpose_program()
    for run in _runners(p):
        a = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
        bt = np.ones((4, 3), np.float32)
        b = bt.T
        want = _transpose_expected(a.copy(), b.copy())
        run(A=a, B=b)
        np.testing.assert_array_equal(b, want)
        np.testing.assert_array_equal(bt, want.T)


@pytest.mark.cc
def test_torch_transposes() -> None:
    p = _transpose_program()
    for run in _runners(p):
        at = torch.arange(12, dtype=torch.float32).reshape(4, 3)
        bt = torch.full((4, 3), 0.5)
        a, b = at.T, bt.T
        assert not a.is_contiguous() and not b.is_contiguous()
        want = _transpose_expected(a.numpy().copy(), b.numpy().copy())
        run(A=a, B=b)
        np.testing.assert_array_equal(b.numpy(), want)
        np.testing.assert_array_equal(bt.numpy(), want.T)   # written back into the caller's storage


@pytest.mark.cc
def test_disjoint_views_of_one_buffer_are_accepted() -> None:
    p = _transpose_program()
    for run in _runners(p):
        buf = np.zeros((6, 4), np.float32)
        a, b = buf[:3], buf[3:]
        a[...] = 1.0
        run(A=a, B=b)
        np.testing.assert_array_equal(b, _transpose_expected(np.ones((3, 4), np.float32), np.zeros((3, 4), np.float32)))
        np.testing.assert_array_equal(a, np.ones((3, 4)))


def _scalar_program() -> pt.Program:
    p = pt.Program("scal", params=["N"])
    p.array("F", ("N",), "float64")
    p.array("I", ("N",), "int32")
    p.array("Bo", ("N",), "bool")
    p.scalar("f", "float32")
    p.scalar("n", "int32")
    p.scalar("b", "bool")
    with p.loop("i", 0, "N"):
        p.assign("F[i] = float64(f) * i")
        p.assign("I[i] = n + i")
        p.assign("Bo[i] = where(b, i < 1, i >= 1)")
    return p


@pytest.mark.cc
@pytest.mark.parametrize("f, n, b", [
    (np.float32(1.5), np.int32(-3), np.bool_(True)),
    (np.float64(1.5), np.int64(-3), np.bool_(True)),
    (1.5, np.int8(-3), True),
    (torch.tensor(1.5), torch.tensor(-3), torch.tensor(True)),
])
def test_scalars_as_numpy_scalars(f: Any, n: Any, b: Any) -> None:
    p = _scalar_program()
    for run in _runners(p):
        fa, ia, ba = np.zeros(3), np.zeros(3, np.int32), np.zeros(3, bool)
        run(F=fa, I=ia, Bo=ba, f=f, n=n, b=b)
        np.testing.assert_array_equal(fa, [0.0, 1.5, 3.0])
        np.testing.assert_array_equal(ia, [-3, -2, -1])
        np.testing.assert_array_equal(ba, [True, False, False])


def test_scalar_value_is_rounded_to_its_dtype() -> None:
    prog = to_program(_scalar_program())
    args = {"F": np.zeros(3), "I": np.zeros(3, np.int32), "Bo": np.zeros(3, bool), "n": 1, "b": False}
    bound = bind(prog, {**args, "f": 0.1})
    assert bound.scalars["f"] == np.float32(0.1)
    assert bound.scalars["n"] == 1 and bound.scalars["b"] == np.bool_(False)
    with pytest.raises(pt.ArgumentError, match="'n'"):
        bind(prog, {**args, "f": 0.1, "n": 1.5})
    with pytest.raises(pt.ArgumentError, match="'n'"):
        bind(prog, {**args, "f": 0.1, "n": np.float64(2.0)})


@pytest.mark.cc
def test_expanded_torch_tensor_is_rejected_before_anything_runs() -> None:
    p = pt.Program("expand", params=["N"])
    p.array("A", ("N",), "float32")
    p.array("B", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("B[i] = A[i] * 2.0")
    for run in _runners(p):
        a = torch.ones(1).expand(4)
        b = torch.zeros(4)
        with pytest.raises(pt.ArgumentError, match="'A'"):
            run(A=a, B=b)
        assert torch.equal(b, torch.zeros(4))


def test_a_program_without_indirect_subscripts_builds_no_index_check(monkeypatch) -> None:
    from polytri.runtime import index_check
    from polytri.suite import KERNELS, make_args

    def refuse(*_: Any) -> None:
        raise AssertionError("an index check built for a program without indirect subscripts")
    monkeypatch.setattr(index_check, "IndexCheck", refuse)
    prog = to_program(KERNELS["atax"].build())
    args = make_args(KERNELS["atax"], {"M": 5, "N": 7})
    bound = bind(prog, args)  # the extents' equations, memoized per program, infer both parameters
    assert bound.params == {"M": 5, "N": 7}
    assert bind(prog, make_args(KERNELS["atax"], {"M": 3, "N": 2})).params == {"M": 3, "N": 2}


def test_parameters_that_violate_the_assumptions_are_rejected_after_good_ones() -> None:
    """Parameter values that met the program's assumptions are remembered (the isl test costs ~20 us a
    call); others are still tested and rejected, however many good calls came before."""
    p = pt.Program("assumed", params=["N"])
    p.assume("N >= 3")
    p.array("A", ("N",), "float32")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = 1.0")
    prog = to_program(p)
    for _ in range(2):
        assert bind(prog, {"A": np.zeros(5, np.float32)}).params == {"N": 5}
    with pytest.raises(pt.ArgumentError, match="assumptions"):
        bind(prog, {"A": np.zeros(2, np.float32)})
    assert bind(prog, {"A": np.zeros(3, np.float32)}).params == {"N": 3}


def test_element_types_are_found_and_refused_alike_through_the_memo() -> None:
    """The same answers on a second call, which the memo of ``of_array`` answers; an unsupported type is
    refused each time (only answers are remembered)."""
    from polytri import dtypes
    assert dtypes.of_array(np.zeros(2, np.float32)) is dtypes.FLOAT32
    assert dtypes.of_array(torch.zeros(2, dtype=torch.bfloat16)) is dtypes.BFLOAT16
    assert dtypes.of_array(np.zeros(2, np.float32)) is dtypes.FLOAT32  # from the memo
    with pytest.raises(pt.TypeCheckError, match="complex64"):
        dtypes.of_array(np.zeros(2, np.complex64))
    with pytest.raises(pt.TypeCheckError, match="complex64"):
        dtypes.of_array(np.zeros(2, np.complex64))  # refused every time, never remembered


def test_a_layout_that_passed_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks that depend on the arguments' layout alone run once per layout; a new array with the same
    layout is bound without them, and a new layout is checked again."""
    import polytri.runtime.args as args

    prog = to_program(_shapes_program())
    seen: list[str] = []
    real = args._check_array
    monkeypatch.setattr(args, "_check_array", lambda program, name, value: (seen.append(name), real(program, name, value)))
    x, y = np.zeros(4), np.zeros((2, 3))
    assert bind(prog, {"X": x, "Y": y}).params == {"N": 3, "M": 2}
    assert seen == ["X", "Y"]
    assert bind(prog, {"X": np.ones(4), "Y": np.ones((2, 3))}).params == {"N": 3, "M": 2}
    assert seen == ["X", "Y"]  # same layout: not checked again
    assert bind(prog, {"X": np.zeros(5), "Y": np.zeros((2, 4))}).params == {"N": 4, "M": 2}
    assert seen == ["X", "Y"] * 2


def test_what_a_layout_does_not_fix_is_checked_at_every_call() -> None:
    """After a good call, the same layout with overlapping arrays, a read-only array, another byte order
    or a parameter of another type is refused as before."""
    prog = to_program(_shapes_program())
    bind(prog, {"X": np.zeros(4), "Y": np.zeros((2, 3)), "N": 3})
    buf = np.zeros(10)
    with pytest.raises(pt.ArgumentError, match="overlap"):
        bind(prog, {"X": buf[:4], "Y": buf[3:9].reshape(2, 3), "N": 3})
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with pytest.raises(pt.ArgumentError, match="read-only"):
        bind(prog, {"X": frozen, "Y": np.zeros((2, 3)), "N": 3})
    with pytest.raises(pt.ArgumentError, match="byte order"):
        bind(prog, {"X": np.zeros(4, dtype=">f8"), "Y": np.zeros((2, 3)), "N": 3})
    with pytest.raises(pt.ArgumentError, match="must be an int"):
        bind(prog, {"X": np.zeros(4), "Y": np.zeros((2, 3)), "N": 3.0})
    with pytest.raises(pt.ArgumentError, match="must be an int"):
        bind(prog, {"X": np.zeros(4), "Y": np.zeros((2, 3)), "N": [3]})


def test_the_pointers_read_by_the_checks_are_the_arrays_and_only_the_contiguous_ones() -> None:
    """A C-contiguous numpy array's data pointer is read once, by the overlap check, and handed to the
    kernel (Bound.pointers); a strided view or a tensor is left to the kernel's own copy or pointer."""
    prog = to_program(_shapes_program())
    x, y = np.zeros(4), np.zeros((2, 6))[:, ::2]
    bound = bind(prog, {"X": x, "Y": y})
    assert bound.pointers == {"X": x.ctypes.data}
    t = torch.zeros(4, dtype=torch.float64)
    assert bind(prog, {"X": t, "Y": np.zeros((2, 3))}).pointers.keys() == {"Y"}
    k = pt.compile(_shapes_program())
    y0 = np.arange(12.0).reshape(2, 6)
    x1, y1 = np.arange(4.0), y0.copy()
    k(X=x1, Y=y1[:, ::2])
    want_x, want_y = np.arange(4.0), y0.copy()
    pt.reference(_shapes_program(), X=want_x, Y=want_y[:, ::2])
    np.testing.assert_array_equal(x1, want_x)
    np.testing.assert_array_equal(y1, want_y)
