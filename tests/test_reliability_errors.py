"""Error messages (issue 8, item 8): for each class of bad input the message names the culprit, and the
traceback a user sees has no polytri-internal frames unless ``POLYTRI_DEBUG=1``.

The cases run in a subprocess, without and with ``POLYTRI_DEBUG=1`` (read when an error passes a public
entry point), and report ``traceback.format_exception`` of what they raise: exactly what Python prints for an uncaught
error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_CASES = r'''
import json, sys, traceback
import numpy as np
import polytri as pt

def prog(body="B[i] = A[i] * 2.0", lo=0, hi="N"):
    p = pt.Program("msg", params=["N"])
    p.array("A", ("N",), "float64")
    p.array("B", ("N",), "float64")
    with p.loop("i", lo, hi):
        p.assign(body)
    return p

def call(**kw):
    pt.compile(prog())(**{"A": np.zeros(4), "B": np.zeros(4), **kw})

def shifted():
    q = pt.Program("shift", params=["N", "M"])
    q.array("B", ("N",), "float64")
    with q.loop("i", 1, "M"):
        q.assign("B[i] = B[i - 1] + 1.0")
    pt.compile(q)(B=np.zeros(4), M=9)

CASES = {
    "bounds-compile": lambda: pt.compile(prog("B[i] = A[i + 1]")),
    "bounds-call": shifted,
    "bounds-reference": lambda: pt.reference(prog("B[i] = A[i + 1]"), A=np.zeros(4), B=np.zeros(4)),
    "target": lambda: pt.compile(prog(), target="tpu"),
    "option": lambda: pt.compile(prog(), options={"vectorize": True}),
    "missing-arg": lambda: pt.compile(prog())(A=np.zeros(4)),
    "dtype": lambda: call(B=np.zeros(4, np.float32)),
    "shape": lambda: call(B=np.zeros(5)),
    "negative-param": lambda: call(N=-2),
    "builder-parse": lambda: prog("B[i] = (A[i] +"),
    "builder-affine": lambda: prog("B[i * i] = 1.0"),
}
import os
out = {}
for debug in ("0", "1"):  # read when an error passes a public entry point
    os.environ["POLYTRI_DEBUG"] = debug
    for name, case in CASES.items():
        try:
            case()
        except Exception as exc:
            out[f"{name}/{debug}"] = {"type": type(exc).__name__, "msg": str(exc),
                                      "tb": "".join(traceback.format_exception(exc))}
        else:
            out[f"{name}/{debug}"] = None
print(json.dumps(out))
'''

#: case -> (exception class, words the message must contain)
EXPECTED = {
    "bounds-compile": ("BoundsError", ["S0", "A[i + 1]", "'A'", "out of bounds"]),
    "bounds-call": ("ParameterBoundsError", ["S0", "B[i]", "'B'", "out of bounds", "M=9"]),
    "bounds-reference": ("BoundsError", ["S0", "A[i + 1]", "out of bounds"]),
    "target": ("OptionError", ["'tpu'", "cpu", "nvgpu", "amdgpu"]),
    "option": ("OptionError", ["'vectorize'", "schedule", "tile"]),
    "missing-arg": ("ArgumentError", ["missing", "B"]),
    "dtype": ("ArgumentError", ["'B'", "float32", "float64"]),
    "shape": ("ArgumentError", ["'B'", "extent 5"]),
    "negative-param": ("ArgumentError", ["'N'", "-2", "negative"]),
    "builder-parse": ("ParseError", ["S0", "syntax error"]),
    "builder-affine": ("NotAffineError", ["S0", "i * i", "not affine"]),
}
#: Builder methods are not public entry points yet (polytri/ir/builder.py: no @public), so their
#: errors show the parser's frames.


@pytest.fixture(scope="module")
def runs() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "POLYTRI_DEBUG"}
    proc = subprocess.run([sys.executable, "-c", _CASES], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def internal_frames(tb: str) -> list[str]:
    """Frames of polytri's own modules, except the one re-raise of the public-entry-point wrapper."""
    frames = [line.strip() for line in tb.splitlines() if line.strip().startswith("File ")]
    return [f for f in frames if "/polytri/" in f and not f.split('"')[1].endswith("polytri/errors.py")]


@pytest.fixture(scope="module")
def results(runs: dict) -> dict:
    return {k[:-2]: v for k, v in runs.items() if k.endswith("/0")}


@pytest.fixture(scope="module")
def debug_results(runs: dict) -> dict:
    return {k[:-2]: v for k, v in runs.items() if k.endswith("/1")}


@pytest.mark.cc
@pytest.mark.parametrize("case", list(EXPECTED))
def test_message_names_the_culprit(results: dict, case: str) -> None:
    got = results[case]
    assert got is not None, f"{case}: nothing was raised"
    cls, words = EXPECTED[case]
    assert got["type"] == cls, got
    for w in words:
        assert w in got["msg"], f"{case}: {w!r} not in {got['msg']!r}"


@pytest.mark.cc
@pytest.mark.parametrize("case", list(EXPECTED))
def test_no_internal_frames_without_debug(results: dict, debug_results: dict, case: str) -> None:
    assert internal_frames(results[case]["tb"]) == [], results[case]["tb"]
    # the control: with POLYTRI_DEBUG=1 the same error shows where inside polytri it was raised
    assert internal_frames(debug_results[case]["tb"]), debug_results[case]["tb"]
    assert debug_results[case]["msg"] == results[case]["msg"]
