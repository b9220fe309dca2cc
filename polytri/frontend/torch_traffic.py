"""Estimated global memory traffic of a lowered segment, fused (one polytri kernel) and unfused (one
kernel per ATen operator, as eager runs it): what ``pt.explain`` reports per kernel.

The fused figure is :func:`polytri.fusion.traffic.kernel_traffic` of the compiled program.  The unfused
total charges every operator the bytes of its tensor inputs and of its results; views (``kind='view'``
handlers: view, permute, expand, slice...) and tuple accesses move nothing, as in eager for contiguous
tensors.  Both count each tensor once per kernel (compulsory traffic), so their ratio is what fusion
saves, not a prediction of time.  Sizes that Dynamo made symbolic are taken at the compiled example's
values.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from ..fusion.traffic import Traffic, kernel_traffic
from .torch_lower import HANDLERS, Segment, op_name


def _int(v: Any) -> int:
    """A size of the example: plain, or the hint of a symbolic size."""
    if isinstance(v, torch.SymInt):  # its value in the example, without adding a guard
        from torch.fx.experimental.symbolic_shapes import optimization_hint
        return int(optimization_hint(v))
    return int(v)


def _tensor_bytes(v: Any) -> int:
    if isinstance(v, torch.Tensor):
        n = 1
        for s in v.shape:
            n *= _int(s)
        return n * v.element_size()
    if isinstance(v, (tuple, list)):
        return sum(_tensor_bytes(x) for x in v)
    return 0


def _moves(node: fx.Node) -> bool:
    info = HANDLERS.get(op_name(node))
    return isinstance(node.target, torch._ops.OpOverload) and (info is None or info.kind != "view")


def unfused_bytes(nodes: list[fx.Node]) -> int:
    """Bytes the nodes move run one kernel per operator."""
    total = 0
    for n in nodes:
        if _moves(n):
            total += sum(_tensor_bytes(a.meta.get("val")) for a in n.all_input_nodes)
            total += _tensor_bytes(n.meta.get("val"))
    return total


def parameter_values(params: dict[str, tuple[fx.Node, int | None]]) -> dict[str, int]:
    """The example's value of each size parameter (``name -> (node, dimension or None)``)."""
    out = {}
    for name, (node, dim) in params.items():
        v = node.meta.get("val")
        out[name] = _int(v) if dim is None else _int(_shape(v)[dim])
    return out


def _shape(v: Any) -> torch.Size:
    """The shape of the example tensor ``v``."""
    if not isinstance(v, torch.Tensor):
        raise TypeError(f"expected an example tensor, got {v!r}")
    return v.shape


def segment_traffic(seg: Segment, kernel: Any, params: dict[str, int],
                    temporaries: tuple[str, ...] | None = None) -> Traffic | None:
    """The fused estimate of ``seg`` compiled as ``kernel``; ``None`` for a kernel without a program.
    ``temporaries``: the segment's intermediates as the kernel's program names them (default: as the
    segment does)."""
    program = getattr(kernel, "program", None)
    if program is None:
        return None
    temps = seg.temps if temporaries is None else temporaries
    return kernel_traffic(program, params, temporaries=temps, local=getattr(kernel, "local_arrays", ()),
                          tiled=getattr(kernel, "epilogue_arrays", ()))
