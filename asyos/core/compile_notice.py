"""Compile a run's kernels once per machine, and say so only when it happens.

A first run on a machine (or after an upgrade or an edit, ``asyos/_kernel_cache.py``)
waits seconds for numba; a silent wait at 0 % looks like a hang, and a notice on a
warm start is a false alarm.  So the notice listens for numba's own "numba:compile"
event, which fires only when a kernel is compiled (not when it is loaded from the
cache), whatever the machine's load.

Processes that start together (MPI ranks, ZeroMQ workers, the estimators' worker
processes) would each compile the same kernels side by side, taking as many times the
CPU.  ``compile_notice`` therefore holds a lock file in numba's cache folder: the first
process to arrive warms up alone (compiling, on a cold cache); the others wait for it
and then load its kernels together.
"""

import logging
import os
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numba
from numba.core import event

log = logging.getLogger("asyos.compile")

MESSAGE = ("compiling kernels for this machine, first run only (later runs load them "
           "from numba's cache) ...")
WAITING = "waiting for another asyos process to compile the kernels ..."
WAIT_NOTICE_AFTER = 1.5   # seconds; loading every kernel from numba's cache takes < 1 s
LOCK_NAME = ".compile.lock"


class _Compiles(event.Listener):
    """Counts numba's compilations; the first one says so on stderr at once."""

    def __init__(self):
        self.count = 0

    def on_start(self, ev) -> None:
        if self.count == 0:
            log.warning(MESSAGE)
        self.count += 1

    def on_end(self, ev) -> None:
        pass


@contextmanager
def _one_compiler(folder: str | None, wait_after: float):
    """Hold the compile lock of the cache ``folder``: exclusive when it is free, else
    shared once its holder (a process warming up, perhaps compiling) has finished,
    so that waiting processes then load the kernels together.  No lock where the
    folder cannot hold one (numba then runs uncached anyway)."""
    import fcntl  # POSIX only: elsewhere ``compile_notice`` takes no lock

    try:
        path = Path(folder) / LOCK_NAME if folder else None
        handle = None if path is None else open(path, "a+b")  # noqa: SIM115
    except OSError:
        handle = None
    if handle is None:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            timer = threading.Timer(wait_after, log.warning, (WAITING,))
            timer.daemon = True
            timer.start()
            try:
                fcntl.flock(handle, fcntl.LOCK_SH)
            finally:
                timer.cancel()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def compile_notice(lock: bool = True, wait_after: float = WAIT_NOTICE_AFTER):
    """Around a warm-up that may compile: one line on stderr as the first kernel
    starts compiling, and when it ends, how long it took; nothing when every kernel
    loads from the cache.  ``lock``: take the machine-wide compile lock (above)."""
    start = time.perf_counter()
    listener = _Compiles()
    folder = getattr(numba.config, "CACHE_DIR", None) or None
    guard = _one_compiler(folder, wait_after) if lock and os.name == "posix" \
        else nullcontext()
    with guard, event.install_listener("numba:compile", listener):
        yield
    if listener.count:
        log.warning("kernels compiled in %.0f s", time.perf_counter() - start)
