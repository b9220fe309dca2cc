"""The scheduler's exact integer rank (polytri/schedule/int_rank.py) against sympy's, on random small
matrices with dependent rows."""

from __future__ import annotations

import random

import pytest
import sympy

from polytri.schedule.int_rank import int_rank


@pytest.mark.parametrize("seed", range(4))
def test_int_rank_equals_sympy(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        width = rng.randint(1, 6)
        rows = [[rng.choice([0, 0, 1, -1, 2, -3, 5, 12]) for _ in range(width)] for _ in range(rng.randint(0, 6))]
        if rows and rng.random() < 0.5:  # a combination of two rows: rank below the row count
            a, b = rng.choice(rows), rng.choice(rows)
            rows.append([2 * x - 3 * y for x, y in zip(a, b)])
        assert int_rank(rows) == (sympy.Matrix(rows).rank() if rows else 0), rows


def test_int_rank_edges() -> None:
    assert int_rank([]) == 0
    assert int_rank([[0, 0, 0]]) == 0
    assert int_rank([[1, 2], [2, 4]]) == 1
    assert int_rank([[0, 1], [1, 0], [1, 1]]) == 2
