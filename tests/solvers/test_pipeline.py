"""The Asy-OS worker's pipelined side: its local view and its compiled batch of steps."""

import numpy as np
import pytest

from asyos.core.kept_set import KeptSet
from asyos.core.losses import Loss
from asyos.core.server_state import ServerState
from asyos.errors import InputError
from asyos.solvers.asy import AsyConfig
from asyos.solvers.messages import View
from asyos.solvers.worker_loop import LocalView


def test_local_view_is_the_newest_view_plus_own_unanswered_pushes():
    view = LocalView(3)
    assert not view.may_step                       # no view yet
    view.answered(View(np.array([1.0, 2.0, 3.0]), 0, through=0, credit=2))
    assert view.may_step and view.current()[1:] == (0, 2, 0, 0.0)
    assert view.pushed(np.array([1.0, 0.0, 0.0]), 1) == 1    # push 1
    assert view.pushed(np.array([0.0, 1.0, 0.0]), 1) == 2    # push 2: credit spent
    assert not view.may_step and view.allowed == 0
    np.testing.assert_array_equal(view.current()[0], [2.0, 3.0, 3.0])
    view.answered(View(np.full(3, 10.0), 5, through=1, credit=3))  # has push 1, not 2
    u_hat, version, allowed, budget, eta = view.current()
    np.testing.assert_array_equal(u_hat, [10.0, 11.0, 10.0])
    assert (version, allowed, budget, eta) == (5, 1, 0, 0.0) and view.may_step
    assert view.pushed(np.array([0.0, 0.0, 1.0]), 1) == 3
    # an older view arriving late changes nothing but may carry credit
    view.answered(View(np.zeros(3), 2, through=0, credit=4))
    u_hat, version, allowed, _, _ = view.current()
    np.testing.assert_array_equal(u_hat, [10.0, 11.0, 11.0])
    assert (version, allowed) == (5, 1)
    # credit is cumulative: a view sent again (its first copy lost?) adds nothing
    view.answered(View(np.full(3, 20.0), 9, through=3, credit=4, budget=2, eta=0.5))
    view.answered(View(np.full(3, 20.0), 9, through=3, credit=4, budget=2, eta=0.5))
    np.testing.assert_array_equal(view.current()[0], [20.0, 20.0, 20.0])
    assert view.current()[1:] == (9, 1, 2, 0.5)
    assert view.pushed(np.ones(3), 1) == 4 and not view.may_step
    # the server's η only shrinks: a late view with an older, larger one is ignored
    view.answered(View(np.full(3, 20.0), 9, through=4, credit=4, eta=0.25))
    view.answered(View(np.full(3, 20.0), 8, through=3, credit=4, eta=0.5))
    assert view.current()[4] == 0.25


def test_a_resumed_local_view_continues_its_numbering_and_spent_credit():
    view = LocalView(2, last_push=7, steps=12)
    view.answered(View(np.zeros(2), 30, through=7, credit=12))   # no credit left
    assert not view.may_step
    view.answered(View(np.ones(2), 31, through=7, credit=15))
    assert view.allowed == 3 and view.pushed(np.ones(2), 3) == 8
    assert not view.may_step


@pytest.mark.parametrize("loss", list(Loss))
def test_a_compiled_batch_equals_steps_that_see_their_own_pushes(loss):
    rng = np.random.default_rng(3)
    n, p = 40, 12
    X = rng.standard_normal((p, n))
    y = np.sign(rng.standard_normal(n)) if loss != Loss.SQUARED else rng.standard_normal(n)
    view = rng.standard_normal(n) * 0.1
    batch, one_by_one = KeptSet(n, 4), KeptSet(n, 4)
    u_local = view.copy()
    batch.run_local(np.arange(p), X, u_local, y, loss, 0.2, 1.5)
    u = view.copy()
    for j in range(p):
        before = one_by_one.contribution.copy()
        one_by_one.step(j, X[j], u, y, loss, 0.2, 1.5)
        u += one_by_one.contribution - before
    np.testing.assert_array_equal(batch.index, one_by_one.index)
    np.testing.assert_allclose(batch.weights, one_by_one.weights, rtol=0, atol=1e-13)
    np.testing.assert_allclose(u_local, u, rtol=0, atol=1e-12)
    np.testing.assert_allclose(u_local - view, batch.contribution, atol=1e-12)


