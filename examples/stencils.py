"""Several stencils in one file: pick one with FILE.py:NAME.

    polytri compile examples/stencils.py:seidel_1d --show schedule
    polytri plot examples/stencils.py:seidel_1d -o seidel_1d.png --param T=6,N=12
    polytri plot examples/stencils.py:jacobi_2d -o jacobi_2d.png --axes t,i
"""

import polytri as pt


@pt.kernel
def seidel_1d(A: pt.f64["N"], T: int, N: int):  # noqa: F821
    """Gauss-Seidel in 1-D: updates in place, so every point depends on its left neighbour's new value."""
    for t in range(T):  # noqa: B007
        for i in range(1, N - 1):
            A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3


@pt.kernel
def jacobi_2d(A: pt.f64["N", "N"], B: pt.f64["N", "N"], T: int, N: int):  # noqa: F821
    """Jacobi in 2-D: a 5-point stencil from A to B, then copied back."""
    for t in range(T):  # noqa: B007
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i - 1, j] + A[i + 1, j])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = B[i, j]
