"""Which polytri this is: its version, and a digest of its sources (an edited checkout is another polytri).
Caches and exported artifacts record both and reuse nothing made by another."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

VERSION = "0.1.0"


@functools.cache
def code_version() -> str:
    """A digest of polytri's own source files: a kernel compiled by another version of the compiler (an
    upgrade, an edited checkout) is not reused."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
