"""Read the next block while the kernel works on this one.

A stream's blocks come from disk (page faults of a memory map), a generator or a
random number generator; the OS kernel releases the GIL (``nogil``), and so do numpy's
copies, so one background thread reading ahead hides most of the reading time.  The
queue holds ``depth`` blocks: memory grows by depth × block, never with p.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

_DONE = object()


def prefetch(items: Iterator, depth: int = 1) -> Iterator:
    """Yield from ``items``, produced ``depth`` ahead by a background thread.

    An exception in the producer is raised here, at the item it would have been;
    stopping early (break, close, an error in the consumer) stops the producer.
    """
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as exc:   # forwarded to the consumer, raised there
            put((None, exc))

    thread = threading.Thread(target=produce, name="asyos-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        thread.join()
        close = getattr(items, "close", None)
        if close is not None:
            close()
