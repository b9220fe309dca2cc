"""Fusion across statements: what the scheduler cannot decide alone (recomputation of temporaries, the
online softmax), and the estimate of global memory traffic that ``pt.explain`` reports (:mod:`.traffic`)."""

from .inline import inline_producers
from .online_softmax import online_softmax

__all__ = ["inline_producers", "online_softmax"]
