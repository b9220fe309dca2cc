"""Small helpers over islpy shared by several stages."""

from __future__ import annotations

from typing import TypeVar

import islpy as isl

S = TypeVar("S", isl.Set, isl.BasicSet)


def fix_params(s: S, values: dict[str, int]) -> S:
    """``s`` with each parameter named in ``values`` fixed to its value."""
    for i in range(s.dim(isl.dim_type.param)):
        name = s.get_dim_name(isl.dim_type.param, i)
        if name in values:
            s = s.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(s.get_ctx(), values[name]))
    return s


def maps(u: isl.UnionMap) -> list[isl.Map]:
    """The maps of ``u``, one per pair of spaces."""
    found = u.get_map_list()
    return [found.get_at(i) for i in range(found.n_map())]


def sets(u: isl.UnionSet) -> list[isl.Set]:
    """The sets of ``u``, one per space."""
    found = u.get_set_list()
    return [found.get_at(i) for i in range(found.n_set())]
