"""A 1-D Jacobi stencil with a time loop, written as restricted Python.

    polytri compile examples/jacobi_1d.py --show c
    polytri plot examples/jacobi_1d.py -o jacobi_1d.png
"""

import polytri as pt


@pt.kernel
def jacobi_1d(A: pt.f64["N"], B: pt.f64["N"], T: int, N: int):  # noqa: F821
    for t in range(T):  # noqa: B007
        for i in range(1, N - 1):
            B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3
        for i in range(1, N - 1):
            A[i] = B[i]
