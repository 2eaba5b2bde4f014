"""The server state machine: the Σ-invariant and the staleness bound, in any interleaving."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.core.server_state import (
    DuplicatePush,
    OutOfOrderPush,
    ProtocolError,
    ServerState,
)


def _drive(n, q, tau, pushes_each, seed):
    """Workers with random contributions pushed in a random interleaving."""
    rng = np.random.default_rng(seed)
    server = ServerState(n, q, staleness=tau)
    contribution = np.zeros((q, n))
    left = [pushes_each] * q
    granted, waiting = set(), set()
    while any(left) or granted or waiting:
        choices = [t for t in range(q) if t in granted] + \
                  [t for t in range(q) if left[t] and t not in granted | waiting]
        assert choices, "deadlock: nobody can move"
        t = choices[rng.integers(len(choices))]
        if t in granted:
            delta = rng.standard_normal(n)
            contribution[t] += delta
            staleness, newly = server.push(t, delta)
            granted.discard(t)
            left[t] -= 1
            if tau is not None:
                assert staleness <= tau
        else:
            waiting.add(t)
            newly = server.request_pull(t)
        for w in newly:
            waiting.discard(w)
            granted.add(w)
            u, version = server.view(w)
            assert version == server.clock
    for t in range(q):
        server.finish(t, [t], [1.0], contribution[t])
    return server, contribution


@settings(max_examples=60, deadline=None)
@given(q=st.integers(1, 6), tau=st.one_of(st.none(), st.integers(0, 6)),
       pushes=st.integers(1, 15), seed=st.integers(0, 2**31))
def test_sum_invariant_and_staleness_bound_in_any_interleaving(q, tau, pushes, seed):
    server, contribution = _drive(8, q, tau, pushes, seed)
    selected, weights, difference = server.assemble()
    assert difference <= 1e-9 * (1 + np.abs(contribution.sum(0)).max())
    assert server.clock == q * pushes
    stats = server.staleness_stats()
    assert stats["max"] <= (tau if tau is not None else q * pushes)
    assert sum(stats["histogram"]) == q * pushes
    assert list(selected) == list(range(q))


def test_tau_zero_serialises_the_workers():
    server = ServerState(3, 3, staleness=0)
    assert server.request_pull(0) == [0]
    assert server.request_pull(1) == []       # waits: 0 is in flight
    assert server.request_pull(2) == []
    assert server.push(0, np.ones(3)) == (0, [1])
    assert server.push(1, np.ones(3)) == (0, [2])


def test_unbounded_staleness_is_recorded():
    server = ServerState(2, 2)
    server.request_pull(0)
    server.request_pull(1)
    server.push(0, np.ones(2))
    server.request_pull(0)
    server.push(0, np.ones(2))
    assert server.push(1, np.ones(2))[0] == 2
    assert server.staleness_stats()["max"] == 2


def test_protocol_errors_leave_the_state_untouched():
    server = ServerState(4, 2, staleness=1)
    with pytest.raises(ProtocolError, match="unknown worker 5"):
        server.request_pull(5)
    with pytest.raises(ProtocolError, match="pushed without a pull"):
        server.push(0, np.ones(4))
    server.request_pull(0)
    with pytest.raises(ProtocolError, match="pulled twice"):
        server.request_pull(0)
    for bad in (np.ones(3), np.ones(4, dtype=np.float32), np.array([1, np.nan, 0, 0.])):
        with pytest.raises(ProtocolError):
            server.push(0, bad)
    assert server.clock == 0 and np.all(server.u == 0)
    server.push(0, np.ones(4))
    with pytest.raises(ProtocolError, match="not finished"):
        server.assemble()
    server.finish(0, [1], [2.0], np.ones(4))
    with pytest.raises(ProtocolError, match="already finished"):
        server.request_pull(0)


def test_a_lost_push_is_caught_at_assembly():
    server = ServerState(2, 1)
    server.request_pull(0)
    server.push(0, np.ones(2))
    server.finish(0, [0], [1.0], 2 * np.ones(2))   # claims a push that never landed
    assert server.assemble()[2] == pytest.approx(1.0)


def test_pipelined_pushes_count_only_the_other_workers_steps():
    server = ServerState(2, 2, window=2, batch=4)
    server.request_pull(0), server.request_pull(1)         # both hold view 0
    assert server.push(0, np.ones(2), version=0, steps=3)[0] == 0
    server.request_pull(0)                                  # answered with view 3
    # still from view 0 (its answer may be in transit): own steps are not stale
    assert server.push(0, np.ones(2), version=0, steps=2)[0] == 0
    server.request_pull(0)
    assert server.push(1, np.ones(2), version=0, steps=1)[0] == 5   # 5 of worker 0
    assert server.clock == 6
    assert server.staleness_stats()["histogram"] == [5, 0, 0, 0, 0, 1]


def test_pipelining_beyond_the_window_or_batch_is_refused_untouched():
    server = ServerState(3, 1, window=2, batch=2)
    server.request_pull(0)
    server.push(0, np.ones(3), version=0)
    server.request_pull(0)
    server.push(0, np.ones(3), version=0)
    server.request_pull(0)
    before = server.u.copy(), server.clock
    with pytest.raises(ProtocolError, match="view 0"):     # a third push on view 0
        server.push(0, np.ones(3), version=0)
    with pytest.raises(ProtocolError, match="view 7"):     # never sent
        server.push(0, np.ones(3), version=7)
    with pytest.raises(ProtocolError, match="3 steps"):
        server.push(0, np.ones(3), version=1, steps=3)
    assert np.all(server.u == before[0]) and server.clock == before[1]
    assert server.push(0, np.ones(3), version=1, steps=2)[0] == 0


def test_pipelining_needs_an_unbounded_staleness():
    with pytest.raises(ValueError, match="staleness bound"):
        ServerState(3, 2, staleness=2, window=2)
    with pytest.raises(ValueError, match="staleness bound"):
        ServerState(3, 2, staleness=2, batch=3)


@settings(max_examples=60, deadline=None)
@given(q=st.integers(1, 4), window=st.integers(1, 4), batch=st.integers(1, 4),
       seed=st.integers(0, 2**31))
def test_pipelined_staleness_is_exactly_the_other_workers_steps(q, window, batch, seed):
    """Views answer requests after random delays; every push reports the number of
    other workers' steps since the view it used, and u_C stays the sum of pushes."""
    rng = np.random.default_rng(seed)
    server = ServerState(3, q, window=window, batch=batch)
    in_transit = [[] for _ in range(q)]       # versions answered, not yet delivered
    current = [None] * q
    log = []                                  # (worker, steps) per push, in order
    total = np.zeros((q, 3))
    for t in range(q):
        server.request_pull(t)
        in_transit[t].append(server.view(t)[1])
    for _ in range(60):
        t = int(rng.integers(q))
        if in_transit[t] and (current[t] is None or rng.random() < 0.5):
            current[t] = in_transit[t].pop(0)
        elif current[t] is not None and len(in_transit[t]) < window:
            steps = int(rng.integers(1, batch + 1))
            delta = rng.standard_normal(3)
            staleness, _ = server.push(t, delta, version=current[t], steps=steps)
            others = sum(k for w, k in log_since(log, current[t]) if w != t)
            assert staleness == others
            log.append((t, steps))
            total[t] += delta
            server.request_pull(t)
            in_transit[t].append(server.view(t)[1])
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
    server = ServerState(2, 1, window=2)
    server.request_pull(0)
    server.push(0, np.ones(2), version=0, seq=1, kept=([3], [0.5], 1))
    with pytest.raises(DuplicatePush):
        server.push(0, np.ones(2), version=0, seq=1)
    with pytest.raises(OutOfOrderPush, match="skips 2"):
        server.push(0, np.ones(2), version=0, seq=3)
    assert server.clock == 1 and np.all(server.u == 1) and server.workers[0].position == 1
    assert server.refresh(0) is False            # no pull in flight: nothing to resend
    server.request_pull(0)
    assert server.refresh(0) is True and server.view(0)[1] == 1


