"""Gemm-like contractions on the CPU (polytri/cpu_codegen/contraction.py): which nests become packed
micro-kernel calls, and that they compute exactly what the reference computes, bit for bit, at sizes
around every block edge, on one and two threads, and when the panels cannot be allocated."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import contraction_reference, right_panel_packed_by_blocks

import polytri as pt
from polytri.cpu_codegen.blocking import cpu_flags, vector_bytes
from polytri.cpu_codegen.contraction import blocking
from polytri.cpu_codegen.contraction_model import TRANSPOSE_BLOCK_BYTES
from polytri.dtypes import FLOAT32, FLOAT64
from polytri.ir.builder import to_program
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc

MARK = "packed contraction"


def _gemm(body: str = "C[i, j] += alpha * A[i, k] * B[k, j]", dtype: str = "float32", a_shape=("M", "K"),
          b_shape=("K", "N"), order: str = "ikj") -> pt.Program:
    p = pt.Program("mk", params=["M", "N", "K"])
    p.array("C", ("M", "N"), dtype)
    p.array("A", a_shape, dtype)
    p.array("B", b_shape, dtype)
    p.scalar("alpha", dtype)
    bounds = {"i": "M", "j": "N", "k": "K"}
    with p.loop(order[0], 0, bounds[order[0]]):
        with p.loop(order[1], 0, bounds[order[1]]):
            with p.loop(order[2], 0, bounds[order[2]]):
                p.assign(body)
    return p


def _args(prog: pt.Program, params: dict, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    args: dict = dict(params)
    for a in to_program(prog).arrays:
        shape = tuple(params[e.name] for e in a.shape)  # shapes here are plain parameter names
        args[a.name] = rng.standard_normal(shape).astype(a.dtype)
    for s in to_program(prog).scalars:
        args[s.name] = 1.25
    return args


def _check(prog: pt.Program, params: dict, options: dict | None = None, *, packed: bool = True) -> None:
    args = _args(prog, params)
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    contraction_reference(prog, **want)
    k = pt.compile(prog, "cpu", options=options)
    assert (MARK in k.source) == packed, k.source
    k(**args)
    for name, v in args.items():
        if isinstance(v, np.ndarray):
            # the same additions in the same order: not close, equal
            np.testing.assert_array_equal(v, want[name], err_msg=name)


def _edges(d) -> list[dict]:
    """Sizes just below, at and above every block edge of type ``d``."""
    b = blocking(d)
    return [dict(M=1, N=1, K=1), dict(M=b.mr - 1, N=b.nr + 1, K=3), dict(M=2 * b.mr + 1, N=b.nr - 1, K=b.kc + 1),
            dict(M=b.mr + 2, N=b.nc + b.nr + 3, K=2 * b.kc - 1)]


@pytest.mark.parametrize("case,threads", [(c, t) for c in range(3) for t in (1, 2)]
                         + [(3, 1), pytest.param(3, 2, marks=pytest.mark.slow)])  # case 3 on 2 threads: make fuzz
def test_float32_gemm_equals_reference_at_block_edges(case: int, threads: int) -> None:
    _check(_gemm(), _edges(FLOAT32)[case], {"threads": threads})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ragged_column_blocks_run_the_kernel_of_their_width(dtype: str) -> None:
    """The last block of a row narrower than a panel runs on as many vectors as it needs (one to all but
    one), and each width sums exactly what the reference sums."""
    d = FLOAT32 if dtype == "float32" else FLOAT64
    b, lanes = blocking(d), vector_bytes() // d.itemsize
    for width in sorted({1, lanes, lanes + 1, 2 * lanes + 1, b.nr - 1}):
        _check(_gemm(dtype=dtype), dict(M=b.mr + 1, N=b.nr + width, K=7), {"threads": 1})


@pytest.mark.parametrize("case", range(4))
def test_float64_gemm_without_openmp(case: int) -> None:
    _check(_gemm(dtype="float64"), _edges(FLOAT64)[case], {"openmp": False, "simd": False})


@pytest.mark.parametrize("order", ["ijk", "kij", "jki"])
def test_any_loop_order(order: str) -> None:
    _check(_gemm(order=order), dict(M=9, N=70, K=11), {"schedule": "original"})


def test_transposed_operands_minus_and_sum_written_first() -> None:
    prog = _gemm("C[i, j] = A[k, i] * B[j, k] + C[i, j]", a_shape=("K", "M"), b_shape=("N", "K"))
    _check(prog, dict(M=7, N=67, K=5))
    _check(_gemm("C[i, j] -= A[i, k] * (alpha * B[k, j])"), dict(M=6, N=66, K=9))
    # rows and columns named the other way round: the target's last subscript is the column
    _check(_gemm("C[j, i] += A[j, k] * B[k, i]", a_shape=("M", "K"), b_shape=("K", "M")), dict(M=6, N=6, K=7))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_right_factor_stored_along_k_is_packed_in_blocks_of_k(dtype: str) -> None:
    """A linear layer's weight ``W[j, k]``: packed a block of ``k`` at a time (the decision says how many),
    exact at sums that end inside a block, at a block of KC and past it."""
    d = FLOAT32 if dtype == "float32" else FLOAT64
    b = blocking(d)
    kb = max(1, TRANSPOSE_BLOCK_BYTES // (b.nr * d.itemsize))
    prog = _gemm("C[i, j] += A[i, k] * B[j, k]", dtype=dtype, b_shape=("N", "K"))
    for K in (kb - 3, b.kc, b.kc + kb + 5):
        _check(prog, dict(M=b.mr + 1, N=b.nr + 3, K=K))
    k = pt.compile(prog, "cpu")
    lanes = 64 // d.itemsize if cpu_flags() >= {"avx512f"} else 32 // d.itemsize
    assert _contraction_data(k) == {"transpose_block": kb, "transpose_squares": lanes, "left_unit": d.itemsize}
    # B[k, j] is stored along the columns; L is alpha * A[i, k], computed: packed element by element
    plain = pt.compile(_gemm(dtype=dtype), "cpu")
    assert _contraction_data(plain) == {"transpose_block": None, "transpose_squares": None, "left_unit": None}
    across = pt.compile(_gemm("C[i, j] += A[k, i] * B[k, j]", dtype=dtype, a_shape=("K", "M")), "cpu")
    assert _contraction_data(across)["left_unit"] is None  # L stored across its rows: element by element


def _contraction_data(k: pt.CpuKernel) -> dict:
    (rec,) = [d for d in k.decision_records if d.kind == "contraction"]
    return {key: rec.data[key] for key in ("transpose_block", "transpose_squares", "left_unit")}


@pytest.mark.parametrize("simd", [True, False])
def test_a_right_factor_along_k_with_strides_moves_in_squares(simd: bool) -> None:
    """The squares take the weight's strides from its addresses: every other value of ``k`` (a stride of 2
    along ``k``: element by element) in rows of ``2 K + 4`` values (the stride between columns)."""
    p = pt.Program("mk", params=["M", "N", "K"])
    p.array("C", ("M", "N"), "float32")
    p.array("A", ("M", "K"), "float32")
    p.array("B", ("N", "2 * K + 4"), "float32")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"), p.loop("k", 0, "K"):
        p.assign("C[i, j] += A[i, k] * B[j, 2 * k + 1]")
    rng = np.random.default_rng(3)
    M, N, K = 5, 2 * 64 + 5, 2 * 16 + 3
    args = {"M": M, "N": N, "K": K, "C": rng.standard_normal((M, N)).astype(np.float32),
            "A": rng.standard_normal((M, K)).astype(np.float32),
            "B": rng.standard_normal((N, 2 * K + 4)).astype(np.float32)}
    want = {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in args.items()}
    contraction_reference(p, **want)
    k = pt.compile(p, "cpu", options={"simd": simd})
    assert _contraction_data(k)["transpose_squares"] is not None
    k(**args)
    np.testing.assert_array_equal(args["C"], want["C"])


def _bmm() -> pt.Program:
    """``Bt`` products ``C[n] += A[n] B[n]``."""
    p = pt.Program("bmm", params=["Bt", "M", "N", "K"])
    p.array("C", ("Bt", "M", "N"))
    p.array("A", ("Bt", "M", "K"))
    p.array("B", ("Bt", "K", "N"))
    with p.loop("n", 0, "Bt"):
        with p.loop("i", 0, "M"):
            with p.loop("k", 0, "K"):
                with p.loop("j", 0, "N"):
                    p.assign("C[n, i, j] += A[n, i, k] * B[n, k, j]")
    return p


def test_batched_contraction_inside_a_parallel_loop() -> None:
    _check(_bmm(), dict(Bt=3, M=5, N=67, K=6))


def test_threads_share_the_batch_points_only_when_they_split_evenly() -> None:
    """3 heads on 2 threads would give one thread two thirds of the work: the rows are shared instead
    (ViT's attention); 4 heads, or rows too few to share, keep the split by batch points."""
    p = _bmm()
    k = pt.compile(p, "cpu", options={"threads": 2})
    assert "pt__by_batch = pt__zn >= pt__nt && 8 * ((pt__zn + pt__nt - 1) / pt__nt) * pt__blocks" in k.source
    mr = blocking(FLOAT32).mr
    for params in (dict(Bt=3, M=8 * mr + 3, N=67, K=6), dict(Bt=4, M=8 * mr, N=67, K=6),
                   dict(Bt=3, M=mr - 1, N=67, K=6)):
        _check(p, params, {"threads": 2, "min_parallel_work": 0.0})  # a team of 2 whatever the work


def test_the_right_panel_is_written_in_order() -> None:
    """R stored along the columns (a Conv1D weight, an image): the panel is packed a block of NR columns
    at a time, each block's rows of k in order, not k outermost (every k stored to every block, NR * KC
    elements apart: one set of the L1 cache)."""
    b = blocking(FLOAT32)
    k = pt.compile(_gemm(), "cpu")
    assert right_panel_packed_by_blocks(k.source, b.nr, "for (int64_t pt__kk = 0; pt__kk < pt__kc; pt__kk++)")
    _check(_gemm(), dict(M=b.mr + 1, N=b.nc + b.nr + 1, K=b.kc + 2))


def test_panels_are_thread_scratch_kept_across_calls_and_threads() -> None:
    """The panels are the calling thread's scratch buffers (not allocated and freed by every call): a kernel
    called again, and from threads that exit (their buffers freed by the key's destructor), stays right."""
    import threading
    prog = _gemm()
    k = pt.compile(prog, "cpu", options={"threads": 2})
    assert "pt__scratch(0, " in k.source and "free(pt__bp)" not in k.source
    b = blocking(FLOAT32)
    params = dict(M=2 * b.mr + 1, N=b.nc + b.nr + 3, K=b.kc + 5)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(2):
                _check(prog, params, {"threads": 2})
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
    for _ in range(2):
        workers = [threading.Thread(target=run) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert not errors, errors


def test_fallback_when_the_panels_cannot_be_allocated() -> None:
    _check(_gemm(), dict(M=9, N=70, K=11), {"cflags": "-DPT_NO_PANELS"})


def test_strict_warnings_and_off_switch() -> None:
    _check(_gemm(), dict(M=5, N=3, K=4), {"cflags": "-Wall -Wextra -Werror"})
    _check(_gemm(), dict(M=5, N=3, K=4), {"microkernel": False}, packed=False)


@pytest.mark.parametrize("body", [
    "C[i, j] += A[i, k] * B[k, j] * alpha",   # (A * B) * alpha: no factor of (i, k) alone
    "C[i, j] += A[i, k] * C[k, j]",           # reads the target's array
    "C[i, j] += A[i, k] + B[k, j]",           # not a product
])
def test_other_nests_keep_their_loops_and_agree(body: str) -> None:
    prog = _gemm(body, a_shape=("M", "M") if "C[k" in body else ("M", "K"))
    params = dict(M=6, N=6, K=6)
    args = _args(prog, params)
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    pt.reference(prog, **want)
    k = pt.compile(prog, "cpu")
    k(**args)
    for name, v in args.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_allclose(v, want[name], rtol=1e-5, atol=1e-5, err_msg=name)
    assert MARK not in k.source


def test_mixed_precision_is_not_packed() -> None:
    p = _gemm("C[i, j] += float64(A[i, k]) * float64(B[k, j])")
    k = pt.compile(p, "cpu")
    assert MARK not in k.source


@pytest.mark.parametrize("name", ["gemm", "2mm", "3mm"])
def test_suite_contractions_are_packed_and_exact(name: str) -> None:
    kern = KERNELS[name]
    args = make_args(kern, kern.small)
    want = copy_args(args)
    pt.reference(kern.build(), **want)
    k = pt.compile(kern.build(), "cpu")
    assert MARK in k.source and any(d.startswith("contraction S1 (rows i, columns j, sum over k") for d in k.decisions)
    k(**args)
    for n, v in args.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, want[n], err_msg=n)


def test_sums_whose_range_depends_on_the_row_are_not_packed() -> None:
    # trmm's B[i, j] += A[k, i] * B[k, j] for k > i (syrk's triangle of columns is packed:
    # tests/test_cpu_triangle_contraction.py)
    assert MARK not in pt.compile(KERNELS["trmm"].build(), "cpu").source


@pytest.mark.parametrize("body", ["C[i, j] += A[i, k] * B[k, j]", "C[i, j] -= A[i, k] * B[k, j]"])
def test_fma_fuses_the_micro_kernel_only_and_stays_close(body: str) -> None:
    """With option fma the micro-kernel rounds once per step: not bit-identical to the reference, within
    the error of a float32 sum of 300 products; the default keeps the two roundings."""
    prog = _gemm(body)
    params = {"M": 37, "N": 70, "K": 300}
    args = _args(prog, params)
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    contraction_reference(prog, **want)
    fused = pt.compile(prog, "cpu", options={"fma": True})
    assert 'optimize("fp-contract=fast")' in fused.source and MARK in fused.source
    assert 'fp-contract=fast' not in pt.compile(prog, "cpu").source
    fused(**args)
    np.testing.assert_allclose(args["C"], want["C"], rtol=1e-4, atol=1e-4)
    assert not np.array_equal(args["C"], want["C"])  # the fused products did run (one rounding each)
    with pytest.raises(pt.OptionError, match="option 'fma' must be True or False"):
        pt.compile(prog, "cpu", options={"fma": "yes"})


def _gemm_with_init(init: str = "C[i, j] = 0", init_cols: str = "N", k: int = 300) -> pt.Program:
    """``C = 0`` (or ``init``) in a nest of its own, then ``C += A B`` summing over ``k`` terms (a constant:
    the fold needs every sum to have a term); C is (M, N + 1) so that an init over one more column writes
    an element the sum does not."""
    p = pt.Program("mk0", params=["M", "N"])
    p.array("C", ("M", "N + 1"), "float32")
    p.array("A", ("M", k), "float32")
    p.array("B", (k, "N"), "float32")
    with p.loop("i", 0, "M"):
        with p.loop("j", 0, init_cols):
            p.assign(init)
    with p.loop("i", 0, "M"):
        with p.loop("j", 0, "N"):
            with p.loop("k", 0, k):
                p.assign("C[i, j] += A[i, k] * B[k, j]")
    return p


def _run_init(prog: pt.Program, params: dict, options: dict) -> pt.CpuKernel:
    rng = np.random.default_rng(1)
    m, n, k = params["M"], params["N"], to_program(prog).array("A").shape[1].value
    args = {"A": rng.standard_normal((m, k)).astype(np.float32), "B": rng.standard_normal((k, n)).astype(np.float32),
            "C": np.full((m, n + 1), np.nan, np.float32)}  # NaN wherever the init would be missed
    want = {name: v.copy() for name, v in args.items()}
    pt.reference(prog, **want)
    kern = pt.compile(prog, "cpu", options={"fuse": "none", **options})
    kern(**args)
    np.testing.assert_array_equal(args["C"], want["C"])
    return kern


@pytest.mark.parametrize("options", [{}, {"threads": 1}, {"cflags": "-DPT_NO_PANELS"}])
def test_zero_init_folds_into_the_contraction_that_follows(options: dict) -> None:
    kern = _run_init(_gemm_with_init(), dict(M=9, N=70), options)  # 300 terms: two blocks of k, 256 + 44
    assert any("its zero init folded in" in d for d in kern.decisions)
    assert "/* S0: C[i, j] = 0 */" not in kern.source  # no nest of its own


@pytest.mark.parametrize("init, cols", [("C[i, j] = 1", "N"), ("C[i, j] = -0.0", "N"), ("C[i, j] = 0", "N + 1")])
def test_inits_that_do_not_match_the_sum_stay_apart(init: str, cols: str) -> None:
    kern = _run_init(_gemm_with_init(init, cols, k=30), dict(M=9, N=70), {})
    assert not any("zero init folded in" in d for d in kern.decisions)
    assert f"/* S0: {init} */" in kern.source and MARK in kern.source


def test_a_matrix_operand_lets_threads_share_the_columns() -> None:
    """Few rows, many columns, R a matrix read once: the threads split the columns (each packs half of R);
    a convolution's R (its image, read several times) keeps the split by rows (test_cpu_domain_contraction)."""
    b = blocking(FLOAT32)
    prog = _gemm()
    k = pt.compile(prog, "cpu", options={"threads": 2})
    assert "const int pt__by_cols = !pt__by_batch && pt__nt > 1" in k.source, k.source
    for params in (dict(M=3, N=2 * b.nr + 7, K=9), dict(M=b.mr + 1, N=b.nc + b.nr + 1, K=b.kc + 2)):
        _check(prog, params, {"threads": 2})


def _gemm_with_epilogue(epilogue: str, j_from: int = 0, k: int | str = 200) -> pt.Program:
    """``C = 0``, ``C += A B``, then ``epilogue`` over ``i`` and ``j`` (from ``j_from``), each in a nest of
    its own (policy 'none')."""
    p = pt.Program("mke", params=["M", "N"] + ([k] if isinstance(k, str) else []))
    p.array("C", ("M", "N"), "float32")
    p.array("A", ("M", k), "float32")
    p.array("B", (k, "N"), "float32")
    p.array("bias", ("N",), "float32")
    p.array("Y", ("M", "N"), "float32")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"):
        p.assign("C[i, j] = 0")
    with p.loop("i", 0, "M"), p.loop("j", 0, "N"), p.loop("k", 0, k):
        p.assign("C[i, j] += A[i, k] * B[k, j]")
    with p.loop("i", 0, "M"), p.loop("j", j_from, "N"):
        p.assign(epilogue)
    return p


def _run_epilogue(prog: pt.Program, params: dict, options: dict, temporaries: tuple[str, ...] = ("C",)) -> pt.CpuKernel:
    """Compile ``prog`` (``C`` a temporary unless said otherwise) and compare its results with the
    reference's: those of ``Y``, and of ``C`` where it is not a temporary."""
    rng = np.random.default_rng(2)
    args: dict = dict(params)
    for a in to_program(prog).arrays:
        shape = tuple(e.value if hasattr(e, "value") else params[e.name] for e in a.shape)
        args[a.name] = rng.standard_normal(shape).astype(np.float32)
    want = {name: (v.copy() if isinstance(v, np.ndarray) else v) for name, v in args.items()}
    pt.reference(prog, **want)
    kern = pt.compile(prog, "cpu", options={"fuse": "none", "temporaries": temporaries, **options})
    kern(**args)
    for name in sorted({"C", "Y"} - set(temporaries)):  # the same operations in the same order: equal
        np.testing.assert_array_equal(args[name], want[name], err_msg=name)
    return kern


@pytest.mark.parametrize("options", [{}, {"threads": 1}, {"threads": 2}, {"cflags": "-DPT_NO_PANELS"}])
def test_an_elementwise_epilogue_runs_on_each_block_as_its_sums_complete(options: dict) -> None:
    """Bias and relu of a temporary ``C`` summed in one block of k: run on each register block from a tile
    of the block's sums (and after each row in the fallback loops), not in a nest of its own, and ``C``
    never stored; ragged blocks at M = 9, N = 70."""
    kern = _run_epilogue(_gemm_with_epilogue("Y[i, j] = max(C[i, j] + bias[j], 0.0)"), dict(M=9, N=70), options)
    assert any("S2 run on each block as its sums complete (each block summed in a tile, C never stored)" in d
               for d in kern.decisions), kern.decisions
    assert "its epilogue, from the tile" in kern.source
    assert "C" in kern.epilogue_arrays
    body = kern.source[kern.source.index("void pt_mke("):]
    assert "#pragma omp parallel" not in body or body.count("#pragma omp parallel") == 1  # one region: the nest


@pytest.mark.parametrize("k, temporaries", [(300, ("C",)), (200, ())])
def test_an_epilogue_stays_a_nest_of_its_own_where_the_product_stores_its_target(
        k: int, temporaries: tuple[str, ...]) -> None:
    """With two blocks of k (the sums of a block are complete only after the second) or a target the caller
    sees, the product stores its target: the epilogue then reads it back in a nest of its own (run on each
    block instead, it made the zoo's transformers slower), and the results are the reference's."""
    prog = _gemm_with_epilogue("Y[i, j] = max(C[i, j] + bias[j], 0.0)", k=k)
    kern = _run_epilogue(prog, dict(M=9, N=70), {}, temporaries)
    assert MARK in kern.source and "from the tile" not in kern.source
    assert not any("run on each block" in d for d in kern.decisions) and not kern.epilogue_arrays


@pytest.mark.parametrize("epilogue, j_from, k", [
    ("Y[i, j] = C[i, j] + C[i, 0]", 0, 200),   # another element of the target
    ("Y[i, j] = C[i, j] * 2.0", 1, 200),       # not every element of the target
    ("Y[i, j] = C[i, j] * 2.0", 0, "K"),       # K may be 0: the nest would not run, the epilogue must
])
def test_epilogues_that_do_not_match_the_nest_keep_their_own(epilogue: str, j_from: int, k: int | str) -> None:
    prog = _gemm_with_epilogue(epilogue, j_from, k)
    params = dict(M=9, N=70, **({"K": 30} if k == "K" else {}))
    kern = _run_epilogue(prog, params, {})
    assert "sums are complete" not in kern.source and MARK in kern.source
    assert not any("run on each block" in d for d in kern.decisions)


@pytest.mark.parametrize("body, dtype, shapes, order", [
    ("C[i, j] += alpha * A[i, k] * B[k, j]", "float32", (("M", "K"), ("K", "N")), "ikj"),
    ("C[i, j] -= A[i, k] * (alpha * B[k, j])", "float32", (("M", "K"), ("K", "N")), "kji"),
    ("C[i, j] += A[i, k] * B[j, k]", "float64", (("M", "K"), ("N", "K")), "ijk"),
    ("C[i, j] += float32(A[i, k]) * float32(B[k, j])", "bfloat16", (("M", "K"), ("K", "N")), "ikj"),
    ("C[i, j] = C[i, j] * alpha + A[i, k]", "float32", (("M", "K"), ("K", "N")), "jki"),
])
def test_the_contraction_oracle_equals_the_reference(body: str, dtype: str, shapes: tuple, order: str) -> None:
    """tests/oracles.py's fast oracle, which the block-edge tests compare with, computes what
    ``pt.reference`` does, bit for bit (the sums in the order of the loops as written)."""
    import torch
    target = {"bfloat16": "float32"}.get(dtype, dtype)
    p = pt.Program("oracle", params=["M", "N", "K"])
    p.array("C", ("M", "N"), target)
    p.array("A", shapes[0], dtype)
    p.array("B", shapes[1], dtype)
    p.scalar("alpha", target)
    bounds = {"i": "M", "j": "N", "k": "K"}
    with p.loop(order[0], 0, bounds[order[0]]), p.loop(order[1], 0, bounds[order[1]]), \
            p.loop(order[2], 0, bounds[order[2]]):
        p.assign(body)
    rng = np.random.default_rng(7)
    params = {"M": 5, "N": 7, "K": 33}
    args: dict = dict(params, alpha=1.25)
    for a in to_program(p).arrays:
        shape = tuple(params[e.name] for e in a.shape)
        x = rng.standard_normal(shape) * 40
        args[a.name] = (torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16) if a.dtype == "bfloat16"
                        else x.astype(a.dtype))
    slow = {k: (v.clone() if hasattr(v, "clone") else v.copy() if isinstance(v, np.ndarray) else v)
            for k, v in args.items()}
    before = args["C"].copy()
    pt.reference(p, **slow)
    contraction_reference(p, **args)
    assert not np.array_equal(args["C"], before)  # it ran
    np.testing.assert_array_equal(np.asarray(args["C"]), np.asarray(slow["C"]))
