"""Asy-OS over real MPI ranks.  Run by tests/transport/test_mpi.py as
``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi`` for several N."""

import numpy as np
import pytest
from mpi4py import MPI
from sweeps import sweeps_begin_after_every_pass

from asyos import fit_os
from asyos.core.kept_set import KeptSet
from asyos.core.losses import Loss
from asyos.core.sweep import SWEEP_ROUNDS, sweep_size
from asyos.datasets import make_regression
from asyos.errors import InputError
from asyos.metrics import recall
from asyos.solvers.asy import AsyConfig, first_block_nu, worker_shard
from asyos.streams import ArrayStream
from asyos.transport import mpi as transport

COMM = MPI.COMM_WORLD
Q = COMM.Get_size() - 1


def _run(X, y, s, *, staleness=None, eta=0.3, m=1.0, epochs=2, loss="squared",
         record_order=False, window="auto", batch="auto", budget="fixed",
         rule="magnitude", ranks_per_node=None, leaders=False, hold=None):
    """Asy-OS over MPI; the paper's rule by default, as the replays here are."""
    stream = ArrayStream(X, block_size=16)

    def config(q, p):
        return AsyConfig.build(s, q, loss=loss, epochs=epochs, eta=eta, m=m,
                               staleness=staleness, window=window, batch=batch,
                               n_features=p, budget=budget, rule=rule)

    return transport.run(COMM, lambda features: (stream, y, None), config,
                         record_order=record_order, ranks_per_node=ranks_per_node,
                         leaders=leaders, hold=hold)


def _small(seed=0, n=60, p=90, s=8):
    problem = make_regression(p=p, s=s, n=n, seed=seed)
    return problem.X, problem.y


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("staleness, window, batch", [
    (0, "auto", "auto"), (1, "auto", "auto"), (3, "auto", "auto"),
    ("auto", "auto", "auto"), (0, 2, 3), (1, 4, 2), (3, 3, 5),   # pipelined under τ
    (None, 1, 1), (None, "auto", "auto"), (None, 3, 5), (None, 1, 7)])
def test_invariants_of_every_run(staleness, window, batch):
    X, y = _small()
    s = 8 if Q <= 8 else Q
    payload = _run(X, y, s, staleness=staleness, window=window, batch=batch)
    if COMM.Get_rank() != 0:
        assert payload is None
        return
    asy = payload.asy
    assert len(payload.selected) <= s
    assert asy["u_check_max_abs_diff"] <= 1e-10
    assert sum(asy["budgets"]) == s
    for worker in asy["workers"]:
        assert worker["kept"] <= worker["budget"]
    bound = asy["staleness"]["bound"]   # "auto": derived from p and the pipeline
    config = AsyConfig.build(s, Q, staleness=staleness, window=window, batch=batch,
                             n_features=90).for_step(asy["step_seconds"] or 0.0)
    # the workers timed their step, for the automatic pipeline
    assert (asy["step_seconds"] or 0.0) > 0 or (staleness, window) != ("auto", "auto")
    assert (bound, asy["depth"], asy["batch"]) == (config.staleness, config.depth,
                                                   config.batch)
    assert staleness == "auto" or bound == staleness
    assert window == "auto" or asy["depth"] == window * batch
    assert asy["staleness"]["max"] <= (bound if bound is not None else 10**9)
    assert sum(asy["staleness"]["histogram"]) == 2 * 90 == payload.n_steps
    # u_C really is X w for the assembled w
    u = X[:, payload.selected] @ payload.weights
    assert payload.objective == pytest.approx(0.5 * np.mean((u - y) ** 2), rel=1e-10)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("staleness, window, batch", [
    (0, "auto", "auto"), (2, "auto", "auto"), (2, 3, 2), ("auto", "auto", "auto"),
    (None, "auto", "auto"), (None, 3, 5)])
