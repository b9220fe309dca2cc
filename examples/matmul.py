"""Matrix multiplication built with the builder API: a function returning a ``pt.Program``.

    polytri compile examples/matmul.py --show schedule,c
"""

import polytri as pt


def matmul() -> pt.Program:
    """C = A @ B + C, float32."""
    p = pt.Program("matmul", params=["M", "N", "K"])
    p.array("A", ("M", "K"), "float32")
    p.array("B", ("K", "N"), "float32")
    p.array("C", ("M", "N"), "float32")
    with p.loop("i", 0, "M"):
        with p.loop("j", 0, "N"):
            with p.loop("k", 0, "K"):
                p.assign("C[i, j] += A[i, k] * B[k, j]")
    return p
