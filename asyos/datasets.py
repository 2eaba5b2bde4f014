"""Synthetic problems of the paper's experiments (Yang et al., KDD 2016, Section 5).

Everything a problem needs is drawn from one ``np.random.default_rng(seed)`` in a fixed
order (X, support, values, then noise or the test set), so a seed fixes the problem and
the regression and classification problems with the same (n, p, s, seed) share X and w*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np

from .core.validate import check_int
from .errors import InputError
from .metrics import classification_error, recovery_error
from .streams import GaussianStream

__all__ = ["Problem", "StreamProblem", "make_bag_of_words", "make_classification",
           "make_rare_words", "make_regression", "paper_n", "stream_problem"]


def paper_n(s: int, p: int) -> int:
    """n = round(1.2 · s · log2 p), the paper's sample size (Yang et al., KDD 2016,
    Section 5; rounding it is our convention): s=100 gives 1316 at p=2000 and 1196 at
    p=1000."""
    s = check_int("s", s, 1)
    p = check_int("p", p, 1)
    return max(1, round(1.2 * s * math.log2(p)))


@dataclass(frozen=True, eq=False)  # eq=False: arrays make field-wise == ambiguous
class Problem:
    """A synthetic problem with its ground truth.

    ``support`` holds the sorted indices of the nonzeros of ``w_true``.  ``X_test`` and
    ``y_test`` are an independent test set (classification only, else None).
    """

    X: np.ndarray
    y: np.ndarray
    w_true: np.ndarray
    support: np.ndarray
    task: str
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    seed: object = None

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def s_true(self) -> int:
        return int(self.support.size)


def _check_sizes(p, s, n) -> tuple[int, int, int]:
    p = check_int("p", p, 1)
    s = check_int("s", s, 1)
    if s > p:
        raise InputError(f"s must be <= p (the number of features), got s={s}, p={p}")
    n = paper_n(s, p) if n is None else check_int("n", n, 1)
    return p, s, n


def _sparse_truth(rng, p: int, s: int) -> tuple[np.ndarray, np.ndarray]:
    """w* with exactly s nonzeros at uniform positions, values N(0,1).

    A N(0,1) draw is exactly 0 with probability 0; redraw anyway so that the
    "exactly s nonzeros" promise holds unconditionally.
    """
    support = np.sort(rng.choice(p, size=s, replace=False)).astype(np.int64)
    values = rng.standard_normal(s)
    while np.any(values == 0.0):
        zero = values == 0.0
        values[zero] = rng.standard_normal(int(zero.sum()))
    w = np.zeros(p)
    w[support] = values
    return w, support


def _check_noise(noise) -> float:
    if isinstance(noise, bool) or not isinstance(noise, Real) or not (
            math.isfinite(noise) and noise >= 0):
        raise InputError(f"noise must be a finite number >= 0, got {noise!r}")
    return float(noise)


def _sign(v: np.ndarray) -> np.ndarray:
    """sign with sign(0) = +1 (our convention; the paper does not say)."""
    return np.where(v >= 0.0, 1.0, -1.0)


def make_regression(p: int = 2000, s: int = 100, n: int | None = None,
                    noise: float = 0.1, seed=0) -> Problem:
    """The paper's regression: X iid N(0,1), y = X w* + N(0, noise²); n defaults to
    paper_n(s, p).

    Parameters
    ----------
    p : int
        Features.
    s : int
        True features: w* has s nonzeros at uniform positions, values N(0, 1).
    n : int, optional
        Samples (default ``paper_n(s, p)``).
    noise : float
        The standard deviation of the label noise.
    seed : int or numpy Generator seed
        For the draws.

    Returns
    -------
    Problem
        ``X``, ``y``, the truth (``w_true``, ``support``), ``task``, ``seed``.
    """
    p, s, n = _check_sizes(p, s, n)
    noise = _check_noise(noise)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w, support = _sparse_truth(rng, p, s)
    y = X @ w + float(noise) * rng.standard_normal(n)
    return Problem(X=X, y=y, w_true=w, support=support, task="regression", seed=seed)


def make_classification(p: int = 1000, s: int = 100, n: int | None = None,
                        seed=0) -> Problem:
    """The paper's classification: y = sign(X w*) (sign(0) = +1, no label noise) and
    an independent test set of the same size drawn the same way.

    Parameters
    ----------
    p, s, n, seed :
        As for ``make_regression``.

    Returns
    -------
    Problem
        ``X``, ``y``, the truth (``w_true``, ``support``), ``task``, ``seed``,
        and the test set ``X_test``, ``y_test``.
    """
    p, s, n = _check_sizes(p, s, n)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w, support = _sparse_truth(rng, p, s)
    y = _sign(X @ w)
    X_test = rng.standard_normal((n, p))
    y_test = _sign(X_test @ w)
    return Problem(X=X, y=y, w_true=w, support=support, task="classification",
                   X_test=X_test, y_test=y_test, seed=seed)


def _csc(n: int, p: int, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray):
    """The (n, p) CSC matrix of these entries (duplicates summed), int32 indices."""
    import scipy.sparse as sp

    X = sp.csc_matrix((vals, (rows, cols)), shape=(n, p))
    X.sum_duplicates()
    return X


def _planted_truth(rng, words: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """w* = ±2 on ``words`` (sorted), 0 elsewhere."""
    w = np.zeros(p)
    w[words] = rng.choice([-2.0, 2.0], words.size)
    return w, words


def make_rare_words(p: int = 100_000, n: int = 20_000, planted: int = 10,
                    words_per_row: int = 18, rate: float = 0.2, noise: float = 0.05,
                    seed=0) -> Problem:
    """A planted rare-word problem: each of n rows holds ``words_per_row`` words drawn
    uniformly from p (value 1), and each of ``planted`` planted words independently
    with probability ``rate``; y = X w* + N(0, noise²) with w* = ±2 on the planted
    words.  At p = 10⁶ about 70 % of the columns are empty and most others have one or
    two nonzeros: a scale-dependent rule keeps those (a one-nonzero column fits its
    row exactly), a scale-invariant one keeps the planted words.  (Each planted word
    appears independently: with a fixed number per row the planted columns would sum
    to a constant, and a model with an intercept would fit y with other columns.)
    X is scipy CSC.

    Parameters
    ----------
    p : int
        Words (columns).
    n : int
        Rows.
    planted : int
        The planted words.
    words_per_row : int
        Words drawn uniformly into each row.
    rate : float in (0, 1]
        The chance that a row holds each planted word.
    noise : float
        The standard deviation of the label noise.
    seed : int
        For the draws.

    Returns
    -------
    Problem
        ``X``, ``y``, the truth (``w_true``, ``support``), ``task``, ``seed``.
    """
    p, n = check_int("p", p, 1), check_int("n", n, 1)
    planted = check_int("planted", planted, 1, p + 1)
    words_per_row = check_int("words_per_row", words_per_row, 0)
    noise = _check_noise(noise)
    if not (isinstance(rate, Real) and 0.0 < rate <= 1.0):
        raise InputError(f"rate must be in (0, 1], got {rate!r}")
    rng = np.random.default_rng(seed)
    words = np.sort(rng.choice(p, planted, replace=False)).astype(np.int64)
    w, support = _planted_truth(rng, words, p)
    rows = np.repeat(np.arange(n), words_per_row)
    cols = rng.integers(0, p, rows.size)
    hit_rows, hit = np.nonzero(rng.random((n, planted)) < rate)
    X = _csc(n, p, np.r_[rows, hit_rows], np.r_[cols, words[hit]],
             np.ones(rows.size + hit.size))
    X.data[:] = 1.0   # a word drawn twice in a row is still one word
    y = X @ w + noise * rng.standard_normal(n)
    return Problem(X=X, y=y, w_true=w, support=support, task="regression", seed=seed)


def make_bag_of_words(p: int = 100_000, n: int = 30_000, words: float = 400.0,
                      informative: int = 20, noise: float = 0.1, seed=0) -> Problem:
    """A Zipf bag of words: n documents of about ``words`` draws (Poisson) from p
    words, word of rank r drawn with probability ∝ 1/(r + 10) (frequent words
    anywhere in 0..p-1); an entry is log(1 + count) times a random idf-like factor in
    [1, 2); y = X w* + N(0, noise²) with w* = ±2 on ``informative`` mid-frequency
    words (ranks 100 to 2000, in 0.2 %–6 % of the documents).  X is scipy CSC.

    Parameters
    ----------
    p : int
        Words (columns), more than 2000.
    n : int
        Documents (rows).
    words : float
        The mean number of draws per document.
    informative : int
        The words with a nonzero weight.
    noise, seed :
        As for ``make_rare_words``.

    Returns
    -------
    Problem
        As ``make_rare_words``'s.
    """
    p, n = check_int("p", p, 2001), check_int("n", n, 1)
    informative = check_int("informative", informative, 1, 1900)
    noise = _check_noise(noise)
    if not (isinstance(words, Real) and words > 0):
        raise InputError(f"words must be a number > 0, got {words!r}")
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / (np.arange(p) + 10.0))
    cdf /= cdf[-1]
    word_of_rank = rng.permutation(p)
    ranks = np.unique(np.geomspace(100, 2000, informative).astype(np.int64))
    ranks = np.r_[ranks, np.setdiff1d(np.arange(100, 2001), ranks)[
        :informative - ranks.size]]
    w, support = _planted_truth(rng, np.sort(word_of_rank[ranks]), p)
    doc = np.repeat(np.arange(n), rng.poisson(words, n))
    word = word_of_rank[np.searchsorted(cdf, rng.random(doc.size))]
    X = _csc(n, p, doc, word, np.ones(doc.size))
    X.data = np.log1p(X.data) * (1.0 + rng.random(X.data.size))
    y = X @ w + noise * rng.standard_normal(n)
    return Problem(X=X, y=y, w_true=w, support=support, task="regression", seed=seed)


@dataclass(frozen=True, eq=False)
class StreamProblem:
    """A synthetic problem whose design is a ``GaussianStream``: O(n·s) memory at any p.

    Same protocol as ``make_regression`` / ``make_classification``,
    different random draws: column j comes from ``rng([design_seed, j])``, so a process
    (an MPI worker, say) generates only the columns it reads.  y needs only the s
    support columns.
    """

    stream: GaussianStream
    y: np.ndarray
    w_true: np.ndarray          # (p,)
    support: np.ndarray
    task: str
    test_stream: GaussianStream | None = None
    y_test: np.ndarray | None = None

    def evaluate(self, selected) -> dict:
        """``metrics.evaluate`` computed from the selected and true columns only.

        The refit and the errors involve only columns in selected ∪ support (w* is zero
        elsewhere), so they are exact on that small sub-design.
        """
        selected = np.unique(np.asarray(selected, dtype=np.int64))
        union = np.union1d(selected, self.support)
        X = self.stream.columns(union).T
        position = np.searchsorted(union, selected)
        hits = np.intersect1d(selected, self.support).size
        out = {"recall": hits / self.support.size}
        if self.task == "regression":
            out["recovery_error"] = recovery_error(X, self.y, position,
                                                   self.w_true[union])
        else:
            X_test = self.test_stream.columns(union).T
            out["test_error"] = classification_error(X, self.y, position, X_test,
                                                     self.y_test)
        return out


def stream_problem(task: str = "regression", p: int = 2000, s: int = 100,
                   n: int | None = None, noise: float = 0.1, seed: int = 0,
                   **stream_options) -> StreamProblem:
    """The paper's synthetic problem with a generated design (``StreamProblem``).

    ``stream_options`` (block_size, shuffle, seed of the order) go to the stream; the
    order's seed defaults to ``seed``.
    """
    p, s, n = _check_sizes(p, s, n)
    seed = check_int("seed", seed, 0)
    noise = _check_noise(noise)
    if task not in ("regression", "classification"):
        raise InputError(f"unknown task {task!r}; expected regression or classification")
    stream_options.setdefault("seed", seed)
    stream = GaussianStream(n, p, design_seed=2 * seed, **stream_options)
    w, support = _sparse_truth(np.random.default_rng([seed, p, s]), p, s)
    u = stream.columns(support).T @ w[support]
    if task == "regression":
        noise_rng = np.random.default_rng([seed, p, s, 1])
        return StreamProblem(stream, u + noise * noise_rng.standard_normal(n),
                             w, support, task)
    test = GaussianStream(n, p, design_seed=2 * seed + 1)
    y_test = _sign(test.columns(support).T @ w[support])
    return StreamProblem(stream, _sign(u), w, support, task, test, y_test)
