"""GPU target descriptions and the launch model (block sizes, warps, pipeline stages).

Model-driven, no autotuning: the numbers below are the vendors' published limits of each architecture,
and the model picks the largest blocks whose working set fits the register file of one program.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import OptionError


@dataclass(frozen=True, slots=True)
class GPUArch:
    """One GPU architecture."""

    name: str
    """``sm_80``, ``sm_90``, ``gfx90a``, ``gfx942``, ``gfx1100``."""
    backend: str
    """Triton's backend name: ``cuda`` or ``hip``."""
    arch: int | str
    """What :class:`triton.backends.compiler.GPUTarget` takes: the compute capability (80, 90) or gfx name."""
    warp_size: int
    """Threads per warp (NVIDIA 32; CDNA wave 64; RDNA3 wave 32)."""
    sm_count: int
    """Streaming multiprocessors / compute units of the flagship part."""
    shared_memory: int
    """Shared memory (LDS) per block, bytes."""
    registers: int
    """32-bit registers per SM / CU."""
    matrix_unit: str
    """The instruction family ``tl.dot`` maps to: ``mma.sync``, ``wgmma``, ``mfma``, ``wmma``."""

    def triton_target(self):  # -> triton.backends.compiler.GPUTarget
        from .loader import import_triton
        import_triton()
        from triton.backends.compiler import GPUTarget
        return GPUTarget(self.backend, self.arch, self.warp_size)


ARCHS: dict[str, GPUArch] = {a.name: a for a in (
    GPUArch("sm_80", "cuda", 80, 32, 108, 163 * 1024, 65536, "mma.sync"),
    GPUArch("sm_90", "cuda", 90, 32, 132, 227 * 1024, 65536, "wgmma"),
    GPUArch("gfx90a", "hip", "gfx90a", 64, 104, 64 * 1024, 131072, "mfma"),
    GPUArch("gfx942", "hip", "gfx942", 64, 304, 64 * 1024, 131072, "mfma"),
    GPUArch("gfx1100", "hip", "gfx1100", 32, 96, 64 * 1024, 131072, "wmma"),
)}

#: The architecture each target models when the options do not name one.
DEFAULT_ARCH = {"nvgpu": "sm_90", "amdgpu": "gfx942"}
TARGET_OF_BACKEND = {"cuda": "nvgpu", "hip": "amdgpu"}


def arch_for(target: str, name: str | None) -> GPUArch:
    """The architecture ``name`` (default: the target's default), checked against ``target``."""
    name = name or DEFAULT_ARCH[target]
    if name not in ARCHS:
        raise OptionError(f"unknown GPU architecture {name!r}; known: {', '.join(ARCHS)}")
    arch = ARCHS[name]
    if TARGET_OF_BACKEND[arch.backend] != target:
        raise OptionError(f"architecture {name!r} belongs to target {TARGET_OF_BACKEND[arch.backend]!r}, "
                          f"not {target!r}")
    return arch


@dataclass(frozen=True, slots=True)
class LaunchModel:
    """Block sizes and launch parameters chosen for one program on one architecture."""

    block: tuple[int, int]
    """Block sides for one and two vector dimensions: ``(B,)`` uses ``block[0] * block[1]`` elements."""
    dot_block: tuple[int, int, int]
    """(M, N, K) tile of a contraction mapped to ``tl.dot``."""
    num_warps: int
    """Warps per program."""
    num_stages: int
    """Software-pipeline depth of ``tl.dot`` loops."""
    programs: int | None = None
    """Programs a launch should make at least, where its loops' iterations are known: the
    architecture's multiprocessors (see :mod:`.block_fit`); ``None`` where the ``block`` option set the
    sides (they are kept as given)."""


def _pow2(v: int, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
        raise OptionError(f"option {what!r} must be a power of two, got {v!r}")
    return v


def launch_model(arch: GPUArch, *, element_bytes: int, dot_bytes: int | None,
                 block: int | None = None, dot_block: tuple[int, int, int] | None = None,
                 num_warps: int | None = None, num_stages: int | None = None) -> LaunchModel:
    """The model's choice, with overrides from the options.

    Elementwise blocks: 1024 elements per program (4 per thread at 8 warps of 32, 16 per wave-64 thread at
    4 waves) keep loads vectorized and the grid large; 2-D blocks are 32 x 32.  Contractions: 128 x 128
    accumulators in fp32 are 64 KiB of registers per program, half the register file of one SM, which
    leaves room for the operand tiles; K = 32 (64 for 8-bit inputs, whose ``tl.dot`` minimum is 32)
    puts two 128 x 32 16-bit tiles, 16 KiB, in shared memory per stage: 4 stages on sm_90 (227 KiB),
    3 on sm_80 (163 KiB), 2 on the AMD parts (64 KiB of LDS).  Elementwise work in fp64 uses half-size blocks.
    """
    side = 32 if element_bytes <= 4 else 16
    b = (side, side) if block is None else (_pow2(block, "block"), _pow2(block, "block"))
    if dot_block is None:
        k = 64 if dot_bytes == 1 else 32
        mn = 128 if (dot_bytes or 4) <= 2 or dot_bytes == 1 else 64
        dot_block = (mn, mn, k)
    else:
        if len(dot_block) != 3:
            raise OptionError(f"option 'dot_block' must be (M, N, K), got {dot_block!r}")
        m, n, k = (_pow2(v, "dot_block") for v in dot_block)
        dot_block = (m, n, k)
        minimum_k = 32 if dot_bytes == 1 else 16
        if min(dot_block[:2]) < 16 or dot_block[2] < minimum_k:
            raise OptionError(f"option 'dot_block' {dot_block!r} is below tl.dot's minimum (M, N >= 16, "
                              f"K >= {minimum_k})")
    if num_warps is None:
        num_warps = 8 if dot_block[0] * dot_block[1] >= 128 * 128 and arch.warp_size == 32 else 4
    if num_stages is None:
        num_stages = 4 if arch.shared_memory >= 200 * 1024 else (3 if arch.shared_memory >= 128 * 1024 else 2)
    return LaunchModel(b, dot_block, _pow2(num_warps, "num_warps"), int(num_stages),
                       arch.sm_count if block is None else None)
