"""What every transport shares: polling without burning a core."""

import time


class Backoff:
    """Sleep between polls, doubling from ``start`` to ``cap`` seconds; reset on traffic.

    Blocking MPI receives spin at 100 % CPU; polling with ``Iprobe``/``Test`` and this
    backoff (the pattern of mpi4py.futures) keeps an idle rank near 0 % while adding at
    most ``cap`` of latency.
    """

    def __init__(self, start: float = 1e-5, cap: float = 1e-3):
        self.start, self.cap = start, cap
        self.delay = start

    def reset(self) -> None:
        self.delay = self.start

    def sleep(self) -> None:
        time.sleep(self.delay)
        self.delay = min(2.0 * self.delay, self.cap)
