"""The memory a node's processes share (``transport.node_memory``): pushes and views
through ``Mailboxes`` beside the n-vectors of ``NodeVectors``, and the forked carrier
that moves them without a message."""

import mmap
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.datasets import make_regression
from asyos.solvers import messages as m
from asyos.solvers.asy import AsyConfig
from asyos.streams import as_stream
from asyos.transport import shared
from asyos.transport.node_memory import Mailboxes, NodeVectors
from asyos.transport.wire import Kind, WireError

N, RING, BATCH, CAPACITY = 5, 3, 4, 3


def _memory(workers=(1, 2)):
    q = max(workers) + 1
    vectors = NodeVectors(mmap.mmap(-1, NodeVectors.nbytes(N, q, len(workers), RING)),
                          N, q, workers, RING)
    mail = Mailboxes(mmap.mmap(-1, Mailboxes.nbytes(len(workers), RING, BATCH,
                                                    CAPACITY)),
                     workers, RING, BATCH, CAPACITY)
    return vectors, mail


def _push(seq, steps=2, kept=2, more=True, salt=0):
    rng = np.random.default_rng([seq, salt])
    return m.Push(seq, 10 * seq, rng.integers(0, 100, steps), rng.standard_normal(N),
                  np.arange(kept) + seq, rng.standard_normal(kept), rng.random(kept),
                  position=7 * seq, more=more)


def _send(vectors, mail, worker, push):
    """A worker's side of a push: its Δu into its slot, its record posted."""
    mail.post(worker, vectors.park(worker, push))


def _same(a: m.Push, b: m.Push) -> bool:
    return (a.seq, a.version, a.position, a.more) == (b.seq, b.version, b.position,
                                                       b.more) and \
        all(np.array_equal(getattr(a, f), getattr(b, f))
            for f in ("features", "delta", "selected", "weights", "importance"))


def test_a_push_posted_is_read_once_whole_with_its_delta_from_its_slot():
    vectors, mail = _memory()
    pushes = [_push(1), _push(2, steps=BATCH, kept=0, more=False)]
    for push in pushes:
        _send(vectors, mail, 2, push)
    got = list(mail.pushes(2, vectors))
    assert len(got) == 2 and all(map(_same, got, pushes))
    assert list(mail.pushes(2, vectors)) == [] and list(mail.pushes(1, vectors)) == []
    # the record's arrays are the server's own: the next push into the slot leaves
    # them as they were
    for push in got:
        vectors.applied(2, push)
    _send(vectors, mail, 2, _push(4))   # slot 1 again (a ring of 3)
    assert np.array_equal(got[0].features, pushes[0].features)


@pytest.mark.parametrize("field, value, problem", [
    (4, BATCH + 1, "5 steps"), (4, 0, "0 steps"), (5, CAPACITY + 1, "4 kept"),
    (0, 9, r"\(9, "), (1, -1, r"-1"), (2, -3, r"-3"),
])
def test_a_record_out_of_the_limits_is_refused_and_not_taken(field, value, problem):
    vectors, mail = _memory()
    _send(vectors, mail, 1, _push(1))
    mail.head[0, 1, field] = value
    with pytest.raises(WireError, match=problem):
        list(mail.pushes(1, vectors))
    assert mail.taken[0] == 0


def test_only_the_newest_view_is_taken_once_and_one_being_written_is_not():
    vectors, mail = _memory()
    assert mail.newest_view(1) is None
    for version, credit, eta in ((3, 64, 0.5), (9, 128, 0.25)):
        mail.write_view(1, m.View(np.zeros(0), version, 1, credit, 6, eta))
    view = mail.newest_view(1)
    assert (view.version, view.through, view.credit, view.budget, view.eta) == \
        (9, 1, 128, 6, 0.25) and view.u.size == 0
    assert mail.newest_view(1) is None and mail.newest_view(2) is None
    mail.write_view(2, m.View(np.zeros(0), 11, 0, 64))
    mail.views[1, 0] += 1   # the server's process is writing it
    assert mail.newest_view(2) is None
    mail.views[1, 0] += 1
    assert mail.newest_view(2).version == 11


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["push", "view", "apply"]),
                          st.integers(1, 2)), max_size=40))