def test_pipeline_defaults_and_the_derived_staleness_bound():
    free = AsyConfig.build(8, 2)                   # PIPELINE, τ = 2 pipelines per peer
    assert (free.depth, free.batch) == (32, 16) and free.staleness == 2 * 1 * 32
    five = AsyConfig.build(8, 5)
    assert five.depth == 32 and five.staleness == 2 * 4 * 32
    # τ ≤ p/16 (10 here), the pipeline sized to it (two per other worker), credit
    # ≤ 1/8 of a shard
    small = AsyConfig.build(8, 2, n_features=160)
    assert (small.depth, small.batch, small.staleness) == (5, 5, 10)
    tiny = AsyConfig.build(8, 4, n_features=40)
    assert (tiny.depth, tiny.batch, tiny.staleness) == (1, 1, 2)
    serial = AsyConfig.build(2, 2, n_features=10)   # p < 16: τ = 0
    assert (serial.depth, serial.batch, serial.staleness) == (1, 1, 0)
    large = AsyConfig.build(8, 2, n_features=10_000)
    assert (large.depth, large.batch, large.staleness) == (32, 16, 64)
    # on large p the depth grows to p/256 (a power of two, at most 512), τ with it
    wide = AsyConfig.build(8, 2, n_features=100_000)
    assert (wide.depth, wide.batch, wide.staleness) == (256, 128, 512)
    huge = AsyConfig.build(8, 2, n_features=1_000_000)
    assert (huge.depth, huge.batch, huge.staleness) == (512, 256, 1024)
    eleven = AsyConfig.build(16, 11, n_features=8192)   # τ ≤ p/16 sizes the depth
    assert (eleven.depth, eleven.batch, eleven.staleness) == (24, 12, 480)
    bounded = AsyConfig.build(8, 3, staleness=3)    # a small τ feeds no pipeline
    assert (bounded.depth, bounded.batch, bounded.staleness) == (1, 1, 3)
    wider = AsyConfig.build(8, 2, staleness=40)
    assert (wider.depth, wider.batch, wider.staleness) == (20, 10, 40)
    unbounded = AsyConfig.build(8, 2, staleness=None)
    assert unbounded.staleness is None and unbounded.depth == 32
    # a given pipeline is taken as it is, under any bound (the server's credit gate
    # keeps τ by granting less than the depth where it must)
    given = AsyConfig.build(8, 2, staleness=1, window=2, batch=4)
    assert (given.depth, given.batch, given.staleness) == (8, 4, 1)
    ServerState(3, 2, given.staleness, given.depth, given.batch)
    window_only = AsyConfig.build(8, 2, window=1)   # the same depth in one push
    assert (window_only.depth, window_only.batch, window_only.staleness) == (32, 32, 64)
    plain = AsyConfig.build(8, 2, window=1, batch=1)
    assert (plain.depth, plain.batch, plain.staleness) == (1, 1, 2)
    with pytest.raises(InputError, match="window must be ≥ 1"):
        AsyConfig.build(8, 2, window=0)
    with pytest.raises(InputError, match="staleness must be ≥ 0"):
        AsyConfig.build(8, 2, staleness=-1)
    with pytest.raises(InputError, match="1 ≤ batch ≤ depth"):
        ServerState(3, 2, 1, depth=2, batch=3)



