"""PolyBench/C 4.2's medley kernels: Deriche's edge detector, Floyd-Warshall and Nussinov.

Scalars that PolyBench carries from one iteration to the next (deriche's ``xm1``, ``ym1``, ``ym2``...)
are expanded by one dimension here, one value per row (or column) being swept: statements only assign
array elements, and a value shared by every row would serialize rows that are independent.
"""

from __future__ import annotations

import polytri as pt


def build_floyd_warshall() -> pt.Program:
    """All-pairs shortest paths: ``path[i, j]`` becomes the shortest path through nodes ``< k + 1``."""
    p = pt.Program("floyd_warshall", params=["N"])
    p.array("path", ("N", "N"))
    with p.loop("k", 0, "N"):
        with p.loop("i", 0, "N"):
            with p.loop("j", 0, "N"):
                p.assign("path[i, j] = min(path[i, j], path[i, k] + path[k, j])")
    return p


def build_nussinov() -> pt.Program:
    """RNA folding by dynamic programming over ``table`` (``seq`` holds bases as the numbers 0 to 3; a
    pair matches when they add up to 3).  PolyBench's ``i`` runs downwards: ``i = N - 1 - ii``."""
    p = pt.Program("nussinov", params=["N"])
    p.array("seq", ("N",))
    p.array("table", ("N", "N"))
    t = "table[N - 1 - ii, j]"
    with p.loop("ii", 0, "N"):
        with p.loop("j", "N - ii", "N"):                    # j > i
            p.assign(f"{t} = max({t}, table[N - 1 - ii, j - 1])")
            p.assign(f"{t} = max({t}, table[N - ii, j])")
            with p.when("N - 1 - ii < j - 1"):
                p.assign(f"{t} = max({t}, table[N - ii, j - 1] + where(seq[N - 1 - ii] + seq[j] == 3, 1.0, 0.0))")
            with p.when("N - 1 - ii < j - 1", negate=True):
                p.assign(f"{t} = max({t}, table[N - ii, j - 1])")
            with p.loop("k", "N - ii", "j"):
                p.assign(f"{t} = max({t}, table[N - 1 - ii, k] + table[k + 1, j])")
    return p


#: Deriche's coefficients, computed once from ``alpha`` into ``coef`` (PolyBench's ``k``, ``a1`` to ``a4``
#: (``a5`` to ``a8`` are the same), ``b1``, ``b2``; ``c1 = c2 = 1``).  ``2 ** -alpha`` is written
#: ``exp(-alpha * log(2))``: the expression language has integer powers only.
_DERICHE_COEFFICIENTS = (
    "(1.0 - exp(-alpha)) * (1.0 - exp(-alpha)) / (1.0 + 2.0 * alpha * exp(-alpha) - exp(2.0 * alpha))",
    "coef[0]",
    "coef[0] * exp(-alpha) * (alpha - 1.0)",
    "coef[0] * exp(-alpha) * (alpha + 1.0)",
    "-coef[0] * exp(-2.0 * alpha)",
    "exp(-alpha * log(2.0))",
    "-exp(-2.0 * alpha)",
)


def _deriche_sweep(p: pt.Program, src: str, out: str, along_rows: bool, forward: bool) -> None:
    """One causal (``forward``) or anti-causal recursive filter of ``src`` into ``out``, along each row
    (``along_rows``: over ``j`` for every ``i``) or each column.  The filter's state (its last two inputs
    and outputs) lives in arrays indexed by the row or column."""
    outer, inner, n_inner = ("i", "j", "H") if along_rows else ("j", "i", "W")
    x1, x2, y1, y2 = (f"{n}_{'row' if along_rows else 'col'}[{outer}]" for n in ("x1", "x2", "y1", "y2"))
    step = inner * 2                                   # the sweep's counter: jj or ii
    pos = step if forward else f"{n_inner} - 1 - {step}"
    at = f"[{outer}, {pos}]" if along_rows else f"[{pos}, {outer}]"
    with p.loop(outer, 0, "W" if along_rows else "H"):
        for z in (x1, x2, y1, y2):
            p.assign(f"{z} = 0.0")
        with p.loop(step, 0, n_inner):
            if forward:   # y[n] = a1 x[n] + a2 x[n-1] + b1 y[n-1] + b2 y[n-2]
                p.assign(f"{out}{at} = coef[1] * {src}{at} + coef[2] * {x1} + coef[5] * {y1} + coef[6] * {y2}")
            else:         # y[n] = a3 x[n+1] + a4 x[n+2] + b1 y[n+1] + b2 y[n+2]
                p.assign(f"{out}{at} = coef[3] * {x1} + coef[4] * {x2} + coef[5] * {y1} + coef[6] * {y2}")
                p.assign(f"{x2} = {x1}")
            p.assign(f"{x1} = {src}{at}")
            p.assign(f"{y2} = {y1}")
            p.assign(f"{y1} = {out}{at}")


def build_deriche() -> pt.Program:
    """Deriche's recursive edge detector on a W x H image: a causal and an anti-causal filter along each
    row, summed, then the same along each column."""
    p = pt.Program("deriche", params=["W", "H"])
    p.array("imgIn", ("W", "H"), "float32")
    p.array("imgOut", ("W", "H"), "float32")
    p.array("y1", ("W", "H"), "float32")
    p.array("y2", ("W", "H"), "float32")
    p.array("coef", (7,), "float32")
    for state in ("x1", "x2", "y1", "y2"):
        p.array(f"{state}_row", ("W",), "float32")
        p.array(f"{state}_col", ("H",), "float32")
    p.scalar("alpha", "float32")
    for n, value in enumerate(_DERICHE_COEFFICIENTS):
        p.assign(f"coef[{n}] = {value}")
    for along_rows, src in ((True, "imgIn"), (False, "imgOut")):
        _deriche_sweep(p, src, "y1", along_rows, forward=True)
        _deriche_sweep(p, src, "y2", along_rows, forward=False)
        with p.loop("i", 0, "W"):
            with p.loop("j", 0, "H"):
                p.assign("imgOut[i, j] = y1[i, j] + y2[i, j]")
    return p
