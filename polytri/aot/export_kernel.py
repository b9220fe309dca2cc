"""Exporting one polytri program (``pt.Program``, frozen ``Program`` or ``@pt.kernel``): its compiled kernel,
which stays parametric (one artifact, every size), and loading it back."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..compiler import compile as pt_compile
from ..cpu_codegen.kernel import CpuKernel
from ..errors import ArgumentError, ArtifactError
from ..ir.printer import expr_to_str
from ..runtime.args import bind
from .artifact import Manifest, new_manifest
from .kernels import KernelWriter, read_kernels


def export_program(program: Any, example_args: Mapping[str, Any] | None, options: dict[str, Any],
                   directory: Path) -> Manifest:
    """Compile ``program`` for the cpu and write its kernel into ``directory``; ``example_args``, when
    given, are checked against the program's signature (nothing runs)."""
    kernel = pt_compile(program, target="cpu", options=options)
    if example_args is not None:
        if not isinstance(example_args, Mapping):
            raise ArgumentError("export: a program's example_args are its keyword arguments (a dict), got "
                                f"{type(example_args).__name__}")
        bind(kernel.program, dict(example_args))
    writer = KernelWriter()
    writer.add(kernel.program, "cpu", options, kernel)
    entries = writer.write(directory)
    inputs = [{"name": a.name, "dtype": a.dtype, "shape": [expr_to_str(e) for e in a.shape]}
              for a in kernel.program.arrays]
    return new_manifest("kernel", options, entries, inputs)


def load_program(directory: Path, manifest: Manifest) -> CpuKernel:
    """The kernel of a program artifact: called with keyword arguments, like ``pt.compile``'s."""
    kernels = read_kernels(directory, manifest.kernels)
    if len(kernels) != 1:
        raise ArtifactError(f"{directory}: a program artifact holds one kernel, this one {len(kernels)}")
    return next(iter(kernels.values()))
