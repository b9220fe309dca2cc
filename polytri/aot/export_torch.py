"""Exporting a PyTorch module or function: ``torch.export`` captures its ATen graph (no Dynamo at load),
the torch frontend plans and compiles it as for ``pt.jit``, and the artifact keeps the graph
(``program.pt2``) with the built kernels.  Loading plans the same graph again and takes each kernel from
the artifact: no tracing, no C compiler."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..errors import ArgumentError, UnsupportedError
from ..frontend.torch_options import TorchOptions, check_options
from ..frontend.torch_plan import fallback_ops, plan_graph
from ..frontend.torch_runtime import CompiledGraph
from .artifact import Manifest, new_manifest
from .kernels import KernelWriter
from .loaded_torch import GRAPH, graph_of

log = logging.getLogger("polytri.aot")

Dynamic = Mapping[int, Sequence[int] | Mapping[int, str]]
"""Dynamic sizes: argument position -> its dynamic dimensions (or dimension -> a name for the size)."""


def export_torch(fn: Any, example_args: Any, compile_options: Mapping[str, Any] | None, dynamic: Dynamic | None,
                 directory: Path) -> Manifest:
    """Export ``fn`` (an ``nn.Module`` or a function of tensors) for ``example_args`` into ``directory``."""
    options = check_options(compile_options)
    args = example_args if isinstance(example_args, tuple) else (example_args,)
    if (options.target or "cpu") != "cpu" or any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args):
        raise UnsupportedError("export: only the cpu target (CPU tensors) can be exported")
    program = _exported(fn, args, dynamic)
    gm = graph_of(program)
    plan = plan_graph(gm, options)
    writer = KernelWriter()
    CompiledGraph(gm, plan, "cpu", options, kernels=_compiling(writer, options))
    eager = fallback_ops(plan)
    if eager:
        log.info("export: %s run in eager from the exported graph", ", ".join(eager))
    torch.export.save(program, directory / GRAPH)
    entries = writer.write(directory)
    return new_manifest("torch", dict(compile_options or {}), entries, _inputs(program, _names(dynamic or {})))


def _compiling(writer: KernelWriter, options: TorchOptions) -> Any:
    from ..frontend.torch_cache import compile_cached

    def compile_and_keep(prog: Any, target: str, opts: dict[str, Any]) -> Any:
        return writer.add(prog, target, opts, compile_cached(prog, target, opts, use_disk=options.cache))
    return compile_and_keep


def _exported(fn: Any, args: tuple[Any, ...], dynamic: Dynamic | None) -> Any:
    """The ATen graph of ``fn`` on ``args``, through ``torch.export``."""
    from ..frontend.torch_backend import export_decompositions
    from ..frontend.torch_explain import unwrap_compiled
    fn = unwrap_compiled(fn)
    module = fn if isinstance(fn, torch.nn.Module) else _FunctionModule(fn)
    shapes = _dynamic_shapes(args, dynamic) if dynamic else None
    try:
        with torch.no_grad():
            program = torch.export.export(module, args, dynamic_shapes=shapes)
            program = program.run_decompositions(export_decompositions())
    except Exception as exc:  # noqa: BLE001 - torch.export's many errors: name the cause, keep the message
        raise UnsupportedError(f"export: torch.export could not capture the function: {type(exc).__name__}: "
                               f"{exc}") from exc
    mutated = [s.target for s in program.graph_signature.output_specs if s.kind.name != "USER_OUTPUT"]
    if mutated:
        raise UnsupportedError(f"export: the function writes {', '.join(map(str, mutated))} (a module in train "
                               "mode?); export inference code (model.eval())")
    return program


class _FunctionModule(torch.nn.Module):
    """A function as a module, for ``torch.export``."""

    def __init__(self, fn: Any):
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def _dynamic_shapes(args: tuple[Any, ...], dynamic: Dynamic) -> tuple[Any, ...]:
    """``torch.export``'s ``dynamic_shapes`` for the positions and dimensions ``dynamic`` names."""
    out: list[Any] = [None] * len(args)
    for pos, dims in dynamic.items():
        if not isinstance(pos, int) or not 0 <= pos < len(args) or not isinstance(args[pos], torch.Tensor):
            raise ArgumentError(f"export: dynamic names argument {pos!r}, which is not a tensor argument "
                                f"(there are {len(args)} arguments)")
        named = _names({pos: dims})
        for _, d in named:
            if not isinstance(d, int) or not 0 <= d < args[pos].dim():
                raise ArgumentError(f"export: argument {pos} has {args[pos].dim()} dimension(s); dynamic "
                                    f"names dimension {d!r}")
        out[pos] = {d: torch.export.Dim(name) for (_, d), name in named.items()}
    return tuple(out)


def _names(dynamic: Dynamic) -> dict[tuple[int, int], str]:
    """(argument position, dimension) -> the dynamic size's name."""
    out = {}
    for pos, dims in dynamic.items():
        named = dims if isinstance(dims, Mapping) else {d: f"arg{pos}_dim{d}" for d in dims}
        out.update({(pos, d): name for d, name in named.items()})
    return out


def _inputs(program: Any, names: dict[tuple[int, int], str]) -> list[dict[str, Any]]:
    """The user inputs of an exported program: name, dtype and shape (a dynamic size by its name)."""
    user = {s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"}
    out = []
    for node in program.graph_module.graph.nodes:
        if node.op == "placeholder" and node.name in user:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                shape = [int(s) if isinstance(s, int) else names.get((len(out), d), str(s))
                         for d, s in enumerate(val.shape)]
                out.append({"name": node.name, "dtype": str(val.dtype).removeprefix("torch."), "shape": shape})
            else:
                out.append({"name": node.name, "dtype": type(val).__name__, "shape": None})
    return out