def test_a_lost_worker_releases_the_gate_and_a_replacement_resumes_its_state():
    server = ServerState(2, 2, staleness=0)
    server.request_pull(0)
    server.push(0, np.full(2, 2.0), seq=1, kept=([5], [1.5], 7))
    assert server.request_pull(0) == [0]
    assert server.request_pull(1) == []             # τ = 0: waits for worker 0
    assert server.lose(0) == [1]                    # which dies holding its pull
    with pytest.raises(ProtocolError, match="lost"):
        server.push(0, np.ones(2), seq=2)
    record = server.rejoin(0)
    assert (record.selected.tolist(), record.weights.tolist(), record.position,
            record.messages) == ([5], [1.5], 7, 1)
    np.testing.assert_array_equal(record.applied, [2.0, 2.0])


def test_lost_workers_count_with_their_last_acknowledged_state():
    server = ServerState(2, 2)
    for t in range(2):
        server.request_pull(t)
        server.push(t, np.full(2, t + 1.0), seq=1, kept=([t], [t + 1.0], 1))
    server.lose(1)
    server.finish(0, [0], [1.0], np.ones(2))
    assert server.done and server.lost_workers == [1]
    selected, weights, difference = server.assemble()
    assert selected.tolist() == [0, 1] and weights.tolist() == [1.0, 2.0]
    assert difference == 0.0


