"""benchmarks/server_throughput.py's synthetic workers follow the protocol: every
push they build is one the server applies (none refused, none lost), at few and at
many workers, under either budgets' rule, so that the benchmark times the path it
claims to."""

import numpy as np
import pytest
from bench_scripts import load

throughput = load("server_throughput")


@pytest.mark.parametrize("budget", ["fixed", "adaptive"])
@pytest.mark.parametrize("q", [2, 64])
def test_every_push_of_the_flood_is_applied(q, budget):
    flood = throughput.Flood(n=50, q=q, steps=4, budget=budget)
    seconds = throughput.timed_round(flood, pushes=300)
    server = flood.server
    assert sum(server.pushes_applied()) == 300 == sum(flood.seq)
    assert server.clock == sum(flood.pushed)
    np.testing.assert_allclose(server.u, 300 * flood.delta, rtol=1e-12)
    assert all(value > 0 for value in seconds.values())


def test_the_floor_is_timed():
    add, copy = throughput.floor(100, repeat=10)
    assert 0 < add < 1 and 0 < copy < 1
