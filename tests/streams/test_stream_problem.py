"""Generated designs: any process can make any column; evaluation needs only a few."""

import numpy as np
import pytest

from asyos.datasets import Problem, stream_problem
from asyos.errors import InputError
from asyos.metrics import evaluate
from asyos.streams import GaussianStream


def test_columns_do_not_depend_on_order_block_or_shard():
    stream = GaussianStream(30, 50, design_seed=3, block_size=7)
    X = stream.columns(np.arange(50)).T
    assert np.abs(X.mean()) < 0.1 and abs(X.std() - 1) < 0.1
    shuffled = GaussianStream(30, 50, design_seed=3, block_size=4, shuffle=True, seed=9)
    for index, block in shuffled.shard(3, 1).blocks(epoch=2):
        np.testing.assert_array_equal(block, X[:, index].T)
    assert not np.array_equal(X, GaussianStream(30, 50, design_seed=4).columns(
        np.arange(50)).T)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_evaluate_from_few_columns_equals_the_dense_evaluation(task):
    problem = stream_problem(task, p=300, s=12, seed=5)
    X = problem.stream.columns(np.arange(300)).T
    u = X @ problem.w_true
    if task == "regression":
        assert np.std(problem.y - u) == pytest.approx(0.1, rel=0.3)
        dense = Problem(X=X, y=problem.y, w_true=problem.w_true,
                        support=problem.support, task=task, seed=5)
    else:
        np.testing.assert_array_equal(problem.y, np.where(u >= 0, 1.0, -1.0))
        X_test = problem.test_stream.columns(np.arange(300)).T
        dense = Problem(X=X, y=problem.y, w_true=problem.w_true,
                        support=problem.support, task=task, X_test=X_test,
                        y_test=problem.y_test, seed=5)
    assert problem.support.size == 12 and problem.stream.n_samples == 118
    selected = np.concatenate([problem.support[:8], [0, 1, 2, 299]])
    expected = evaluate(dense, np.unique(selected))
    got = problem.evaluate(selected)
    assert got.keys() == expected.keys()
    for key in got:
        assert got[key] == pytest.approx(expected[key], rel=1e-9, abs=1e-12)


def test_bad_arguments_are_named():
    with pytest.raises(InputError, match="unknown task 'ranking'"):
        stream_problem("ranking")
    with pytest.raises(InputError, match="noise"):
        stream_problem(noise=-1.0)
