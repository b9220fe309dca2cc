"""Options of the PyTorch frontend (``torch.compile(..., options=...)``, ``pt.jit(compile_options=...)``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..compiler import TARGETS
from ..errors import OptionError
from ..pipeline.target import get_target

#: Frontend options: default and description.  ``target`` defaults to the inputs' device.
TORCH_OPTIONS: dict[str, tuple[Any, str]] = {
    "target": (None, "'cpu', 'nvgpu' or 'amdgpu' (default: from the inputs' device: CPU tensors -> cpu, "
                     "CUDA tensors -> nvgpu, or amdgpu on ROCm builds)"),
    "fuse": (None, "fusion policy of the scheduler: 'outer', 'smart', 'max' or 'none' (default: 'outer' on the "
                   "cpu target, the GPU targets' 'auto')"),
    "tile": (None, "tile the permutable bands (None: the scheduler decides)"),
    "tile_size": (None, "tile side for every band dimension (default: from the cache model)"),
    "schedule": (None, "'auto', 'pluto' or 'original' (see pt.compile); default: 'auto'"),
    "threads": (None, "OpenMP thread count of the cpu target (default: OpenMP's own)"),
    "fma": (True, "cpu target: products fuse each multiplication into its sum (one rounding, as oneDNN "
                  "does); False rounds twice, as pt.reference does"),
    "inline": (True, "compute single-use elementwise results inside their consumer instead of storing them"),
    "cache": (True, "reuse kernels compiled earlier (in memory, and on disk across processes)"),
    "debug": (False, "log every lowered program and kernel source on the 'polytri.torch' logger at WARNING"),
}


@dataclass(frozen=True)
class TorchOptions:
    """Checked frontend options."""

    target: str | None
    """The explicit target, or ``None`` to choose it from the inputs' device."""
    fuse: str | None
    tile: bool | None
    tile_size: int | None
    schedule: str | None
    threads: int | None
    fma: bool
    inline: bool
    cache: bool
    debug: bool

    def compile_options(self, target: str = "cpu") -> dict[str, Any]:
        """The options handed to :func:`polytri.compile` for a program on ``target``."""
        opts: dict[str, Any] = {"schedule": self.schedule or "auto"}
        if self.fuse is not None or target == "cpu":
            opts["fuse"] = self.fuse or "outer"
        if self.tile is not None:
            opts["tile"] = self.tile
        if self.tile_size is not None:
            opts["tile_size"] = self.tile_size
        if self.threads is not None:
            opts["threads"] = self.threads
        if target == "cpu":
            opts["fma"] = self.fma
        return opts

    def key(self) -> tuple[Any, ...]:
        """Hashable identity of the options (part of every cache key)."""
        return (self.target, self.fuse, self.tile, self.tile_size, self.schedule, self.threads, self.fma, self.inline)


def check_options(options: Mapping[str, Any] | None) -> TorchOptions:
    """Validate ``options``; unknown names are an :class:`OptionError` that lists the known ones."""
    given = dict(options or {})
    unknown = sorted(set(given) - set(TORCH_OPTIONS))
    if unknown:
        raise OptionError(f"unknown polytri option(s) {', '.join(map(repr, unknown))}; known options: "
                          f"{', '.join(TORCH_OPTIONS)}")
    merged = {k: given.get(k, default) for k, (default, _) in TORCH_OPTIONS.items()}
    _check_target(merged["target"])
    _check_flags(merged)
    _check_scheduling(merged)
    opts = TorchOptions(**merged)
    if opts.target is not None:  # the target's own check, now: not at the first graph
        get_target(opts.target).check_options(opts.compile_options(opts.target))
    return opts


def _check_target(target: Any) -> None:
    if target is not None and target not in TARGETS:
        raise OptionError(f"option 'target' must be one of {', '.join(TARGETS)}, got {target!r}")


def _check_flags(merged: Mapping[str, Any]) -> None:
    """The booleans (``tile`` may also be None)."""
    for flag in ("fma", "inline", "cache", "debug"):
        if not isinstance(merged[flag], bool):
            raise OptionError(f"option {flag!r} must be True or False, got {merged[flag]!r}")
    if merged["tile"] is not None and not isinstance(merged["tile"], bool):
        raise OptionError(f"option 'tile' must be True, False or None, got {merged['tile']!r}")


def _check_scheduling(merged: Mapping[str, Any]) -> None:
    """The sizes (``tile_size``, ``threads``), the schedule and the fusion policy."""
    for name in ("tile_size", "threads"):
        v = merged[name]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise OptionError(f"option {name!r} must be a positive int, got {v!r}")
    if merged["schedule"] not in (None, "auto", "pluto", "original"):
        raise OptionError(f"option 'schedule' must be 'auto', 'pluto' or 'original', got {merged['schedule']!r}")
    from ..schedule.pluto import FUSION_POLICIES
    if merged["fuse"] is not None and merged["fuse"] not in FUSION_POLICIES:
        raise OptionError(f"option 'fuse' must be one of {', '.join(FUSION_POLICIES)}, got {merged['fuse']!r}")


def default_target(devices: Sequence[Any]) -> str:
    """The target for tensors on ``devices``: cpu, nvgpu (CUDA) or amdgpu (CUDA devices of a ROCm build)."""
    import torch
    if any(getattr(d, "type", str(d)) == "cuda" for d in devices):
        return "amdgpu" if getattr(torch.version, "hip", None) else "nvgpu"
    return "cpu"
