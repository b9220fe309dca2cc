"""A compiled CPU kernel as plain parts (a dict that pickles) and back: what the torch frontend's disk cache
and exported artifacts keep.  The parts name the library; whoever stores them decides where it lives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .kernel import CpuKernel

#: The keys of a kernel's parts; bumped with :data:`FORMAT` whenever they change.
KEYS = ("program", "schedule", "deps", "source", "library", "function", "options", "decisions", "local_arrays",
        "epilogue_arrays", "min_parallel_work")

#: Version of the parts' layout.
FORMAT = 1


def kernel_parts(kernel: CpuKernel) -> dict[str, Any]:
    """``kernel``'s parts (it must be built: its library path is one of them)."""
    return {"program": kernel.program, "schedule": kernel.schedule_info, "deps": kernel.dependences,
            "source": kernel.source, "library": str(kernel.library), "function": f"pt_{kernel.program.name}",
            "options": kernel.options, "decisions": kernel._decisions, "local_arrays": kernel.local_arrays,
            "epilogue_arrays": kernel.epilogue_arrays, "min_parallel_work": kernel.min_parallel_work}


def kernel_from_parts(parts: dict[str, Any], library: Path | None = None) -> CpuKernel:
    """The kernel of ``parts``, its library loaded from ``library`` (default: the path the parts name).
    ``KeyError`` if a part is missing, ``OSError`` if the library does not load."""
    missing = [k for k in KEYS if k not in parts]
    if missing:
        raise KeyError(f"kernel parts lack {', '.join(missing)}")
    return CpuKernel(parts["program"], parts["schedule"], parts["deps"], parts["source"],
                     Path(library if library is not None else parts["library"]), parts["function"], parts["options"],
                     parts["decisions"], local_arrays=parts["local_arrays"], epilogue_arrays=parts["epilogue_arrays"],
                     min_parallel_work=parts["min_parallel_work"])
