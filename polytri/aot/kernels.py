"""The kernels of an artifact: each one's parts (pickled) and its shared library, under ``kernels/``, found
again by a key of its program and options."""

from __future__ import annotations

import hashlib
import pickle
import shutil
from pathlib import Path
from typing import Any

from ..cpu_codegen.kernel import CpuKernel
from ..cpu_codegen.kernel_parts import kernel_from_parts, kernel_parts
from ..errors import ArtifactError, UnsupportedError

FOLDER = "kernels"


def kernel_key(program: Any, target: str, options: dict[str, Any]) -> str:
    """The key of a kernel: its program's canonical text, the target and the options it was compiled with."""
    text = f"{target}\n{sorted(options.items())!r}\n{program}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class KernelWriter:
    """Collects the kernels of an export, then writes them into the artifact."""

    def __init__(self) -> None:
        self._kernels: dict[str, CpuKernel] = {}

    def add(self, program: Any, target: str, options: dict[str, Any], kernel: Any) -> Any:
        """Keep ``kernel`` (compiled from ``program``) for the artifact; returns it."""
        if not isinstance(kernel, CpuKernel):
            raise UnsupportedError(f"export: kernel {getattr(program, 'name', program)!r} is a "
                                   f"{type(kernel).__name__}; only cpu kernels can be exported")
        self._kernels[kernel_key(program, target, options)] = kernel
        return kernel

    def write(self, directory: Path) -> list[dict[str, str]]:
        """Write every kernel's parts and library under ``directory/kernels``; returns the manifest's entries."""
        folder = directory / FOLDER
        folder.mkdir()
        entries = []
        for key, kernel in self._kernels.items():
            parts = kernel_parts(kernel)  # waits for a build in the background
            library = f"{FOLDER}/{key}.so"
            shutil.copyfile(parts["library"], directory / library)
            parts["library"] = library  # relative: the loader passes the artifact's own path
            with open(directory / f"{FOLDER}/{key}.pkl", "wb") as f:
                pickle.dump(parts, f)
            entries.append({"key": key, "name": kernel.program.name, "parts": f"{FOLDER}/{key}.pkl",
                            "library": library})
        return entries


def read_kernels(directory: Path, entries: list[dict[str, str]]) -> dict[str, CpuKernel]:
    """The artifact's kernels by key, their libraries loaded from the artifact."""
    out = {}
    for entry in entries:
        try:
            with open(directory / entry["parts"], "rb") as f:
                parts = pickle.load(f)
            out[entry["key"]] = kernel_from_parts(parts, directory / entry["library"])
        except (OSError, KeyError, TypeError, AttributeError, pickle.UnpicklingError, EOFError) as exc:
            raise ArtifactError(f"{directory}: kernel {entry.get('name', '?')} cannot be loaded: "
                                f"{type(exc).__name__}: {exc}") from None
    return out
