"""Compile a run's kernels once per machine, and say so only when it happens.

A first run on a machine (or after an upgrade or an edit, ``asyos/_kernel_cache.py``)
waits seconds for numba; a silent wait at 0 % looks like a hang, and a notice on a
warm start is a false alarm.  So the notice listens for numba's own "numba:compile"
event, which fires only when a kernel is compiled (not when it is loaded from the
cache), whatever the machine's load.

Processes that start together (MPI ranks, ZeroMQ workers, the estimators' worker
processes) would each compile the same kernels side by side, taking as many times the
CPU.  ``compile_notice`` therefore hands out lock files in numba's cache folder, one per
set of kernels: the first process to arrive warms a set up alone (compiling, on a cold
cache); the others warm up another set meanwhile, or wait for it and then load its
kernels together.
"""

import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numba
from numba.core import event

log = logging.getLogger("asyos.compile")

MESSAGE = ("compiling kernels for this machine, first run only (later runs load them "
           "from numba's cache) ...")
WAITING = "waiting for another asyos process to compile the kernels ..."
WAIT_NOTICE_AFTER = 1.5   # seconds; loading every kernel from numba's cache takes < 1 s
LOCK_NAME = ".compile.{}.lock"   # one per set of kernels (``Turns``)


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
def _lock(folder: str | None, name: str, wait: bool, wait_after: float):
    """Hold the lock file ``name`` of the cache ``folder``, yielding whether it is
    exclusive.  ``wait`` False: exclusive if it is free, else yield False at once
    without it; ``wait`` True: shared once its holder (a process warming up,
    perhaps compiling) has finished, so that waiting processes then load the kernels
    together.  No lock where the folder cannot hold one (numba then runs uncached
    anyway): yields True."""
    import fcntl  # POSIX only: elsewhere ``compile_notice`` takes no lock

    try:
        handle = open(Path(folder) / name, "a+b") if folder else None  # noqa: SIM115
    except OSError:
        handle = None
    if handle is None:
        yield True
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            exclusive = True
        except BlockingIOError:
            if not wait:
                yield False
                return
            timer = threading.Timer(wait_after, log.warning, (WAITING,))
            timer.daemon = True
            timer.start()
            try:
                fcntl.flock(handle, fcntl.LOCK_SH)
            finally:
                timer.cancel()
            exclusive = False
        try:
            yield exclusive
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Turns:
    """Hands out the warm-ups of a process one at a time, each under the lock of
    its kernels (``key``): first those no other process is warming up, then, waiting
    for their holders, the rest, which then load from the cache.  Processes that
    warm up the same kernels compile them once; processes that need two sets (a
    ZeroMQ worker warms both rules) compile one each, side by side."""

    def __init__(self, folder: str | None, wait_after: float):
        self.folder, self.wait_after = folder, wait_after

    def __call__(self, items, key):
        busy = []
        for item in items:
            with _lock(self.folder, LOCK_NAME.format(key(item)), False,
                       self.wait_after) as free:
                if free:
                    yield item
                    continue
            busy.append(item)
        for item in busy:
            with _lock(self.folder, LOCK_NAME.format(key(item)), True, self.wait_after):
                yield item


@contextmanager
def compile_notice(lock: bool = True, wait_after: float = WAIT_NOTICE_AFTER):
    """Around a warm-up that may compile: one line on stderr as the first kernel
    starts compiling, and when it ends, how long it took; nothing when every kernel
    loads from the cache.  Yields a ``Turns``: iterate the warm-ups through it to
    take the machine-wide compile locks (above); ``lock`` False: no locks."""
    start = time.perf_counter()
    listener = _Compiles()
    folder = getattr(numba.config, "CACHE_DIR", None) or None
    locking = lock and os.name == "posix" and folder is not None
    with event.install_listener("numba:compile", listener):
        yield Turns(folder if locking else None, wait_after)
    if listener.count:
        log.warning("kernels compiled in %.0f s", time.perf_counter() - start)
