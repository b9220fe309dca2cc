"""Ahead-of-time export: ``polytri.export`` compiles once and writes an artifact directory;
``polytri.load`` runs it in another process with no tracing and no C compiler.

- :mod:`.artifact`: the directory, its manifest and the checks a loader makes;
- :mod:`.kernels`: the built kernels in it;
- :mod:`.export_kernel`: one polytri program (``pt.Program``, ``@pt.kernel``);
- :mod:`.export_torch` and :mod:`.loaded_torch`: a PyTorch module or function through ``torch.export``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, ArtifactError, public
from .artifact import read_manifest, seal, writing

log = logging.getLogger("polytri.aot")


@public
def export(fn_or_module: Any, example_args: Any, path: str | Path, compile_options: Mapping[str, Any] | None = None,
           dynamic: Mapping[int, Any] | None = None) -> Path:
    """Compile ``fn_or_module`` and write a self-contained artifact directory at ``path``; returns ``path``.

    ``fn_or_module`` is a PyTorch ``nn.Module`` or function of tensors (a ``pt.jit`` one too), called on
    the tuple ``example_args`` (or a single tensor), or a polytri program (``pt.Program``, ``@pt.kernel``),
    with ``example_args`` its keyword arguments (or ``None``): a program's kernel is parametric, so its
    artifact runs at every size.  ``compile_options`` are those of ``pt.jit`` (PyTorch) or ``pt.compile``
    (a program); only the cpu target exports.  ``dynamic`` (PyTorch only) maps an argument's position to
    its dynamic dimensions, ``{0: [0]}`` or ``{0: {0: "batch"}}``; every other size is fixed, and a call
    with another one is an :class:`~polytri.errors.ArgumentError`.  ATen ops polytri does not lower stay in
    the exported graph and run in eager.  An existing artifact at ``path`` is replaced; nothing is written
    if the export fails."""
    path = Path(path)
    with writing(path) as tmp:
        if _is_program(fn_or_module):
            if dynamic is not None:
                raise ArgumentError("export: dynamic applies to PyTorch functions; a program's kernel takes "
                                    "every size already")
            from .export_kernel import export_program
            manifest = export_program(fn_or_module, example_args, dict(compile_options or {}), tmp)
        else:
            from .export_torch import export_torch
            manifest = export_torch(fn_or_module, example_args, compile_options, dynamic, tmp)
        seal(tmp, manifest)
    log.info("exported %s to %s", getattr(fn_or_module, "__name__", type(fn_or_module).__name__), path)
    return path


@public
def load(path: str | Path) -> Any:
    """The artifact at ``path``, ready to call: for a PyTorch export, a callable taking the exported
    function's arguments; for a program, its kernel (keyword arguments, as ``pt.compile``'s).  A damaged
    artifact, or one made by another polytri version, for another target or for a CPU with instructions
    this one lacks, is an :class:`~polytri.errors.ArtifactError`."""
    path = Path(path)
    manifest = read_manifest(path)
    if manifest.kind == "kernel":
        from .export_kernel import load_program
        return load_program(path, manifest)
    if manifest.kind == "torch":
        from .loaded_torch import load_torch
        return load_torch(path, manifest)
    raise ArtifactError(f"{path}: unknown artifact kind {manifest.kind!r}")


def _is_program(obj: Any) -> bool:
    from ..frontend import Kernel
    from ..ir.builder import ProgramBuilder
    from ..ir.program import Program
    return isinstance(obj, (Kernel, ProgramBuilder, Program))


__all__ = ["export", "load"]
