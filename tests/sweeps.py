"""What the closing sweeps' barrier guarantees on every carrier, read from a run's
recorded push order (``record_order``)."""

import numpy as np


def sweeps_begin_after_every_pass(order, ends, size=0, rounds=1) -> bool:
    """Whether no worker's sweep step (a step past ``ends[t]``, its passes' steps) was
    applied before every worker's passes were, nor a step of a later round (of
    ``size`` steps each, ``rounds`` of them) before every worker's earlier rounds
    were (or its sweep ended): ``order`` rows are (worker, feature) in the order the
    server applied them."""
    workers = np.asarray(order, dtype=np.int64).reshape(-1, 2)[:, 0]
    totals = np.bincount(workers, minlength=len(ends))
    for k in range(rounds):
        barrier = np.asarray(ends, dtype=np.int64) + k * size
        count = np.zeros(len(ends), dtype=np.int64)
        for position, t in enumerate(workers):
            count[t] += 1
            if count[t] > barrier[t]:
                if position < np.minimum(totals, barrier).sum():
                    return False
                break
    return True
