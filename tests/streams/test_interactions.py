"""Generated polynomial feature spaces: exactly the dense expansion, never materialised."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.errors import InputError
from asyos.solvers.sequential import fit_os
from asyos.streams import ArrayStream, InteractionStream, interaction_count


def dense_expansion(B: np.ndarray, degree: int):
    """(n, p) matrix and its terms, by plain loops in the documented order."""
    d = B.shape[1]
    terms = [(i,) for i in range(d)]
    if degree >= 2:
        terms += list(itertools.combinations_with_replacement(range(d), 2))
    if degree >= 3:
        terms += list(itertools.combinations_with_replacement(range(d), 3))
    X = np.column_stack([np.prod(B[:, list(t)], axis=1) for t in terms])
    return X, terms


@pytest.mark.parametrize("d, degree", [(1, 2), (5, 1), (5, 2), (7, 3), (12, 3)])
def test_columns_are_the_dense_expansion(d, degree):
    B = np.random.default_rng(d).standard_normal((9, d))
    X, terms = dense_expansion(B, degree)
    stream = InteractionStream(B, degree, block_size=7)
    assert stream.n_features == X.shape[1] == interaction_count(d, degree)
    assert stream.terms(np.arange(stream.n_features)) == terms
    got = np.concatenate([block for _, block in stream.blocks(0)])
    np.testing.assert_allclose(got, X.T, rtol=1e-14)
    np.testing.assert_allclose(stream.columns([stream.n_features - 1, 0]),
                               X[:, [-1, 0]].T, rtol=1e-14)


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 40), degree=st.integers(1, 3), q=st.integers(1, 7))
def test_shards_cover_every_feature_once(d, degree, q):
    stream = InteractionStream(np.ones((2, d)), degree)
    q = min(q, stream.n_features)
    seen = np.concatenate([stream.shard(q, t).feature_indices() for t in range(q)])
    assert np.array_equal(np.sort(seen), np.arange(stream.n_features))


def test_decoding_is_exact_at_two_million_features():
    stream = InteractionStream(np.ones((3, 2000)))
    assert stream.n_features == 2_003_000
    last_pair, first_pair = stream.n_features - 1, 2000
    assert stream.terms([first_pair, first_pair + 1999, first_pair + 2000, last_pair]) \
        == [(0, 0), (0, 1999), (1, 1), (1999, 1999)]
    k = np.random.default_rng(0).integers(2000, stream.n_features, 5000)
    i, j = (np.array(v) for v in zip(*stream.terms(k), strict=True))
    assert np.all(i <= j)
    before = 2000 + i * 2000 - i * (i - 1) // 2       # pairs before row i
    np.testing.assert_array_equal(before + (j - i), k)


def test_os_finds_a_planted_interaction():
    rng = np.random.default_rng(3)
    B = rng.standard_normal((300, 30))
    y = 2.0 * B[:, 4] * B[:, 11] - 1.5 * B[:, 7]
    stream = InteractionStream(B)
    target = [stream.terms(np.arange(stream.n_features)).index(t) for t in [(4, 11), (7,)]]
    result = fit_os(stream, y, 5, epochs=3)
    assert set(target) <= set(result.selected.tolist())
    assert stream.names(target) == ["x4*x11", "x7"]


def test_a_stream_base_and_bad_degrees():
    B = np.random.default_rng(1).standard_normal((6, 4))
    from_stream = InteractionStream(ArrayStream(B), 2, dtype="float32")
    assert next(from_stream.blocks(0))[1].dtype == np.float32
    np.testing.assert_allclose(from_stream.columns([4]), (B[:, 0] ** 2)[None], rtol=1e-6)
    for bad in (0, 4):
        with pytest.raises(InputError, match="degree"):
            InteractionStream(B, bad)
    with pytest.raises(InputError, match="not in this stream"):
        from_stream.terms([10_000])


def test_cli_degree_selects_among_products_of_the_data(tmp_path):
    import json
    import subprocess
    import sys

    rng = np.random.default_rng(3)
    B = rng.standard_normal((300, 30))
    np.save(tmp_path / "B.npy", B)
    np.save(tmp_path / "y.npy", 2.0 * B[:, 4] * B[:, 11] - 1.5 * B[:, 7])
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--data",
                           str(tmp_path / "B.npy"), "--labels", str(tmp_path / "y.npy"),
                           "-s", "5", "--degree", "2", "--epochs", "3", "--quiet",
                           "--out", str(tmp_path / "r.json")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["data"]["n_features"] == 30 + 30 * 31 // 2
    assert {"x4*x11", "x7"} <= set(result["feature_names"])
    assert "x4*x11" in proc.stdout
