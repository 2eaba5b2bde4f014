"""What the closing sweeps' barrier guarantees on every carrier, read from a run's
recorded push order (``record_order``)."""

import numpy as np


def sweeps_begin_after_every_pass(order, ends) -> bool:
    """Whether no worker's sweep step (a step past ``ends[t]``, its passes' steps) was
    applied before every worker's passes were: ``order`` rows are (worker, feature)
    in the order the server applied them."""
    workers = np.asarray(order, dtype=np.int64).reshape(-1, 2)[:, 0]
    count = np.zeros(len(ends), dtype=np.int64)
    for position, t in enumerate(workers):
        count[t] += 1
        if count[t] > ends[t]:
            return position >= sum(ends)
    return True
