"""Importing Triton safely in a process that already holds another copy of LLVM (TensorFlow's).

Triton's ``libtriton.so`` carries LLVM and exports its symbols.  When a library loaded earlier with global
visibility exports LLVM too (``import tensorflow`` does), the dynamic linker binds libtriton's references
to that library's LLVM: Triton's command-line options are registered a second time in the other LLVM's
registry and LLVM aborts the process ("Option 'bitcode-mdindex-threshold' registered more than once").
Loading libtriton with ``RTLD_DEEPBIND`` makes it resolve its own symbols first, so each LLVM keeps its own
registry.  That flag is used only when the clash is there to avoid: when LLVM's option registry is
visible in the process's global scope before Triton is loaded.

Every place where polytri imports Triton goes through :func:`import_triton` first.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
from types import ModuleType

#: A function of LLVM's command-line library (``llvm::cl::Option::addArgument()``), defined by any
#: library that carries LLVM's option registry.
_LLVM_SYMBOL = "_ZN4llvm2cl6Option11addArgumentEv"

_lock = threading.Lock()


def llvm_in_global_scope() -> bool:
    """Whether a library already loaded exports LLVM's option registry to every later library."""
    try:
        return hasattr(ctypes.CDLL(None), _LLVM_SYMBOL)
    except OSError:
        return False


def import_triton() -> ModuleType:
    """``import triton``, with its libraries loaded ``RTLD_DEEPBIND`` when another LLVM is visible."""
    with _lock:
        if "triton" in sys.modules:
            return sys.modules["triton"]
        deepbind = getattr(os, "RTLD_DEEPBIND", 0)
        if not deepbind or not llvm_in_global_scope():
            import triton
            return triton
        flags = sys.getdlopenflags()
        sys.setdlopenflags(flags | deepbind)
        try:
            import triton
            import triton.language  # noqa: F401  (its extension modules, under the same flags)
        finally:
            sys.setdlopenflags(flags)
        return triton


def triton_before_dynamo() -> None:
    """Load Triton now (if it is installed) when another LLVM is visible and ``torch._dynamo``, which
    imports Triton as it loads (torch's fake tensors import it), is not loaded yet: frontends that run in
    a process holding TensorFlow call this before they touch torch's compiler machinery."""
    if "triton" in sys.modules or "torch._dynamo" in sys.modules or not llvm_in_global_scope():
        return
    if importlib.util.find_spec("triton") is not None:
        import_triton()