def test_adaptive_budgets_keep_every_invariant(staleness, window, batch):
    """Adaptive budgets over MPI: budgets follow the weights; the server refuses a
    push or a FINAL whose kept set is over what the worker may hold, and those sum to
    ≤ s."""
    X, y = _small(seed=3)
    s = max(8, Q)
    payload = _run(X, y, s, staleness=staleness, window=window, batch=batch,
                   budget="adaptive")
    if COMM.Get_rank() != 0:
        return
    asy = payload.asy
    assert asy["budget"] == "adaptive"
    assert len(payload.selected) <= s
    assert sum(w["kept"] for w in asy["workers"]) == len(payload.selected)
    assert asy["u_check_max_abs_diff"] <= 1e-10
    assert sum(asy["staleness"]["histogram"]) == 2 * 90 == payload.n_steps
    bound = asy["staleness"]["bound"]
    assert staleness == "auto" or bound == staleness
    assert asy["staleness"]["max"] <= (bound if bound is not None else 10**9)
    u = X[:, payload.selected] @ payload.weights
    assert payload.objective == pytest.approx(0.5 * np.mean((u - y) ** 2), rel=1e-10)


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("staleness, window, batch", [(1, 1, 1), (None, 2, 2)])
def test_adaptive_budgets_let_a_strong_shard_keep_its_features(staleness, window,
                                                               batch):
    """Every true feature on worker 0's shard (j ≡ 0 mod q): a fixed budget s/q caps
    its recall at 4 of 6; adaptive budgets hand it the others' slots.

    η is the default rule's, held fixed: the server's safeguard would halve the
    default η whenever a round of pushes raised the loss, as often as the timing
    makes it (under τ = None, 1 to 4 halvings, and then 3 epochs do not find the
    support), which is not what this test is about."""
    rng = np.random.default_rng(5)
    n, p, s, k = 300, 100 * Q, 4 * Q, 6
    X = rng.standard_normal((n, p))
    support = Q * np.arange(k)            # all owned by worker 0
    y = X[:, support] @ (2.0 + rng.random(k))
    stream = ArrayStream(X, block_size=16)
    nu = max(first_block_nu(worker_shard(stream, Q, t)) for t in range(Q))
    eta, m = AsyConfig.build(s, Q).eta_and_m(n, nu)
    results = {budget: _run(X, y, s, staleness=staleness, window=window, batch=batch,
                            eta=eta, m=m, epochs=3, budget=budget)
               for budget in ("fixed", "adaptive")}
    if COMM.Get_rank() != 0:
        return
    fixed, adaptive = (recall(results[b].selected, support)
                       for b in ("fixed", "adaptive"))
    kept = [w["kept"] for w in results["adaptive"].asy["workers"]]
    assert fixed <= 4 / k
    assert adaptive >= 5 / k and kept[0] > 4, (adaptive, kept)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("window, batch, budget, staleness", [
    (1, 1, "fixed", 0), (4, 3, "fixed", None), (1, 6, "fixed", None),
    (4, 3, "adaptive", None), (1, 1, "adaptive", None)])
def test_one_pipelined_worker_is_still_sequential_os(window, batch, budget, staleness):
    """q = 1: the worker's local view is u_C itself, whatever the pipeline and bound;
    its adaptive budget is all of s (one worker has no trial slot)."""
    if Q != 1:
        pytest.skip("needs exactly 2 ranks (q = 1)")
    X, y = _small(seed=4)
    payload = _run(X, y, 8, eta=0.3, m=2.0, epochs=3, window=window, batch=batch,
                   budget=budget, staleness=staleness)
    if COMM.Get_rank() == 0:
        result = fit_os(ArrayStream(X, block_size=16), y, 8, eta=0.3, m=2.0, epochs=3,
                        rule="magnitude")
        np.testing.assert_array_equal(payload.selected, result.selected)
        np.testing.assert_allclose(payload.weights, result.weights, rtol=0,
                                   atol=1e-10)
        assert payload.asy["staleness"]["max"] == 0


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("window, batch, ranks_per_node", [
    ("auto", "auto", None), (2, 3, None), ("auto", "auto", 1), (2, 3, 2)])
