"""The server state machine: the Σ-invariant, the credit gate that bounds staleness,
and liveness, in any interleaving (with lost and repeated messages, and workers that
die)."""

from collections import deque

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from asyos.core.server_state import (
    PASSES_AHEAD,
    all_finite,
    apply_push,
    DuplicatePush,
    NotARequest,
    OutOfOrderPush,
    ProtocolError,
    ServerState,
)
from asyos.errors import InputError
from asyos.solvers import messages
from asyos.solvers.asy import AsyConfig
from asyos.solvers.asy_server import AsyServer
from asyos.solvers.worker_loop import LocalView, Unacknowledged


def _drive(n, q, tau, pushes_each, seed, depth=1, batch=1):
    """Workers with random contributions pushed in a random interleaving: each holds
    the views and credit it was sent, steps from its newest view and pushes."""
    rng = np.random.default_rng(seed)
    server = ServerState(n, q, staleness=tau, depth=depth, batch=batch)
    contribution = np.zeros((q, n))
    left = [pushes_each] * q
    version, credit, spent = [None] * q, [0] * q, [0] * q

    def send_views(workers):
        for w in workers:
            u, v, through, c, budget = server.view(w)
            assert v == server.clock and through == server.workers[w].messages
            assert budget is None
            version[w], credit[w] = v, max(credit[w], c)

    while any(left):
        can_push = [t for t in range(q) if left[t] and credit[t] > spent[t]]
        can_ask = [t for t in range(q) if left[t] and not server.is_waiting(t)]
        choices = can_push + can_ask
        assert choices, "deadlock: nobody can move"
        t = choices[rng.integers(len(choices))]
        if t in can_push and (t not in can_ask or rng.random() < 0.7):
            steps = int(rng.integers(1, min(batch, credit[t] - spent[t], left[t]) + 1))
            delta = rng.standard_normal(n)
            contribution[t] += delta
            staleness, newly = server.push(t, delta, version[t], steps)
            spent[t] += steps
            left[t] -= steps
            if tau is not None:
                assert staleness <= tau
            if not left[t]:   # its FINAL follows its last push: its credit returns
                send_views(newly)
                newly = server.finish(t, [t], [1.0], contribution[t],
                                      np.full((1, n), t + 1.0))
        else:
            newly = server.request(t)
        send_views(newly)
        if tau is not None:
            assert all(server.exposure(w) <= tau for w in range(q))
    assert server.done
    return server, contribution


@settings(max_examples=60, deadline=None)
@given(q=st.integers(1, 6), tau=st.one_of(st.none(), st.integers(0, 6)),
       pushes=st.integers(1, 15), depth=st.integers(1, 4), batch=st.integers(1, 4),
       seed=st.integers(0, 2**31))
def test_sum_invariant_and_staleness_bound_in_any_interleaving(q, tau, pushes, depth,
                                                               batch, seed):
    batch = min(batch, depth)
    server, contribution = _drive(8, q, tau, pushes, seed, depth, batch)
    selected, weights, difference = server.assemble()
    assert difference <= 1e-9 * (1 + np.abs(contribution.sum(0)).max())
    assert server.clock == q * pushes
    stats = server.staleness_stats()
    assert stats["max"] <= (tau if tau is not None else q * pushes)
    assert sum(stats["histogram"]) == q * pushes
    assert list(selected) == list(range(q))


def test_tau_zero_serialises_the_workers():
    server = ServerState(3, 3, staleness=0)
    assert server.request(0) == [0]
    assert server.view(0)[1:] == (0, 0, 1, None)   # version 0, credit for one step
    assert server.request(1) == []       # waits: 0 holds credit
    assert server.request(2) == []
    assert server.is_waiting(1) and server.is_waiting(2)
    assert server.push(0, np.ones(3), version=0) == (0, [1])   # 1 asked first
    assert server.view(1)[1:] == (1, 0, 1, None)
    assert server.push(1, np.ones(3), version=1) == (0, [2])
    assert server.view(2)[1] == 2
    assert server.request(0) == []       # 2 holds the credit now
    assert server.push(2, np.ones(3), version=2) == (0, [0])
    assert server.staleness_stats()["max"] == 0


def test_unbounded_staleness_is_recorded():
    server = ServerState(2, 2)
    assert server.request(0) == [0] and server.view(0)[1] == 0
    assert server.request(1) == [1] and server.view(1)[1] == 0
    server.push(0, np.ones(2), version=0)
    assert server.request(0) == [0] and server.view(0)[1] == 1
    server.push(0, np.ones(2), version=1)
    assert server.push(1, np.ones(2), version=0)[0] == 2
    assert server.staleness_stats()["max"] == 2


def test_protocol_errors_leave_the_state_untouched():
    server = ServerState(4, 2, staleness=1)
    with pytest.raises(ProtocolError, match="unknown worker 5"):
        server.request(5)
    with pytest.raises(ProtocolError, match="with credit for 0"):   # never asked
        server.push(0, np.ones(4), version=0)
    assert server.request(0) == [0]
    server.view(0)
    # asking again (its view lost?) is answered by a view, without more credit
    assert server.request(0) == [0]
    assert server.view(0)[3] == 1 and server.workers[0].unspent == 1
    for bad in (np.ones(3), np.ones(4, dtype=np.float32), np.array([1, np.nan, 0, 0.])):
        with pytest.raises(ProtocolError):
            server.push(0, bad, version=0)
    with pytest.raises(ProtocolError, match="0 steps in one message; 1 to 1"):
        server.push(0, np.ones(4), version=0, steps=0)
    assert server.clock == 0 and np.all(server.u == 0)
    assert server.workers[0].staleness == [] and server.workers[0].unspent == 1
    server.push(0, np.ones(4), version=0)
    with pytest.raises(ProtocolError, match="not finished"):
        server.assemble()
    server.finish(0, [1], [2.0], np.ones(4))
    with pytest.raises(ProtocolError, match="already finished"):
        server.request(0)
    with pytest.raises(ProtocolError, match="already finished"):
        server.push(0, np.ones(4), version=1)


def test_a_message_that_is_no_request_is_a_protocol_fault_and_a_bug_is_not(monkeypatch):
    """The server names what it cannot take (``NotARequest``, which carriers drop);
    a TypeError from inside it is a bug, and is not mistaken for one."""
    config = AsyConfig.build(2, 1, eta=0.1, m=1.0, epochs=1, window=1, batch=1,
                             staleness=None)
    server = AsyServer(np.zeros(3), config)
    server.start(4, 0.1, 1.0)
    with pytest.raises(NotARequest, match="not a worker request: View"):
        server.handle(0, messages.View(np.zeros(3), 0, 0, 0))
    assert server.state.clock == 0

    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(server.state, "request", broken)
    with pytest.raises(TypeError, match="a bug") as caught:
        server.handle(0, messages.Pull())
    assert not isinstance(caught.value, ProtocolError)