def test_budgets_adapt_where_there_are_peers_to_share_s_with():
    """"auto" budgets adapt for q ≥ 2 and are fixed for one worker, whose budget is
    s under either rule (re-ranking its kept set at every view was half of its
    server's time per request); groups keep fixed budgets; a rule given is kept."""
    assert AsyConfig.build(8, 2, n_features=1000).adaptive
    lone = AsyConfig.build(8, 1, n_features=1000)
    assert not lone.adaptive and lone.capacities == [8] and lone.budgets == [8]
    assert AsyConfig.build(8, 1, n_features=1000, budget="adaptive").capacities == [8]
    assert AsyConfig.build(8, 1, n_features=1000, budget="adaptive").adaptive
    assert not AsyConfig.build(8, 2, n_features=1000, budget="fixed").adaptive
    assert not AsyConfig.build(8, 2, n_features=1000, s2=4).adaptive


def test_cheap_steps_deepen_the_automatic_pipeline_within_the_bound():
    """``for_step``: a push carries about ``PUSH_SECONDS`` of kernel time once steps
    are cheap (the paper's size: 6–15 µs a step, 2 × 128 steps, τ = 512 = p/16),
    never shallower than the pipeline sized for p, never past the bound's limits, and
    a pipeline or bound the user gave is kept."""
    paper = AsyConfig.build(64, 2, n_features=8192)
    assert (paper.depth, paper.batch, paper.staleness) == (32, 16, 64)
    cheap = paper.for_step(7.5e-6)
    assert (cheap.depth, cheap.batch, cheap.staleness) == (256, 128, 512)
    assert cheap.step_seconds == 7.5e-6 and cheap.sized_for == 8192
    middling = paper.for_step(3.8e-5)   # n = 2000, s = 256: 53 steps a push
    assert (middling.depth, middling.batch, middling.staleness) == (106, 53, 212)
    # not rounded to a power of two: a step timed a little cheaper deepens a little
    assert paper.for_step(3.1e-5).depth == 130 and paper.for_step(3.2e-5).depth == 126
    dear = paper.for_step(1e-3)       # dear steps: as sized for p
    assert (dear.depth, dear.batch, dear.staleness) == (32, 16, 64)
    huge = AsyConfig.build(8, 2, n_features=1_000_000).for_step(1e-7)   # ≤ MAX_DEPTH
    assert (huge.depth, huge.batch, huge.staleness) == (512, 256, 1024)
    eleven = AsyConfig.build(16, 11, n_features=8192).for_step(1e-7)    # τ ≤ p/16
    assert (eleven.depth, eleven.batch, eleven.staleness) == (24, 12, 480)
    small = AsyConfig.build(8, 2, n_features=160).for_step(1e-7)   # ≤ 1/8 of a shard
    assert (small.depth, small.batch, small.staleness) == (5, 5, 10)
    solo = AsyConfig.build(8, 1, n_features=8192)
    # one worker: τ = 0, its own long pushes (two blocks each), two in flight (a
    # server in another process answers one while it steps on)
    assert (solo.depth, solo.batch, solo.staleness) == (1024, 512, 0)
    for step in (1e-7, 1e-3):
        alone = solo.for_step(step)
        assert (alone.depth, alone.batch, alone.staleness) == \
            (solo.depth, solo.batch, 0)
    for kept in (AsyConfig.build(8, 2, n_features=8192, window=2, batch=4),
                 AsyConfig.build(8, 2, n_features=8192, staleness=40),
                 AsyConfig.build(8, 2)):   # p not known yet (a ZeroMQ server)
        assert kept.for_step(1e-7) is kept
    assert paper.for_step(0.0) is paper and paper.for_step(float("nan")) is paper
    # p learnt later keeps the step the pipeline was sized for
    assert cheap.for_features(8192) is cheap
    assert cheap.for_features(16384).n_features == 16384


