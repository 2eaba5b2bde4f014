"""The server's data plane, compiled: a push's checks, its bookkeeping and the credit
gate over a table of the workers' counters (``core.server_state.ServerState`` holds
the arrays and says what the rules mean; this module only runs them).

A push is the server's hot path, and in Python it cost 45-100 µs at n = 1000 (one
worker record object, a deque of grants and one of views per worker, the gate
looking at each as Python objects).  Here each worker is a row of int64 counters;
its unspent grants lie in a ring (each holds at least one step of credit, and a
worker holds at most ``depth``, so ``depth`` slots at most), the views it was sent in a
growing array of rows with a head, its steps' staleness in a growing buffer, and
the waiting workers in a queue in arrival order.  Python grows the arrays (a view
is sent from Python; a ring that a grant filled, ``GRANTS_FULL``, before the next
grant); nothing here allocates.

The codes a check returns are turned into the protocol's errors by the caller.
"""

import numpy as np
from numba import njit

# the workers' table: one row per worker
CREDIT, PUSHES, MESSAGES, POSITION, FINISHED, LOST, GIVEN_UP, WAITING = range(8)
GRANT_HEAD, GRANT_COUNT, SENT_HEAD, SENT_COUNT, STALE_COUNT = range(8, 13)
PASS_SIZE, PASS_END = 13, 14   # ``bound_passes`` (0: unbounded), ``hold_sweeps``
COLUMNS = 15
# a grant's and a sent view's fields
VERSION, OWN, UPTO = 0, 1, 2   # a grant: (version, own steps then, credit after it)
BUDGET = 2                     # a view: (version, own steps then, budget or NO_BUDGET)
NO_BUDGET = -1
# the settings: one int64 array
CLOCK, TAU, DEPTH, BATCH, HOLD, ROUND_SIZE, ROUNDS, ROUNDS_OPEN, N_WAITING = range(9)
GRANTS_FULL = 9   # a worker's grants fill its ring: the caller grows it
SETTINGS = 10
UNBOUNDED = -1   # TAU: no staleness bound
NO_LIMIT = 1 << 62   # ``passes_left``: nothing holds the worker
PASSES_AHEAD = 1   # ``ServerState.bound_passes``: how far a worker may run ahead
# what ``check_push`` finds
FITS, FINISHED_ALREADY, WAS_LOST, DUPLICATE, SKIPS, STEPS_OUT_OF_RANGE, OVER_CREDIT, \
    NO_SUCH_VIEW = range(8)
KEPT_FITS, WEIGHTS_NOT_FINITE, BAD_IMPORTANCE = range(3)   # ``kept_fits``
NOT_FINITE, NO_ROOM = -1, -2   # ``push`` refused it (a staleness is ≥ 0)


@njit(cache=True, fastmath={"reassoc"})
def all_finite(values, least=-np.inf) -> bool:
    """Whether every value is finite (and ≥ ``least``): no temporaries; the server
    checks every n-vector and kept set it receives.  Finiteness is summed, not
    tested value by value (value·0 is NaN exactly where value is not finite, and
    reassociating the sum only lets it run in vector lanes): a loop that returns
    early is not vectorised, and this is a pass over every Δu a push brings (5×
    faster at n = 10⁵)."""
    poisoned = 0.0
    for i in range(values.shape[0]):
        poisoned += values[i] * 0.0
    if not poisoned == 0.0:
        return False
    if least > -np.inf:
        for i in range(values.shape[0]):
            if values[i] < least:
                return False
    return True


@njit(cache=True)
def apply_push(u, applied, delta) -> None:
    """u += Δu and the worker's Σ Δu += Δu in one pass over the three."""
    for i in range(delta.shape[0]):
        u[i] += delta[i]
        applied[i] += delta[i]


@njit(cache=True)
def exposure(table, grants, worker, clock, total):
    """The staleness ``worker``'s unspent credit may still reach (it holds some):
    others' steps since its oldest unspent grant, plus everything the others may
    still push (``total``: Σ unspent credit of all workers)."""
    oldest = grants[worker, table[worker, GRANT_HEAD]]
    pushes = table[worker, PUSHES]
    unspent = table[worker, CREDIT] - pushes
    return (clock - oldest[VERSION]) - (pushes - oldest[OWN]) + total - unspent