def test_pushes_beyond_the_credit_or_from_views_older_than_their_grant_are_refused():
    """The credit rules: a push carries at most the steps a worker holds credit for,
    each step computed from a view no older than the grant whose credit it spends."""
    server = ServerState(3, 2, staleness=4, depth=2, batch=2)
    assert server.request(0) == [0]
    assert server.view(0)[1:4] == (0, 0, 2)                 # version 0, credit 2
    assert server.request(1) == [1] and server.view(1)[3] == 2
    before = server.u.copy(), server.clock
    with pytest.raises(ProtocolError, match="3 steps in one message; 1 to 2"):
        server.push(0, np.ones(3), version=0, steps=3)
    with pytest.raises(ProtocolError, match="view 7"):      # never sent
        server.push(0, np.ones(3), version=7)
    assert np.all(server.u == before[0]) and server.clock == before[1]
    assert server.push(0, np.ones(3), version=0)[0] == 0   # 1 step of its credit of 2
    with pytest.raises(ProtocolError, match="2 steps with credit for 1"):
        server.push(0, np.ones(3), version=0, steps=2)
    # a top-up: granted at version 1; a push spanning both grants must use its view
    assert server.request(0) == [0] and server.view(0)[1:4] == (1, 1, 3)
    with pytest.raises(ProtocolError, match="view 0"):
        server.push(0, np.ones(3), version=0, steps=2)
    assert server.workers[0].unspent == 2 and server.clock == 1
    assert server.push(0, np.ones(3), version=0, steps=1)[0] == 0   # grant 1's view
    assert server.push(0, np.ones(3), version=1, steps=1)[0] == 0
    with pytest.raises(ProtocolError, match="credit for 0"):
        server.push(0, np.ones(3), version=1)
    # views are used in order: once a push named view 1, view 0 has expired
    assert server.request(0) == [0] and server.view(0)[1] == 3
    with pytest.raises(ProtocolError, match="view 0"):
        server.push(0, np.ones(3), version=0)
    # worker 1 still holds its credit on view 0: three of worker 0's steps since
    assert server.push(1, np.ones(3), version=0, steps=2)[0] == 3
    assert server.staleness_stats()["histogram"] == [3, 0, 0, 2]
    np.testing.assert_array_equal(server.u, np.full(3, 4.0))


def test_a_grant_waits_until_the_others_credit_fits_under_tau():
    """τ = 3, depth 2: a grant must leave every other holder's exposure (others'
    steps since its oldest unspent grant + the credit the others hold) ≤ τ."""
    server = ServerState(2, 2, staleness=3, depth=2, batch=1)
    assert server.request(0) == [0] and server.view(0)[3] == 2
    assert server.request(1) == [1] and server.view(1)[3] == 2
    assert server.exposure(0) == server.exposure(1) == 0 + 2
    assert server.push(0, np.ones(2), version=0) == (0, [])
    assert server.exposure(1) == 1 + 1
    assert server.request(0) == [0] and server.view(0)[3] == 3    # topped up by 1 only
    assert server.exposure(1) == 1 + 2 and server.exposure(0) == 0 + 2
    server.push(0, np.ones(2), version=0)
    server.push(0, np.ones(2), version=1)
    assert server.exposure(1) == 3 + 0 and server.exposure(0) == 0
    assert server.request(0) == [] and server.is_waiting(0)      # no room: it waits
    assert server.push(1, np.ones(2), version=0) == (3, [])       # still 3 exposed
    assert server.push(1, np.ones(2), version=0) == (3, [0])      # spent: 0's turn
    assert server.view(0)[3] == 5 and server.exposure(0) == 0
    assert server.staleness_stats()["max"] == 3


def test_a_lost_push_is_caught_at_assembly():
    server = ServerState(2, 1)
    server.request(0)
    server.view(0)
    server.push(0, np.ones(2), version=0)
    server.finish(0, [0], [1.0], 2 * np.ones(2))   # claims a push that never landed
    assert server.assemble()[2] == pytest.approx(1.0)


def test_pipelined_pushes_count_only_the_other_workers_steps():
    server = ServerState(2, 2, depth=8, batch=4)
    assert server.request(0) == [0] and server.view(0)[3] == 8   # both hold view 0
    assert server.request(1) == [1] and server.view(1)[3] == 8
    assert server.push(0, np.ones(2), version=0, steps=3)[0] == 0
    assert server.request(0) == [0]                          # topped up ...
    assert server.view(0)[1:4] == (3, 1, 11)                 # ... with view 3
    # still from view 0 (its answer may be in transit): own steps are not stale
    assert server.push(0, np.ones(2), version=0, steps=2)[0] == 0
    assert server.push(1, np.ones(2), version=0, steps=1)[0] == 5   # 5 of worker 0
    assert server.clock == 6
    assert server.staleness_stats()["histogram"] == [5, 0, 0, 0, 0, 1]


@settings(max_examples=60, deadline=None)
@given(q=st.integers(1, 4), depth=st.integers(1, 6), batch=st.integers(1, 4),
       tau=st.sampled_from([None, 0, 2, 7]), seed=st.integers(0, 2**31))
def test_pipelined_staleness_is_exactly_the_other_workers_steps(q, depth, batch, tau,
                                                                seed):
    """Views arrive after random delays; workers step on their newest view with the
    credit they were sent; every push reports the number of other workers' steps
    since the view it used, and u_C stays the sum of pushes."""
    batch = min(batch, depth)
    rng = np.random.default_rng(seed)
    server = ServerState(3, q, staleness=tau, depth=depth, batch=batch)
    in_transit = [deque() for _ in range(q)]  # (version, credit) sent, not delivered
    current, credit, spent = [None] * q, [0] * q, [0] * q
    log = []                                  # (worker, steps) per push, in order
    total = np.zeros((q, 3))

    def send(workers):
        for w in workers:
            _, version, _, granted, _ = server.view(w)
            in_transit[w].append((version, granted))

    for t in range(q):
        send(server.request(t))
    for _ in range(80):
        t = int(rng.integers(q))
        if in_transit[t] and (current[t] is None or rng.random() < 0.5):
            current[t], granted = in_transit[t].popleft()
            credit[t] = max(credit[t], granted)
        elif current[t] is not None and credit[t] > spent[t]:
            steps = int(rng.integers(1, min(batch, credit[t] - spent[t]) + 1))
            delta = rng.standard_normal(3)
            staleness, granted = server.push(t, delta, version=current[t], steps=steps)
            send(granted)
            others = sum(k for w, k in log_since(log, current[t]) if w != t)
            assert staleness == others
            assert tau is None or staleness <= tau
            log.append((t, steps))
            spent[t] += steps
            total[t] += delta
            if rng.random() < 0.7:
                send(server.request(t))
        elif not server.is_waiting(t):
            send(server.request(t))
    np.testing.assert_allclose(server.u, total.sum(0), atol=1e-12)
    assert server.clock == sum(k for _, k in log)


def log_since(log, version):
    """The pushes applied after the clock read ``version`` (the clock counts steps)."""
    clock, since = 0, []
    for worker, steps in log:
        if clock >= version:
            since.append((worker, steps))
        clock += steps
    return since


def test_sequence_numbers_apply_each_push_once_and_in_order():
    server = ServerState(2, 1, depth=2)
    server.request(0)
    server.view(0)
    server.push(0, np.ones(2), version=0, seq=1, kept=([3], [0.5], 1))
    with pytest.raises(DuplicatePush):
        server.push(0, np.ones(2), version=0, seq=1)
    with pytest.raises(OutOfOrderPush, match="skips 2"):
        server.push(0, np.ones(2), version=0, seq=3)
    assert server.clock == 1 and np.all(server.u == 1) and server.workers[0].position == 1
    assert server.workers[0].unspent == 1       # the refused ones spent nothing
    server.push(0, np.ones(2), version=0, seq=2)
    assert server.workers[0].messages == 2 and server.clock == 2


def test_a_worker_holding_credit_is_answered_at_once():
    """A worker that asks while it holds credit is sent a view at once: with new
    credit if it fits, else without (it goes on stepping; and a view of its that was
    lost must not leave credit, which holds the others' gate, unknown to it).  Only
    a worker without credit waits."""
    server = ServerState(2, 2, staleness=0, depth=2)
    assert server.request(0) == [0] and server.view(0)[3] == 2
    assert not server.is_waiting(0)
    assert server.request(1) == [] and server.is_waiting(1)   # no credit: waits
    server.push(0, np.ones(2), version=0)
    assert server.request(0) == [0]             # worker 1 is first in line for credit
    assert not server.is_waiting(0)
    assert server.view(0)[1:4] == (1, 1, 2)     # a fresh view, no new credit
    assert server.request(0) == [0] and server.view(0)[1:4] == (1, 1, 2)  # again
    assert server.push(0, np.ones(2), version=1) == (0, [1])
    assert server.view(1)[1:4] == (2, 0, 2)
    assert server.request(0) == [] and server.is_waiting(0)


