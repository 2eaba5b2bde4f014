"""The closing sweep (core/sweep.py): it offers the features that the final residual
ranks highest, only unkept ones, and makes a few passes independent of the stream's
order where they were not; Asy-OS workers sweep their shards through the protocol."""

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from sweeps import sweeps_begin_after_every_pass

from asyos import fit_os
from asyos.core.losses import Loss, loss_grad
from asyos.core.sparse_step import CSCBlock
from asyos.core.sweep import SWEEP_LEAST, SWEEP_ROUNDS, sweep_candidates, sweep_size
from asyos.datasets import make_regression
from asyos.streams import as_stream
from asyos.errors import InputError
from asyos.metrics import recall
from asyos.solvers.simulator import Clock, fit_simulated
from asyos.streams import ArrayStream, SparseStream


def _brute_force(X, u, y, loss, kept, size):
    """The ``size`` best unkept columns of X by |x_jᵀ∇L(u)| / ‖x_j‖, sorted."""
    g = loss_grad(int(loss), u, y, np.empty(u.shape[0]))
    norms = np.linalg.norm(X, axis=0)
    score = np.divide(np.abs(X.T @ g), norms, out=np.zeros(X.shape[1]),
                      where=norms > 0)
    score[kept] = 0
    order = np.argsort(-score, kind="stable")
    return np.sort(order[:size][score[order[:size]] > 0])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(1, 30),
       loss=st.sampled_from(list(Loss)), sparse=st.booleans(),
       block=st.integers(1, 17))
def test_candidates_are_the_best_unkept_features_at_u(seed, size, loss, sparse, block):
    rng = np.random.default_rng(seed)
    n, p = 23, 40
    X = rng.standard_normal((n, p)) * (rng.random((n, p)) < (0.3 if sparse else 1))
    X[:, rng.choice(p, 3, replace=False)] = 0.0   # all-zero columns are never offered
    y = rng.choice([-1.0, 1.0], n) if loss.is_classification else rng.standard_normal(n)
    u = rng.standard_normal(n)
    kept = rng.choice(p, 5, replace=False)
    blocks = []
    for start in range(0, p, block):
        index = np.arange(start, min(start + block, p))
        columns = np.ascontiguousarray(X[:, index].T)
        blocks.append((index, CSCBlock.from_dense(columns) if sparse else columns))
    got = sweep_candidates(lambda: iter(blocks), u, y, loss, kept, size)
    expected = _brute_force(X, u, y, loss, kept, size)
    assert got.size == expected.size and np.all(np.diff(got) > 0)
    assert not np.isin(got, kept).any()
    # ties aside (none in continuous data), the same features
    np.testing.assert_array_equal(got, expected)
    # an in-memory stream scores them all in one product, without reading blocks
    def unread():
        raise AssertionError("the blocks were read")
    stream = SparseStream(scipy.sparse.csc_matrix(X)) if sparse else ArrayStream(X)
    np.testing.assert_array_equal(sweep_candidates(unread, u, y, loss, kept, size,
                                                   stream), expected)


def test_size_auto_and_bad_values():
    assert sweep_size("auto", 256, "fitted", 3) == 32
    assert sweep_size("auto", 5, "fitted", 3) == SWEEP_LEAST
    assert sweep_size("auto", 256, "magnitude", 3) == 0   # the paper's rule as it is
    assert sweep_size("auto", 256, "fitted", 1) == 0   # one pass reads the stream once
    assert sweep_size(3, 256, "magnitude", 1) == 3
    for bad in (-1, 2.5, "some"):
        with pytest.raises(InputError, match="sweep"):
            sweep_size(bad, 10, "fitted", 3)


# n = 1000, p = 4096, s = 128: three passes end at objectives that depend on the
# order of the columns; with the sweep, they agree (and match the converged run's)
N, P, S = 1000, 4096, 128


@pytest.fixture(scope="module")
def problems():
    return [make_regression(p=P, s=S, n=N, seed=seed) for seed in (0, 1)]


def _orders(data, sweep):
    """Final objectives and recalls of three passes over three orders of the columns."""
    rng = np.random.default_rng(7)
    out = []
    for k in range(3):
        perm = np.arange(P) if k == 0 else rng.permutation(P)
        fit = fit_os(ArrayStream(np.asfortranarray(data.X[:, perm])), data.y, S,
                     epochs=3, sweep=sweep)
        out.append((fit.objective, recall(perm[fit.selected], data.support)))
    return np.array(out)


def test_the_sweep_makes_three_passes_independent_of_the_order(problems):
    """Without the sweep, three orders end 23 % and 72 % apart on these two seeds;
    with it within 1.2 % of each other and of the converged objective (measured:
    one sweep does not always reach it, a second pass may still swap)."""
    spread_without, spread_with = [], []
    for data in problems:
        without, with_sweep = _orders(data, 0), _orders(data, "auto")
        spread_without.append(np.ptp(without[:, 0]) / without[:, 0].min())
        spread_with.append(np.ptp(with_sweep[:, 0]) / with_sweep[:, 0].min())
        # it never ends worse than the same passes without it
        assert np.all(with_sweep[:, 0] <= without[:, 0] * (1 + 1e-9))
        assert with_sweep[:, 1].min() >= without[:, 1].min()
        converged = fit_os(data.X, data.y, S, epochs=20, sweep=0).objective
        assert with_sweep[:, 0].max() <= 1.02 * converged
    assert max(spread_with) <= 0.02
    assert min(spread_without) > 0.1   # the problem shows what the sweep is for


