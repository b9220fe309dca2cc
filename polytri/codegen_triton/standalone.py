"""A generated Triton module that runs on its own: the device functions decorated with ``@triton.jit`` and a
``run`` function that launches the kernels, so a user can save the text, import it and call it without
polytri (``k.module_source()``).  polytri itself loads the undecorated source and wraps the functions for
the GPU or the interpreter (:mod:`.module`)."""

from __future__ import annotations

from ..ir.program import Program
from .module import function_names
from .target import LaunchModel


def standalone_source(source: str, program: Program, model: LaunchModel) -> str:
    """``source`` (a generated module) with its device functions under ``@triton.jit`` and a ``run``
    entry point; the launches use ``model``'s warps and stages, and no FP contraction, as polytri's."""
    jitted = set(function_names(source))
    lines = []
    for line in source.splitlines():
        if line.startswith("def ") and line[4:line.index("(")] in jitted:
            lines.append("@triton.jit")
        lines.append(line)
    arrays = [a.name for a in program.arrays]
    scalars = [s.name for s in program.scalars]
    params = list(program.params)
    args = ", ".join(arrays + scalars + params)
    lines += ["", "",
              f"NUM_WARPS, NUM_STAGES = {model.num_warps}, {model.num_stages}",
              "", "",
              "def _launch(kernel, grid, args):",
              "    kernel[grid](*args, num_warps=NUM_WARPS, num_stages=NUM_STAGES, enable_fp_fusion=False)",
              "", "",
              f"def run({args}):",
              f'    """Run program {program.name} in place: arrays {", ".join(arrays) or "(none)"} as contiguous '
              'tensors on the GPU',
              f'    (C order, the declared dtypes), scalars {", ".join(scalars) or "(none)"} as one-element tensors '
              f'there, sizes {", ".join(params) or "(none)"} as ints."""',
              f"    pt_host(_launch, {args})",
              ""]
    return "\n".join(lines)