def test_time_a_step_times_the_worker_kernel():
    from asyos.datasets import make_regression
    from asyos.solvers.asy import shard_of, time_a_step, warm_worker
    from asyos.streams import as_stream

    problem = make_regression(p=600, s=10, n=200, seed=1)
    config = AsyConfig.build(10, 2, n_features=600)
    shard = shard_of(as_stream(problem.X), config, 0)
    warm_worker(shard, config)
    assert 0.0 < time_a_step(shard, problem.y, config) < 0.1
    # data the kernel refuses is not timed: the run says so, naming the worker
    X = problem.X.copy()
    X[:, 0] *= 1e200
    refused = shard_of(as_stream(X), config, 0)
    assert time_a_step(refused, problem.y, config) == 0.0


def test_time_a_step_times_a_second_run_over_the_first_block(monkeypatch):
    """The first run over a block from u = 0 keeps nearly every arrival; the step the
    pipeline is sized for is the second run's, from the state the first one left (a
    clock that the kernel's runs advance by 5 s, then 1 s)."""
    from asyos.datasets import make_regression
    from asyos.solvers import asy
    from asyos.streams import as_stream

    problem = make_regression(p=600, s=10, n=200, seed=1)
    config = AsyConfig.build(10, 2, n_features=600)
    shard = asy.shard_of(as_stream(problem.X), config, 0)
    clock, runs, views = [0.0], [], []

    def counted(kept_set):
        def make(*args, **kwargs):
            kept, blocks = kept_set(*args, **kwargs)
            run_local = kept.run_local

            def timed(index, block, u, *rest):
                views.append(u.copy())
                run_local(index, block, u, *rest)
                runs.append(index.size)
                clock[0] += 5.0 if len(runs) == 1 else 1.0
            kept.run_local = timed
            return kept, blocks
        return make
    monkeypatch.setattr(asy, "kept_set", counted(asy.kept_set))
    monkeypatch.setattr(asy.time, "perf_counter", lambda: clock[0])
    step = asy.time_a_step(shard, problem.y, config)
    assert len(runs) == 2 and runs[0] == runs[1] == shard.stream.block_size
    assert step == pytest.approx(1.0 / runs[1])
    assert not views[0].any() and views[1].any()   # from where the first run left u


def _drive(loop, u, batch, stop_after=None):
    """A single worker whose views are exact (q = 1): returns its last Push / Final."""
    request, pushes, last = next(loop), 0, None
    while True:
        if request == "pull":   # exact views, credit for a whole batch
            request = loop.send((u, 0, batch, 0, 0.0))
        elif hasattr(request, "delta"):
            u = u + request.delta
            pushes, last = pushes + 1, request
            if pushes == stop_after:
                return last, u
            request = next(loop)
        else:
            return request, u


