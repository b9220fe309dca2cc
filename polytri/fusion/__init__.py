"""Fusion across statements: what the scheduler cannot decide alone (recomputation of temporaries)."""

from .inline import inline_producers

__all__ = ["inline_producers"]