def test_a_lost_worker_releases_the_gate_and_a_replacement_resumes_its_state():
    server = ServerState(2, 2, staleness=0)
    assert server.request(0) == [0] and server.view(0)[1] == 0
    server.push(0, np.full(2, 2.0), version=0, seq=1, kept=([5], [1.5], 7))
    assert server.request(0) == [0] and server.view(0)[1] == 1
    assert server.request(1) == []                  # τ = 0: waits for worker 0
    assert server.lose(0) == [1]                    # which dies holding its credit
    assert server.exposure(0) == 0 and server.view(1)[3] == 1
    with pytest.raises(ProtocolError, match="lost"):
        server.push(0, np.ones(2), version=1, seq=2)
    with pytest.raises(ProtocolError, match="lost"):
        server.request(0)
    record = server.rejoin(0)
    assert (record.selected.tolist(), record.weights.tolist(), record.position,
            record.messages, record.pushes) == ([5], [1.5], 7, 1, 1)
    np.testing.assert_array_equal(record.applied, [2.0, 2.0])
    assert record.unspent == 0 and not record.lost
    with pytest.raises(ProtocolError, match="credit for 0"):   # its credit is gone
        server.push(0, np.ones(2), version=1, seq=2)
    assert server.request(0) == []                  # behind worker 1's credit
    assert server.push(1, np.ones(2), version=1, seq=1) == (0, [0])


def _two_pushed() -> ServerState:
    """Two workers that each pushed one step keeping feature t with weight t + 1."""
    server = ServerState(2, 2)
    for t in range(2):
        server.request(t)
        server.view(t)
        server.push(t, np.full(2, t + 1.0), version=int(server.views_of(t)[-1, 0]),
                    seq=1, kept=([t], [t + 1.0], 1))
    return server


def test_lost_workers_count_with_their_last_acknowledged_state():
    server = _two_pushed()
    server.lose(1)
    server.finish(0, [0], [1.0], np.ones(2))
    assert server.done and server.lost_workers == [1]
    selected, weights, difference = server.assemble()
    assert selected.tolist() == [0, 1] and weights.tolist() == [1.0, 2.0]
    assert difference == 0.0


def test_a_snapshot_restores_the_same_state(tmp_path):
    server, contribution = _drive(5, 3, None, 4, seed=1, depth=3, batch=2)
    np.savez(tmp_path / "s.npz", **server.snapshot())
    with np.load(tmp_path / "s.npz", allow_pickle=False) as arrays:
        back = ServerState.restore(arrays)
    assert back.clock == server.clock and np.all(back.u == server.u)
    assert (back.tau, back.depth, back.batch) == (None, 3, 2)
    assert back.staleness_stats() == server.staleness_stats()
    assert [r.messages for r in back.workers] == [r.messages for r in server.workers]
    selected = server.assemble()[0]
    np.testing.assert_array_equal(back.assemble()[0], selected)
    np.testing.assert_array_equal(back.final_columns(selected),
                                  server.final_columns(selected))
    assert back.final_columns(selected)[:, 0].tolist() == [1.0, 2.0, 3.0]


def test_a_worker_past_the_columns_limit_sends_none_and_nothing_is_refit():
    """A FINAL without columns (n × kept past ``messages.COLUMNS_LIMIT``) is a
    FINAL: the run ends, and its support has no columns to refit."""
    server = _two_pushed()
    server.finish(0, [0], [1.0], np.ones(2), np.zeros((0, 2)))
    server.finish(1, [1], [2.0], 2 * np.ones(2), np.array([[5.0, 6.0]]))
    selected = server.assemble()[0]
    assert server.done and server.final_columns(selected) is None
    assert server.final_columns(selected[1:]).tolist() == [[5.0, 6.0]]


def test_final_columns_are_checked_and_missing_for_a_lost_worker():
    """Bad columns change nothing; a lost worker's features have no column, so the
    assembled support cannot be refit."""
    server = _two_pushed()
    for columns, problem in ((np.ones((2, 2)), "1 × 2"),
                             (np.array([[np.nan, 1.0]]), "finite")):
        with pytest.raises(ProtocolError, match=problem):
            server.finish(0, [0], [1.0], np.ones(2), columns)
        assert not server.workers[0].finished and server.workers[0].columns is None
    server.finish(0, [0], [1.0], np.ones(2), np.array([[3.0, 4.0]]))
    assert server.final_columns(np.array([0])).tolist() == [[3.0, 4.0]]
    server.lose(1)
    selected = server.assemble()[0]
    assert server.final_columns(selected) is None
    assert server.final_columns(selected[:1]).tolist() == [[3.0, 4.0]]


# -- adaptive budgets: a trial slot each on top of s, final budgets within s --------
def test_held_budgets_and_kept_sets_under_adaptive_budgets():
    """An open worker is granted its share of the top s plus a trial slot; it may
    hold the largest budget of any view it may still act on (and its initial share
    until its first push); a push or FINAL over that is refused, the state untouched."""
    server = ServerState(3, 2, depth=2, batch=2)
    server.adapt_budgets(4)                       # starts at s_t = 2, 2
    server.budgets.set_ends([100, 100])                   # no final budgets in this test

    def held():
        return [server.budgets.held(t) for t in range(2)]

    assert held() == [2, 2]
    assert server.request(0) == [0] and server.view(0)[4] == 3    # 2 of the top 4, + 1
    assert server.request(1) == [1] and server.view(1)[4] == 3
    with pytest.raises(ProtocolError, match="keeps 4 features, over the 3"):
        server.push(0, np.ones(3), version=0, kept=([0, 2, 4, 6], [4.0, 3.0, 2, 1], 1))
    assert server.clock == 0 and server.workers[0].messages == 0
    server.push(0, np.ones(3), version=0, kept=([0, 2], [3.0, 2.0], 1))
    assert server.budgets.shares() == {0: 3, 1: 1}   # worker 0's weights lead; 2 spare slots
    # worker 1's budget is lowered with its next view, but it may still act on the
    # view of budget 3 until a push names the new one: it holds 3
    assert server.request(1) == [1] and server.view(1)[4] == 2 and held() == [3, 3]
    assert server.request(0) == [0] and server.view(0)[4] == 4
    assert server.budgets.granted == [4, 2]      # the latest grants: ≤ s + q = 6
    server.push(1, np.ones(3), version=1, kept=([1], [0.5], 1))   # view 0 expires
    assert held() == [4, 2]
    with pytest.raises(ProtocolError, match="keeps 5 features, over the 4"):
        server.finish(0, [0, 2, 4, 6, 8], [3.0, 2.0, 1.0, 0.5, 0.1], np.zeros(3))
    assert not server.workers[0].finished
    server.finish(0, [0, 2, 4], [3.0, 2.0, 1.0], np.zeros(3))
    assert held() == [3, 2]
    assert server.request(1) == [1] and server.view(1)[4] == 2   # 1 of 4 left, + 1
    # a push of no steps (a kept set lowered without stepping) is allowed here
    server.push(1, np.zeros(3), version=2, steps=0, kept=([], [], 1))
    assert server.clock == 2 and server.workers[1].staleness == [0]


