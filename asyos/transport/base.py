"""What every transport shares: polling that answers fast yet does not burn a core."""

import os
import time


class Backoff:
    """Wait between polls: yield the CPU for ``spin`` seconds, then sleep, doubling.

    Blocking MPI receives spin at 100 % CPU.  Polling with ``Iprobe``/``Test`` and this
    backoff (the pattern of mpi4py.futures) keeps a waiting rank's latency to a few
    microseconds while messages flow (``sched_yield`` hands the core to any runnable
    process, so an oversubscribed run loses nothing), and its CPU use near zero when
    idle (sleeps from ``start`` doubling up to ``cap`` seconds).  ``reset`` on traffic.
    """

    def __init__(self, spin: float = 1e-3, start: float = 2e-5, cap: float = 1e-3):
        self.spin, self.start, self.cap = spin, start, cap
        self.reset()

    def reset(self) -> None:
        self._since = None
        self._delay = self.start

    def sleep(self) -> None:
        now = time.perf_counter()
        if self._since is None:
            self._since = now
        if now - self._since < self.spin:
            os.sched_yield()
            return
        time.sleep(self._delay)
        self._delay = min(2.0 * self._delay, self.cap)
