"""Options of the PyTorch frontend (``torch.compile(..., options=...)``, ``pt.jit(compile_options=...)``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..compiler import TARGETS
from ..errors import OptionError
from ..pipeline.options import Fusion, Schedule, checked, option_table, parse_options, positive
from ..pipeline.target import get_target


@dataclass(frozen=True)
class TorchOptions:
    """Options of the PyTorch frontend, checked by the same validator as the targets' options
    (:func:`polytri.pipeline.options.parse_options`); ``target`` defaults to the inputs' device."""

    target: str | None = None
    """'cpu', 'nvgpu' or 'amdgpu' (default: from the inputs' device: CPU tensors -> cpu, CUDA tensors ->
    nvgpu, or amdgpu on ROCm builds)"""
    fuse: Fusion | None = None
    """fusion policy of the scheduler: 'outer', 'smart', 'max' or 'none' (default: 'outer' on the cpu
    target, the GPU targets' 'auto')"""
    tile: bool | None = None
    """tile the permutable bands (None: the scheduler decides)"""
    tile_size: int | None = field(default=None, metadata=checked(positive))
    """tile side for every band dimension (default: from the cache model)"""
    schedule: Schedule | None = None
    """'auto', 'pluto' or 'original' (see pt.compile); default: 'auto'"""
    threads: int | None = field(default=None, metadata=checked(positive))
    """OpenMP thread count of the cpu target (default: OMP_NUM_THREADS if set, else the cores other
    processes leave free, measured at each call, at most torch.get_num_threads())"""
    fma: bool = True
    """cpu target: products fuse each multiplication into its sum (one rounding, as oneDNN does); False
    rounds twice, as pt.reference does"""
    inline: bool = True
    """compute single-use elementwise results inside their consumer instead of storing them"""
    float32_chains: bool = True
    """elementwise ops on 16-bit floats computed in one statement pass their intermediate values on in
    float32 and round where a value is stored or converted, as Inductor does; False rounds after every
    op, as eager does"""
    cache: bool = True
    """reuse kernels compiled earlier (in memory, and on disk across processes)"""
    debug: bool = False
    """log every lowered program and kernel source on the 'polytri.torch' logger at WARNING"""

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
        return (self.target, self.fuse, self.tile, self.tile_size, self.schedule, self.threads, self.fma, self.inline,
                self.float32_chains)


#: Frontend options: default and description (from :class:`TorchOptions`).
TORCH_OPTIONS: dict[str, tuple[Any, str]] = option_table(TorchOptions)


def check_options(options: Mapping[str, Any] | None) -> TorchOptions:
    """Validate ``options``; unknown names are an :class:`OptionError` that lists the known ones.  With an
    explicit target, the options it is handed are checked by the target too, at once."""
    given = dict(options or {})
    unknown = sorted(set(given) - set(TORCH_OPTIONS))
    if unknown:
        raise OptionError(f"unknown polytri option(s) {', '.join(map(repr, unknown))}; known options: "
                          f"{', '.join(TORCH_OPTIONS)}")
    target = given.get("target")
    if target is not None and target not in TARGETS:
        raise OptionError(f"option 'target' must be one of {', '.join(TARGETS)}, got {target!r}")
    opts = parse_options(TorchOptions, given, "the PyTorch frontend")
    if opts.target is not None:  # the target's own check, now: not at the first graph
        get_target(opts.target).check_options(opts.compile_options(opts.target))
    return opts


def default_target(devices: Sequence[Any]) -> str:
    """The target for tensors on ``devices``: cpu, nvgpu (CUDA) or amdgpu (CUDA devices of a ROCm build)."""
    import torch
    if any(getattr(d, "type", str(d)) == "cuda" for d in devices):
        return "amdgpu" if getattr(torch.version, "hip", None) else "nvgpu"
    return "cpu"
