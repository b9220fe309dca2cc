"""Arrays across the JAX / PyTorch border: through DLPack (no copy) where it can, else through numpy."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

log = logging.getLogger("polytri.jax")


def to_torch(x: Any) -> torch.Tensor:
    """A JAX array, numpy array or scalar as a torch tensor (sharing the JAX array's memory when DLPack
    can; the tensor is only read)."""
    if isinstance(x, torch.Tensor):
        return x
    if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        try:
            return torch.from_dlpack(x)
        except (RuntimeError, TypeError, BufferError, ValueError) as exc:
            log.debug("DLPack import of %s failed (%s): copied through numpy", type(x).__name__, exc)
    arr = np.asarray(x)
    if arr.dtype.name == "bfloat16":  # numpy has no bfloat16 of its own (ml_dtypes): go through its bits
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(arr, copy=True))


def to_jax(t: torch.Tensor) -> Any:
    """A torch tensor as a JAX array (sharing its memory through DLPack when JAX accepts it)."""
    import jax.numpy as jnp

    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    try:
        return jnp.from_dlpack(t)
    except (RuntimeError, TypeError, BufferError, ValueError) as exc:
        log.debug("DLPack export of a %s tensor failed (%s): copied through numpy", t.dtype, exc)
    if t.dtype == torch.bfloat16:
        return jnp.asarray(t.cpu().view(torch.uint16).numpy()).view(jnp.bfloat16)
    return jnp.asarray(t.cpu().numpy())
