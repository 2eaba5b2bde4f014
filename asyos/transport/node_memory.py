"""Asy-OS's n-vectors, and forked workers' pushes and views, through shared memory.

Workers that share memory with the server's process (forked from it on one machine,
or MPI ranks on its node under an MPI-3 shared window) exchange u_C, Δu and X_S w_S
through one block of memory, carved by ``NodeVectors``:

* u_C is published by the server's process under a sequence lock: a worker reads it
  when a view arrives, so a VIEW message carries only its version, credit, budget
  and η;
* each such worker writes its Δu (and at the end X_S w_S) into its own ring of
  slots, and its PUSH says which push it is: the server applies the slot and counts
  it consumed, so a slot is never overwritten before it was applied.  The server
  keeps each worker's applied sum apart, so u_C = Σ_t X_S(t) w_S(t) exactly.

Under MPI the messages stay ``transport.wire``'s frames, with the n-vectors left empty
(tens of bytes): the protocol, its checks and its staleness gate are unchanged.  The
forked workers of one machine send no message per push at all: their pushes and
views go through ``Mailboxes`` too (``MailLink``), and the server's process looks
at them between its own pushes.  A worker reads u_C when it takes a view, which may
be newer than the view's version: its steps are then less stale than the server
records, never more.
"""

from collections.abc import Callable, Sequence

import numpy as np

from ..solvers import messages
from .base import Backoff, carry_worker
from .wire import Envelope, Kind, WireError

EMPTY = np.zeros(0)


class Carver:
    """Consecutive float64 and int64 arrays over one writable buffer (an anonymous
    mapping, an MPI shared window)."""

    def __init__(self, buffer):
        self.buffer, self.at = buffer, 0

    def take(self, shape, dtype) -> np.ndarray:
        count = int(np.prod(shape))
        array = np.frombuffer(self.buffer, dtype=dtype, count=count, offset=self.at)
        self.at += count * np.dtype(dtype).itemsize
        return array.reshape(shape)


class NodeVectors:
    """u_C as last published, and a ring of n-vector slots for each worker in
    ``workers`` (the workers that share this memory; others send their vectors in
    messages).  ``host_gone()``: whether the server's process has died, asked while a
    worker waits on memory it alone updates (the worker then exits)."""

    def __init__(self, buffer, n: int, q: int, workers: Sequence[int], ring: int,
                 host_gone: Callable[[], bool] = lambda: False):
        self.rows = {t: row for row, t in enumerate(workers)}
        self.ring, self.host_gone = ring, host_gone
        memory = Carver(buffer)
        self.sequence = memory.take(1, np.int64)
        self.through = memory.take(q, np.int64)
        self.consumed = memory.take(len(workers), np.int64)
        self.u = memory.take(n, np.float64)
        self.slots = memory.take((len(workers), ring, n), np.float64)
        self.published = -1

    @staticmethod
    def nbytes(n: int, q: int, sharing: int, ring: int) -> int:
        return 8 * (1 + q + sharing + n + sharing * ring * n)

    def shares(self, worker: int) -> bool:
        return worker in self.rows

    def _slot(self, worker: int, number: int) -> np.ndarray:
        return self.slots[self.rows[worker], number % self.ring]

    def delta(self, worker: int, push: int) -> np.ndarray:
        """The Δu of ``worker``'s push number ``push``, in its slot (the server's
        side, until ``applied``)."""
        return self._slot(worker, push)

    # -- the server's side ------------------------------------------------------------
    def outgoing(self, reply, server):
        """``reply`` to a sharing worker as sent: a view's u_C is published (once
        per server clock) and left out of the message.  ``server``: the
        ``AsyServer`` that answered."""
        if not isinstance(reply, messages.View):
            return reply
        if self.published != server.clock:
            self.publish(server.u, server.clock, server.pushes_applied())
        return messages.replace(reply, u=EMPTY)

    def publish(self, u, version: int, through) -> None:
        """u_C at ``version`` and every worker's pushes it includes, for the readers
        (the server's process, or a node's leader with a ``NodeView``)."""
        self.sequence[0] += 1   # odd: a reader retries
        self.u[:] = u
        self.through[:] = through
        self.sequence[0] += 1
        self.published = version

    def incoming(self, worker: int, body):
        """A sharing worker's message with its n-vector read from its slot."""
        if isinstance(body, messages.Push):
            return messages.replace(body, delta=self._slot(worker, body.seq))
        if isinstance(body, messages.Final):
            return messages.replace(body, contribution=self._slot(worker, body.seq + 1))
        return body

    def applied(self, worker: int, body) -> None:
        """The server has applied ``body``: its slot may be written again."""
        if isinstance(body, messages.Push):
            self.consumed[self.rows[worker]] = body.seq
        elif isinstance(body, messages.Final):
            self.consumed[self.rows[worker]] = body.seq + 1

    # -- a worker's side --------------------------------------------------------------
    def park(self, worker: int, message):
        """``message`` as sent: its n-vector written into its slot, once the server
        consumed the push that slot held, and left out of the message."""
        if isinstance(message, messages.Push):
            number, field = message.seq, "delta"
        elif isinstance(message, messages.Final):
            number, field = message.seq + 1, "contribution"
        else:
            return message
        row, backoff = self.rows[worker], Backoff(spin=5e-5)
        while self.consumed[row] < number - self.ring:
            if self.host_gone():
                raise SystemExit(1)
            backoff.sleep()
        self._slot(worker, number)[:] = getattr(message, field)
        return messages.replace(message, **{field: EMPTY})

    def read_view(self, worker: int, body, into: np.ndarray):
        """A view with u_C copied into ``into`` from the published vector, and the
        pushes of ``worker`` it includes.  A sequence lock: the writer makes the
        counter odd, writes, makes it even; a reader retries when the counter was odd
        or moved (stores are not reordered with stores on x86-64, nor loads with
        loads)."""
        if not isinstance(body, messages.View):
            return body
        tries = 0
        while True:
            before = int(self.sequence[0])
            if before % 2 == 0:
                into[:] = self.u
                through = int(self.through[worker])
                if int(self.sequence[0]) == before:
                    return messages.replace(body, u=into, through=through)
            tries += 1
            if tries % 4096 == 0 and self.host_gone():
                raise SystemExit(1)


