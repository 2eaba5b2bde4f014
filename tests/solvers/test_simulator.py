"""The staleness simulator (docs/algorithms.md, "Asy-OS: staleness and budgets"): exact
against a literal reference, invariants for any delay, determinism, and the CLI."""

import json
import subprocess
import sys
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_os import os_step

from asyos.core.server_state import ProtocolError
from asyos.core.sweep import SWEEP_ROUNDS, sweep_size
from asyos.datasets import make_classification, make_regression
from asyos.errors import InputError
from asyos.metrics import recall
from asyos.solvers import messages
from asyos.solvers.asy import AsyConfig
from asyos.solvers.asy_server import AsyServer
from asyos.solvers.sequential import fit_os
from asyos.solvers.simulator import Clock, fit_simulated

ETA, M = 0.5, 1.0


def reference_simulator(X, y, s, q, tau, epochs=2, loss="squared"):
    """The simulator written literally: round-robin workers, a log of the last τ
    pushes, and û = u_C − Σ other workers' pushes in the log (staleness "others")."""
    n, p = X.shape
    budgets = [s // q + (1 if t < s % q else 0) for t in range(q)]
    queues = [deque(list(range(t, p, q)) * epochs) for t in range(q)]
    kept = [([], np.zeros(0)) for _ in range(q)]
    u_c = np.zeros(n)
    log = deque(maxlen=tau) if tau > 0 else deque(maxlen=0)
    t = 0
    while any(queues):
        while not queues[t]:
            t = (t + 1) % q
        j = queues[t].popleft()
        u_hat = u_c - sum((d for w, d in log if w != t), np.zeros(n))
        S, W = kept[t]
        u_old = X[:, S] @ W if S else np.zeros(n)
        S, W, _ = os_step(X, y, list(S), W, j, budgets[t], ETA, M, loss, u=u_hat)
        delta = (X[:, S] @ W if S else np.zeros(n)) - u_old
        u_c = u_c + delta
        log.append((t, delta))
        kept[t] = (S, W)
        t = (t + 1) % q
    selected = np.concatenate([np.asarray(S, dtype=np.int64) for S, _ in kept])
    weights = np.concatenate([W for _, W in kept])
    order = np.argsort(selected)
    return selected[order], weights[order]


@pytest.mark.parametrize("q, tau", [(1, 0), (2, 2), (3, 1), (4, 4), (4, 9), (5, 0)])
def test_equals_the_literal_reference(q, tau):
    problem = make_regression(p=90, s=8, n=60, seed=q + tau)
    out = fit_simulated(problem.X, problem.y, 8, q, delay=tau, eta=ETA, m=M,
                        rule="magnitude",
                        budget="fixed")
    selected, weights = reference_simulator(problem.X, problem.y, 8, q, tau)
    np.testing.assert_array_equal(out.selected, selected)
    np.testing.assert_allclose(out.weights, weights, rtol=1e-9, atol=1e-12)


def test_one_worker_is_sequential_os_for_any_delay():
    problem = make_regression(p=400, s=20, seed=1)
    sequential = fit_os(problem.X, problem.y, 20)
    for delay in (0, 3):
        out = fit_simulated(problem.X, problem.y, 20, 1, delay=delay)
        np.testing.assert_array_equal(out.selected, sequential.selected)
        np.testing.assert_allclose(out.weights, sequential.weights, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(q=st.integers(1, 6), tau=st.integers(0, 8), random_delay=st.booleans(),
       order=st.sampled_from(["round_robin", "random"]), seed=st.integers(0, 9),
       classify=st.booleans())
def test_invariants_for_any_delay(q, tau, random_delay, order, seed, classify):
    make = make_classification if classify else make_regression
    problem = make(p=60, s=6, n=40, seed=seed)
    out = fit_simulated(problem.X, problem.y, 6, q, delay=tau, random_delay=random_delay,
                        order=order, seed=seed,
                        loss="squared_hinge" if classify else "squared")
    asy = out.asy
    epochs = len(out.objective_per_epoch)   # "auto": 3 under the fitted rule
    assert epochs == 3
    assert asy["u_check_max_abs_diff"] <= 1e-9 * (1 + np.max(np.abs(problem.y)))
    assert asy["staleness"]["max"] <= tau                 # no step reads older than τ
    for t, worker in enumerate(asy["workers"]):   # its passes, then its sweep
        swept = worker["steps"] - epochs * len(range(t, 60, q))
        assert 0 <= swept <= SWEEP_ROUNDS * sweep_size("auto", 6, "fitted", epochs)
    assert all(w["kept"] <= w["budget"] for w in asy["workers"])
    selected = np.asarray(out.selected)
    assert selected.size <= 6 and np.unique(selected).size == selected.size


def test_round_robin_staleness_is_the_delay_up_to_q_minus_one():
    problem = make_regression(p=300, s=12, n=80, seed=2)
    for q, tau, expected in [(4, 2, 2), (4, 4, 3), (6, 0, 0)]:
        hist = fit_simulated(problem.X, problem.y, 12, q, delay=tau).asy["staleness"]
        # all but the first round's steps read exactly min(τ, q − 1) others' updates
        assert int(np.argmax(hist["histogram"])) == expected
        assert hist["histogram"][expected] >= 2 * 300 - q


def test_the_paper_default_and_determinism():
    problem = make_regression(p=300, s=12, n=80, seed=3)
    paper = fit_simulated(problem.X, problem.y, 12, 4)
    assert paper.asy["staleness"]["max"] == 3          # τ_max = q: q − 1 others
    runs = [fit_simulated(problem.X, problem.y, 12, 4, delay=6, random_delay=True,
                          order="random", seed=seed) for seed in (5, 5, 6)]
    assert np.array_equal(runs[0].selected, runs[1].selected)
    assert np.array_equal(runs[0].weights, runs[1].weights)
    assert runs[0].asy["staleness"] == runs[1].asy["staleness"]
    assert runs[0].asy["staleness"] != runs[2].asy["staleness"]


def test_virtual_clock_makes_staleness_and_speedup():
    problem = make_regression(p=400, s=16, n=100, seed=4)
    one = fit_simulated(problem.X, problem.y, 16, 1, clock=(1e-9, 0.0))
    four = fit_simulated(problem.X, problem.y, 16, 4, clock=(1e-9, 1e-6),
                         budget="fixed")
    adaptive = fit_simulated(problem.X, problem.y, 16, 4, clock=(1e-9, 1e-6))
    assert one.asy["staleness"]["max"] == 0
    # equal costs: the four pull together, so each step follows 0..3 others' pushes
    assert four.asy["staleness"]["mean"] > 1
    # per step the cost is a·n·(|S(t)|+2): four workers with s/4 each finish sooner;
    # with adaptive budgets each also holds a trial slot (s/4 + 1)
    assert four.virtual_seconds < one.virtual_seconds / 4
    assert adaptive.virtual_seconds < one.virtual_seconds / 3
    times = four.trace["virtual_seconds"]
    assert len(times) == len(four.trace["steps"]) and times == sorted(times)


@pytest.mark.parametrize("kwargs, message", [
    ({"n_workers": 0}, "n_workers"),
    ({"delay": -1}, "delay"),
    ({"order": "sideways"}, "order"),
    ({"clock": (1e-9,)}, "clock"),
    ({"clock": (0.0, 1.0)}, "a > 0"),
    ({"clock": (1e-9, 0.0), "delay": 2}, "either clock or delay"),
    ({"n_workers": 11}, "at most 10 workers"),
])
def test_bad_settings_are_refused(kwargs, message):
    problem = make_regression(p=50, s=10, n=30, seed=0)
    args = {"n_workers": 2, **kwargs}
    with pytest.raises(InputError, match=message):
        fit_simulated(problem.X, problem.y, 10, **args)


def test_cli_simulate_writes_the_results_of_real_runs(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--simulate", "3",
                           "--delay", "2", "-p", "500", "-s", "12", "--quiet", "--out",
                           str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["asy"]["transport"] == "simulator" and result["asy"]["n_workers"] == 3
    assert result["asy"]["staleness"]["max"] == 2 and result["config"]["delay"] == 2
    assert 0 < result["truth"]["recall"] <= 1
    for bad in (["--delay", "2"], ["--simulate", "2", "--staleness", "1"]):
        proc = subprocess.run([sys.executable, "-m", "asyos.run", *bad, "-p", "100",
                               "-s", "5"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "asyos: error:" in proc.stderr


def test_an_explicit_schedule_is_followed_and_checked():
    problem = make_regression(p=40, s=6, n=30, seed=1)
    schedule = [0, 0, 1] * 10 + [1] * 10     # 20 steps each, worker 0 ahead
    out = fit_simulated(problem.X, problem.y, 6, 2, delay=0, order=schedule,
                        record_order=True, epochs=1, sweep=0)
    assert [w for w, _ in out.asy["order"]] == schedule
    with pytest.raises(InputError, match="schedule names"):
        fit_simulated(problem.X, problem.y, 6, 2, delay=0, order=[0] * 21, epochs=1,
                      sweep=0)


# -- adaptive budgets ---------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(q=st.integers(1, 6), extra=st.integers(0, 20), seed=st.integers(0, 99),
       grants=st.lists(st.integers(0, 5), min_size=1, max_size=30))
def test_granted_budgets_stay_within_s_plus_q(q, extra, seed, grants):
    """Grants in any order, weights of any size: the latest grants sum to ≤ s + q,
    each ≥ 1, and a worker's grant falls only with its own share, never because of
    what the others were granted."""
    from asyos.core.server_state import ServerState

    s = q + extra
    state = ServerState(4, q)
    state.adapt_budgets(s)
    state.budgets.set_ends([1 << 30] * q)   # trial slots on top of s; no final budgets
    rng = np.random.default_rng(seed)
    for t in grants:
        t %= q
        size = int(rng.integers(0, s + 2))
        state.workers[t].importance = np.abs(rng.standard_normal(size))
        before, share = state.budgets.granted[t], state.budgets.shares()[t]
        granted = state.budgets.grant(t)
        assert granted >= min(before, share + 1) and granted >= 1
        assert sum(state.budgets.granted) <= s + q
    assert sum(state.budgets.shares().values()) == s


def test_shares_follow_the_most_important_features():
    from asyos.core.server_state import ServerState

    def state():
        state = ServerState(4, 3)
        state.adapt_budgets(9)
        state.workers[0].importance = np.array([5.0, 4.0, 3.0, 2.0])
        state.workers[1].importance = np.array([0.1, 0.2])
        state.workers[2].importance = np.array([1.0])
        return state

    within = state()   # trial slots within s: the top 9 − 3 = 6 of all |w|: 5, 4, 3,
    # 2 (worker 0), 1 (worker 2), 0.2 (worker 1)
    assert within.budgets.shares() == {0: 4, 1: 1, 2: 1}
    assert [within.budgets.grant(t) for t in (1, 2, 0)] == [2, 2, 5]   # Σ ≤ s = 9
    on_top = state()
    on_top.budgets.set_ends([100] * 3)
    # on top: the top 9 of all |w| hold all 7; the 2 spare slots go to workers 0, 1
    assert on_top.budgets.shares() == {0: 5, 1: 3, 2: 1}
    # + a trial slot each, within s + q = 12 of what the others were granted
    assert [on_top.budgets.grant(t) for t in (1, 2, 0)] == [4, 2, 6]


def test_a_lowered_budget_drops_the_smallest_and_keeps_u_exact():
    from asyos.core.kept_set import KeptSet

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 6))
    kept = KeptSet(30, 6)
    kept.load(np.arange(6), X.T.copy(), np.array([3.0, -0.5, 2.0, 0.1, -4.0, 1.0]))
    kept.contribution[:] = X @ kept.weights[:6]
    kept.set_limit(3)
    selected, weights = kept.selected()
    assert selected.tolist() == [0, 2, 4] and weights.tolist() == [3.0, 2.0, -4.0]
    np.testing.assert_allclose(kept.contribution, X[:, selected] @ weights, atol=1e-12)
    kept.set_limit(99)
    assert kept.limit == 6 and kept.size == 3


def test_adaptive_budgets_with_one_worker_are_sequential_os():
    problem = make_regression(p=400, s=20, seed=1)
    sequential = fit_os(problem.X, problem.y, 20)
    out = fit_simulated(problem.X, problem.y, 20, 1, budget="adaptive")
    np.testing.assert_array_equal(out.selected, sequential.selected)
    np.testing.assert_allclose(out.weights, sequential.weights, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(q=st.integers(2, 6), tau=st.integers(0, 6), seed=st.integers(0, 9))
def test_adaptive_budgets_keep_the_invariants(q, tau, seed):
    problem = make_regression(p=80, s=8, n=40, seed=seed)
    out = fit_simulated(problem.X, problem.y, 8, q, delay=tau, budget="adaptive")
    assert out.asy["u_check_max_abs_diff"] <= 1e-9 * (1 + np.max(np.abs(problem.y)))
    assert len(out.selected) <= 8 and out.asy["budget"] == "adaptive"
    # what the workers kept beyond s (their grown closing sweeps) was cut at the end
    assert sum(w["kept"] for w in out.asy["workers"]) - out.asy["cut"] == \
        len(out.selected)


def test_cli_budget_adaptive(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--simulate", "4",
                           "--budget", "adaptive", "-p", "500", "-s", "12", "--quiet",
                           "--out", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "budgets adaptive" in proc.stdout
    result = json.loads(out.read_text())
    assert result["asy"]["budget"] == "adaptive" and result["config"]["budget"] == \
        "adaptive" and len(result["selected"]) <= 12
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--budget", "adaptive",
                           "-p", "100", "-s", "5"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--simulate" in proc.stderr and "mpiexec" in \
        proc.stderr


def test_the_servers_step_size_halves_once_per_rise_not_every_round_after_it():
    """The safeguard halves η when a round's loss rose 5 % above the lowest since its
    last halving; a plateau above an older low is no new rise.  (Against the lowest
    loss ever, one budget cut's rise halved η every round after it: 1e-267 and a
    frozen run, recall 0.19 against 0.55 sequential on a classification seed.)"""
    from asyos.solvers.asy import AsyConfig
    from asyos.solvers.asy_server import AsyServer

    y = np.ones(4)
    server = AsyServer(y, AsyConfig.build(2, 1, n_features=8, window=1, batch=1))
    server.start(8, eta=1.0, m=1.0)
    for level in (0.0, 0.5, 0.5, 0.5, 0.5, 0.8, 0.8):   # y − u: the loss ½(y−u)²
        server.state.u[:] = 1.0 - level
        server._safeguard(server.config.depth)
    assert server.step_size == 0.25          # two rises (0 → 0.5, 0.5 → 0.8), two halvings


def test_a_classification_run_does_not_freeze_after_a_rise():
    """The simulated run on the seed that froze under the old safeguard keeps a
    usable η and stays near sequential OS's recall."""
    problem = make_classification(2048, 32, seed=1)
    result = fit_simulated(problem.X, problem.y, 32, 2, loss="logistic")
    sequential = fit_os(problem.X, problem.y, 32, loss="logistic")
    assert result.eta > 1e-2              # it froze at 3e-267
    assert recall(result.selected, problem.support) >= \
        recall(sequential.selected, problem.support) - 0.1


# ------------------------------------------------------------------ the cost model
def _clocked(q, clock, p=240, s=12, epochs=2):
    """Without the closing sweep: its scan is not a step the model charges."""
    problem = make_regression(p=p, s=s, n=60, seed=7)
    return fit_simulated(problem.X, problem.y, s, q, clock=clock, epochs=epochs,
                         sweep=0)


def test_one_worker_hosting_the_server_pays_every_term_in_turn():
    # q = 1 on the shared-memory carrier: steps, push and serving follow one another;
    # pushes of 8 steps share a push of 24 µs and a serving of 40 µs
    steps = 2 * 240
    hosted = _clocked(1, Clock(step=2e-6, push=3e-6, serve=5e-6, host=True))
    assert hosted.virtual_seconds == pytest.approx(steps * 10e-6)
    batched = _clocked(1, Clock(step=2e-6, push=24e-6, serve=40e-6, batch=8,
                                host=True))
    assert batched.virtual_seconds == pytest.approx(steps * 10e-6)
    # the pushes are of 8 steps: 240 / 8 of them an epoch
    assert batched.asy["workers"][0]["pushes"] == steps // 8
    # with its own core the server overlaps the worker: only the last serving shows
    apart = _clocked(1, Clock(step=2e-6, push=3e-6, serve=1e-6))
    assert apart.virtual_seconds == pytest.approx(steps * 5e-6 + 1e-6)
    assert hosted.asy["staleness"]["max"] == apart.asy["staleness"]["max"] == 0


@pytest.mark.parametrize("rule", ["fitted", "magnitude"])
def test_each_substitution_is_charged(rule):
    """One worker is sequential OS step for step: under the fitted rule the clock
    charges exactly its substitutions (the kernels count them); the paper's rule is
    charged for each newcomer its pushes keep (its first s included)."""
    problem = make_regression(p=240, s=12, n=60, seed=7)

    def run(swap):
        return fit_simulated(problem.X, problem.y, 12, 1, epochs=2, rule=rule,
                             clock=Clock(step=1e-6, swap=swap)).virtual_seconds

    extra = (run(1e-3) - run(0.0)) / 1e-3   # the substitutions charged
    assert extra == pytest.approx(round(extra), abs=1e-6)
    swaps = sum(fit_os(problem.X, problem.y, 12, epochs=2, rule=rule,
                       start="stream").substitutions_per_epoch)   # as the workers
    if rule == "fitted":
        assert round(extra) == swaps > 0
    else:
        assert 12 <= round(extra) <= 12 + swaps


def test_a_busy_server_is_the_bottleneck_and_the_window_bounds_staleness():
    steps = 2 * 240
    free = _clocked(4, Clock(step=1e-6))
    slow = _clocked(4, Clock(step=1e-6, serve=1e-5))            # queue without end
    bounded = _clocked(4, Clock(step=1e-6, serve=1e-5, window=4))
    assert free.virtual_seconds == pytest.approx(steps / 4 * 1e-6, rel=0.05)
    for run in (slow, bounded):   # one push at a time: the server's time, summed
        assert run.virtual_seconds == pytest.approx(steps * 1e-5, rel=0.01)
    # on worker 0's core the serving and worker 0's own steps take turns
    hosted = _clocked(2, Clock(step=1e-6, serve=1e-5, host=True, window=4))
    assert hosted.virtual_seconds == pytest.approx(steps / 2 * 1e-6 + steps * 1e-5,
                                                   rel=0.01)
    # pushes wait in the queue: without a window the workers run ahead of it
    assert slow.asy["staleness"]["max"] > 4 * bounded.asy["staleness"]["max"]
    assert bounded.asy["staleness"]["max"] <= 4 * 4


def test_remote_workers_read_older_views_and_load_the_servers_link():
    near = _clocked(2, Clock(step=1e-6, serve=1e-7, remote=1))
    far = _clocked(2, Clock(step=1e-6, serve=1e-7, remote=1, latency=2e-5))
    assert far.asy["staleness"]["mean"] > near.asy["staleness"]["mean"] + 10
    # 16·n bytes a remote push over the link, one push at a time with the serving
    n, remote_steps = 60, 240
    thin = _clocked(2, Clock(step=1e-6, serve=0.0, remote=2, bandwidth=16 * n / 1e-5))
    assert thin.virtual_seconds == pytest.approx(2 * remote_steps * 1e-5, rel=0.01)


@pytest.mark.parametrize("clock, message", [
    (Clock(step=0.0), "must cost"),
    (Clock(step=1e-6, serve=-1.0), "serve"),
    (Clock(step=1e-6, latency=float("nan")), "latency"),
    (Clock(step=1e-6, bandwidth=0.0), "bandwidth"),
    (Clock(step=1e-6, batch=0.5), "batch"),
    (Clock(step=1e-6, remote=1.5), "remote"),
    (Clock(step=1e-6, window=-1), "window"),
])
def test_bad_clocks_are_refused(clock, message):
    problem = make_regression(p=50, s=4, n=20, seed=1)
    with pytest.raises(InputError, match=message):
        fit_simulated(problem.X, problem.y, 4, 2, clock=clock)


def test_an_aged_view_is_one_the_whole_push_may_spend_credit_from():
    """A worker that reads an old version (a remote one, behind its own pushes) for a
    push of several steps gets a view no older than the grant holding the push's
    last step: the server refuses a push from an older one."""
    config = AsyConfig.build(2, 1, eta=0.1, m=1.0, epochs=1, window=2, batch=2,
                             staleness=None, budget="fixed")
    server = AsyServer(np.zeros(3), config)
    server.start(8, 0.1, 1.0)
    server.handle(0, messages.Pull())            # credit for 4 steps, at version 0
    server.offer([0])

    def push(seq, version, steps):
        return server.handle(0, messages.Push(
            seq, version, np.arange(steps, dtype=np.int64), np.ones(3),
            np.zeros(0, np.int64), np.zeros(0), np.zeros(0), seq, more=True))

    for seq in (1, 2, 3):   # single steps from view 0; each tops the credit up
        push(seq, 0, 1)
        server.offer([0])
    # 1 step is left of the first grant: a push of 2 spends from the one at version 1
    assert server.aged_view(0, 3, 0, steps=1)[0] == 0
    version = server.aged_view(0, 3, 0, steps=2)[0]
    assert version == 1
    push(4, version, 2)
    assert server.state.clock == 5
    with pytest.raises(ProtocolError, match="may no longer use"):
        push(5, 0, 2)
