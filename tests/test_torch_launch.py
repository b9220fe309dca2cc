"""A compiled graph's steps launch their kernels directly after a checked call (frontend/torch_launch.py)."""

from __future__ import annotations

import gc

import torch
import torch.fx as fx

import polytri as pt
from polytri.frontend.torch_launch import launch_for
from polytri.frontend.torch_runtime import _KernelStep


def _steps() -> list[_KernelStep]:
    found = []
    for o in gc.get_objects():
        try:
            if type(o) is _KernelStep:
                found.append(o)
        except ReferenceError:
            pass
    return found


def test_later_calls_run_the_launch_on_new_values_and_equal_eager() -> None:
    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x @ w + b)
        return (h.reshape(4, 2, 16).permute(1, 0, 2) * 2).sum(-1)
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(4, 8, generator=gen), torch.randn(8, 32, generator=gen), torch.randn(32, generator=gen)]
    before = {id(s) for s in _steps()}
    g = pt.jit(f, compile_options={"cache": False})
    torch.testing.assert_close(g(*args), f(*args))
    mine = [s for s in _steps() if id(s) not in before]
    assert mine and all(s._launches for s in mine if s._launchable)
    launched = [s for s in mine if s._launches]
    assert launched
    calls = []
    for s in launched:
        for launch in s._launches.values():
            inner = launch.call
            object.__setattr__(launch, "call", lambda a, p, inner=inner: (calls.append(a), inner(a, p)))
    for _ in range(3):  # new values each call: the launch reads the addresses of this call's tensors
        args = [torch.randn(t.shape, generator=gen) for t in args]
        torch.testing.assert_close(g(*args), f(*args))
    assert len(calls) == 3 * sum(len(s._launches) for s in launched)
    assert any(args[0].data_ptr() in a for a in calls)


def test_a_launch_takes_the_long_way_for_an_input_that_is_not_contiguous() -> None:
    node = fx.Graph().placeholder("x")
    seen: list[list[int]] = []
    temp = torch.zeros(3)
    launch = launch_for(lambda a, p: seen.append(list(a)), ["x", "t", "y"], [("x", node)],
                        [("y", (2, 3), torch.float32, 2)], {"t": temp}, (), torch.device("cpu"))
    x = torch.randn(3, 2)
    assert launch({node: x.t()}) is None and seen == []  # nothing ran
    made = launch({node: x})
    assert made is not None and seen == [[x.data_ptr(), temp.data_ptr(), made["y"].data_ptr()]]
    assert made["y"].shape == (2, 3) and made["y"].dtype == torch.float32
    assert launch.temps[0] is temp  # its address stays valid whatever the step's reuse table drops