class LeanLink:
    """A worker's link (``carry_worker``'s interface) whose n-vectors go through
    ``NodeVectors`` and whose messages carry none."""

    def __init__(self, link, vectors: NodeVectors, worker: int, n: int):
        self.link, self.vectors, self.worker = link, vectors, worker
        self._u = np.zeros(n)

    def send(self, message, dest: int, worker: int) -> None:
        self.link.send(self.vectors.park(self.worker, message), dest, worker)

    def _view(self, received):
        if received is None:
            return None
        source, envelope = received
        body = self.vectors.read_view(self.worker, envelope.body, self._u)
        return source, messages.replace(envelope, body=body)

    def poll(self, source=0):
        return self._view(self.link.poll(source))

    def wait(self, source=0):
        return self._view(self.link.wait(source))

    def drain(self) -> None:
        self.link.drain()


def carry_on_node(link, driver, worker: int, vectors: "NodeVectors | None",
                  n: int) -> None:
    """``carry_worker`` for a worker on a node: its n-vectors through ``vectors``
    (memory it shares with the server) when it has some, else in ``link``'s
    messages."""
    if vectors is not None:
        link = LeanLink(link, vectors, worker, n)
    carry_worker(link, driver, worker)


class Mailboxes:
    """Each forked worker's pushes and its newest view through memory it shares with
    the server's process: no message and no system call for either.

    A push's fields go into the record beside its Δu's slot (the same number, so the
    slot's rule, written only once the server consumed the push it held, covers the
    record too); ``posted`` then names it, so the server reads only whole records.  A
    view goes into the worker's one view record under a sequence lock: credit is
    cumulative and a newer view says all an older one did (``LocalView.answered``),
    so only the newest is kept, and the worker takes it when it looks.  These are
    the staleness gate's clocks in shared memory: the version (the server's clock)
    and the credit the gate granted.  The socket pair carries only the rest (the
    first pull, the final report, a failure, DONE), and wakes nobody per push.

    The server checks a record's counts against the handshake's limits before it
    reads it (``WireError``), then ``ServerState`` checks it as any push.
    Single writer, single reader, on x86-64's ordering, as ``NodeVectors``.
    """

    HEAD = 6    # seq, version, position, more, steps, kept
    VIEW = 7    # lock, views written, version, through, credit, budget, η's bits

    def __init__(self, buffer, workers: Sequence[int], ring: int, batch: int,
                 capacity: int):
        rows = len(workers)
        self.rows = {t: row for row, t in enumerate(workers)}
        self.ring, self.batch, self.capacity = ring, batch, capacity
        memory = Carver(buffer)
        self.posted = memory.take(rows, np.int64)
        self.head = memory.take((rows, ring, self.HEAD), np.int64)
        self.features = memory.take((rows, ring, batch), np.int64)
        self.selected = memory.take((rows, ring, capacity), np.int64)
        self.weights = memory.take((rows, ring, capacity), np.float64)
        self.importance = memory.take((rows, ring, capacity), np.float64)
        self.views = memory.take((rows, self.VIEW), np.int64)
        self.taken = [0] * rows   # the server's side: the last push it read
        self.seen = [0] * rows    # a worker's side: the views it read

    @classmethod
    def nbytes(cls, sharing: int, ring: int, batch: int, capacity: int) -> int:
        return 8 * sharing * (1 + ring * (cls.HEAD + batch + 3 * capacity) + cls.VIEW)

    # -- a worker's side ---------------------------------------------------------------
    def post(self, worker: int, push: messages.Push) -> None:
        """Push ``push`` (its Δu already in its slot: ``NodeVectors.park``)."""
        row, slot = self.rows[worker], push.seq % self.ring
        steps, kept = push.features.size, push.selected.size
        self.features[row, slot, :steps] = push.features
        self.selected[row, slot, :kept] = push.selected
        self.weights[row, slot, :kept] = push.weights
        self.importance[row, slot, :kept] = push.importance
        self.head[row, slot] = (push.seq, push.version, push.position, push.more,
                                steps, kept)
        self.posted[row] = push.seq   # after the record: the server reads it whole

    def newest_view(self, worker: int) -> messages.View | None:
        """The view written since this worker last looked, with u_C left out
        (``NodeVectors.read_view`` reads it), or None (none, or one being written:
        the caller looks again)."""
        row = self.rows[worker]
        record = self.views[row]
        before = int(record[0])
        fields = record[1:].tolist()
        if before % 2 or int(record[0]) != before:   # being written: look again
            return None
        count, version, through, credit, budget, eta = fields
        if count == self.seen[row]:
            return None
        self.seen[row] = count
        return messages.View(EMPTY, version, through, credit, budget,
                             float(np.int64(eta).view(np.float64)))

    # -- the server's side -------------------------------------------------------------
    def pushes(self, worker: int, vectors: NodeVectors):
        """The pushes ``worker`` posted since the last call, in order, each with its
        Δu in its slot; WireError for a record out of the limits."""
        row = self.rows[worker]
        while self.taken[row] < int(self.posted[row]):
            seq = self.taken[row] + 1
            slot = seq % self.ring
            number, version, position, more, steps, kept = self.head[row, slot].tolist()
            if number != seq or not 1 <= steps <= self.batch or \
                    not 0 <= kept <= self.capacity or min(version, position) < 0:
                raise WireError(f"push {seq} has a bad record ({number}, {version}, "
                                f"{position}, {steps} steps, {kept} kept)")
            self.taken[row] = seq
            yield messages.Push(seq, version, self.features[row, slot, :steps].copy(),
                                vectors.delta(worker, seq),
                                self.selected[row, slot, :kept].copy(),
                                self.weights[row, slot, :kept].copy(),
                                self.importance[row, slot, :kept].copy(), position,
                                more=bool(more))

    def write_view(self, worker: int, view: messages.View) -> None:
        """``view`` (its u_C published by ``NodeVectors.outgoing``) for ``worker``."""
        record = self.views[self.rows[worker]]
        record[0] += 1   # odd: a reader retries
        record[2:] = (view.version, view.through, view.credit, view.budget,
                      np.float64(view.eta).view(np.int64))
        record[1] += 1
        record[0] += 1


