"""Standardizing a block in one compiled read of each row (``_standardize_rows``)
gives numpy's ``(x - mean) / std`` with its rules for constant columns."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.streams import ArrayStream
from asyos.streams.standardize import Standardized, column_stats, standardize


def numpy_stats(block, center, scale):
    """The rule as numpy states it (the form this module had before the kernel)."""
    mean = block.mean(axis=1) if center else np.zeros(len(block))
    spread = np.sqrt(np.mean((block - mean[:, None]) ** 2, axis=1)) if scale \
        else np.ones(len(block))
    constant = (block.max(axis=1) == block.min(axis=1)) & center
    mean[constant] = block[constant, 0]
    spread[constant | (spread == 0.0)] = 1.0
    return mean, spread


@settings(max_examples=80, deadline=None)
@given(b=st.integers(1, 6), n=st.integers(1, 50), center=st.booleans(),
       scale=st.booleans(), constant=st.integers(0, 6), seed=st.integers(0, 99))
def test_the_kernel_is_numpys_rule(b, n, center, scale, constant, seed):
    rng = np.random.default_rng(seed)
    block = rng.standard_normal((b, n)) * rng.uniform(0.1, 1e3, (b, 1)) + 5.0
    block[:min(constant, b)] = rng.standard_normal((min(constant, b), 1))  # constant
    mean, spread = column_stats(block, center, scale)
    want_mean, want_spread = numpy_stats(block, center, scale)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(spread, want_spread, rtol=1e-12)
    z = standardize(block, center, scale)
    np.testing.assert_allclose(z, (block - want_mean[:, None]) / want_spread[:, None],
                               rtol=1e-9, atol=1e-9)
    if center:   # a constant column is exactly zero, whatever its value
        assert not z[:min(constant, b)].any()


def test_nan_and_inf_come_through_to_be_refused():
    block = np.array([[1.0, np.nan, 3.0], [2.0, 2.0, np.inf], [np.nan] * 3])
    z = standardize(block)
    assert np.isnan(z[0, 1]) and not np.isfinite(z[1]).all() and np.isnan(z[2]).all()
    with pytest.raises(Exception, match="NaN or inf"):
        list(Standardized(ArrayStream(block.T.copy())).blocks())


def test_a_standardized_stream_reads_into_its_pool_and_keeps_what_is_held():
    X = np.random.default_rng(3).standard_normal((40, 30)) * 7 + 2
    stream = Standardized(ArrayStream(X, block_size=4), center=True, scale=False)
    stream.prefetch = False
    kept = list(stream.blocks())
    for index, block in kept:
        np.testing.assert_allclose(block, X[:, index].T - X[:, index].T.mean(axis=1,
                                   keepdims=True), atol=1e-12)
    assert len({id(block) for _, block in kept}) == len(kept)