@njit(cache=True)
def open_barriers(table, settings) -> None:
    """Open every one of the sweeps' barriers that all workers reached: each one's
    passes (``PASS_END``) plus the rounds opened before, or finished or given up."""
    while settings[HOLD] and settings[ROUNDS_OPEN] < settings[ROUNDS]:
        offset = settings[ROUNDS_OPEN] * settings[ROUND_SIZE]
        for t in range(table.shape[0]):
            if not (table[t, FINISHED] or table[t, GIVEN_UP] or
                    table[t, PUSHES] >= table[t, PASS_END] + offset):
                return
        settings[ROUNDS_OPEN] += 1


@njit(cache=True)
def pass_floor(table):
    """(lowest pass any worker that may still step is in, how many are in it, the
    next lowest), -1 for none: what every worker's ``bound_passes`` limit is read
    from in O(1)."""
    low, count, second = -1, 0, -1
    for t in range(table.shape[0]):
        size = table[t, PASS_SIZE]
        if size == 0 or table[t, FINISHED] or table[t, GIVEN_UP]:
            continue
        index = table[t, PUSHES] // size
        if low < 0 or index < low:
            low, count, second = index, 1, low
        elif index == low:
            count += 1
        elif second < 0 or index < second:
            second = index
    return low, count, second


@njit(cache=True)
def passes_left(table, settings, worker, low, count, second):
    """The credit ``worker`` may still get before the next sweeps' barrier opens or
    the slowest other worker's pass moves on (NO_LIMIT: neither holds it), from
    ``pass_floor`` and the barriers ``open_barriers`` opened."""
    limit = NO_LIMIT
    size = table[worker, PASS_SIZE]
    if size:
        alone = count == 1 and not (table[worker, FINISHED] or table[worker, GIVEN_UP]) \
            and table[worker, PUSHES] // size == low
        others = second if alone else low
        if others >= 0:
            limit = (others + 1 + PASSES_AHEAD) * size
    if settings[HOLD] and settings[ROUNDS_OPEN] < settings[ROUNDS]:
        limit = min(limit, table[worker, PASS_END] +
                    settings[ROUNDS_OPEN] * settings[ROUND_SIZE])
    return NO_LIMIT if limit == NO_LIMIT else limit - table[worker, CREDIT]


@njit(cache=True)
def limit_of(table, settings, worker):
    """``passes_left`` of ``worker`` now (and the barriers reached opened)."""
    open_barriers(table, settings)
    low, count, second = pass_floor(table)
    return passes_left(table, settings, worker, low, count, second)


@njit(cache=True)
def grantable(table, grants, settings, worker, left, total):
    """How many steps of credit ``worker`` may be granted now (0: it waits), with
    ``left`` its ``passes_left`` and ``total`` Σ unspent credit."""
    unspent = table[worker, CREDIT] - table[worker, PUSHES]
    wanted = min(settings[DEPTH] - unspent, left)
    tau = settings[TAU]
    if tau == UNBOUNDED or wanted <= 0:
        return max(wanted, 0)
    if total - unspent > tau:   # its own new view could not hold
        return 0
    clock, room = settings[CLOCK], wanted
    for t in range(table.shape[0]):
        if t != worker and table[t, CREDIT] > table[t, PUSHES]:
            room = min(room, tau - exposure(table, grants, t, clock, total))
    return max(room, 0)


@njit(cache=True)
def enqueue(table, settings, queue, worker) -> None:
    """``worker`` waits for a view (once)."""
    if not table[worker, WAITING]:
        queue[settings[N_WAITING]] = worker
        settings[N_WAITING] += 1
        table[worker, WAITING] = 1


@njit(cache=True)
def dequeue(table, settings, queue, worker) -> None:
    """``worker`` waits no more; the others keep their order."""
    if not table[worker, WAITING]:
        return
    n = settings[N_WAITING]
    at = 0
    while queue[at] != worker:
        at += 1
    queue[at:n - 1] = queue[at + 1:n]
    settings[N_WAITING] = n - 1
    table[worker, WAITING] = 0


