"""Warm-up compiles what a run needs, no more, and says so when compiling is slow."""

import logging
import os
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


def test_a_compile_is_announced_at_once_with_its_time_and_a_warm_call_says_nothing(
        caplog):
    from numba import njit

    @njit   # not cached: it compiles in this process, whatever the cache holds
    def twice(x):
        return 2.0 * x

    with caplog.at_level(logging.WARNING, logger="asyos.compile"):
        with compile_notice(lock=False):
            assert twice(1.5) == 3.0
        messages = [record.getMessage() for record in caplog.records]
        assert messages[0] == MESSAGE
        assert messages[1].startswith("kernels compiled in") and len(messages) == 2
        caplog.clear()
        with compile_notice(lock=False):
            assert twice(2.0) == 4.0   # compiled already
            time.sleep(0.3)            # slow (a loaded machine), yet nothing compiles
    assert caplog.records == []


WARM = """
import sys, time
import numpy as np
from asyos.core.kept_set import KeptSet, warm_up
start = time.perf_counter()
warm_up(KeptSet(5, 2))
print(f"{time.perf_counter() - start:.3f}")
"""


def test_processes_that_start_together_compile_once(tmp_path):
    """Three processes warm up at once on an empty cache: one compiles, the others
    wait for it and load its kernels (one compile notice, not three)."""
    env = {**os.environ, "ASYOS_KERNEL_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", WARM], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(3)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    errors = "".join(err for _, err in outputs)
    assert errors.count("kernels compiled in") == 1, errors
    assert errors.count(MESSAGE) == 1
    assert list(tmp_path.glob("asyos-kernels/*/.compile.*.lock"))
    again = subprocess.run([sys.executable, "-c", WARM], capture_output=True,
                           text=True, env=env, timeout=600)
    assert again.returncode == 0 and "compil" not in again.stderr, again.stderr


GROUPS_PROBE = """
import numpy as np
from asyos import fit_os
from asyos.core import fitted_step
from asyos.core.kept_set import FittedKeptSet, warm_up
grouped = sys.argv[1] == "groups"
kept = FittedKeptSet(5, 2, 1e-6, group_of=np.zeros(4, np.int64) if grouped else None,
                     max_groups=1 if grouped else 0)
warm_up(kept)
before = list(fitted_step.fitted_block.signatures)
X = np.random.default_rng(0).standard_normal((30, 12))
fit_os(X, X[:, 0], 4, **({"groups": np.arange(12) // 3, "s2": 2} if grouped else {}))
print(len(before), len(fitted_step.fitted_block.signatures),
      "none" in str(before[0][10]).lower())   # the fitted state: its group_of
"""


@pytest.mark.parametrize("groups", ["groups", "plain"])
def test_the_group_code_is_compiled_only_for_a_run_with_groups(groups):
    """Without groups the arrival kernel is compiled without the group code (its
    ``group_of`` is None: ``fitted_step._group_swap``), a fifth of the first run's
    wait; with groups the warm-up compiles the kernel a group run uses, so the run
    itself compiles nothing."""
    proc = subprocess.run([sys.executable, "-c", "import sys\n" + GROUPS_PROBE, groups],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    before, after, without = proc.stdout.split()
    assert before == after == "1"
    assert without == ("False" if groups == "groups" else "True")


BOTH_RULES = """
import sys
from numba.core import event
from asyos.core.kept_set import FittedKeptSet, KeptSet, warm_up

compiled = set()

class Compiles(event.Listener):
    def on_start(self, ev):
        compiled.add(getattr(ev.data["dispatcher"].py_func, "__name__", "?"))

    def on_end(self, ev):
        pass

with event.install_listener("numba:compile", Compiles()):
    warm_up(FittedKeptSet(5, 2, 1e-6), KeptSet(5, 2), asy=True)   # a ZeroMQ worker's
print(" ".join(sorted(compiled & {"fitted_local", "os_local", "fitted_arrivals",
                                  "group_os_step"})))
"""


def test_workers_that_warm_up_both_rules_compile_each_once(tmp_path):
    """Two processes warm up the same two sets of kernels (a ZeroMQ worker warms both
    rules) on an empty cache: each set is compiled by one of them, never by both (a
    lock per set: the second process compiles the other set meanwhile, then loads).
    Neither compiles what a run without groups does not run (the paper's rule's group
    step), and the fitted rule's loop of arrivals, which the sequential and the worker
    kernels share, is compiled once with the worker's."""
    env = {**os.environ, "ASYOS_KERNEL_CACHE": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", BOTH_RULES],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
             for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    compiled = [out.split() for out, _ in outputs]
    assert sorted(compiled[0] + compiled[1]) == ["fitted_arrivals", "fitted_local",
                                                 "os_local"], outputs


def test_the_server_loads_its_compiled_helpers_before_a_run():
    """``warm_server`` loads everything the server compiles (an MPI server rank calls
    it while its workers warm their kernels: after them, a lone worker waited a
    quarter of a second for its first view): in a fresh process, none is loaded
    before and each is after."""
    probe = """
from asyos.core.budgets import top_counts
from asyos.core.losses import loss_value
from asyos.core.server_state import all_finite
from asyos.solvers.asy_server import warm_server
helpers = (all_finite, top_counts, loss_value)
print([len(helper.signatures) for helper in helpers])
warm_server()
print([len(helper.signatures) for helper in helpers])
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    before, after = proc.stdout.splitlines()
    assert before == "[0, 0, 0]" and after == "[2, 1, 1]"
