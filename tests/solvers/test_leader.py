"""A node's leader (sans-I/O): what it bundles, when a bundle goes, the order every
worker's messages keep, and what it hands on from the server."""

import numpy as np
import pytest

from asyos.core.server_state import ProtocolError
from asyos.solvers import messages
from asyos.solvers.leader import NodeLeader

N = 5


def _push(seq, delta, more=True, version=0):
    return messages.Push(seq, version, np.array([seq], np.int64),
                         np.asarray(delta, float), np.array([seq], np.int64), np.array([1.0]), np.array([1.0]),
                         seq, more)


def test_a_bundle_holds_one_push_per_worker_and_their_summed_delta():
    leader = NodeLeader([3, 5], N, hold=1.0)
    assert leader.from_worker(3, _push(1, np.arange(N)), now=0.0) == []
    assert not leader.due(0.1)          # worker 5 is still to come, hold not over
    assert leader.from_worker(5, _push(1, np.ones(N)), now=0.2) == []
    assert leader.due(0.2)              # every running worker is in it
    [(worker, bundle)] = leader.flush()
    assert worker == 3 and isinstance(bundle, messages.Bundle)
    assert bundle.workers.tolist() == [3, 5]
    np.testing.assert_array_equal(bundle.delta, np.arange(N) + 1.0)
    assert all(p.delta.size == 0 for p in bundle.pushes)
    assert [p.seq for p in bundle.pushes] == [1, 1]
    assert (leader.bundles, leader.pushes) == (1, 2)
    assert leader.flush() == []         # nothing gathered since


def test_the_callers_buffer_may_be_reused_after_a_push():
    leader = NodeLeader([0, 1], N, hold=1.0)
    buffer = np.ones(N)
    leader.from_worker(0, _push(1, buffer))
    buffer[:] = 7.0
    leader.from_worker(1, _push(1, buffer))
    np.testing.assert_array_equal(leader.flush()[0][1].delta, np.full(N, 8.0))


def test_a_bundle_goes_after_hold_seconds_without_the_others():
    leader = NodeLeader([0, 1, 2], N, hold=0.5)
    leader.from_worker(1, _push(1, np.ones(N)), now=10.0)
    assert not leader.due(10.4)
    assert leader.due(10.5)
    assert not NodeLeader([0], N).due(0.0)   # nothing to send


def test_a_second_push_of_a_worker_sends_the_first_bundle_before_it():
    leader = NodeLeader([0, 1], N, hold=9.0)
    leader.from_worker(0, _push(1, np.ones(N)))
    [(_, first)] = leader.from_worker(0, _push(2, np.full(N, 2.0)))
    assert [p.seq for p in first.pushes] == [1]
    np.testing.assert_array_equal(first.delta, np.ones(N))
    [(_, second)] = leader.flush()
    assert [p.seq for p in second.pushes] == [2]
    np.testing.assert_array_equal(second.delta, np.full(N, 2.0))


def test_any_other_message_follows_the_pushes_gathered_before_it():
    leader = NodeLeader([0, 1], N, hold=9.0)
    leader.from_worker(1, _push(1, np.ones(N)))
    final = messages.Final(1, 1, np.zeros(0, np.int64), np.zeros(0), np.zeros(N),
                           np.zeros((0, N)))
    out = leader.from_worker(0, final)
    assert [type(m).__name__ for _, m in out] == ["Bundle", "Final"]
    assert [t for t, _ in out] == [1, 0]


def test_a_done_worker_no_longer_holds_a_bundle_back_and_all_done_is_finished():
    leader = NodeLeader([0, 1], N, hold=9.0)
    assert leader.from_server(0, messages.Done()) == [(0, messages.Done())]
    assert not leader.finished
    leader.from_worker(1, _push(1, np.ones(N)))
    assert leader.due(0.0)              # worker 0 will push no more
    leader.from_server(1, messages.Done())
    assert leader.finished


def test_a_node_view_is_handed_on_as_each_workers_view():
    leader = NodeLeader([2, 4], N)
    views = (messages.View(np.zeros(0), 7, 1, 9), messages.View(np.zeros(0), 7, 3, 8))
    node_view = messages.NodeView(np.ones(N), 7, np.array([0, 0, 1, 0, 3]),
                                  np.array([4, 2], np.int64), views)
    assert leader.from_server(4, node_view) == [(4, views[0]), (2, views[1])]
    ack = messages.Ack(3)
    assert leader.from_server(2, ack) == [(2, ack)]


def test_messages_of_strangers_are_protocol_faults():
    leader = NodeLeader([0, 1], N)
    with pytest.raises(ProtocolError, match="worker 2 is not one this leader relays"):
        leader.from_worker(2, _push(1, np.ones(N)))
    with pytest.raises(ProtocolError, match="worker 3 is not one"):
        leader.from_server(3, messages.Done())
    with pytest.raises(ProtocolError, match="sent a leader a Push"):
        leader.from_server(0, _push(1, np.ones(N)))
    assert leader.flush() == []         # nothing was gathered from them