@njit(cache=True)
def release(table, settings, queue, worker) -> None:
    """``worker`` will spend no more credit: what it holds goes back."""
    table[worker, CREDIT] = table[worker, PUSHES]
    table[worker, GRANT_COUNT] = 0
    dequeue(table, settings, queue, worker)


@njit(cache=True)
def grant_waiting(table, grants, settings, queue, out):
    """Answer the waiting workers that can be answered now (the rule:
    ``ServerState._grant``): their ids in ``out``, in order; returns how many."""
    open_barriers(table, settings)
    low, count, second = pass_floor(table)
    total = 0
    for t in range(table.shape[0]):
        total += table[t, CREDIT] - table[t, PUSHES]
    blocked, answered, at = False, 0, 0
    slots = grants.shape[1]
    while at < settings[N_WAITING]:
        worker = queue[at]
        unspent = table[worker, CREDIT] - table[worker, PUSHES]
        if blocked and unspent <= 0:   # waits, at a barrier or behind one
            at += 1
            continue
        left = passes_left(table, settings, worker, low, count, second)
        if left <= 0 and unspent <= 0:   # at the sweeps' barrier: no one waits behind
            at += 1
            continue
        k = 0 if blocked else grantable(table, grants, settings, worker, left, total)
        if k <= 0 and unspent <= 0:
            blocked = True
            at += 1
            continue
        dequeue(table, settings, queue, worker)
        if k > 0:
            table[worker, CREDIT] += k
            total += k
            slot = (table[worker, GRANT_HEAD] + table[worker, GRANT_COUNT]) % slots
            grants[worker, slot, VERSION] = settings[CLOCK]
            grants[worker, slot, OWN] = table[worker, PUSHES]
            grants[worker, slot, UPTO] = table[worker, CREDIT]
            table[worker, GRANT_COUNT] += 1
            if table[worker, GRANT_COUNT] == slots:
                settings[GRANTS_FULL] = 1
        out[answered] = worker
        answered += 1
    return answered


@njit(cache=True)
def note_view(table, settings, sent, worker, budget) -> bool:
    """Record u_C as it is now as a view sent to ``worker`` (``budget`` granted with
    it, or NO_BUDGET), which its pushes may name; False (nothing recorded) when
    ``sent`` is full: the caller makes room."""
    at = table[worker, SENT_HEAD] + table[worker, SENT_COUNT]
    if at == sent.shape[0]:
        return False
    sent[at, VERSION] = settings[CLOCK]
    sent[at, OWN] = table[worker, PUSHES]
    sent[at, BUDGET] = budget
    table[worker, SENT_COUNT] += 1
    return True


@njit(cache=True)
def kept_fits(weights, importance) -> int:
    """A kept set's numbers checked: KEPT_FITS, WEIGHTS_NOT_FINITE, or
    BAD_IMPORTANCE (each one must be finite and ≥ 0)."""
    if not all_finite(weights):
        return WEIGHTS_NOT_FINITE
    if not all_finite(importance, 0.0):
        return BAD_IMPORTANCE
    return KEPT_FITS


@njit(cache=True)
def check_push(table, grants, settings, sent, worker, version, steps, seq, fewest):
    """Whether ``worker`` (a known one) may push ``steps`` steps computed from view ``version``
    as its push ``seq`` (-1: unnumbered): (FITS, the view's row in ``sent``) or
    (the code of what breaks, -1).  Nothing changes here.  The view must have
    been sent to it and be no older than the grant holding the push's last step
    (so the staleness bound covers every step)."""
    if table[worker, FINISHED]:
        return FINISHED_ALREADY, -1
    if table[worker, LOST]:
        return WAS_LOST, -1
    messages = table[worker, MESSAGES]
    if seq >= 0 and seq <= messages:
        return DUPLICATE, -1
    if seq >= 0 and seq != messages + 1:
        return SKIPS, -1
    pushes = table[worker, PUSHES]
    if steps < fewest or steps > settings[BATCH]:
        return STEPS_OUT_OF_RANGE, -1
    if steps > table[worker, CREDIT] - pushes:
        return OVER_CREDIT, -1
    newest = -1   # the version of the grant holding the push's last step
    slots = grants.shape[1]
    for k in range(table[worker, GRANT_COUNT]):
        grant = grants[worker, (table[worker, GRANT_HEAD] + k) % slots]
        if grant[UPTO] >= pushes + steps:
            newest = grant[VERSION]
            break
    head = table[worker, SENT_HEAD]
    for row in range(head, head + table[worker, SENT_COUNT]):
        if sent[row, VERSION] == version and version >= newest:
            return FITS, row
    return NO_SUCH_VIEW, -1


