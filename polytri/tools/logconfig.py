"""Logging set-up: ``-v`` on the command line and the ``POLYTRI_LOG`` environment variable.

polytri's modules log their decisions on named loggers (``polytri.schedule``, ``polytri.tiling``,
``polytri.compile``, ``polytri.cpu``, ...).  ``POLYTRI_LOG`` turns them on:

* ``POLYTRI_LOG=debug`` (or ``info``, ``warning``): every polytri logger at that level;
* ``POLYTRI_LOG=schedule=debug,cpu=info``: chosen loggers (the ``polytri.`` prefix is optional);
* ``POLYTRI_LOG=schedule,tiling``: a bare logger name means ``debug`` for it.

Messages go to stderr, prefixed with the seconds since start and the logger's name.
"""

from __future__ import annotations

import logging
import os
import sys

from ..errors import OptionError

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMAT = "[%(relativeCreated)7.0f ms] %(name)s: %(message)s"
_HANDLER_FLAG = "_polytri_handler"


def parse_spec(spec: str) -> dict[str, int]:
    """``"debug"`` / ``"schedule=debug,cpu"`` -> ``{logger name: level}``."""
    out: dict[str, int] = {}
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        name, _, level = item.partition("=")
        name, level = name.strip(), level.strip().lower()
        if not level and name.lower() in LEVELS:
            name, level = "polytri", name.lower()
        if level and level not in LEVELS:
            raise OptionError(f"POLYTRI_LOG: unknown level {level!r} in {item!r}; known: {', '.join(LEVELS)}")
        full = name if name == "polytri" or name.startswith("polytri.") else f"polytri.{name}"
        out[full] = LEVELS[level or "debug"]
    return out


def _ensure_handler() -> None:
    """A stderr handler on the ``polytri`` logger, unless the application already handles logging (a
    handler on the root logger, which polytri's records reach by propagation)."""
    ours = logging.getLogger("polytri")
    if logging.getLogger().handlers or any(getattr(h, _HANDLER_FLAG, False) for h in ours.handlers):
        return
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter(FORMAT))
    setattr(h, _HANDLER_FLAG, True)
    ours.addHandler(h)


def configure(verbosity: int = 0, spec: str | None = None) -> dict[str, int]:
    """Set polytri's logger levels from ``-v`` counts (1: info, 2: debug) and ``POLYTRI_LOG`` (``spec``
    or the environment); return what was set.  Without either, nothing changes (warnings still show)."""
    spec = os.environ.get("POLYTRI_LOG", "") if spec is None else spec
    levels = parse_spec(spec)
    if verbosity:
        level = logging.INFO if verbosity == 1 else logging.DEBUG
        levels["polytri"] = min(level, levels.get("polytri", logging.WARNING))
    if not levels:
        return levels
    _ensure_handler()
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    return levels


def show(name: str, level: int) -> None:
    """Show the records of the logger ``name`` from ``level`` on, on stderr: its level is lowered to ``level``
    unless it was set by name (``POLYTRI_LOG=progress=warning``, the application) or is lower already."""
    logger = logging.getLogger(name)
    if logger.level == logging.NOTSET and logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    _ensure_handler()
