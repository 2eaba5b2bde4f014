"""Say so when a run waits for numba to compile its kernels (the first run on a
machine, or after an upgrade): a silent wait of seconds at 0 % looks like a hang."""

import logging
import threading
import time
from contextlib import contextmanager

log = logging.getLogger("asyos.compile")

NOTICE_AFTER = 1.5   # seconds; loading every kernel from numba's cache takes < 0.5 s
MESSAGE = ("compiling kernels for this machine, first run only (later runs load them "
           "from numba's cache) ...")


@contextmanager
def compile_notice(after: float = NOTICE_AFTER):
    """Around code that may compile: after ``after`` seconds, one line on stderr
    (a logging warning, which reaches the screen even when logging is not set up),
    and when it ends, how long it took."""
    start = time.perf_counter()
    timer = threading.Timer(after, log.warning, (MESSAGE,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        took = time.perf_counter() - start
        if took > after:
            log.warning("kernels compiled in %.0f s", took)
