"""Fusion across statements: what the scheduler cannot decide alone (recomputation of temporaries), and
the estimate of global memory traffic that ``pt.explain`` reports (:mod:`.traffic`)."""

from .inline import inline_producers

__all__ = ["inline_producers"]