def test_a_worker_at_the_end_of_its_shard_gets_its_final_share_without_trial_slot():
    """The view whose credit reaches the end of a worker's shard grants its final
    budget: its share of the top s, no trial slot, fixed from then on, and small
    enough that every open worker keeps a slot; the final budgets sum to ≤ s."""
    server = ServerState(3, 3, depth=1, batch=1)
    server.adapt_budgets(6)
    server.budgets.set_ends([2, 3, 3])

    def grant(t):
        assert server.request(t) == [t]
        _, version, _, credit, budget = server.view(t)
        return version, budget, credit

    first = [grant(t) for t in range(3)]
    assert [budget for _, budget, _ in first] == [3, 3, 3]      # 2 of the top 6, + 1
    server.push(0, np.ones(3), version=0, kept=([0, 3, 6], [5.0, 4.0, 3.0], 1))
    server.push(1, np.ones(3), version=0, kept=([1], [0.1], 1))
    assert server.budgets.shares() == {0: 4, 1: 2, 2: 0}   # 4 weights in the top 6; 2 spare
    version, budget, credit = grant(0)
    # its end (credit 2): its share was 4, but the others' grants (3 + 3) left it
    # s + q − 6 = 3
    assert credit == 2 and budget == 3 and server.budgets.final == [3, None, None]
    server.push(2, np.ones(3), version=0, kept=([2, 5], [9.0, 8.0], 1))
    assert server.budgets.shares() == {1: 1, 2: 2}     # the top 6 − 3 of the open workers
    assert server.view(0)[4] == 3              # fixed, whatever the weights do now
    server.push(0, np.ones(3), version=version, kept=([0, 3, 6], [5.0, 4.0, 3.0], 1))
    server.finish(0, [0, 3, 6], [5.0, 4.0, 3.0], np.ones(3))
    (v2, open2, _), (v1, open1, _) = grant(2), grant(1)
    assert (open2, open1) == (3, 2)            # open: share + 1
    server.push(1, np.ones(3), version=v1, kept=([1, 4], [0.1, 0.05], 1))
    server.push(2, np.ones(3), version=v2, kept=([2, 5, 8], [9.0, 8.0, 0.2], 1))
    assert [grant(t)[1] for t in (2, 1)] == [2, 1]   # their ends: 2 of 3 left, then 1
    assert server.budgets.final == [3, 1, 2] and server.budgets.shares() == {}


def test_a_lost_workers_kept_set_is_settled_less_its_trial_slot():
    """A lost worker can drop nothing until it rejoins: its kept set, less the trial
    slot that lies on top of s, takes its slots of the top s for good, however far
    its weights fall behind the others'.  (Counted with its trial slot, a worker that
    was only paused past the heartbeat timeout cost the survivor a true feature;
    counted as an open worker's share, the survivor's final budget brought a partial
    run to s + 2.)  If it never rejoins, the result drops its least important
    feature, so the partial run too holds s."""
    server = ServerState(3, 2, depth=1, batch=1)
    server.adapt_budgets(4)
    server.budgets.set_ends([100, 2])
    for t in range(2):
        assert server.request(t) == [t] and server.view(t)[4] == 3   # 2 of 4, + 1
    server.push(0, np.full(3, 2.0), version=0, kept=([0, 2, 4], [1.0, 0.8, 0.9], 1))
    server.lose(0)
    assert server.budgets.settled() == 2
    server.push(1, np.ones(3), version=0, kept=([1, 3, 5], [9.0, 8.0, 7.0], 1))
    assert server.budgets.shares() == {1: 2}              # the top 4 less worker 0's 2
    assert server.request(1) == [1] and server.view(1)[4] == 2    # its end: final
    assert server.budgets.final == [None, 2] and server.budgets.settled() == 4
    server.finish(1, [1, 3], [9.0, 8.0], np.ones(3))
    assert server.done and server.budgets.lost_cut() == {0: 2}
    selected, weights, difference = server.assemble()
    assert selected.tolist() == [0, 1, 3, 4] and weights.tolist() == [1.0, 9.0, 8.0, 0.9]
    assert difference == 0.0                  # u_C still holds the dropped weight
    server.rejoin(0)                              # open again
    assert server.budgets.settled() == 2 and server.budgets.lost_cut() == {}


@pytest.mark.parametrize("grow", [0, 2])
def test_a_growing_sweep_keeps_its_newcomers_until_the_global_cut_to_s(grow):
    """Where the closing sweeps grow, a worker whose passes are applied is granted its
    final budget plus its sweep's arrivals, and the assembly keeps the global top s
    by the importance the workers last pushed: worker 1's newcomer (2.0) displaces
    worker 0's weak kept feature (1.0), which a final budget fixed at the end of the
    passes would have kept.  u_C still holds what the cut dropped (Σ check intact)."""
    server = ServerState(3, 2, depth=1, batch=1)
    server.adapt_budgets(4)
    server.budgets.set_ends([1, 1], grow=grow)
    for t in range(2):
        assert server.request(t) == [t] and server.view(t)[4] == 2   # its end: final
    assert server.budgets.final == [2, 2]
    kept = {0: ([0, 2], [5.0, 1.0]), 1: ([1, 3], [3.0, 0.2])}
    for t in range(2):
        server.push(t, np.ones(3), version=0, kept=(*kept[t], 1))
        assert server.request(t) == [t]
        assert server.view(t)[4] == 2 + grow   # its sweep: final + its arrivals
    grown = {0: ([0, 2, 4], [5.0, 1.0, 4.0]), 1: ([1, 3, 5], [3.0, 0.2, 2.0])}
    if not grow:
        with pytest.raises(ProtocolError, match="over the 2 it may hold"):
            server.push(0, np.ones(3), version=int(server.views_of(0)[-1, 0]),
                        kept=(*grown[0], 2))
        return
    for t in range(2):
        server.push(t, np.ones(3), version=int(server.views_of(t)[-1, 0]),
                    kept=(*grown[t], 2))
    for t in range(2):
        server.finish(t, *grown[t], np.full(3, 2.0))
    selected, weights, difference = server.assemble()
    assert selected.tolist() == [0, 1, 4, 5] and weights.tolist() == [5.0, 3.0, 4.0, 2.0]
    assert difference == 0.0
    # ranked by a joint fit of the union instead (``ServerMonitor._joint_worth``):
    # here it rates worker 0's weak 2 above worker 1's newcomer 5; none: as pushed
    joint = {0: 5.0, 2: 3.5, 4: 4.0, 1: 3.0, 3: 0.1, 5: 0.2}
    selected, _, _ = server.assemble(lambda j, w: np.array([joint[i] for i in j]))
    assert selected.tolist() == [0, 1, 2, 4]
    assert server.assemble(lambda j, w: None)[0].tolist() == [0, 1, 4, 5]


@settings(max_examples=60, deadline=None)
@given(q=st.integers(1, 5), extra=st.integers(0, 8), depth=st.integers(1, 3),
       tau=st.sampled_from([None, 0, 2]), seed=st.integers(0, 2**31))
def test_grants_stay_within_s_plus_q_and_the_final_kept_sets_within_s(q, extra, depth,
                                                                    tau, seed):
    """Random requests, views delivered late, pushes whose kept sets fill the budget
    of the view they used, and finishes: after every event the latest grants sum to
    ≤ s + q, and the finished kept sets with the final budgets to ≤ s; every worker
    is granted ≥ 1; at the end the kept sets hold ≤ s features."""
    rng = np.random.default_rng(seed)
    s = q + extra
    server = ServerState(2, q, staleness=tau, depth=depth, batch=1)
    server.adapt_budgets(s)
    inbox = [deque() for _ in range(q)]
    view = [None] * q                    # (version, budget) of the newest view
    credit, spent, left = [0] * q, [0] * q, [int(rng.integers(1, 8)) for _ in range(q)]
    server.budgets.set_ends(left)

    def send(workers):
        for w in workers:
            _, version, _, granted, budget = server.view(w)
            assert budget >= 1
            inbox[w].append((version, granted, budget))

    def check():
        assert server.budgets.committed().sum() <= s + q
        assert server.budgets.settled() <= s   # finished kept sets and final budgets

    for t in range(q):
        send(server.request(t))
        check()
    while not server.done:
        t = int(rng.integers(q))
        if server.workers[t].finished:
            continue
        if inbox[t] and (view[t] is None or rng.random() < 0.5):
            version, granted, budget = inbox[t].popleft()
            view[t], credit[t] = (version, budget), max(credit[t], granted)
        elif left[t] and view[t] is not None and credit[t] > spent[t]:
            size = int(rng.integers(0, view[t][1] + 1))
            kept = (t + q * np.arange(size), rng.standard_normal(size), 0)
            _, granted = server.push(t, rng.standard_normal(2), view[t][0], kept=kept)
            send(granted)
            spent[t] += 1
            left[t] -= 1
            if left[t]:
                send(server.request(t))
        elif not left[t]:
            record = server.workers[t]
            send(server.finish(t, record.selected, record.weights, record.applied))
        elif not server.is_waiting(t) and credit[t] == spent[t]:
            send(server.request(t))
        check()
    selected, _, error = server.assemble()
    assert error <= 1e-12 and selected.size <= s


