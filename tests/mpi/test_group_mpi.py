"""Group-aware Asy-OS over real MPI ranks.  Run by tests/transport/test_mpi.py as
``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi`` for several N."""

import numpy as np
import pytest
from mpi4py import MPI

from asyos import fit_os
from asyos.core.projection import group_constraint
from asyos.core.shards import group_owners
from asyos.errors import InputError
from asyos.solvers.asy import AsyConfig
from asyos.solvers.simulator import fit_simulated
from asyos.streams import ArrayStream
from asyos.transport import mpi as transport

COMM = MPI.COMM_WORLD
Q = COMM.Get_size() - 1
N_GROUPS = 12


def _grouped(seed=0, n=50, p=96):
    """Groups of 8 features; y from 3 features in each of 3 groups, plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    groups = np.repeat(np.arange(N_GROUPS), p // N_GROUPS)
    w = np.zeros(p)
    w[[1, 4, 6, 33, 35, 38, 80, 82, 87]] = 1.5
    return X, X @ w + 0.3 * rng.standard_normal(n), groups


def _run(comm, X, y, groups, s1, s2, *, staleness=None, window="auto", batch="auto",
         epochs=2, record_order=False, rule="auto"):
    stream = ArrayStream(X, block_size=16)

    def open_job(features):
        group_of, _ = group_constraint(groups, s2, X.shape[1])
        return stream, y, group_of

    def config(q, p):
        return AsyConfig.build(s1, q, eta=0.3, m=2.0, epochs=epochs, staleness=staleness,
                               window=window, batch=batch, n_features=p, s2=s2,
                               rule=rule)

    return transport.run(comm, open_job, config, record_order=record_order)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("staleness, window, batch", [
    (0, "auto", "auto"), (2, "auto", "auto"), (2, 2, 2), ("auto", "auto", "auto"),
    (None, "auto", "auto"), (None, 3, 5)])
def test_every_run_keeps_its_feature_and_group_budgets(staleness, window, batch):
    X, y, groups = _grouped()
    s1, s2 = max(9, 2 * Q), max(3, Q)
    payload = _run(COMM, X, y, groups, s1, s2, staleness=staleness, window=window,
                   batch=batch)
    if COMM.Get_rank() != 0:
        assert payload is None
        return
    asy = payload.asy
    selected = np.asarray(payload.selected)
    assert selected.size <= s1 and len(set(groups[selected])) <= s2
    assert asy["groups_kept"] == len(set(groups[selected]))
    assert sum(asy["budgets"]) == s1 and sum(asy["group_budgets"]) == s2
    assert asy["u_check_max_abs_diff"] <= 1e-10
    bound = asy["staleness"]["bound"]
    assert staleness == "auto" or bound == staleness
    assert asy["staleness"]["max"] <= (bound if bound is not None else 10**9)
    owner = group_owners(groups, N_GROUPS, Q)
    for t, worker in enumerate(asy["workers"]):   # whole groups, within (s1_t, s2_t)
        mine = selected[owner[groups[selected]] == t]
        assert worker["kept"] == mine.size <= asy["budgets"][t]
        assert len(set(groups[mine])) <= asy["group_budgets"][t]
    u = X[:, selected] @ payload.weights
    assert payload.objective == pytest.approx(0.5 * np.mean((u - y) ** 2), rel=1e-10)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("staleness, window, batch", [(0, 1, 1), (None, 4, 3)])
def test_one_worker_is_sequential_group_aware_os(staleness, window, batch):
    """q = 1 (ranks 0 and 1 of any job): u_C is the worker's own u, so the run is
    sequential group-aware OS with the same fixed step."""
    comm = COMM.Split(0 if COMM.Get_rank() < 2 else MPI.UNDEFINED)
    if comm == MPI.COMM_NULL:
        return
    X, y, groups = _grouped(seed=1)
    payload = _run(comm, X, y, groups, 9, 3, staleness=staleness, window=window,
                   batch=batch, epochs=3)
    comm.Free()
    if payload is None:
        return
    result = fit_os(ArrayStream(X, block_size=16), y, 9, eta=0.3, m=2.0, epochs=3,
                    groups=groups, s2=3)
    np.testing.assert_array_equal(payload.selected, result.selected)
    np.testing.assert_allclose(payload.weights, result.weights, rtol=0, atol=1e-10)
    assert len(set(groups[result.selected])) <= 3


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("window, batch", [("auto", "auto"), (2, 3)])
def test_tau_zero_is_the_simulator_on_the_recorded_order(window, batch):
    """τ = 0 serialises the workers' steps, pipelined or not; the simulator,
    replaying the order MPI recorded with the same group shards, must reach the same
    kept sets."""
    X, y, groups = _grouped(seed=2)
    s1, s2 = max(9, 2 * Q), max(3, Q)
    # the paper's rule: the fitted rule's damping also depends on where views begin,
    # which pipelining moves
    payload = _run(COMM, X, y, groups, s1, s2, staleness=0, window=window, batch=batch,
                   record_order=True, rule="magnitude")
    if COMM.Get_rank() != 0:
        return
    schedule = [worker for worker, _ in payload.asy["order"]]
    simulated = fit_simulated(ArrayStream(X, block_size=16), y, s1, Q, delay=0,
                              order=schedule, eta=0.3, m=2.0, groups=groups, s2=s2,
                              rule="magnitude")
    np.testing.assert_array_equal(simulated.selected, payload.selected)
    np.testing.assert_allclose(simulated.weights, payload.weights, rtol=0,
                               atol=1e-12)


@pytest.mark.mpi(min_size=2)
def test_bad_labels_on_one_rank_stop_every_rank():
    COMM.Barrier()   # rank 1's error must not reach a server still in the last test
    X, y, groups = _grouped()
    bad = groups[:-1] if COMM.Get_rank() == 1 else groups   # rank 1 read a short file
    with pytest.raises(InputError) as error:
        _run(COMM, X, y, bad, max(9, 2 * Q), max(3, Q))
    message = {0: "rank 1: groups must give one label per feature",   # it reports
               1: "groups must give one label per feature"}
    assert str(error.value).startswith(message.get(COMM.Get_rank(), "setup failed"))