def test_pushes_arrive_once_in_order_and_views_newest_first(events):
    """Any interleaving of two workers posting (while their ring has room), the
    server writing views and applying what arrived: every push is read exactly once,
    in order, and a worker that looks sees the newest view written since it last
    looked, or none."""
    vectors, mail = _memory()
    sent, read, seq = {1: [], 2: []}, {1: [], 2: []}, {1: 0, 2: 0}
    written, seen = {1: None, 2: None}, {1: None, 2: None}
    version = 0
    for event, t in events:
        if event == "push":
            if seq[t] - len(read[t]) < RING:   # its ring has room: no wait
                seq[t] += 1
                push = _push(seq[t], steps=1 + seq[t] % BATCH, salt=t)
                _send(vectors, mail, t, push)
                sent[t].append(push)
        elif event == "apply":
            for push in mail.pushes(t, vectors):   # its Δu, in the slot, as applied
                read[t].append(m.replace(push, delta=push.delta.copy()))
                vectors.applied(t, push)
        else:
            version += 1
            written[t] = version
            mail.write_view(t, m.View(np.zeros(0), version, len(read[t]), version))
            view = mail.newest_view(t)
            assert view.version == written[t] != seen[t]
            seen[t] = view.version
            assert mail.newest_view(t) is None
    for t in (1, 2):
        read[t].extend(m.replace(push, delta=push.delta.copy())
                       for push in mail.pushes(t, vectors))
        assert [p.seq for p in read[t]] == list(range(1, seq[t] + 1))
        assert all(map(_same, read[t], sent[t]))


def test_the_forked_workers_push_and_are_answered_without_a_message(monkeypatch):
    """Over a whole run the socket pairs carry each forked worker's first pull and
    its final report, nothing else: its hundreds of pushes and views go through
    memory, and the run keeps the invariants."""
    received = []
    real = shared._Host.receive
    monkeypatch.setattr(shared._Host, "receive",
                        lambda host, t: received.append(t) or real(host, t))
    problem = make_regression(p=1200, s=12, n=200, seed=3)
    config = AsyConfig.build(12, 3, epochs=3, n_features=1200)
    result = shared.run(as_stream(problem.X), problem.y, config)
    assert sorted(received) == [1, 1, 2, 2]
    assert all(w["pushes"] > 10 for w in result.asy["workers"])
    assert result.asy["u_check_max_abs_diff"] <= 1e-10 * max(1.0, result.objective)
    stale = result.asy["staleness"]
    assert stale["max"] <= stale["bound"]
    assert not result.asy["partial"]


def test_a_view_taken_from_memory_reaches_the_worker_with_u_c():
    """A view taken from memory reaches ``carry_worker`` as a VIEW envelope with
    u_C read from the published vector."""
    from asyos.transport.node_memory import MailLink

    class Nothing:
        def poll(self, source=0):
            return None

    vectors, mail = _memory(workers=(1,))
    vectors.u[:] = np.arange(N)
    link = MailLink(Nothing(), vectors, mail, 1, N, lambda: None)
    assert link.poll() is None
    mail.write_view(1, m.View(np.zeros(0), 4, 0, 32))
    source, envelope = link.poll()
    assert (source, envelope.kind) == (0, Kind.VIEW)
    assert np.array_equal(envelope.body.u, np.arange(N)) and envelope.body.credit == 32


def test_a_forked_worker_that_posts_a_bad_record_ends_the_run_naming_it(monkeypatch):
    """A record out of the limits (a worker's memory corrupted, or a bug) is refused
    before the server reads it: the run fails naming the worker, and nothing of the
    record reaches u_C."""
    host, real = os.getpid(), Mailboxes.post

    def post(mail, worker, push):
        if os.getpid() == host or push.seq != 3:   # the forked worker's third push:
            return real(mail, worker, push)        # more steps than a push may carry
        row = mail.rows[worker]
        mail.head[row, push.seq % mail.ring] = (push.seq, push.version, push.position,
                                                push.more, mail.batch + 1, 0)
        mail.posted[row] = push.seq

    monkeypatch.setattr(Mailboxes, "post", post)
    problem = make_regression(p=1200, s=12, n=200, seed=0)
    config = AsyConfig.build(12, 2, epochs=3, n_features=1200)
    with pytest.raises(shared.WorkerFailed,
                       match=r"worker 1 sent a malformed message: push 3 has a bad "
                             r"record .* steps"):
        shared.run(as_stream(problem.X), problem.y, config)