# -- the protocol under any interleaving, with losses: bound and liveness ------------
TAUS = [0, 1, 3, 10, None]
EVENTS = ("send",) * 4 + ("reply",) * 4 + ("step",) * 3 + ("resend",) * 2 + \
    ("lose", "rejoin")   # a message moves far more often than a worker dies


class FakeWorker:
    """One worker's side of the protocol, without OS: it keeps the views and credit it
    received (``LocalView``, the real one), steps from its newest view, pushes random
    Δu with random kept sets, resends what is unacknowledged, and finishes."""

    def __init__(self, t, q, n, total, batch, rng, record=None):
        self.t, self.q, self.n, self.total, self.batch, self.rng = t, q, n, total, \
            batch, rng
        resumed = record is not None
        self.view = LocalView(n, record.messages if resumed else 0,
                              record.pushes if resumed else 0)
        self.left = total - (record.pushes if resumed else 0)
        self.contribution = record.applied.copy() if resumed else np.zeros(n)
        self.selected = record.selected.copy() if resumed else np.zeros(0, np.int64)
        self.weights = record.weights.copy() if resumed else np.zeros(0)
        self.unacked = Unacknowledged()   # the real one, as the ZeroMQ worker's
        self.done = False
        self.outbox, self.inbox = deque([messages.Pull()]), deque()

    @property
    def blocked(self) -> bool:
        return self.left > 0 and not self.view.may_step

    def step(self, most: int) -> bool:
        if not self.left or not self.view.may_step:
            return False
        steps = max(1, min(most, self.batch, self.view.allowed, self.left))
        delta = self.rng.standard_normal(self.n)
        budget = self.view.budget or 3
        size = int(self.rng.integers(0, budget + 1))
        self.selected = (self.t + self.q * np.arange(size)).astype(np.int64)
        self.weights = self.rng.standard_normal(size)
        version = self.view.version
        seq = self.view.pushed(delta, steps)
        self.left -= steps
        self.contribution += delta
        push = messages.Push(seq, version, np.arange(steps, dtype=np.int64), delta,
                             self.selected, self.weights, np.abs(self.weights),
                             self.total - self.left, more=self.left > 0)
        self.unacked.sent(seq, push)
        self.outbox.append(push)
        return True

    def receive(self, message) -> None:
        self.unacked.answered(message)
        if isinstance(message, messages.View):
            self.view.answered(message)
        elif isinstance(message, messages.Done):
            self.done = True

    def finish(self) -> bool:
        """Its FINAL, once its last push is acknowledged."""
        if self.left or self.unacked or self.unacked.final is not None:
            return False
        self.unacked.final = messages.Final(self.view.last_push, self.total,
                                            self.selected, self.weights,
                                            self.contribution.copy(),
                                            np.zeros((self.selected.size,
                                                      self.contribution.size)))
        self.outbox.append(self.unacked.final)
        return True

    def resend(self) -> None:
        """A timeout: what ``Unacknowledged`` says is due."""
        if not self.done:
            self.outbox.extend(self.unacked.due(self.blocked))


class Carrier:
    """AsyServer and q fake workers over a network that keeps each direction of each
    pair in order and may drop any message; checks every invariant after each event."""

    def __init__(self, q, tau, window, batch, steps, adaptive, seed, n=3,
                 on_top=False, sweep=0):
        self.q, self.tau, self.n = q, tau, n
        self.s = 2 * q + 1
        config = AsyConfig.build(self.s, q, epochs=1, eta=0.1, m=1.0, staleness=tau,
                                 window=window, batch=batch,
                                 budget="adaptive" if adaptive else "fixed")
        self.server = AsyServer(np.zeros(n), config)
        self.server.start(q * steps, 0.1, 1.0)   # short shards: trial slots within s
        self.state = self.server.state
        if adaptive and on_top:   # as on long shards: on top of s, final budgets
            self.state.budgets.set_ends([steps] * q)
        # the last ``sweep`` steps: a closing sweep in ``sweep`` rounds of one step
        self.ends, self.rounds = [steps - sweep] * q, sweep
        if sweep:
            self.state.hold_sweeps(self.ends, 1, sweep)
        self.opened = 0   # the sweeps' barriers opened
        assert (self.state.tau, self.state.depth, self.state.batch) == \
            (tau, window * batch, batch)
        self.rng = np.random.default_rng(seed)
        self.steps, self.batch, self.adaptive = steps, batch, adaptive
        self.workers = [FakeWorker(t, q, n, steps, batch, self.rng) for t in range(q)]
        self.lost = [False] * q
        self.log: list[tuple[int, int]] = []    # (worker, steps) of every applied push
        self.applied = [dict() for _ in range(q)]   # seq → Δu of applied pushes

    # -- events -----------------------------------------------------------------------
    def _post(self, replies) -> None:
        for w, reply in replies:
            if isinstance(reply, messages.View):   # the server's u_C, copied when sent
                reply = messages.replace(reply, u=reply.u.copy())
            if not self.lost[w]:
                self.workers[w].inbox.append(reply)

    def send(self, t, drop=False) -> bool:
        worker = self.workers[t]
        if self.lost[t] or not worker.outbox:
            return False
        message = worker.outbox.popleft()
        if drop:
            return True
        record = self.state.workers[t]
        applied_before, clock = record.messages, self.state.clock
        self._post(self.server.handle(t, message))
        if record.messages > applied_before:   # a push was applied: check its staleness
            assert isinstance(message, messages.Push)
            steps = message.features.size
            others = sum(k for w, k in log_since(self.log, message.version) if w != t)
            assert record.staleness[-steps:] == [others] * steps
            assert self.state.clock == clock + steps
            self.log.append((t, steps))
            self.applied[t][message.seq] = message.delta
        return True

    def reply(self, t, drop=False) -> bool:
        worker = self.workers[t]
        if self.lost[t] or not worker.inbox:
            return False
        message = worker.inbox.popleft()
        if not drop:
            worker.receive(message)
            worker.finish()
        return True

    def step(self, t, most=1 << 30) -> bool:
        worker = self.workers[t]
        if self.lost[t] or not worker.step(most):
            return False
        worker.finish()
        return True

    def resend(self, t) -> bool:
        if self.lost[t]:
            return False
        self.workers[t].resend()
        return True

    def lose(self, t) -> bool:
        """Worker t dies: its messages in flight vanish; the server revokes its
        credit."""
        if self.lost[t] or self.state.workers[t].finished:
            return False
        self.lost[t] = True
        self._post(self.server.lose(t))
        return True

    def rejoin(self, t) -> bool:
        """A replacement resumes from the server's record of worker t."""
        if not self.lost[t]:
            return False
        record = self.state.rejoin(t)
        self.lost[t] = False
        self.workers[t] = FakeWorker(t, self.q, self.n, self.steps, self.batch,
                                     self.rng, record)
        self.workers[t].finish()   # a pull, then at once its FINAL if nothing is left
        return True

    # -- invariants -------------------------------------------------------------------
    def check(self) -> None:
        state = self.state
        if self.tau is not None:
            for t in range(self.q):
                assert state.exposure(t) <= self.tau, (t, state.exposure(t))
                assert all(x <= self.tau for x in state.workers[t].staleness)
        total = sum((delta for seqs in self.applied for delta in seqs.values()),
                    np.zeros(self.n))
        np.testing.assert_allclose(state.u, total, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.u, sum(r.applied for r in state.workers),
                                   rtol=0, atol=1e-9)
        assert state.clock == sum(r.pushes for r in state.workers)
        while self.opened < self.rounds:   # the sweeps' barriers: no credit past
            # the passes, or a round, until all are through them (a lost worker may
            # rejoin: it holds them)
            barrier = [end + self.opened for end in self.ends]
            if not all(r.finished or r.given_up or r.pushes >= end
                       for r, end in zip(state.workers, barrier)):
                assert all(r.credit <= end for r, end in zip(state.workers, barrier))
                break
            self.opened += 1
        if self.adaptive and state.budgets.on_top:   # trial slots on top of s
            assert state.budgets.committed().sum() <= self.s + self.q
            # finished and lost kept sets (less the lost ones' trial slots), final
            # budgets
            assert state.budgets.settled() <= self.s
        elif self.adaptive:                  # within s
            assert sum(state.budgets.held(t) for t in range(self.q)) <= self.s

    def progress(self) -> tuple:
        return (self.state.clock, sum(r.finished for r in self.state.workers),
                sum(w.view.credit for w in self.workers))

    def run_to_the_end(self) -> None:
        """No more losses, every message delivered: the run must finish.  A round
        delivers everything and lets every worker step; a round that changes nothing
        is a timeout (everyone resends); two timeouts in a row without progress are a
        deadlock."""
        for t in range(self.q):
            self.rejoin(t)
            self.check()
        idle = 0
        for _ in range(50 * self.q * self.steps + 100):
            if all(r.finished for r in self.state.workers):
                return
            before = self.progress()
            moved = True
            while moved:
                moved = False
                for t in range(self.q):
                    while self.send(t) or self.reply(t) or self.step(t):
                        moved = True
                        self.check()
            if self.progress() == before:
                idle += 1
                assert idle <= 2, "deadlock: " + self.describe()
                for t in range(self.q):
                    self.resend(t)
            else:
                idle = 0
        raise AssertionError("no end in sight: " + self.describe())

    def describe(self) -> str:
        state = self.state
        return "; ".join(
            f"worker {t}: left {w.left}, knows credit {w.view.credit} spent "
            f"{w.view.spent} version {w.view.version}; server credit "
            f"{state.workers[t].credit} pushes {state.workers[t].pushes} waiting "
            f"{state.is_waiting(t)} finished {state.workers[t].finished}"
            for t, w in enumerate(self.workers))