def test_tau_zero_equals_a_serial_replay_of_the_recorded_order(window, batch,
                                                               ranks_per_node):
    """τ = 0 serialises the workers' steps, pipelined or not: each step sees every
    step applied before it (a worker's credit is granted only while nobody else
    holds any).  Exactly so whether the n-vectors go through the node's shared window
    (None: every rank on this machine), in messages (1), or both (2: worker 0 shares
    the server's window, the others send messages)."""
    X, y = _small(seed=2)
    s = max(8, Q)
    payload = _run(X, y, s, staleness=0, record_order=True, window=window, batch=batch,
                   ranks_per_node=ranks_per_node)
    if COMM.Get_rank() != 0:
        return
    selected, weights = _replay(X, y, payload.asy["order"], Q, s)
    np.testing.assert_array_equal(payload.selected, selected)
    np.testing.assert_allclose(payload.weights, weights, rtol=0, atol=1e-12)
    assert payload.asy["staleness"]["max"] == 0
    assert payload.asy["shared_window_workers"] == {
        None: list(range(Q)), 1: [], 2: [0]}[ranks_per_node]


def _replay(X, y, order, q, s):
    """Sequential OS steps of each worker's kept set in the recorded ``order``, each
    seeing every step before it: the (selected, weights) a τ = 0 run must give."""
    config = AsyConfig.build(s, q, eta=0.3, m=1.0, epochs=2)
    kept = [KeptSet(X.shape[0], b) for b in config.budgets]
    u = np.zeros(X.shape[0])
    for worker, feature in order:
        before = kept[worker].contribution.copy()
        kept[worker].step(feature, np.ascontiguousarray(X[:, feature]), u, y,
                          Loss.SQUARED, 0.3, 1.0)
        u = u + kept[worker].contribution - before
    selected = np.concatenate([k.index[: k.size] for k in kept])
    weights = np.concatenate([k.weights[: k.size] for k in kept])
    order = np.argsort(selected)
    return selected[order], weights[order]


@pytest.mark.mpi(min_size=4)
@pytest.mark.parametrize("ranks_per_node, staleness, hold", [
    (2, 0, None), (3, 0, 0.0), (2, 2, 0.0), (3, 2, None), (2, None, 1e-3),
    (3, "auto", None)])
def test_node_leaders_relay_their_nodes_and_keep_the_bound_exactly(ranks_per_node,
                                                                   staleness, hold):
    """Nodes of ``ranks_per_node`` ranks, each but the server's led by its lowest
    rank, which sends its workers' pushes as bundles (Δu summed) and hands on the
    server's node views.  Each push still counts as itself: at τ = 0 the run is the
    serial replay of the recorded order, exactly; otherwise the bound, Σ-invariant
    and objective hold; every led push went up in a bundle."""
    X, y = _small(seed=6)
    s = max(8, Q)
    payload = _run(X, y, s, staleness=staleness, record_order=True,
                   ranks_per_node=ranks_per_node, leaders=True, hold=hold)
    if COMM.Get_rank() != 0:
        assert payload is None
        return
    asy = payload.asy
    size = COMM.Get_size()
    heads = [r - r % ranks_per_node for r in range(size)]
    leading = sorted({h for h in heads if h and heads.count(h) > 1})
    q = size - 1 - len(leading)
    assert len(asy["workers"]) == q == asy["n_workers"]
    assert [leader["rank"] for leader in asy["leaders"]] == leading
    led = [t for leader in asy["leaders"] for t in leader["workers"]]
    assert len(led) == len(set(led)) and len(led) == sum(
        heads.count(h) - 1 for h in leading)
    for leader in asy["leaders"]:
        assert leader["pushes"] == sum(asy["workers"][t]["pushes"]
                                       for t in leader["workers"])
        assert 1 <= leader["bundles"] <= leader["pushes"]
    assert asy["u_check_max_abs_diff"] <= 1e-10
    assert sum(asy["staleness"]["histogram"]) == 2 * 90 == payload.n_steps
    bound = asy["staleness"]["bound"]
    assert asy["staleness"]["max"] <= (bound if bound is not None else 10**9)
    if staleness == 0:
        selected, weights = _replay(X, y, asy["order"], q, s)
        np.testing.assert_array_equal(payload.selected, selected)
        np.testing.assert_allclose(payload.weights, weights, rtol=0, atol=1e-12)
        assert asy["staleness"]["max"] == 0
    u = X[:, payload.selected] @ payload.weights
    assert payload.objective == pytest.approx(0.5 * np.mean((u - y) ** 2), rel=1e-10)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("ranks_per_node", [None, 1, 2, 3])