class MailLink:
    """A forked worker's link (``carry_worker``'s interface): its pushes and views
    through ``Mailboxes`` and ``NodeVectors``, everything else over ``link`` (its
    socket pair).  ``backoff()``: how it waits (``NodeShare.backoff``)."""

    def __init__(self, link, vectors: NodeVectors, mail: Mailboxes, worker: int,
                 n: int, backoff: Callable):
        self.link, self.vectors, self.mail, self.worker = link, vectors, mail, worker
        self.backoff = backoff
        self._u = np.zeros(n)

    def send(self, message, dest: int, worker: int) -> None:
        message = self.vectors.park(self.worker, message)
        if isinstance(message, messages.Push):
            self.mail.post(self.worker, message)
        else:
            self.link.send(message, dest, worker)

    def poll(self, source=0):
        view = self.mail.newest_view(self.worker)
        if view is None:
            return self.link.poll(source)
        view = self.vectors.read_view(self.worker, view, self._u)
        return source, Envelope(Kind.VIEW, self.worker, 0, 0, view)

    def wait(self, source=0):
        backoff, tries = self.backoff(), 0
        while (received := self.poll(source)) is None:
            tries += 1
            if tries % 64 == 0 and self.vectors.host_gone():
                raise SystemExit(1)
            backoff.sleep()
        return received

    def drain(self) -> None:
        self.link.drain()