# a view carrying credit is lost and its worker pulls again behind a worker waiting for
# that credit: it must be answered (the others would wait for it forever)
@example(q=2, tau=0, window=1, batch=1, steps=1, adaptive=False, on_top=False,
         sweep=0, events=[("send", 0, False), ("reply", 0, True)], seed=0)
# a replacement with nothing left to do, whose pull is lost: it still sends its FINAL
@example(q=2, tau=1, window=3, batch=1, steps=1, adaptive=True, on_top=True, sweep=0,
         events=[("send", 0, False), ("reply", 0, False), ("step", 0, False),
                 ("send", 0, False), ("lose", 0, False), ("rejoin", 0, False),
                 ("send", 0, True)], seed=0)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(q=st.integers(1, 5), tau=st.sampled_from(TAUS), window=st.integers(1, 4),
       batch=st.integers(1, 3), steps=st.integers(1, 6), adaptive=st.booleans(),
       on_top=st.booleans(), sweep=st.integers(0, 2), events=st.lists(st.tuples(st.sampled_from(EVENTS), st.integers(0, 4),
                                 st.booleans()), min_size=30, max_size=200),
       seed=st.integers(0, 2**16))
def test_the_protocol_bounds_staleness_and_always_finishes_despite_losses(
        q, tau, window, batch, steps, adaptive, on_top, sweep, events, seed):
    """q fake workers against ``AsyServer.handle`` in a random interleaving: replies
    and requests dropped (then resent: pushes with the same sequence number, pulls),
    workers lost and replaced mid-run.  After every event: each holder's exposure
    ≤ τ, every recorded staleness ≤ τ and exactly the other workers' steps since the
    view used, u_C = Σ applied Δu (each push once), and the budgets: trial slots
    within s, Σ held ≤ s; on top of s, the latest grants sum to ≤ s + q and the final
    ones to ≤ s; with closing sweeps (the last ``sweep`` steps, a round each), no
    credit past a worker's passes, or a round of its sweep, until every worker still
    running is through its own.  Then, with
    no more losses, every worker gets credit and the run finishes, its kept sets
    within s."""
    carrier = Carrier(q, tau, window, batch, steps, adaptive, seed, on_top=on_top,
                      sweep=min(sweep, steps - 1) if q > 1 else 0)
    for kind, t, flag in events:
        t %= q
        if kind == "send":
            carrier.send(t, drop=flag)
        elif kind == "reply":
            carrier.reply(t, drop=flag)
        elif kind == "step":
            carrier.step(t, most=1 if flag else batch)
        else:
            getattr(carrier, kind)(t)
        carrier.check()
    carrier.run_to_the_end()
    carrier.check()
    state = carrier.state
    assert state.clock == q * steps and not state.lost_workers
    if adaptive:
        assert state.assemble()[0].size <= carrier.s
    assert sum(len(r.staleness) for r in state.workers) == q * steps
    selected, _, difference = state.assemble()
    assert difference <= 1e-9
    for w in carrier.workers:
        assert w.done or state.workers[w.t].finished


def _sweeping_pair(epochs=1, sweep=2):
    """Two workers, shards of 4, one pass, closing sweeps of 2 (by default): the
    server, and ``push(t, seq, version, steps)`` to send it worker t's steps."""
    n = 3
    config = AsyConfig.build(4, 2, epochs=epochs, eta=0.1, m=1.0, staleness=None,
                             window=1, batch=8, budget="fixed", sweep=sweep)
    server = AsyServer(np.zeros(n), config)
    server.start(8, 0.1, 1.0)

    def push(t, seq, version, steps):
        return server.handle(t, messages.Push(
            seq, version, np.arange(steps, dtype=np.int64), np.ones(n),
            np.array([t], np.int64), np.ones(1), np.ones(1), seq, more=True))
    return server, push


def test_a_worker_at_the_sweeps_barrier_waits_with_an_ack_until_every_pass_is_over():
    """Two workers, shards of 4, one pass, closing sweeps of 2: worker 0's credit
    stops at its passes' end; its pulls are answered with an ACK of its pushes and no
    view while worker 1 is still in its passes; worker 1's last pass step opens the
    barrier, and worker 0 gets its view and sweep credit then."""
    server, push = _sweeping_pair()
    state = server.state
    assert state.pass_ends == [4, 4]

    views = dict(server.handle(0, messages.Pull()) + server.handle(1, messages.Pull()))
    assert views[0].credit == views[1].credit == 4   # no more than its passes
    replies = push(0, 1, 0, 4)                         # worker 0's passes are over
    assert [type(m) for _, m in replies] == [messages.Ack]
    assert state.at_barrier(0) and not state.at_barrier(1)
    again = server.handle(0, messages.Pull())          # a resend while it waits
    assert [type(m) for _, m in again] == [messages.Ack] and again[0][1].through == 1
    replies = push(1, 1, 0, 3)                         # worker 1 not yet through
    assert all(t == 1 for t, _ in replies) and not state.at_barrier(1)
    replies = push(1, 2, views[1].version, 1)          # its last pass step
    views = {t: m for t, m in replies if isinstance(m, messages.View)}
    assert set(views) == {0, 1} and views[0].version == state.clock == 8
    assert views[0].credit > 4 and views[1].credit > 4 and not state.at_barrier(0)