@pytest.mark.parametrize("rule", ["magnitude", "fitted"])
@pytest.mark.parametrize("batch", [1, 3])
def test_a_resumed_worker_continues_exactly_where_its_predecessor_stopped(batch, rule):
    from asyos.datasets import make_regression
    from asyos.solvers.worker_loop import WorkerPlan, worker_loop
    from asyos.streams import ArrayStream

    problem = make_regression(p=120, s=6, n=50, seed=5)
    stream = ArrayStream(problem.X, block_size=16)

    def loop(resume=None):
        return worker_loop(stream, problem.y,
                           WorkerPlan(6, Loss.SQUARED, 0.3, 1.5, 2, batch, rule),
                           resume=resume)

    start = np.zeros(50)
    whole, _ = _drive(loop(), start, batch)
    stopped, u = _drive(loop(), start, batch, stop_after=150 // batch)
    assert 120 < stopped.position < 240
    resumed, _ = _drive(loop((stopped.selected, stopped.weights, stopped.position)), u,
                        batch)
    np.testing.assert_array_equal(resumed.selected, whole.selected)
    np.testing.assert_allclose(resumed.weights, whole.weights, rtol=0, atol=1e-9)
    assert resumed.steps == whole.steps == 240


def test_a_worker_resumed_in_its_closing_sweep_offers_only_what_is_left_of_it():
    """Nothing lost, nothing doubled: the passes and the sweep's arrivals are counted
    once, whether the sweep ran in one worker or was split between two."""
    from asyos.datasets import make_regression
    from asyos.solvers.worker_loop import WorkerPlan, worker_loop
    from asyos.streams import ArrayStream

    problem = make_regression(p=120, s=6, n=50, seed=5)
    stream = ArrayStream(problem.X, block_size=16)
    plan = WorkerPlan(6, Loss.SQUARED, 0.3, 1.5, 2, 1, "fitted", sweep=8)
    start = np.zeros(50)
    whole, _ = _drive(worker_loop(stream, problem.y, plan), start, 1)
    assert whole.steps == 240 + 8   # two passes, then the sweep's 8 arrivals
    stopped, u = _drive(worker_loop(stream, problem.y, plan), start, 1, stop_after=243)
    assert stopped.position == 243   # three arrivals into the sweep
    resumed, u = _drive(worker_loop(stream, problem.y, plan, resume=(
        stopped.selected, stopped.weights, stopped.position)), u, 1)
    assert resumed.steps == 248
    np.testing.assert_allclose(resumed.contribution, resumed.weights @
                               stream.columns(resumed.selected), atol=1e-9)


@pytest.mark.parametrize("stop_after", [243, 251])
def test_a_sweep_in_rounds_is_resumed_in_the_round_it_was_stopped_in(stop_after):
    """Two rounds of 8 arrivals, each from a new pull: a worker stopped three
    arrivals into the first round or into the second is replaced by one that offers
    what is left of that round and the rounds after it, nothing more."""
    from asyos.datasets import make_regression
    from asyos.solvers.worker_loop import WorkerPlan, worker_loop
    from asyos.streams import ArrayStream

    problem = make_regression(p=120, s=6, n=50, seed=5)
    stream = ArrayStream(problem.X, block_size=16)
    plan = WorkerPlan(6, Loss.SQUARED, 0.3, 1.5, 2, 1, "fitted", sweep=8,
                      sweep_rounds=2)
    whole, _ = _drive(worker_loop(stream, problem.y, plan), np.zeros(50), 1)
    assert whole.steps == 240 + 2 * 8
    stopped, u = _drive(worker_loop(stream, problem.y, plan), np.zeros(50), 1,
                        stop_after=stop_after)
    resumed, u = _drive(worker_loop(stream, problem.y, plan, resume=(
        stopped.selected, stopped.weights, stopped.position)), u, 1)
    assert resumed.steps == 256


def test_a_round_that_finds_fewer_than_its_size_ends_the_sweep():
    """A round of 200 arrivals over a shard of 120 features, 6 of them kept: it
    offers the 114 others, and no second round follows (it would find no more)."""
    from asyos.datasets import make_regression
    from asyos.solvers.worker_loop import WorkerPlan, worker_loop
    from asyos.streams import ArrayStream

    problem = make_regression(p=120, s=6, n=50, seed=5)
    stream = ArrayStream(problem.X, block_size=16)
    plan = WorkerPlan(6, Loss.SQUARED, 0.3, 1.5, 2, 1, "fitted", sweep=200,
                      sweep_rounds=2)
    final, _ = _drive(worker_loop(stream, problem.y, plan), np.zeros(50), 1)
    assert final.steps == 240 + 120 - 6


def test_a_push_takes_as_few_steps_as_keep_its_own_cost_under_a_tenth():
    from asyos.solvers.worker_loop import PushSize

    size = PushSize(16)
    assert size.size == 16                        # until a push was timed
    size.timed(16, kernel=16 * 100e-6, outside=20e-6)   # 100 µs steps, 20 µs outside
    assert size.size == 2                         # 10 · 20 / 100
    for _ in range(50):                           # steps got cheap: the cap
        size.timed(2, kernel=2 * 1e-6, outside=100e-6)
    assert size.size == 16
    for _ in range(50):                           # nothing outside: one step a push
        size.timed(16, kernel=16e-3, outside=0.0)
    assert size.size == 1
    fixed = PushSize(8, adaptive=False)
    fixed.timed(8, kernel=1.0, outside=0.0)
    assert fixed.size == 8


def _pushes(loop, u, credit, drift=None):
    """Drive ``loop`` as ``_drive`` does, ``credit`` steps a view; ``drift(k)``: added
    to the k-th view (a view that the others' steps made worse).  Returns the pushes
    and the Final."""
    request, pushes = next(loop), []
    while True:
        if request == "pull":
            view = u if drift is None else u + drift(len(pushes))
            request = loop.send((view, 0, credit, 0, 0.0))
        elif hasattr(request, "delta"):
            u = u + request.delta
            pushes.append(request)
            request = next(loop)
        else:
            return pushes, request


@pytest.mark.parametrize("rule", ["magnitude", "fitted"])
def test_a_push_goes_on_into_the_next_block_and_the_next_pass(rule):
    """A push's fixed cost is paid per push, not per block: one that ends a block
    with room left takes the next block's arrivals from the same view, and one that
    ends a pass the next pass's.  Every arrival is stepped once, in the stream's
    order, and a lone worker's result is the one of pushes of a single step."""
    from asyos.datasets import make_regression
    from asyos.solvers.worker_loop import WorkerPlan, worker_loop
    from asyos.streams import ArrayStream

    problem = make_regression(p=40, s=4, n=50, seed=5)
    stream = ArrayStream(problem.X, block_size=16)

    def run(batch, credit):
        plan = WorkerPlan(4, Loss.SQUARED, 0.3, 1.5, 2, batch, rule)
        return _pushes(worker_loop(stream, problem.y, plan), np.zeros(50), credit)

    pushes, final = run(12, 12)
    assert [push.features.size for push in pushes] == [12] * 6 + [8]
    np.testing.assert_array_equal(pushes[1].features, np.arange(12, 24))  # 2 blocks
    np.testing.assert_array_equal(pushes[3].features, [36, 37, 38, 39, *range(8)])
    np.testing.assert_array_equal(np.concatenate([p.features for p in pushes]),
                                  np.tile(np.arange(40), 2))
    assert [push.position for push in pushes] == [12, 24, 36, 48, 60, 72, 80]
    single, single_final = run(1, 1)
    assert len(single) == 80 and final.steps == single_final.steps == 80
    np.testing.assert_array_equal(final.selected, single_final.selected)
    np.testing.assert_allclose(final.weights, single_final.weights, rtol=0, atol=1e-9)
    # the credit a view grants bounds a push, wherever the blocks end
    pushes, _ = run(12, 5)
    assert {push.features.size for push in pushes} == {5}
    np.testing.assert_array_equal(pushes[3].features, np.arange(15, 20))


def test_a_push_over_two_blocks_moves_at_its_views_scale():
    """The fitted rule scales a worker's moves per view (halved where the loss at a
    view rose, ``FittedKeptSet._damping``).  A push that goes on into the next
    block is still from the same view: its moves there take the same scale, and the
    push equals one over a single block holding both (were the scale taken again at
    the block's start, from the view plus this push's own moves, it would have
    grown back)."""
    from asyos.datasets import make_regression
    from asyos.solvers.worker_loop import WorkerPlan, worker_loop
    from asyos.streams import ArrayStream

    problem = make_regression(p=32, s=4, n=50, seed=7)
    plan = WorkerPlan(4, Loss.SQUARED, 0.3, 1.5, 1, 32, "fitted", damping=0.25)

    def run(block_size):   # every view worse than the last: the scale falls
        stream = ArrayStream(problem.X, block_size=block_size)
        return _pushes(worker_loop(stream, problem.y, plan), np.zeros(50), 8,
                       drift=lambda k: -0.5 * k * problem.y)[1]

    split, whole = run(12), run(32)
    np.testing.assert_array_equal(split.selected, whole.selected)
    np.testing.assert_allclose(split.weights, whole.weights, rtol=0, atol=1e-9)
    np.testing.assert_allclose(split.contribution, whole.contribution, rtol=0,
                               atol=1e-9)
