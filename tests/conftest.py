"""What the test modules share: the hypothesis profile every property test runs under, a fixture that
checks a compiled suite kernel against ``pt.reference``, and the model tests' kernel cache and Dynamo reset.

The profile is deterministic (the same examples on every run, nothing read from or written to a database,
no deadline: compile times vary with the machine's load), so CI and a developer see the same cases.
``HYPOTHESIS_PROFILE=explore`` runs with random examples instead, for a developer looking for new bugs.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# The test workers share the cores (pytest-xdist runs one per core), so the kernels' OpenMP threads that
# wait at a barrier sleep instead of spinning: a spinning thread takes the core its team mate (or the
# other worker) needs: doitgen's two-thread test took 25 s in a suite run on a loaded machine, 0.6 s alone.  Set
# before anything loads libgomp, which reads it once.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("explore", deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def suite_kernel_agrees() -> Callable[..., None]:
    """``check(compiled, name, params)``: run ``compiled`` (a compiled suite kernel) on the suite's inputs
    at those of ``params`` the program has, and compare every array with ``pt.reference``."""
    import polytri as pt
    from polytri.ir.builder import to_program
    from polytri.suite import KERNELS, copy_args, make_args

    def check(compiled: Any, name: str, params: dict[str, int]) -> None:
        kern = KERNELS[name]
        prog = to_program(kern.build())
        args = make_args(kern, {p: v for p, v in params.items() if p in prog.params})
        want = copy_args(args)
        pt.reference(kern.build(), **want)
        compiled(**args)
        for n, v in args.items():
            if isinstance(v, np.ndarray):
                np.testing.assert_allclose(v, want[n], rtol=1e-9, atol=1e-12, err_msg=f"{name}: {n}")
    return check


@pytest.fixture(scope="module")
def module_kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    """One kernel cache for the module: a second entry point finds the kernels the first compiled."""
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("kernel_cache")
    mp.setenv("POLYTRI_CACHE_DIR", str(path))
    yield path
    mp.undo()


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    """Dynamo's caches reset before and after the test (a test compiles the model afresh)."""
    import torch._dynamo
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()