def test_each_round_of_the_sweeps_waits_for_every_workers_round_before_it():
    """Closing sweeps of 2 arrivals in two rounds: past the passes, worker 0's
    credit stops at the end of its first round (6), and its pull after it is
    answered with an ACK until worker 1's first round is applied too; then both may
    take their second rounds, each from a view that holds every first round."""
    server, push = _sweeping_pair()
    state = server.state
    assert (state.round_size, state.rounds) == (2, 2) == \
        (server.config.sweep, server.config.sweep_rounds)
    views = dict(server.handle(0, messages.Pull()) + server.handle(1, messages.Pull()))
    push(0, 1, views[0].version, 4)
    views = {t: m for t, m in push(1, 1, views[1].version, 4)
             if isinstance(m, messages.View)}
    assert views[0].credit == views[1].credit == 6     # its passes and a round
    assert [type(m) for _, m in push(0, 2, views[0].version, 2)] == [messages.Ack]
    assert state.at_barrier(0)
    again = server.handle(0, messages.Pull())
    assert [type(m) for _, m in again] == [messages.Ack]
    replies = push(1, 2, views[1].version, 2)          # worker 1's first round
    views = {t: m for t, m in replies if isinstance(m, messages.View)}
    assert set(views) == {0, 1} and views[0].version == state.clock == 12
    assert views[0].credit > 6 and not state.at_barrier(0)


@pytest.mark.parametrize("call, match", [
    (lambda state: state.hold_sweeps([4, 4, 4]), "3 pass ends for 2 workers"),
    (lambda state: state.hold_sweeps([4, 4], 2, 0), "in 0 rounds of 2 steps"),
    (lambda state: state.bound_passes([4]), "1 shard sizes for 2 workers"),
])
def test_barriers_set_wrong_are_refused_and_set_nothing(call, match):
    state = ServerState(3, 2, staleness=None, depth=8, batch=8)
    with pytest.raises(InputError, match=match):
        call(state)
    assert state.pass_ends is None and state.pass_sizes is None
    assert state.rounds == 1


@pytest.mark.parametrize("how", ["rejoins", "given up", "exited"])
def test_a_lost_worker_holds_the_sweeps_barrier_until_it_rejoins_or_is_given_up(how):
    """Worker 1 is lost in the middle of its passes, worker 0 at the barrier.  A lost
    worker may be only slow: the survivor's sweep waits for it (swept against a
    residual its shard had not fitted, it kept noise for weak true features).  It
    opens when worker 1 rejoins and ends its passes, when the server gives up on it,
    or at once when its process exited (``lose(may_return=False)``)."""
    server, push = _sweeping_pair()
    state = server.state

    views = dict(server.handle(0, messages.Pull()) + server.handle(1, messages.Pull()))
    push(1, 1, views[1].version, 2)                    # half its passes, then lost
    assert [type(m) for _, m in push(0, 1, views[0].version, 4)] == [messages.Ack]
    replies = server.lose(1, may_return=how != "exited")
    if how == "exited":
        assert [t for t, _ in replies] == [0] and replies[0][1].credit > 4
        return
    assert replies == [] and state.at_barrier(0)
    if how == "given up":
        replies = server.give_up(1)
    else:
        state.rejoin(1)
        [(_, view)] = server.handle(1, messages.Pull())
        assert view.credit == 4 and state.at_barrier(0)   # to its passes' end
        replies = push(1, 2, view.version, 2)
    assert {t: m.credit > 4 for t, m in replies if isinstance(m, messages.View)}[0]
    assert not state.at_barrier(0)
    with pytest.raises(ProtocolError, match="worker 0 is not lost"):
        server.give_up(0)


@pytest.mark.parametrize("how", ["steps", "given up", "exited"])
def test_no_worker_runs_more_than_a_pass_ahead_of_one_that_may_still_step(how):
    """Three passes over shards of 4, no staleness bound: worker 1 has not stepped
    (a cut link, a slow start), so worker 0 gets credit to the end of its second
    pass and no further; its pulls are answered with an ACK.  Worker 1 entering its
    second pass lets worker 0 into its third; so does giving worker 1 up, or its
    process exiting, while its being lost and still able to return does not."""
    server, push = _sweeping_pair(epochs=3, sweep=0)
    state = server.state
    assert state.pass_sizes == [4, 4] and state.pass_ends is None

    views = dict(server.handle(0, messages.Pull()) + server.handle(1, messages.Pull()))
    assert views[0].credit == 8                      # its pass and one more
    assert [type(m) for _, m in push(0, 1, views[0].version, 8)] == [messages.Ack]
    assert state.at_barrier(0)
    if how == "steps":
        replies = push(1, 1, views[1].version, 3)     # still in its first pass
        assert all(t == 1 for t, _ in replies) and state.at_barrier(0)
        replies = push(1, 2, views[1].version, 1)     # its second pass begins
    elif how == "given up":
        assert server.lose(1, may_return=True) == [] and state.at_barrier(0)
        replies = server.give_up(1)
    else:
        replies = server.lose(1, may_return=False)
    view = {t: m for t, m in replies if isinstance(m, messages.View)}[0]
    # to the end of its third pass, or a full window when no one bounds it
    assert view.credit == (12 if how == "steps" else 8 + 8) and not state.at_barrier(0)


def _limit_by_definition(state, worker, rounds_open):
    """``_passes_left`` as ``bound_passes`` and ``hold_sweeps`` define it, every other
    worker looked at (the O(q) a worker that the gate reads in O(1)); returns it and
    the barriers opened."""
    records, limits = state.workers, []
    if state.pass_sizes is not None and state.pass_sizes[worker] > 0:
        ends = [(r.pushes // size + 1 + PASSES_AHEAD) * state.pass_sizes[worker]
                for t, (r, size) in enumerate(zip(records, state.pass_sizes))
                if t != worker and size > 0 and not (r.finished or r.given_up)]
        if ends:
            limits.append(min(ends))
    while state.pass_ends is not None and rounds_open < state.rounds:
        offset = rounds_open * state.round_size
        if all(r.finished or r.given_up or r.pushes >= end + offset
               for r, end in zip(records, state.pass_ends)):
            rounds_open += 1
        else:
            limits.append(state.pass_ends[worker] + offset)
            break
    left = min(limits) - records[worker].credit if limits else None
    return left, rounds_open


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_each_workers_limit_read_in_constant_time_is_the_one_defined(data):
    """The gate reads every waiting worker's limit from one summary of the others
    (``credit_gate.pass_floor``): the same limit as looking at every other worker, for
    any passes, shard sizes (some empty), finished and given-up workers, and sweeps'
    rounds, as the workers move on."""
    q = data.draw(st.integers(1, 7))
    state = ServerState(3, q)
    sizes = data.draw(st.lists(st.integers(0, 4), min_size=q, max_size=q))
    if data.draw(st.booleans()):
        state.bound_passes(sizes)
    if data.draw(st.booleans()):
        ends = [3 * size for size in sizes]
        state.hold_sweeps(ends, data.draw(st.integers(0, 3)), data.draw(st.integers(1, 3)))
    rounds_open = 0
    for _ in range(data.draw(st.integers(1, 12))):
        for record in state.workers:   # the workers move on, some finish or give up
            record.pushes += data.draw(st.integers(0, 5))
            record.credit = record.pushes + data.draw(st.integers(0, 3))
            record.finished |= data.draw(st.integers(0, 9)) == 0
            record.given_up |= data.draw(st.integers(0, 9)) == 0
        for worker in range(q):
            expected, rounds_open = _limit_by_definition(state, worker, rounds_open)
            assert state._passes_left(worker) == expected
            assert state.rounds_open == rounds_open


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, 1e308, -1e-300, np.nan, np.inf,
                                 -np.inf]), max_size=40),
       st.sampled_from([-np.inf, 0.0]))
