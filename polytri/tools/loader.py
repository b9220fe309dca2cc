"""Programs from a Python file, for the command line: ``FILE.py[:NAME]``.

A file offers programs in three ways, found in the order they are defined:

* ``@pt.kernel`` functions (:class:`polytri.Kernel` objects);
* module-level programs (``p = pt.Program(...)`` built at import time);
* functions defined in the file that take no required argument and are annotated as returning a
  program (``def build() -> pt.Program:``), like the builders of :mod:`polytri.suite`.

``NAME`` picks one; it may also name any function of the file that takes no required argument (it is
called, and must return a program).  Without ``NAME`` the file must offer exactly one program.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import re
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import PolytriError
from ..frontend.kernel import Kernel
from ..ir.builder import ProgramBuilder, to_program
from ..ir.program import Program

log = logging.getLogger("polytri.cli")


class LoadError(PolytriError):
    """A ``FILE.py[:NAME]`` that names no file, no program, or a file that fails to import."""


@dataclass(frozen=True)
class Entry:
    """One program a file offers."""

    name: str
    """The Python name it is bound to in the file."""
    kind: str
    """``kernel`` (``@pt.kernel``), ``program`` (a module-level program) or ``function`` (returns one)."""
    obj: Any
    """The object itself."""


_SPEC = re.compile(r"^(?P<path>.+?\.py)(?::(?P<name>[A-Za-z_]\w*))?$")


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"dir/file.py:name"`` -> ``("dir/file.py", "name")``; the name is optional."""
    m = _SPEC.match(spec)
    if not m:
        raise LoadError(f"{spec!r}: expected FILE.py or FILE.py:NAME")
    return m.group("path"), m.group("name")


def _user_traceback(exc: BaseException, path: str) -> str:
    """The traceback of ``exc`` restricted to frames of the user's file (the last line always kept)."""
    real = os.path.realpath(path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.realpath(f.filename) == real]
    text = "".join(traceback.format_list(frames))
    return text + "".join(traceback.format_exception_only(type(exc), exc))


def load_module(path: str) -> ModuleType:
    """Import ``path`` as a fresh module (its folder is put on ``sys.path`` meanwhile, for local imports)."""
    if not os.path.isfile(path):
        raise LoadError(f"{path}: no such file")
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    modname = f"polytri_user_{stem}"
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    sys.modules[modname] = module  # dataclasses and pickling look the module up by name
    log.info("importing %s", path)
    try:
        spec.loader.exec_module(module)
    except PolytriError:
        raise  # already says which kernel and line
    except Exception as exc:  # the user's own error: show it, without polytri's frames
        raise LoadError(f"{path}: importing the file failed:\n{_user_traceback(exc, path)}".rstrip()) from None
    finally:
        sys.path.remove(folder)
    return module


def _returns_program(fn: Any) -> bool:
    ann = inspect.signature(fn).return_annotation
    if isinstance(ann, str):
        return ann.split(".")[-1] in ("Program", "ProgramBuilder")
    return isinstance(ann, type) and issubclass(ann, (Program, ProgramBuilder))


def _no_required_args(fn: Any) -> bool:
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in inspect.signature(fn).parameters.values())


def entries(module: ModuleType) -> list[Entry]:
    """The programs ``module`` offers, in definition order."""
    out = []
    for name, obj in vars(module).items():
        if name.startswith("_"):
            continue
        if isinstance(obj, Kernel):
            out.append(Entry(name, "kernel", obj))
        elif isinstance(obj, (Program, ProgramBuilder)):
            out.append(Entry(name, "program", obj))
        elif (inspect.isfunction(obj) and obj.__module__ == module.__name__ and _no_required_args(obj)
              and _returns_program(obj)):
            out.append(Entry(name, "function", obj))
    return out


def _materialize(entry: Entry, path: str) -> Program:
    if entry.kind != "function":
        return to_program(entry.obj)
    try:
        result = entry.obj()
    except PolytriError:
        raise
    except Exception as exc:
        raise LoadError(f"{path}: {entry.name}() failed:\n{_user_traceback(exc, path)}".rstrip()) from None
    if not isinstance(result, (Program, ProgramBuilder, Kernel)):
        raise LoadError(f"{path}: {entry.name}() returned {type(result).__name__}, not a polytri Program")
    return to_program(result)


def load_program(spec: str) -> tuple[str, Program]:
    """The program that ``FILE.py[:NAME]`` names, and the name it was found under."""
    path, name = split_spec(spec)
    module = load_module(path)
    found = entries(module)
    if name is None:
        if len(found) == 1:
            return found[0].name, _materialize(found[0], path)
        if not found:
            raise LoadError(f"{path} defines no @pt.kernel function, no module-level Program and no function "
                            f"annotated '-> pt.Program'")
        raise LoadError(f"{path} defines {len(found)} programs ({', '.join(e.name for e in found)}); "
                        f"pick one with {path}:NAME")
    match = next((e for e in found if e.name == name), None)
    if match is None:
        obj = vars(module).get(name)
        if obj is None:
            known = ", ".join(e.name for e in found) or "none"
            raise LoadError(f"{path} has no {name!r}; the programs it defines: {known}")
        if not (inspect.isfunction(obj) and _no_required_args(obj)):
            raise LoadError(f"{path}: {name!r} is a {type(obj).__name__}, not a @pt.kernel, a Program or a "
                            f"function without required arguments returning one")
        match = Entry(name, "function", obj)
    return match.name, _materialize(match, path)
