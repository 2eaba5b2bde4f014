"""Warm-up compiles what a run needs, no more, and says so when compiling is slow."""

import logging
import subprocess
import sys
import time

import pytest

from asyos.core.compile_notice import MESSAGE, compile_notice

PROBE = """
import numpy as np
from numba.core import types
from asyos.core import drivers, fitted_step, sparse_step
from asyos.core.kept_set import FittedKeptSet, KeptSet, SparseKeptSet, warm_up
kind, asy = sys.argv[1], sys.argv[2] == "asy"
kept = {"fitted": FittedKeptSet(5, 2, 1e-6, np.float32), "magnitude": KeptSet(5, 2),
        "sparse": SparseKeptSet(5, 2)}[kind]
warm_up(kept, asy=asy)
for name, kernel in (("fitted_block", fitted_step.fitted_block),
                     ("fitted_local", fitted_step.fitted_local),
                     ("os_block", drivers.os_block), ("os_local", drivers.os_local),
                     ("sparse_steps", sparse_step.sparse_steps)):
    # the dtype of the first argument, or of a structure's first field
    first = [sig[0].types[0] if isinstance(sig[0], types.BaseTuple) else sig[0]
             for sig in kernel.signatures]
    print(name, ",".join(str(arg.dtype) for arg in first))
"""


def _compiled(kind: str, asy: bool) -> dict:
    proc = subprocess.run([sys.executable, "-c", "import sys\n" + PROBE, kind,
                           "asy" if asy else "sequential"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return dict((line.split(" ") + [""])[:2] for line in proc.stdout.splitlines())


@pytest.mark.parametrize("kind, asy, expected", [
    ("fitted", False, {"fitted_block": "float32"}),
    ("fitted", True, {"fitted_local": "float32"}),
    ("magnitude", False, {"os_block": "float64"}),
    ("magnitude", True, {"os_local": "float64"}),
    ("sparse", False, {"sparse_steps": "int64"}),
])
def test_warm_up_loads_only_the_kernels_of_its_kept_set(kind, asy, expected):
    # a fresh process: a kernel has signatures only once called (compiled or loaded)
    compiled = {name: types for name, types in _compiled(kind, asy).items() if types}
    assert compiled == expected


def test_a_slow_compile_is_announced_once_with_its_time(caplog):
    with caplog.at_level(logging.WARNING, logger="asyos.compile"):
        with compile_notice(after=0.05):
            time.sleep(0.3)
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0] == MESSAGE
    assert messages[1].startswith("kernels compiled in") and len(messages) == 2


def test_a_quick_warm_up_says_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger="asyos.compile"):
        with compile_notice(after=0.5):
            pass
        time.sleep(0.6)   # the timer was cancelled, not merely late
    assert caplog.records == []
