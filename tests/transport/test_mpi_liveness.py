"""The MPI carrier's liveness (``transport.mpi.Silence``), without MPI: who is lost,
when, and who is sent a heartbeat."""

import pytest

from asyos.transport.mpi import RankLost, Roles, Silence


class Server:
    def __init__(self, owing):
        self.owing = owing

    def owes(self, worker):
        return worker in self.owing


class Pulses:
    def __init__(self):
        self.calls = []

    def pulse(self, peers, every, now):
        self.calls.append((dict(peers), every, now))


# ranks 0 | 1 2 3 (a node led by rank 1) | 4 (a worker alone on its node)
ROLES = Roles.of([0, 1, 1, 1, 4], leaders=True)


def test_the_server_hears_a_led_worker_from_its_leader():
    assert ROLES.leaders == {1: [0, 1]} and ROLES.worker_ranks == (2, 3, 4)
    assert [ROLES.speaker(t) for t in range(3)] == [1, 1, 4]
    assert Silence(ROLES, 10.0, 0.0).peers == {1: 0, 4: 2}


def test_a_rank_owing_a_message_past_the_timeout_is_lost_and_named():
    silence = Silence(ROLES, 10.0, 0.0)
    silence.watch(Pulses(), Server({2}), 9.0)       # within the timeout
    silence.contact(4, 9.5)
    silence.watch(Pulses(), Server({2}), 19.0)      # answered at 9.5: 9.5 s
    with pytest.raises(RankLost, match=r"worker 2 \(rank 4\) has been silent for "
                                       r"10\.6 s.*heartbeat timeout \(10 s\)") as lost:
        silence.watch(Pulses(), Server({2}), 20.1)
    assert lost.value.exit_status == 3


def test_a_rank_whose_workers_owe_nothing_may_be_silent():
    """Finished, or waiting for credit the server holds: silence is the server's."""
    silence = Silence(ROLES, 10.0, 0.0)
    silence.watch(Pulses(), Server(set()), 100.0)
    with pytest.raises(RankLost, match=r"leader of workers \[0, 1\] \(rank 1\)"):
        silence.watch(Pulses(), Server({1}), 200.0)


def test_checks_are_spaced_and_every_speaker_is_pulsed_at_a_third_of_the_timeout():
    silence, link = Silence(ROLES, 6.0, 0.0), Pulses()
    for now in (0.0, 0.1, 0.3, 0.7):
        silence.watch(link, Server(set()), now)
    assert [now for _, _, now in link.calls] == [0.0, 0.7]   # every 0.6 s at most
    assert link.calls[0][:2] == ({1: 0, 4: 2}, 2.0)
