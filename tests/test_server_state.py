"""The server state machine: the Σ-invariant and the staleness bound, in any interleaving."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.core.server_state import ProtocolError, ServerState


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