@njit(cache=True)
def count_push(table, grants, settings, queue, sent, staleness, worker, row, steps,
               ask):
    """A checked push's bookkeeping, its Δu applied: the clock, the credit it spent,
    the grants it used up, the views it retires (those before the one it used: views
    are used in order), its steps' staleness (``staleness`` has room); ``ask``: it
    waits for a view.  Returns its staleness."""
    pushes = table[worker, PUSHES]
    stale = (settings[CLOCK] - sent[row, VERSION]) - (pushes - sent[row, OWN])
    settings[CLOCK] += steps
    pushes += steps
    table[worker, PUSHES] = pushes
    table[worker, MESSAGES] += 1
    at = table[worker, STALE_COUNT]
    staleness[at:at + steps] = stale
    table[worker, STALE_COUNT] = at + steps
    slots = grants.shape[1]
    while table[worker, GRANT_COUNT] and \
            grants[worker, table[worker, GRANT_HEAD], UPTO] <= pushes:
        table[worker, GRANT_HEAD] = (table[worker, GRANT_HEAD] + 1) % slots
        table[worker, GRANT_COUNT] -= 1
    table[worker, SENT_COUNT] -= row - table[worker, SENT_HEAD]
    table[worker, SENT_HEAD] = row
    if ask:
        enqueue(table, settings, queue, worker)
    return stale


@njit(cache=True)
def push(table, grants, settings, queue, sent, staleness, u, applied, delta, worker,
         row, steps, ask, out):
    """A checked push (``check_push``'s row) applied whole: Δu, its bookkeeping, then
    the gate (the workers to send a view in ``out``).  Returns (its staleness, how many in ``out``), or, nothing
    changed, (NOT_FINITE, 0) for a Δu with NaN or inf, (NO_ROOM, 0) when
    ``staleness`` has no room for its steps (the caller grows it)."""
    if table[worker, STALE_COUNT] + steps > staleness.shape[0]:
        return NO_ROOM, 0
    if not all_finite(delta):
        return NOT_FINITE, 0
    apply_push(u, applied, delta)
    stale = count_push(table, grants, settings, queue, sent, staleness, worker, row,
                       steps, ask)
    return stale, grant_waiting(table, grants, settings, queue, out)


def warm() -> None:
    """Load (or compile) every entry point now, on a one-worker table: a server
    must not spend its first push compiling."""
    table = np.zeros((1, COLUMNS), np.int64)
    settings = np.zeros(SETTINGS, np.int64)
    settings[ROUNDS], settings[DEPTH], settings[BATCH] = 1, 1, 1
    grants, queue, out = np.zeros((1, 1, 3), np.int64), np.zeros(1, np.int64), \
        np.zeros(1, np.int64)
    sent, staleness, values = np.zeros((1, 3), np.int64), np.zeros(1, np.int64), \
        np.zeros(1)
    note_view(table, settings, sent, 0, NO_BUDGET)
    kept_fits(values, values)
    all_finite(values)
    all_finite(values, 0.0)
    enqueue(table, settings, queue, 0)
    grant_waiting(table, grants, settings, queue, out)
    exposure(table, grants, 0, 0, 1)
    limit_of(table, settings, 0)
    code, row = check_push(table, grants, settings, sent, 0, 0, 1, -1, 1)
    push(table, grants, settings, queue, sent, staleness, values, values.copy(), values,
         0, row, 1, False, out)
    count_push(table, grants, settings, queue, sent, staleness, 0, 0, 0, False)
    apply_push(values, values.copy(), values)
    release(table, settings, queue, 0)
