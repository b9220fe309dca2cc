"""Never wrong code (issue 8, item 3): the legality proof runs on every compile, and an internal failure
of scheduling or code generation falls back to the original order with a warning."""

from __future__ import annotations

import numpy as np
import pytest

import polytri as pt
import polytri.cpu_codegen.target
import polytri.schedule.choose
from polytri.suite import KERNELS, copy_args, make_args

pytestmark = pytest.mark.cc


def _agrees(k: pt.CpuKernel, name: str) -> None:
    args = make_args(KERNELS[name], KERNELS[name].small)
    want, got = copy_args(args), copy_args(args)
    pt.reference(KERNELS[name].build(), **want)
    k(**got)
    for n, v in got.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_allclose(v, want[n], rtol=1e-9, err_msg=n)


@pytest.mark.parametrize("options", [{}, {"schedule": "original"}, {"schedule": "pluto"},
                                     {"schedule": "pluto", "tile": True}], ids=["auto", "original", "pluto", "tiled"])
def test_the_final_schedule_is_proved_legal_on_every_compile(monkeypatch: pytest.MonkeyPatch, options: dict) -> None:
    proved = []
    real = polytri.schedule.choose.prove_legal

    def spy(schedule, deps, *, what):  # type: ignore[no-untyped-def]
        real(schedule, deps, what=what)
        proved.append(schedule)

    monkeypatch.setattr(polytri.schedule.choose, "prove_legal", spy)
    k = pt.compile(KERNELS["jacobi_1d"].build(), options=options)
    assert any(m.is_equal(k.schedule) for m in proved), "the schedule the kernel runs was never proved legal"


def _internal_failure(*args: object, **kwargs: object) -> None:
    raise KeyError("simulated internal bug")


def test_an_unexpected_scheduler_exception_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(polytri.schedule.choose, "pluto_schedule", _internal_failure)
    with pytest.warns(UserWarning, match="original order"):
        k = pt.compile(KERNELS["gemm"].build(), options={"schedule": "pluto"})
    _agrees(k, "gemm")


@pytest.mark.parametrize("stage", ["build_loop_ast", "generate_c"])
def test_a_code_generation_failure_falls_back_to_the_original_order(monkeypatch: pytest.MonkeyPatch,
                                                                    stage: str) -> None:
    """The stage fails for the Pluto schedule only; the original order must still compile and be right."""
    module = polytri.schedule.choose if stage == "build_loop_ast" else polytri.cpu_codegen.target
    real = getattr(module, stage)
    prog = KERNELS["gemm"].build()
    from polytri.ir import to_program
    from polytri.schedule.dependences import compute_dependences
    from polytri.schedule.schedule import original_schedule
    original = original_schedule(to_program(prog), compute_dependences(to_program(prog)))

    def flaky(p, first, *args, **kwargs):  # type: ignore[no-untyped-def]
        schedule = first if stage == "build_loop_ast" else None
        if schedule is not None and not schedule.map.is_equal(original.map):
            raise IndexError("simulated code generation bug")
        if stage == "generate_c" and not flaky.failed:
            flaky.failed = True
            raise IndexError("simulated code generation bug")
        return real(p, first, *args, **kwargs)

    flaky.failed = False
    monkeypatch.setattr(module, stage, flaky)
    with pytest.warns(UserWarning, match="original order"):
        k = pt.compile(prog, options={"schedule": "pluto"})
    assert k.schedule.is_equal(original.map)
    _agrees(k, "gemm")
