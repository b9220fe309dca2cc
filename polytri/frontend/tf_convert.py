"""Tensors across the TensorFlow / PyTorch border: through DLPack (no copy) where it can, else numpy."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from .jax_convert import to_torch as _to_torch
from .jax_rules import TORCH_DTYPES

log = logging.getLogger("polytri.tf")


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a TensorFlow dtype; ``TypeError`` for one torch lacks (strings, resources...)."""
    name = str(getattr(dtype, "name", dtype))
    if name not in TORCH_DTYPES:
        raise TypeError(f"TensorFlow dtype {name} has no torch equivalent")
    return TORCH_DTYPES[name]


def to_torch(x: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A TensorFlow tensor, numpy array or scalar as a torch tensor (sharing a TensorFlow tensor's memory
    when DLPack can; the tensor is only read), of ``dtype`` if given."""
    t = torch.tensor(x, dtype=dtype) if isinstance(x, (bool, int, float)) else _to_torch(x)
    return t if dtype is None or t.dtype == dtype else t.to(dtype)


def to_tf(t: torch.Tensor) -> Any:
    """A torch tensor as a TensorFlow tensor (sharing its memory through DLPack when TensorFlow takes it)."""
    import tensorflow as tf

    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.device.type == "cpu":
        try:
            return tf.experimental.dlpack.from_dlpack(t.__dlpack__())
        except (RuntimeError, TypeError, BufferError, ValueError, tf.errors.OpError) as exc:
            log.debug("DLPack export of a %s tensor failed (%s): copied through numpy", t.dtype, exc)
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        return tf.bitcast(tf.convert_to_tensor(t.view(torch.uint16).numpy()), tf.bfloat16)
    return tf.convert_to_tensor(np.asarray(t.numpy()))
