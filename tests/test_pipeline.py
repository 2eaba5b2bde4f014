"""The Asy-OS worker's pipelined side: its local view and its compiled batch of steps."""

import numpy as np
import pytest

from asyos.core.kept_set import KeptSet
from asyos.core.losses import Loss
from asyos.errors import InputError
from asyos.solvers.asy import AsyConfig
from asyos.solvers.worker_loop import LocalView


def test_local_view_is_the_newest_view_plus_own_unanswered_pushes():
    view = LocalView(3, window=2)
    assert view.requested() == 0
    assert view.must_wait                          # no view yet
    view.answered(np.array([1.0, 2.0, 3.0]), 0, through=0)
    assert not view.must_wait and view.current()[1] == 0
    assert view.requested(np.array([1.0, 0.0, 0.0])) == 1   # push 1 asks for a view
    assert view.requested(np.array([0.0, 1.0, 0.0])) == 2   # push 2: window full
    assert view.must_wait
    np.testing.assert_array_equal(view.current()[0], [2.0, 3.0, 3.0])
    view.answered(np.array([10.0, 10.0, 10.0]), 5, through=1)  # has push 1, not 2
    u_hat, version = view.current()
    np.testing.assert_array_equal(u_hat, [10.0, 11.0, 10.0])
    assert version == 5 and view.unanswered == 1 and not view.must_wait
    view.requested(np.array([0.0, 0.0, 1.0]))     # push 3; then the answer to push 2
    view.answered(np.array([20.0, 20.0, 20.0]), 9, through=3)  # is lost: covered
    assert view.unanswered == 0
    np.testing.assert_array_equal(view.current()[0], [20.0, 20.0, 20.0])


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


def test_pipeline_defaults_follow_the_staleness_bound():
    free = AsyConfig.build(8, 2)
    assert free.window > 1 and free.batch > 1
    bounded = AsyConfig.build(8, 2, staleness=3)
    assert bounded.window == bounded.batch == 1
    plain = AsyConfig.build(8, 2, window=1, batch=1)
    assert plain.window == plain.batch == 1
    for bad in ({"window": 2}, {"batch": 4}):
        with pytest.raises(InputError, match="staleness bound"):
            AsyConfig.build(8, 2, staleness=1, **bad)
    with pytest.raises(InputError, match="window must be ≥ 1"):
        AsyConfig.build(8, 2, window=0)


def _drive(loop, u, stop_after=None):
    """A single worker whose views are exact (q = 1): returns its last Push / Final."""
    request, pushes, last = next(loop), 0, None
    while True:
        if request == "pull":
            request = loop.send((u, 0))
        elif hasattr(request, "delta"):
            u = u + request.delta
            pushes, last = pushes + 1, request
            if pushes == stop_after:
                return last, u
            request = next(loop)
        else:
            return request, u


@pytest.mark.parametrize("batch", [1, 3])
def test_a_resumed_worker_continues_exactly_where_its_predecessor_stopped(batch):
    from asyos.datasets import make_regression
    from asyos.solvers.worker_loop import worker_loop
    from asyos.streams import ArrayStream

    problem = make_regression(p=120, s=6, n=50, seed=5)
    stream = ArrayStream(problem.X, block_size=16)

    def loop(resume=None):
        return worker_loop(stream, problem.y, 6, Loss.SQUARED, 0.3, 1.5, 2, batch,
                           resume=resume)

    start = np.zeros(50)
    whole, _ = _drive(loop(), start)
    stopped, u = _drive(loop(), start, stop_after=150 // batch)
    assert 120 < stopped.position < 240
    resumed, _ = _drive(loop((stopped.selected, stopped.weights, stopped.position)), u)
    np.testing.assert_array_equal(resumed.selected, whole.selected)
    np.testing.assert_allclose(resumed.weights, whole.weights, rtol=0, atol=1e-9)
    assert resumed.steps == whole.steps == 240
