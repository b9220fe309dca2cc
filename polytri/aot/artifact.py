"""An exported artifact on disk: a directory with ``manifest.json``, the kernels' libraries and parts, and
(for a PyTorch export) the graph.

The manifest records what a loader must match before it runs anything: the artifact format, polytri's
version and a digest of its sources (the graph is planned again at load and must give the same programs),
the target, the CPU features the libraries were built for (``-march=native``), and a SHA-256 digest of every
file.  Anything that does not match is an :class:`~polytri.errors.ArtifactError` that names the field or
the file, before a library is opened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cpu_codegen.isa import cpu_flags, isa_flags
from ..errors import ArtifactError
from ..runtime.identity import VERSION, code_version

MANIFEST = "manifest.json"

#: Version of the artifact layout; a loader reads only its own.
FORMAT = 1

@dataclass(frozen=True)
class Manifest:
    """What ``manifest.json`` holds."""

    kind: str
    """``"torch"`` (a module or function through ``torch.export``) or ``"kernel"`` (one polytri program)."""
    target: str
    options: dict[str, Any]
    """The compile options the artifact was exported with."""
    polytri_version: str
    code_version: str
    """Digest of polytri's sources at export."""
    isa: list[str]
    """The exporting machine's instruction-set flags (:func:`isa_flags`)."""
    files: dict[str, str]
    """File name (relative to the artifact) -> SHA-256 of its contents."""
    kernels: list[dict[str, str]] = field(default_factory=list)
    """One entry per kernel: ``key`` (program and options), ``parts`` and ``library`` file names."""
    inputs: list[dict[str, Any]] = field(default_factory=list)
    """The user's inputs, flattened: ``name``, ``dtype``, ``shape`` (ints, or a name for a dynamic size)."""
    format: int = FORMAT

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)


def new_manifest(kind: str, options: dict[str, Any], kernels: list[dict[str, str]],
                 inputs: list[dict[str, Any]]) -> Manifest:
    """The manifest of an artifact made here, now, for the cpu (its files' digests are added last)."""
    return Manifest(kind=kind, target="cpu", options=options, polytri_version=VERSION,
                    code_version=code_version(), isa=isa_flags(), files={}, kernels=kernels, inputs=inputs)


def seal(directory: Path, manifest: Manifest) -> None:
    """Write ``manifest`` into ``directory`` with the digest of every file there."""
    files = {str(p.relative_to(directory)): digest(p) for p in sorted(directory.rglob("*")) if p.is_file()}
    (directory / MANIFEST).write_text(dataclasses.replace(manifest, files=files).to_json())


def digest(path: Path) -> str:
    """SHA-256 of a file's contents."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def writing(path: Path) -> Iterator[Path]:
    """A fresh directory to fill; on success it becomes ``path``, on failure it is removed (nothing
    half-written).  An existing ``path`` is replaced only if it is an artifact itself."""
    path = Path(path)
    if path.exists() and not (path / MANIFEST).is_file():
        raise ArtifactError(f"{path} exists and is not a polytri artifact; export to a new path")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_manifest(path: Path) -> Manifest:
    """The manifest of the artifact at ``path``, checked against this polytri and this machine, with every
    file's digest verified."""
    path = Path(path)
    if not path.is_dir():
        raise ArtifactError(f"{path}: no such artifact directory")
    try:
        raw = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no {MANIFEST}; not a polytri artifact") from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{path / MANIFEST} is damaged: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        got = raw.get("format") if isinstance(raw, dict) else None
        raise ArtifactError(f"{path}: artifact format {got!r}, this polytri reads format {FORMAT}")
    try:
        manifest = Manifest(**raw)
    except TypeError as exc:
        raise ArtifactError(f"{path / MANIFEST} is damaged: {exc}") from None
    _check_compatible(path, manifest)
    for name, expected in manifest.files.items():
        file = path / name
        if not file.is_file():
            raise ArtifactError(f"{path}: file {name} is missing")
        if digest(file) != expected:
            raise ArtifactError(f"{path}: file {name} is damaged (its SHA-256 differs from the manifest's)")
    return manifest


def _check_compatible(path: Path, manifest: Manifest) -> None:
    if manifest.polytri_version != VERSION or manifest.code_version != code_version():
        raise ArtifactError(f"{path} was exported by polytri {manifest.polytri_version} (sources "
                            f"{manifest.code_version[:12]}); this is polytri {VERSION} (sources "
                            f"{code_version()[:12]}): export it again with this version")
    if manifest.target != "cpu":
        raise ArtifactError(f"{path} was exported for target {manifest.target!r}; only cpu artifacts load")
    missing = sorted(set(manifest.isa) - set(isa_flags()))
    if missing and cpu_flags():
        raise ArtifactError(f"{path} was built for a CPU with {', '.join(missing)}, which this CPU lacks: "
                            "export it again on this machine")