def test_a_snapshot_restores_the_same_state(tmp_path):
    server, contribution = _drive(5, 3, None, 4, seed=1)
    np.savez(tmp_path / "s.npz", **server.snapshot())
    with np.load(tmp_path / "s.npz", allow_pickle=False) as arrays:
        back = ServerState.restore(arrays)
    assert back.clock == server.clock and np.all(back.u == server.u)
    assert back.staleness_stats() == server.staleness_stats()
    assert [r.messages for r in back.workers] == [r.messages for r in server.workers]
    np.testing.assert_array_equal(back.assemble()[0], server.assemble()[0])


def test_settle_pushes_and_final_budgets_under_adaptive_budgets():
    """A push of no steps exists only to shrink a worker to its granted budget (the
    worker loop's settle); a FINAL over the last grant is refused, state untouched."""
    fixed = ServerState(3, 2)
    fixed.request_pull(0)
    with pytest.raises(ProtocolError, match="0 steps in one message; 1 to 1"):
        fixed.push(0, np.ones(3), steps=0)
    assert fixed.clock == 0 and np.all(fixed.u == 0)

    server = ServerState(3, 2)
    server.adapt_budgets(4)                       # starts at s_t = 2, 2
    server.request_pull(0)
    server.push(0, np.ones(3), kept=([0, 2, 4], [3.0, 2.0, 1.0], 1))
    server.request_pull(1)
    server.push(1, np.ones(3), kept=([1], [0.5], 1))
    server.request_pull(0)
    assert server.grant_budget(0) == 2            # worker 1 still holds 2 slots
    staleness, _ = server.push(0, -np.ones(3), steps=0,
                               kept=([0, 2], [3.0, 2.0], 1))   # settle: drops one
    assert server.clock == 2 and np.allclose(server.u, [1, 1, 1])
    with pytest.raises(ProtocolError, match="over its granted budget 2"):
        server.finish(0, [0, 2, 4], [3.0, 2.0, 1.0], np.zeros(3))
    assert not server.workers[0].finished
    server.finish(0, [0, 2], [3.0, 2.0], np.zeros(3))
    assert server.granted[0] == 2
