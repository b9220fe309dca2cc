"""What a function of another framework compiled by polytri shares, whichever the framework
(:class:`.jax_function.JaxFunction`, :class:`.tf_function.TfFunction`): the compiled call signatures, the
operations each leaves to the framework, and the one message per such operation."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from .torch_options import check_options


class _Compiled(Protocol):
    @property
    def fallbacks(self) -> tuple[str, ...]: ...


C = TypeVar("C", bound=_Compiled)

_LOGGED: set[tuple[str, str]] = set()


class FrameworkFunction(Generic[C]):
    """A function of another framework whose calls run polytri kernels; ``compiles`` counts the
    signatures compiled.  Subclasses compile a signature in ``_compile``."""

    framework = ""
    """The framework's name, in messages."""

    def __init__(self, fn: Callable[..., Any], compile_options: Mapping[str, Any] | None):
        self.fn = fn
        self.compile_options = dict(compile_options or {})
        self.options = check_options(compile_options)
        self.compiles = 0
        self._cache: dict[Any, C] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]  # the wrapper is this callable object

    def compiled(self, key: Any, compile: Callable[[], C]) -> C:
        """The signature ``key``'s compilation, made by ``compile`` the first time."""
        with self._lock:
            found = self._cache.get(key)
        if found is None:
            found = compile()
            with self._lock:
                self._cache[key] = found
        return found

    @property
    def fallbacks(self) -> list[str]:
        """The operations that run through the framework in the signatures compiled so far, each once."""
        with self._lock:
            names = [n for c in self._cache.values() for n in c.fallbacks]
        return list(dict.fromkeys(names))

    def cache_clear(self) -> None:
        """Forget the compiled signatures (the kernels stay in polytri's caches)."""
        with self._lock:
            self._cache.clear()

    def log_fallbacks(self, log: logging.Logger, names: Iterable[str]) -> None:
        """One message per operation left to the framework, the first time any function leaves it."""
        for name in names:
            if (self.framework, name) not in _LOGGED:
                _LOGGED.add((self.framework, name))
                log.info("%s operation %s is not translated by polytri; it runs in %s between polytri kernels",
                         self.framework, name, self.framework)


def function_name(fn: Callable[..., Any]) -> str:
    """``fn``'s name for messages."""
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


__all__ = ["FrameworkFunction", "function_name"]
