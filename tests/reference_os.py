"""A plain numpy OS (Yang, Fujimaki, Kusumura & Liu, KDD 2016, Algorithm 1), written
independently of the compiled kernel.

It is the oracle of the kernel tests.  It follows Algorithm 1 literally, recomputing
u = X_S W from scratch at every step, plus our conventions where the paper is silent
(docs/algorithms.md, "Conventions where the papers are silent"): a revisited feature
takes a plain gradient step, and the newcomer takes the dropped feature's slot; ties
drop the newcomer, then the lowest slot.
"""

from itertools import combinations

import numpy as np


def grad_u(loss, u, y):
    n = u.shape[0]
    if loss == "squared":
        return (u - y) / n
    if loss == "squared_hinge":
        return -np.maximum(0.0, 1.0 - y * u) * y / n
    z = y * u  # logistic: -y σ(-y u) / n, σ(-z) = 1/(1+e^z)
    return -y / (1.0 + np.exp(z)) / n


def value(loss, u, y):
    n = u.shape[0]
    if loss == "squared":
        return 0.5 * np.sum((u - y) ** 2) / n
    if loss == "squared_hinge":
        return 0.5 * np.sum(np.maximum(0.0, 1.0 - y * u) ** 2) / n
    return np.sum(np.logaddexp(0.0, -y * u)) / n


def os_step(X, y, S, W, j, s, eta, m, loss, u=None):
    """One step with the gradient at ``u`` (default X_S W: sequential OS; an Asy-OS
    worker passes its possibly stale view û); returns (S, W, dropped)."""
    if u is None:
        u = X[:, S] @ W if S else np.zeros(X.shape[0])
    g = grad_u(loss, u, y)
    gS = X[:, S].T @ g if S else np.zeros(0)
    if j in S:
        step = np.full(len(S), eta / m)
        step[S.index(j)] = eta
        return S, W - step * gS, None
    W = np.append(W - (eta / m) * gS, -eta * (X[:, j] @ g))
    S = S + [j]
    if len(S) <= s:
        return S, W, None
    a = np.abs(W)
    k = len(S) - 1 if a[-1] <= a.min() else int(np.argmin(a))
    dropped = S[k]
    S[k], W[k] = S[-1], W[-1]
    return S[:-1], W[:-1], dropped


def os_reference(X, y, s, eta, m=1.0, epochs=2, loss="squared", order=None):
    p = X.shape[1]
    order = np.arange(p) if order is None else order
    S, W = [], np.zeros(0)
    for _ in range(epochs):
        for j in order:
            S, W, _ = os_step(X, y, S, W, int(j), s, eta, m, loss)
    return S, W


def toy_problem(loss, n=50, p=70, s=6, seed=0):
    """Gaussian X, an s-sparse truth, labels for ``loss`` (signs for classification)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w = np.zeros(p)
    w[rng.choice(p, s, replace=False)] = rng.standard_normal(s)
    y = X @ w + 0.1 * rng.standard_normal(n)
    if loss != "squared":
        y = np.where(y >= 0, 1.0, -1.0)
    return X, y


def brute_force(v, groups, s1, s2):
    """The bi-level projection's oracle: max Σ_{i∈S} v_i² over |S| ≤ s1 meeting ≤ s2 groups, by enumeration."""
    best = 0.0
    for size in range(min(s1, len(v)) + 1):
        for subset in combinations(range(len(v)), size):
            if len({groups[i] for i in subset}) <= s2:
                best = max(best, float(sum(v[i] ** 2 for i in subset)))
    return best
