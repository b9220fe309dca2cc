"""Generated-code hygiene (issue 8, item 5): user identifiers cannot collide with what the C printer
emits, no user text escapes a comment, and the generated C of every suite kernel compiles with
``-Wall -Wextra -Werror``."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

import polytri as pt
from polytri.cpu_codegen.cexpr import C, c_float, cname, comment
from polytri.dtypes import FLOAT32, FLOAT64
from polytri.suite import KERNELS

STRICT = {"cflags": "-Wall -Wextra -Werror"}


#: Kernels whose Pluto schedules (skews, fusion, outlined parallel loops) are checked in the default run;
#: the rest, and tiled code, under ``make fuzz`` (the fuzzer builds every random program this way too).
PLUTO_FAST = ["gemm", "jacobi_2d", "seidel_2d", "fdtd_2d", "lu", "correlation", "blur", "doitgen"]


@pytest.mark.cc
@pytest.mark.parametrize("name", list(KERNELS))
def test_suite_kernels_in_input_order_compile_without_warnings(name: str) -> None:
    for options in ({"schedule": "original"}, {"schedule": "original", "openmp": False, "simd": False}):
        k = pt.compile(KERNELS[name].build(), options={**options, **STRICT})
        assert "-Werror" in k.explain()


@pytest.mark.cc
@pytest.mark.parametrize("name", PLUTO_FAST)
def test_suite_kernels_with_pluto_schedules_compile_without_warnings(name: str) -> None:
    pt.compile(KERNELS[name].build(), options=STRICT)


@pytest.mark.cc
@pytest.mark.slow
@pytest.mark.parametrize("options", [{}, {"schedule": "pluto", "tile": True}], ids=["auto", "tiled"])
@pytest.mark.parametrize("name", list(KERNELS))
def test_every_suite_kernel_compiles_without_warnings(name: str, options: dict) -> None:
    pt.compile(KERNELS[name].build(), options={**options, **STRICT})


def _one_array(array: str, program: str = "hyg", dtype: str = "float64") -> pt.Program:
    p = pt.Program(program, params=["N"])
    p.array(array, ("N", "N"), dtype)
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "N"):
            p.assign(f"{array}[i, j] = {array}[i, j] + {dtype}(i + 2 * j)")
    return p


# Each of these broke the build before: an array named like a local of the generated function, a C
# type used by the generated code, or a program named like a helper of the prelude.
@pytest.mark.cc
@pytest.mark.parametrize("array, program, dtype", [
    ("threads", "hyg", "float64"),
    ("num_threads", "hyg", "float64"),
    ("int64_t", "hyg", "float64"),
    ("uint16_t", "hyg", "bfloat16"),
    ("int8_t", "hyg", "int8"),
    ("A", "floordiv_i64", "float64"),
    ("A", "round_f16", "float16"),
    ("A", "min_double", "float64"),
])
def test_user_names_cannot_collide_with_generated_names(array: str, program: str, dtype: str) -> None:
    p = _one_array(array, program, dtype)
    k = pt.compile(p, options=STRICT)
    make = (lambda: torch.zeros(3, 3, dtype=torch.bfloat16)) if dtype == "bfloat16" else \
        (lambda: np.zeros((3, 3), dtype))
    got, want = make(), make()
    k(**{array: got})
    pt.reference(p, **{array: want})
    assert np.array_equal(np.asarray(got.float() if dtype == "bfloat16" else got),
                          np.asarray(want.float() if dtype == "bfloat16" else want))
    assert np.asarray(got.float() if dtype == "bfloat16" else got).any()


def test_cname_maps_emitted_and_type_like_names_only() -> None:
    assert cname("A") == "A" and cname("threads") == "threads"
    assert cname("int64_t") == "pt__u_int64_t" and cname("size_t") == "pt__u_size_t"
    assert cname("INFINITY") == "pt__u_INFINITY" and cname("omp_get_max_threads") == "pt__u_omp_get_max_threads"


@pytest.mark.parametrize("text", ["A[i] = B[i] */ 2", "x /* y", "line\nbreak", "*/*/"])
def test_comments_cannot_be_closed_by_user_text(text: str) -> None:
    c = comment(text)
    inner = c[2:-2]
    assert c.startswith("/* ") and c.endswith(" */") and "*/" not in inner and "/*" not in inner and "\n" not in c


def test_special_float_constants() -> None:
    assert c_float(math.nan, FLOAT32) == C("NAN", 16)
    assert c_float(math.nan, FLOAT64).text == "(double)NAN"
    assert c_float(-math.inf, FLOAT64).text == "-INFINITY"
    assert c_float(1.0, FLOAT32).text == "1.0f"


@pytest.mark.cc
def test_unused_locals_are_silenced_in_every_function() -> None:
    """A parallel loop outlined into its own function that uses few of the arrays, scalars and
    parameters still compiles with -Wall -Wextra -Werror (the fuzzer found the unused thread count)."""
    p = pt.Program("sparse_use", params=["N", "M"])
    p.array("A", ("N",), "float64")
    p.array("B", ("M", "N"), "float32")
    p.scalar("s", "float64")
    with p.loop("i", 0, "N"):
        p.assign("A[i] = 1.0")
    k = pt.compile(p, options=STRICT)
    assert re.search(r"static void pt_sparse_use_par0\(", k.source)
    a = np.zeros(3)
    k(A=a, B=np.zeros((0, 3), np.float32), s=1.0)
    np.testing.assert_array_equal(a, np.ones(3))
    k2 = pt.compile(p, options={**STRICT, "openmp": False, "simd": False})   # no parallel loop at all
    k2(A=a, B=np.zeros((2, 3), np.float32), s=1.0)


@pytest.mark.cc
def test_or_of_and_conditions_are_parenthesized() -> None:
    """Found by the fuzzer: isl's guards such as ``N >= 5 || N == 4 && c0 == 5`` tripped -Wparentheses."""
    from polytri.cpu_codegen.build import DEFAULT_FLAGS, build_library
    from polytri.cpu_codegen.cexpr import index_expr
    from polytri.ir.expr import Binary, Const, Var

    n, c = Var("N", "param"), Var("c0", "iter")
    cond = Binary("or", Binary(">=", n, Const(5)), Binary("and", Binary("==", n, Const(4)), Binary("==", c, Const(5))))
    text = index_expr(cond).text
    assert text == "N >= 5 || (N == 4 && c0 == 5)"
    assert index_expr(Binary("or", cond.rhs, cond.lhs)).text == "(N == 4 && c0 == 5) || N >= 5"
    src = f"#include <stdint.h>\nint f(int64_t N, int64_t c0) {{ return {text}; }}\n"
    build_library(src, cc="cc", flags=(*DEFAULT_FLAGS, "-Wall", "-Wextra", "-Werror"))