def test_several_nodes_on_one_machine_keep_every_invariant(ranks_per_node):
    """Ranks split into "nodes" of ``ranks_per_node``: the workers in the server's
    node share its window, the others send their vectors; the bound, the exact
    Σ-invariant and the objective of the assembled w hold either way."""
    X, y = _small(seed=4)
    s = max(8, Q)
    payload = _run(X, y, s, staleness=2, budget="adaptive",
                   ranks_per_node=ranks_per_node)
    if COMM.Get_rank() != 0:
        return
    asy = payload.asy
    sharing = list(range(Q)) if ranks_per_node is None else \
        list(range(min(Q, ranks_per_node - 1)))
    assert asy["shared_window_workers"] == sharing
    assert asy["u_check_max_abs_diff"] <= 1e-10
    assert asy["staleness"]["max"] <= 2
    assert sum(asy["staleness"]["histogram"]) == 2 * 90 == payload.n_steps
    u = X[:, payload.selected] @ payload.weights
    assert payload.objective == pytest.approx(0.5 * np.mean((u - y) ** 2), rel=1e-10)


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("ranks_per_node", [None, 2])
def test_no_worker_sweeps_before_every_workers_passes_are_over(ranks_per_node):
    """Under the fitted rule each worker ends with a closing sweep of its shard; the
    server grants none of its steps before every worker's passes were applied, on
    one node or several."""
    X, y = _small(seed=5)
    s = max(8, Q)
    payload = _run(X, y, s, budget="adaptive", rule="fitted", record_order=True,
                   ranks_per_node=ranks_per_node)
    if COMM.Get_rank() != 0:
        return
    passes = [2 * len(range(t, 90, Q)) for t in range(Q)]
    size = sweep_size("auto", s, "fitted", 2)
    steps = [worker["steps"] for worker in payload.asy["workers"]]
    assert all(ends < taken <= ends + SWEEP_ROUNDS * size
               for ends, taken in zip(passes, steps))
    assert sweeps_begin_after_every_pass(payload.asy["order"], passes, size,
                                         SWEEP_ROUNDS)
    assert payload.asy["u_check_max_abs_diff"] <= 1e-10


@pytest.mark.mpi(min_size=5)
def test_quality_close_to_sequential_on_the_paper_protocol():
    """The paper's MPI protocol (p = 8192, s = 64, n = 1000), q = 4: recall within
    0.08 of OS."""
    if Q != 4:
        pytest.skip("runs with q = 4 workers")
    problem = make_regression(p=8192, s=64, n=1000, seed=0)
    stream = ArrayStream(problem.X)

    def config(q, p):
        return AsyConfig.build(64, q, epochs=2, n_features=p)

    payload = transport.run(COMM, lambda features: (stream, problem.y, None), config)
    if COMM.Get_rank() == 0:
        sequential = fit_os(problem.X, problem.y, 64, epochs=2)
        asy_recall = recall(payload.selected, problem.support)
        os_recall = recall(sequential.selected, problem.support)
        assert asy_recall >= os_recall - 0.08, (asy_recall, os_recall)


@pytest.mark.mpi(min_size=2)
def test_fewer_than_two_ranks_is_refused():
    with pytest.raises(InputError, match="at least 2 MPI ranks"):
        transport.run(MPI.COMM_SELF, None, None)


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("window, batch", [("auto", "auto"), (3, 2)])
def test_the_simulator_replays_a_real_tau_zero_run(window, batch):
    """Simulator with τ = 0 on the order MPI recorded = that MPI run, also
    when the MPI workers pipelined their steps."""
    from asyos.solvers.simulator import fit_simulated

    X, y = _small(seed=3)
    s = max(8, Q)
    payload = _run(X, y, s, staleness=0, record_order=True, window=window, batch=batch)
    if COMM.Get_rank() != 0:
        return
    schedule = [worker for worker, _ in payload.asy["order"]]
    simulated = fit_simulated(ArrayStream(X, block_size=16), y, s, Q, delay=0,
                              order=schedule, eta=0.3, m=1.0, budget="fixed",
                              rule="magnitude")
    np.testing.assert_array_equal(simulated.selected, payload.selected)
    np.testing.assert_allclose(simulated.weights, payload.weights, rtol=0,
                               atol=1e-12)
