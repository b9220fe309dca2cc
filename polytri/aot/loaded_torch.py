"""A loaded PyTorch artifact: the exported graph planned again, its kernels taken from the artifact, called
like the exported function (same arguments, same output structure), in inference (no autograd)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from ..cpu_codegen.isa import planned_for
from ..errors import ArgumentError, ArtifactError, public
from ..frontend.torch_options import check_options
from ..frontend.torch_plan import plan_graph
from ..frontend.torch_runtime import CompiledGraph
from .artifact import Manifest
from .kernels import kernel_key, read_kernels

GRAPH = "program.pt2"
"""The exported graph (``torch.export.save``) in a PyTorch artifact."""


def load_torch(directory: Path, manifest: Manifest) -> LoadedGraph:
    """The callable of the PyTorch artifact in ``directory``."""
    kernels = read_kernels(directory, manifest.kernels)
    try:
        program = torch.export.load(directory / GRAPH)
    except Exception as exc:  # noqa: BLE001 - torch's loader raises many kinds; the artifact is unusable
        raise ArtifactError(f"{directory}: {GRAPH} cannot be loaded: {type(exc).__name__}: {exc}") from None
    options = check_options(manifest.options)

    def from_artifact(prog: Any, target: str, opts: dict[str, Any]) -> Any:
        key = kernel_key(prog, target, opts)
        if key not in kernels:
            raise ArtifactError(f"{directory}: it has no kernel for program {prog.name} (the graph was planned "
                                "otherwise at export)")
        return kernels[key]
    with planned_for(manifest.isa):  # as the exporting machine planned it (its vectors, its instructions)
        plan = plan_graph(graph_of(program), options)
        compiled = CompiledGraph(program.graph_module, plan, "cpu", options, kernels=from_artifact)
    return LoadedGraph(program, compiled, manifest.inputs)


def graph_of(program: Any) -> Any:
    """The ATen graph of an exported program as the planner takes it, the same before saving and after
    loading: the loader adds a ``getitem`` node for each unused output of a multi-output op (which the
    planner would take for a use of it), and dead-code elimination removes them."""
    gm = program.graph_module
    if gm.graph.eliminate_dead_code():
        gm.recompile()
    return gm


class LoadedGraph:
    """``polytri.load`` of a PyTorch artifact: call it with the exported function's arguments."""

    def __init__(self, program: Any, compiled: CompiledGraph, inputs: list[dict[str, Any]]):
        self.compiled = compiled
        """The graph's kernels and eager nodes (:class:`polytri.frontend.torch_runtime.CompiledGraph`)."""
        self.inputs = inputs
        """The inputs it was exported for: name, dtype, shape (a dynamic size by name)."""
        self._in_spec = program.call_spec.in_spec
        self._out_spec = program.call_spec.out_spec
        state = {**program.state_dict, **program.constants}
        self._slots: list[torch.Tensor | None] = []
        """Each placeholder's fixed value (parameters, buffers, constants), ``None`` for a user input."""
        for spec in program.graph_signature.input_specs:
            if spec.kind.name == "USER_INPUT":
                self._slots.append(None)
            else:
                value = state[spec.target]
                self._slots.append(value.detach() if isinstance(value, torch.Tensor) else value)

    @public
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec:
            raise ArgumentError(f"the artifact takes {len(self.inputs)} input(s) "
                                f"({', '.join(i['name'] for i in self.inputs)}) in the exported call's structure; "
                                f"got {len(flat)} in another structure")
        for k, (value, expected) in enumerate(zip(flat, self.inputs)):
            _check_input(k, value, expected)
        values = iter(flat)
        args_all = [next(values) if slot is None else slot for slot in self._slots]
        with torch.no_grad():
            out = self.compiled(*args_all)
        return pytree.tree_unflatten(list(out), self._out_spec)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{i['name']}: {_text(i)}" for i in self.inputs)
        return f"<polytri artifact ({shapes}), {len(self.compiled.kernels)} kernel(s)>"


def _text(spec: dict[str, Any]) -> str:
    shape = spec["shape"]
    return spec["dtype"] if shape is None else f"{spec['dtype']}[{', '.join(map(str, shape))}]"


def _check_input(position: int, value: Any, expected: dict[str, Any]) -> None:
    """``ArgumentError`` naming the expected dtype and shape if ``value`` does not match them (a dynamic size
    matches any)."""
    shape = expected["shape"]
    if shape is None:
        return
    ok = (isinstance(value, torch.Tensor) and str(value.dtype).removeprefix("torch.") == expected["dtype"]
          and value.dim() == len(shape) and value.device.type == "cpu"
          and all(not isinstance(s, int) or s == n for s, n in zip(shape, value.shape)))
    if not ok:
        got = (f"{str(value.dtype).removeprefix('torch.')}[{', '.join(map(str, value.shape))}] on "
               f"{value.device.type}" if isinstance(value, torch.Tensor) else type(value).__name__)
        raise ArgumentError(f"input {position} ({expected['name']}): the artifact was exported for a CPU tensor "
                            f"{_text(expected)}; got {got}")