def test_sequential_steps_count_the_sweep_and_the_trace_ends_at_it(problems):
    data = problems[0]
    fit = fit_os(data.X, data.y, S, epochs=2, sweep=16, start="stream")
    plain = fit_os(data.X, data.y, S, epochs=2, sweep=0)
    assert 2 * P < fit.n_steps <= 2 * P + 16
    assert plain.n_steps == 2 * P
    assert fit.trace["objective"][-1] == pytest.approx(fit.objective, rel=1e-12)
    assert fit.trace["steps"][-1] == fit.n_steps


def test_simulated_workers_sweep_their_shards(problems):
    """Each worker offers ``sweep`` more arrivals after its passes, through the
    protocol (the simulator checks u_C = Σ_t X_S(t) w_S(t) and the bound), from its
    own shard, and the sweeps close most of the gap to sequential OS that the same
    run has without them."""
    size = sweep_size("auto", S, "fitted", 3)
    for data in problems:
        sequential = fit_os(data.X, data.y, S, epochs=3)
        run = fit_simulated(data.X, data.y, S, 2, delay=8, epochs=3, record_order=True)
        plain = fit_simulated(data.X, data.y, S, 2, delay=8, epochs=3, sweep=0)
        assert plain.n_steps == 3 * P
        assert [w["steps"] for w in run.asy["workers"]] == \
            [3 * P // 2 + SWEEP_ROUNDS * size] * 2
        assert run.asy["u_check_max_abs_diff"] <= 1e-9
        assert run.asy["staleness"]["max"] <= 8
        swept = np.array(run.asy["order"][3 * P:])
        for worker in (0, 1):   # a worker sweeps its own shard
            own = as_stream(data.X).shard(2, worker).feature_indices()
            assert np.all(np.isin(swept[swept[:, 0] == worker, 1], own))
        gap, plain_gap = (r.objective - sequential.objective for r in (run, plain))
        assert gap <= 0.5 * plain_gap


def test_no_worker_sweeps_before_every_workers_passes_are_over():
    """A worker on another machine (latency 2 ms a push) ends its passes last: the
    nearby worker, 240 steps ahead at its end without the barrier, waits for it, so
    both sweeps score the residual of every pass."""
    n, p, s = 400, 1024, 32
    clock = Clock(step=1e-6, column=1e-9, push=1e-6, serve=1e-6, batch=16, remote=1,
                  latency=2e-3)
    for seed in (0, 1):
        data = make_regression(p=p, s=s, n=n, seed=seed)
        run = fit_simulated(data.X, data.y, s, 2, clock=clock, epochs=3,
                            record_order=True)
        size = sweep_size("auto", s, "fitted", 3)
        assert [w["steps"] for w in run.asy["workers"]] == \
            [3 * p // 2 + SWEEP_ROUNDS * size] * 2
        assert sweeps_begin_after_every_pass(run.asy["order"], [3 * p // 2] * 2, size,
                                             SWEEP_ROUNDS)
        assert run.asy["u_check_max_abs_diff"] <= 1e-9


@pytest.mark.parametrize("clock", [None, Clock(step=1e-6, batch=2)])
def test_a_sweep_with_nothing_to_offer_ends_the_worker(clock):
    """Each worker keeps its whole shard (s = p, fixed budgets): its sweep, which
    pulls a view before it scores, finds no candidate, and the worker finishes from
    that pull without a step."""
    data = make_regression(p=8, s=4, n=50, seed=0)
    run = fit_simulated(data.X, data.y, 8, 2, clock=clock, epochs=2, sweep=2,
                        budget="fixed")
    assert [w["steps"] for w in run.asy["workers"]] == [8, 8]
    assert run.selected.tolist() == list(range(8))


def test_grown_sweeps_and_the_closing_cut_move_slots_across_workers():
    """At q = 8, three passes leave some workers at a final budget of true features
    only while others keep slots for noise: a sweep that may only swap within its
    worker's final budget left 2–5 true features more out than sequential OS on
    these seeds (0 and 4 favourable to the cut, 3 and 6 less so).  Grown sweeps and
    the global cut to s leave at most one."""
    p, n, s, q = 2048, 500, 64, 8
    for seed in (0, 3, 4, 6):
        data = make_regression(p=p, s=s, n=n, seed=seed)
        sequential = fit_os(data.X, data.y, s, epochs=3)
        run = fit_simulated(data.X, data.y, s, q, delay=q, epochs=3, budget="adaptive")
        assert run.selected.size == s and run.asy["cut"] > 0
        assert run.asy["u_check_max_abs_diff"] <= 1e-9
        assert recall(run.selected, data.support) >= \
            recall(sequential.selected, data.support) - 1 / s
