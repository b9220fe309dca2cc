"""Kernels of lowered graphs, cached on disk across processes.

``pt.compile`` already keeps built libraries by source hash; this cache also skips the dependence
analysis and the scheduler: the key is the program's canonical text, the target and the options, the
value the compiled CPU kernel's parts (isl objects pickle through their text form).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from ..compiler import compile as pt_compile
from ..cpu_codegen.build import cache_dir
from ..cpu_codegen.isa import isa_flags
from ..cpu_codegen.kernel import CpuKernel
from ..cpu_codegen.kernel_parts import FORMAT as PARTS_FORMAT
from ..cpu_codegen.kernel_parts import kernel_from_parts, kernel_parts
from ..ir.builder import ProgramBuilder
from ..runtime.identity import code_version

log = logging.getLogger("polytri.torch")

#: Bumped whenever the pickled layout changes (with the kernel parts' own format).
_FORMAT = f"4.{PARTS_FORMAT}"


def _key(program: ProgramBuilder, target: str, options: dict[str, Any]) -> str:
    env = [os.environ.get(v, "") for v in ("CC", "POLYTRI_SANITIZE")]  # they change the built library
    text = f"{_FORMAT}\n{code_version()}\n{env!r}\n{isa_flags()!r}\n{target}\n{sorted(options.items())!r}\n{program}"
    return hashlib.sha256(text.encode()).hexdigest()


def compile_cached(program: ProgramBuilder, target: str, options: dict[str, Any], *, use_disk: bool = True) -> Any:
    """``pt.compile(program, target, options)``, or the same kernel from the disk cache."""
    if target != "cpu" or not use_disk:
        return pt_compile(program, target=target, options=options)
    key = _key(program, target, options)
    path = cache_dir() / "torch" / key[:2] / f"{key}.pkl"
    if path.exists():
        try:
            with open(path, "rb") as f:
                parts = pickle.load(f)
            if os.path.exists(parts["library"]):
                log.debug("kernel cache hit %s", path)
                return kernel_from_parts(parts)
        except Exception as exc:  # a stale or partial entry: compile again
            log.debug("kernel cache entry %s unusable: %s", path, exc)
    kernel = pt_compile(program, target=target, options=options)
    if isinstance(kernel, CpuKernel):  # kept once its library is built (it may be building in the background)
        kernel.after_build(functools.partial(_keep, kernel, path))
    return kernel


def _keep(kernel: CpuKernel, path: Path) -> None:
    """Write ``kernel``'s parts to the disk cache at ``path``."""
    parts = kernel_parts(kernel)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(parts, f)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
        log.debug("kernel not cached on disk: %s", exc)