def test_the_summed_finiteness_check_is_the_elementwise_one(values, least):
    """``all_finite`` sums value·0 instead of testing each value: the same answer
    as testing each, for every mix of finite, huge, signed-zero and non-finite
    values, with and without a lower bound."""
    x = np.array(values, dtype=np.float64)
    expected = bool(np.all(np.isfinite(x) & (x >= least)))
    assert all_finite(x, least) is expected
    assert all_finite(np.repeat(x, 33), least) is expected   # the vector lanes too


def test_a_push_adds_its_delta_to_u_and_to_its_workers_sum():
    rng = np.random.default_rng(3)
    u, applied, delta = rng.standard_normal((3, 1000))
    want_u, want_applied = u + delta, applied + delta
    apply_push(u, applied, delta)
    assert np.array_equal(u, want_u) and np.array_equal(applied, want_applied)


@settings(max_examples=100, deadline=None)
@given(q=st.integers(1, 6), tau=st.one_of(st.none(), st.integers(0, 6)),
       depth=st.integers(1, 4), batch=st.integers(1, 4), seed=st.integers(0, 2**31),
       bounded=st.booleans())
def test_a_push_that_asks_grants_what_a_push_then_a_request_grants(q, tau, depth, batch,
                                                                   seed, bounded):
    """``push(..., ask=True)`` (a push that also asks for a view: one pass of the
    gate) against ``push`` then ``request`` (two): the same views to the same
    workers in the same order, and the same credit, at every step of a random run."""
    batch = min(batch, depth)
    rng = np.random.default_rng(seed)
    one, two = (ServerState(4, q, staleness=tau, depth=depth, batch=batch)
                for _ in range(2))
    if bounded:
        for state in (one, two):
            state.bound_passes([3] * q)
    version, credit, spent = [None] * q, [0] * q, [0] * q

    def views(workers):
        for w in workers:
            _, v, _, c, _ = one.view(w)
            two.view(w)
            version[w], credit[w] = v, c

    for t in range(q):
        got = one.request(t)
        assert two.request(t) == got
        views(got)
    for _ in range(60):
        holders = [t for t in range(q) if credit[t] > spent[t]]
        if not holders:
            break
        t = holders[rng.integers(len(holders))]
        steps = int(rng.integers(1, min(batch, credit[t] - spent[t]) + 1))
        delta = rng.standard_normal(4)
        asks = bool(rng.random() < 0.8)
        _, got = one.push(t, delta, version[t], steps, ask=asks)
        _, then = two.push(t, delta, version[t], steps)
        if asks:
            then = then + two.request(t)
        assert got == then
        spent[t] += steps
        views(got)
        assert [r.credit for r in one.workers] == [r.credit for r in two.workers]
        assert one.waiting == two.waiting


@settings(max_examples=80, deadline=None)
@given(q=st.integers(1, 6), tau=st.one_of(st.none(), st.integers(0, 6)),
       depth=st.integers(1, 4), batch=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_a_bundle_counts_as_its_pushes_one_by_one_and_keeps_the_bound(q, tau, depth,
                                                                      batch, seed):
    """A leader's bundle (distinct workers' pushes, their Δu summed) against the
    same pushes applied one by one: the same staleness for each, the same u_C and
    clock; the bound holds throughout and u_C is the sum of everything pushed."""
    import copy
    batch = min(batch, depth)
    rng = np.random.default_rng(seed)
    state = ServerState(4, q, staleness=tau, depth=depth, batch=batch)
    version, credit, spent = [None] * q, [0] * q, [0] * q
    total = np.zeros(4)

    def views(workers):
        for w in workers:
            _, v, _, c, _ = state.view(w)
            version[w], credit[w] = v, c

    for t in range(q):
        views(state.request(t))
    for _ in range(40):
        holders = [t for t in range(q) if credit[t] > spent[t]]
        if not holders:
            break
        chosen = rng.permutation(holders)[: int(rng.integers(1, len(holders) + 1))]
        pushes, deltas = [], []
        for t in chosen.tolist():
            steps = int(rng.integers(1, min(batch, credit[t] - spent[t]) + 1))
            pushes.append((t, version[t], steps, None, None, bool(rng.random() < 0.8)))
            deltas.append(rng.standard_normal(4))
            spent[t] += steps
        alone = copy.deepcopy(state)
        one_by_one = [alone.push(t, d, v, k)[0]
                      for (t, v, k, *_), d in zip(pushes, deltas)]
        staleness, granted = state.push_bundle(pushes, np.sum(deltas, axis=0))
        total += np.sum(deltas, axis=0)
        assert staleness == one_by_one
        assert state.clock == alone.clock
        np.testing.assert_allclose(state.u, alone.u, rtol=0, atol=1e-12)
        np.testing.assert_allclose(state.u, total, rtol=0, atol=1e-12)
        if tau is not None:
            assert max(staleness) <= tau
            assert all(state.exposure(w) <= tau for w in range(q))
        views(granted)


def test_a_bad_bundle_is_refused_whole_and_changes_nothing():
    state = ServerState(3, 3, staleness=4)
    for t in range(3):
        state.request(t)
        state.view(t)
    before = {k: v.copy() for k, v in state.snapshot().items()}
    good = (0, 0, 1, 1, None, True)
    for pushes, match in [
            ([], "distinct workers"),
            ([good, (0, 0, 1, 2, None, True)], "distinct workers"),
            ([good, (1, 0, 1, 5, None, True)], "skips 1"),           # a lost push
            ([good, (2, 0, 9, 1, None, True)], "steps in one message"),
            ([good, (7, 0, 1, 1, None, True)], "unknown worker 7")]:
        with pytest.raises(ProtocolError, match=match):
            state.push_bundle(pushes, np.ones(3))
    with pytest.raises(ProtocolError):
        state.push_bundle([good], np.array([1.0, np.nan, 0.0]))
    after = state.snapshot()
    assert before.keys() == after.keys()
    for key, value in before.items():
        np.testing.assert_array_equal(value, after[key], err_msg=key)
    assert state.push_bundle([good, (1, 0, 1, 1, None, True)], np.ones(3))[0] == [0, 1]


def test_grants_and_views_outgrow_their_first_arrays_and_keep_their_order():
    """A worker that asks again while it holds credit gets a one-step grant each
    time (so its unspent grants outgrow the ring's first slots), and one that asks
    without pushing collects views (outgrowing their first rows): every grant stays
    in order with its version, and a push may still name any view it may use."""
    state = ServerState(3, 1, staleness=None, depth=40, batch=1)
    state.request(0)
    state.view(0)
    expected = [(0, 0, 40)]   # (version, own, upto) of each unspent grant
    for k in range(1, 31):
        version = int(state.views_of(0)[-1, 0])
        state.push(0, np.zeros(3), version, seq=k)
        assert state.request(0) == [0]
        state.view(0)
        expected.append((k, k, 40 + k))
        assert state.grants_of(0).tolist() == [list(g) for g in expected]
    assert state.grants.shape[1] >= 31
    for _ in range(12):   # views piling up, no push between them
        state.request(0)
        state.view(0)
    assert state.views_of(0).shape[0] == 14   # and the one its last push used
    oldest = int(state.views_of(0)[0, 0])
    state.push(0, np.zeros(3), oldest, seq=31)      # the oldest it may still use
    assert state.views_of(0).shape[0] == 14 and state.workers[0].staleness[-1] == 0
    for k in range(32, 45):   # retired rows dropped when the array fills again
        state.request(0)
        state.view(0)
        state.push(0, np.zeros(3), int(state.views_of(0)[-1, 0]), seq=k)
    assert state.views_of(0)[:, 0].tolist() == [state.clock - 1]
    assert state.workers[0].pushes == 44 and state.workers[0].staleness == [0] * 44
