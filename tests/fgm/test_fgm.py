"""FGM (Tan, Tsang & Wang, JMLR 2014): the prox, the APG subproblem against a generic
solver, the worst-case search against brute force, the global certificate, groups, the
implicit polynomial search, budgets, and support recovery on the paper's synthetic
protocol."""

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize

from asyos.core.losses import Loss, loss_grad, loss_value
from asyos.errors import InputError
from asyos.experiments.comparators import METHODS
from asyos.fgm import fit_fgm
from asyos.fgm.apg import apg, prox_squared_l21, subproblem_objective
from asyos.fgm.cutting_plane import FGMResult, check_fgm, dual_value, fgm, make_space
from asyos.fgm.search import PolynomialSpace, StreamSpace
from asyos.streams import InteractionStream, as_stream


def _problem(n, m, k, seed, task="classification", noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, m))
    w = np.zeros(m)
    support = np.sort(rng.choice(m, k, replace=False))
    w[support] = rng.uniform(-1.0, 1.0, k)
    u = X @ w
    y = np.where(u >= 0, 1.0, -1.0) if task == "classification" else (
        u + noise * rng.standard_normal(n))
    return X, y, w, support


def _run(X, y, loss="squared_hinge", **options):
    space, y, loss = check_fgm(X, y, loss, options.get("n_select"),
                               groups=options.pop("groups", None),
                               degree=options.pop("degree", 1),
                               normalize=options.pop("normalize", False))
    return fgm(space, y, loss=loss, **options)


def _P(loss, z, y, C):
    return C * len(y) * loss_value(int(Loss.parse(loss)), np.ascontiguousarray(z), y)


def _r(loss, z, y, C):
    n = len(y)
    return -C * n * loss_grad(int(Loss.parse(loss)), np.ascontiguousarray(z), y,
                              np.empty(n))


# -- the prox of Algorithm 3 (Proposition 1) ----------------------------------------

@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.integers(1, 6), elements=st.floats(0, 10)),
       st.floats(1e-3, 10))
def test_prox_matches_numerical_minimisation(o, lam):
    a = prox_squared_l21(o, lam, np.empty_like(o))
    f = lambda x: 0.5 * np.sum((x - o) ** 2) + 0.5 * lam * np.sum(x) ** 2  # noqa: E731
    ref = minimize(f, o / (1 + lam), jac=lambda x: x - o + lam * np.sum(x),
                   bounds=[(0, None)] * o.size, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-12})
    assert f(a) <= ref.fun + 1e-9 * max(1.0, ref.fun)
    assert np.all(a >= 0) and np.all(a <= o + 1e-15)
    # the smallest-norm blocks are zeroed first
    assert np.all(np.diff(a[np.argsort(o)]) >= -1e-12)


def test_prox_special_cases():
    o = np.array([3.0])
    assert prox_squared_l21(o, 0.5, np.empty(1))[0] == pytest.approx(3.0 / 1.5)
    o = np.array([2.0, 1.0, 0.5])
    np.testing.assert_allclose(prox_squared_l21(o, 1e-12, np.empty(3)), o, rtol=1e-9)
    assert not prox_squared_l21(np.zeros(3), 1.0, np.empty(3)).any()


# -- the APG (Algorithm 4) against a generic solver -----------------------------------

def _dual_qcqp(rows, starts, y, loss, C, fit_b):
    """max_α h(α) − θ s.t. θ ≥ ½‖X_hᵀ r(α)‖² for every block (the MKL dual of (31),
    Tan et al., eq. (29)), by scipy's SLSQP: a solver sharing no code with the APG."""
    n, t = len(y), len(starts) - 1
    hinge = loss == "squared_hinge"
    r_of = (lambda a: a * y) if hinge else (lambda a: a)

    def negative(v):
        a = v[:n]
        h = a.sum() - a @ a / (2 * C) if hinge else a @ y - a @ a / (2 * C)
        return v[n] - h

    cons = [{"type": "ineq", "fun": lambda v, h=h: v[n] - 0.5 * np.sum(
        (rows[starts[h]:starts[h + 1]] @ r_of(v[:n])) ** 2)} for h in range(t)]
    if fit_b:
        cons.append({"type": "eq", "fun": lambda v: np.sum(r_of(v[:n]))})
    bounds = [(0, None)] * n + [(None, None)] if hinge else None
    res = minimize(negative, np.zeros(n + 1), method="SLSQP", constraints=cons,
                   bounds=bounds, options={"ftol": 1e-15, "maxiter": 3000})
    return -res.fun


@pytest.mark.parametrize("loss", ["squared_hinge", "squared"])
@pytest.mark.parametrize("fit_b", [False, True])
def test_apg_reaches_the_generic_solvers_objective(loss, fit_b):
    rng = np.random.default_rng(7 + fit_b)
    n = 40
    rows = rng.standard_normal((7, n))
    starts = np.array([0, 2, 5, 7])
    u = rows.T @ rng.standard_normal(7)
    y = np.where(u + 0.5 * rng.standard_normal(n) >= 0, 1.0, -1.0) \
        if loss == "squared_hinge" else u + 0.3 * rng.standard_normal(n) + 0.7
    C = 0.5
    code = int(Loss.parse(loss))
    w, b, _, F, _ = apg(rows, starts, y, code, C, np.zeros(7), 0.0, 0.1 * n * C,
                        fit_b, 1e-14, 5000)
    assert F == pytest.approx(_dual_qcqp(rows, starts, y, loss, C, fit_b), rel=1e-6)
    # the returned F is the objective of the returned point (the cached products of
    # Tan et al., Section 5.5, did not drift from a direct recomputation)
    assert subproblem_objective(rows, starts, y, code, C, w, b) == pytest.approx(
        F, rel=1e-12)
    if fit_b:   # optimality in b: Σ r_i = 0
        r = _r(loss, w @ rows + b, y, C)
        assert abs(r.sum()) <= 1e-6 * np.abs(r).sum()
    # optimality of (31): ‖c_h‖ = Σ‖w_k‖ on blocks with w_h ≠ 0, ≤ elsewhere
    c = rows @ _r(loss, w @ rows + b, y, C)
    norms = [np.linalg.norm(w[starts[h]:starts[h + 1]]) for h in range(3)]
    for h in range(3):
        ch = np.linalg.norm(c[starts[h]:starts[h + 1]])
        if norms[h] > 1e-8:
            assert ch == pytest.approx(sum(norms), rel=1e-5)
        else:
            assert ch <= sum(norms) * (1 + 1e-5)


# -- the worst-case analysis (Algorithm 2) against brute force ------------------------

@pytest.mark.parametrize("B", [1, 3])
def test_each_activation_is_the_most_violated_constraint(B):
    X, y, _, _ = _problem(60, 10, 3, seed=5)
    C = 1.0
    for t in range(1, 5):
        before = _run(X, y, B=B, C=C, max_activations=t - 1, tol=0.0) if t > 1 else None
        after = _run(X, y, B=B, C=C, max_activations=t, tol=0.0)
        if before is not None and len(before.blocks) < t - 1:
            break
        coef = np.zeros(X.shape[1])
        if before is not None:
            coef[before.selected] = before.weights
        b = before.intercept if before is not None else 0.0
        s = (X.T @ _r("squared_hinge", X @ coef + b, y, C)) ** 2
        # brute force over every vertex of D = {d ∈ [0,1]^m : Σd ≤ B}
        best = max(combinations(range(X.shape[1]), B), key=lambda S: s[list(S)].sum())
        if len(after.blocks) < t:
            continue
        assert s[after.blocks[t - 1]].sum() == pytest.approx(s[list(best)].sum(),
                                                             rel=1e-12)
        assert set(after.blocks[t - 1]) == set(best)


def test_first_activation_is_univariate_correlation_and_scale_free():
    X, y, _, _ = _problem(80, 30, 3, seed=2)
    first = _run(X, y, B=4, C=1.0, max_activations=1).blocks[0]
    np.testing.assert_array_equal(np.sort(first),
                                  np.sort(np.argsort(-np.abs(X.T @ y))[:4]))
    assert set(_run(X, y, B=4, C=7.0, max_activations=1).blocks[0]) == set(first)
    perm = np.random.default_rng(0).permutation(30)
    moved = _run(X[:, perm], y, B=4, C=1.0, max_activations=1).blocks[0]
    assert set(perm[moved]) == set(first)


# -- the global certificate ------------------------------------------------------------

def _omega(w, B):
    """Ω_B(w) = min_{d∈D} ½ Σ_j w_j²/d_j in closed form: ½ the squared k-support norm
    (Argyriou, Foygel & Srebro 2012) with k = B."""
    a = np.sort(np.abs(w))[::-1]
    a = a[a > 0]
    if a.size <= B:
        return 0.5 * a @ a
    for q in range(B):
        zeta = a[q:].sum() / (B - q)
        if (q == 0 or a[q - 1] >= zeta) and zeta >= a[q]:
            return 0.5 * a[:q] @ a[:q] + a[q:].sum() ** 2 / (2 * (B - q))
    raise AssertionError("no q found")


@pytest.mark.parametrize("loss", ["squared_hinge", "squared", "logistic"])
def test_exact_fgm_certifies_the_convex_optimum(loss):
    task = "regression" if loss == "squared" else "classification"
    X, y, _, _ = _problem(200, 60, 5, seed=11, task=task)
    B, C = 3, 0.1
    res = _run(X, y, loss, B=B, C=C, max_activations=300, tol=0.0, inner_tol=1e-12,
               max_inner=3000)
    assert res.stop == "no violation"
    F = np.asarray(res.objective)
    assert np.all(np.diff(F) <= 1e-9 * F[0])          # F_t never increases (Lemma 1)
    assert all(d <= f * (1 + 1e-9) for d, f in zip(res.dual, F))   # weak duality
    assert 0 <= res.gap <= 1e-4
    coef = np.zeros(X.shape[1])
    coef[res.selected] = res.weights
    convex = _omega(coef, B) + _P(loss, X @ coef, y, C)   # the convex problem
    assert F[-1] == pytest.approx(convex, rel=1e-6)


def test_dual_value_is_a_lower_bound_anywhere():
    X, y, _, _ = _problem(50, 20, 3, seed=1)
    rng = np.random.default_rng(0)
    best = _run(X, y, B=2, C=1.0, max_activations=100, tol=0.0, inner_tol=1e-12,
                max_inner=3000).objective[-1]
    for _ in range(5):
        z = X @ (0.3 * rng.standard_normal(20))
        r = _r("squared_hinge", z, y, 1.0)
        top = np.sort((X.T @ r) ** 2)[-2:].sum()
        assert dual_value(Loss.SQUARED_HINGE, r, y, 1.0, top) <= best * (1 + 1e-9)


# -- groups ----------------------------------------------------------------------------

def test_singleton_groups_are_linear_fgm():
    X, y, _, _ = _problem(80, 25, 3, seed=3)
    a = _run(X, y, B=2, C=1.0, max_activations=6)
    b = _run(X, y, B=2, C=1.0, max_activations=6, groups=np.arange(25)[::-1] * 3)
    c = _run(X, y, B=2, C=1.0, max_activations=6, groups=[[j] for j in range(25)])
    for other in (b, c):
        np.testing.assert_array_equal(a.selected, other.selected)
        np.testing.assert_allclose(a.weights, other.weights, rtol=1e-12)
        np.testing.assert_allclose(a.objective, other.objective, rtol=1e-12)


def test_overlapping_groups_equal_the_augmented_matrix():
    X, y, _, _ = _problem(90, 12, 3, seed=4)
    groups = [[0, 1, 2], [2, 3], [3, 4, 5, 6], [6, 7, 0], [8, 9], [10, 11, 1]]
    implicit = _run(X, y, B=2, C=1.0, max_activations=4, groups=groups)
    columns = np.concatenate(groups)
    labels = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    explicit = _run(X[:, columns], y, B=2, C=1.0, max_activations=4, groups=labels)
    for a, b in zip(implicit.blocks, explicit.blocks):
        np.testing.assert_array_equal(np.sort(a), np.sort(b))
    np.testing.assert_allclose(implicit.objective, explicit.objective, rtol=1e-10)
    coef = np.zeros(12)
    np.add.at(coef, columns[explicit.selected], explicit.weights)
    np.testing.assert_allclose(coef[implicit.selected], implicit.weights, rtol=1e-9)


def test_group_selection_recovers_informative_groups():
    rng = np.random.default_rng(8)
    n, p, size = 300, 40, 5
    X = rng.standard_normal((n, p * size))
    w = np.zeros(p * size)
    true = rng.choice(p, 4, replace=False)
    for g in true:
        w[g * size:(g + 1) * size] = rng.standard_normal(size)
    y = np.where(X @ w >= 0, 1.0, -1.0)
    res = _run(X, y, B=2, C=1.0, n_select=4, groups=np.repeat(np.arange(p), size))
    chosen = set(np.unique(res.selected // size))
    assert chosen == set(true)


# -- the degree-2 map without building it (Algorithm 5) --------------------------------

def test_implicit_pair_search_equals_brute_force():
    rng = np.random.default_rng(9)
    n, d = 50, 30
    base = rng.standard_normal((n, d)) * rng.lognormal(0, 1, d)
    stream = InteractionStream(base, degree=2)
    explicit = stream.columns(stream.feature_indices()).T
    r = rng.standard_normal(n)
    brute = (explicit.T @ r) ** 2
    for B, block in ((7, 512), (7, 4), (20, 7)):
        ids, scores = PolynomialSpace(stream, block=block).top(r, B, np.zeros(0, int))
        order = np.lexsort((np.arange(brute.size), -brute))[:B]
        np.testing.assert_array_equal(ids, order)
        np.testing.assert_allclose(scores, brute[order], rtol=1e-10)
    skip = np.sort(order[:3])
    ids, _ = PolynomialSpace(stream, block=5).top(r, 4, skip)
    np.testing.assert_array_equal(ids, [j for j in np.lexsort(
        (np.arange(brute.size), -brute)) if j not in skip][:4])
    ids, _ = StreamSpace(as_stream(explicit)).top(r, 7, np.zeros(0, int))
    np.testing.assert_array_equal(ids, np.lexsort((np.arange(brute.size), -brute))[:7])


def test_polynomial_fgm_equals_fgm_on_the_expanded_matrix():
    rng = np.random.default_rng(10)
    n, d = 120, 8
    base = rng.standard_normal((n, d))
    y = np.where(base[:, 0] * base[:, 1] - 0.5 * base[:, 2] ** 2 + 0.3 * base[:, 3]
                 + 0.3 >= 0, 1.0, -1.0)
    stream = InteractionStream(base, degree=2)
    expanded = stream.columns(stream.feature_indices()).T
    a = _run(base, y, B=3, C=1.0, max_activations=5, degree=2, fit_intercept=True)
    b = _run(expanded, y, B=3, C=1.0, max_activations=5, fit_intercept=True)
    np.testing.assert_array_equal(a.selected, b.selected)
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-10)
    assert stream.terms([a.blocks[0][0]]) == [(0, 1)]         # the true interaction
    # degree 3 enumerates the stream's columns: the same first block as brute force
    c = _run(base, y, B=3, C=1.0, max_activations=1, degree=3)
    s3 = InteractionStream(base, degree=3)
    brute = (s3.columns(s3.feature_indices()) @ y) ** 2
    assert set(c.blocks[0]) == set(np.argsort(-brute, kind="stable")[:3])


# -- scaling ------------------------------------------------------------------------

def test_normalized_pair_search_equals_brute_force():
    rng = np.random.default_rng(21)
    n, d = 40, 12
    base = rng.random((n, d)) * rng.lognormal(0, 2, d)
    base[:, 3] = 0.0                                     # a zero column scores 0
    stream = InteractionStream(base, degree=2)
    explicit = stream.columns(stream.feature_indices())
    r = rng.standard_normal(n)
    sq = np.einsum("ij,ij->i", explicit, explicit)
    brute = np.where(sq > 0, (explicit @ r) ** 2 / np.where(sq > 0, sq, 1), 0.0)
    order = np.lexsort((np.arange(brute.size), -brute))[:9]
    for block in (512, 5):
        ids, scores = PolynomialSpace(stream, block=block, normalize=True).top(
            r, 9, np.zeros(0, int))
        np.testing.assert_array_equal(ids, order)
        np.testing.assert_allclose(scores, brute[order], rtol=1e-10)
    ids, _ = StreamSpace(as_stream(explicit.T, block_size=7), normalize=True).top(
        r, 9, np.zeros(0, int))
    np.testing.assert_array_equal(ids, order)


@pytest.mark.parametrize("degree, source", [(1, "array"), (1, "sparse"),
                                            (1, "stream"), (1, "groups"),
                                            (2, "array")])
def test_normalized_scores_make_fgm_invariant_to_column_scaling(degree, source):
    import scipy.sparse as sp

    rng = np.random.default_rng(22)
    X, y, _, _ = _problem(80, 10, 3, seed=22)
    X[np.abs(X) < 0.3] = 0.0
    scale = rng.lognormal(0.0, 2.0, X.shape[1])         # positive, very uneven
    wrap = {"array": lambda A: A, "sparse": sp.csr_matrix,
            "stream": lambda A: as_stream(A, block_size=4),
            "groups": lambda A: A}[source]
    opts = dict(B=2, C=1.0, n_select=6, tol=0.0, degree=degree, normalize=True,
                fit_intercept=True)
    if source == "groups":
        opts.update(groups=[[0, 1], [2, 3, 4], [5], [6, 7], [8, 9]], n_select=3)
    a = _run(wrap(X), y, **opts)
    b = _run(wrap(X * scale), y, **opts)
    # the subproblems are solved to a tolerance, not exactly: the rescaled run agrees
    # to that accuracy (objectives 3.6e-7 apart, a small weight 5e-5 of 0.28 seen on
    # another build), not to rounding
    np.testing.assert_array_equal(a.selected, b.selected)
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-5)
    stream = InteractionStream(X, degree=degree)
    factor = np.prod(np.atleast_2d(scale[np.array(stream.terms(a.selected))]), axis=1) \
        if degree == 2 else scale[a.selected]
    np.testing.assert_allclose(b.weights * factor, a.weights, rtol=1e-3,
                               atol=1e-3 * np.abs(a.weights).max())
    # the raw scores, the default, are not scale-free here
    raw = [_run(wrap(A), y, **{**opts, "normalize": False}).selected
           for A in (X, X * scale)]
    assert not np.array_equal(*raw) or degree == 1 and source == "groups"


# -- budgets and stopping --------------------------------------------------------------

def test_budgets_and_activation_counts():
    X, y, _, _ = _problem(100, 50, 5, seed=12)
    for B in (1, 2, 4):
        res = _run(X, y, B=B, C=1.0, max_activations=5, tol=0.0)
        assert res.selected.size <= len(res.blocks) * B
        ex = _run(X, y, B=B, C=1.0, max_activations=5, tol=0.0, exclude_active=True)
        assert all(len(blk) == B for blk in ex.blocks)
        assert len(np.unique(np.concatenate(ex.blocks))) == 5 * B
        assert np.isnan(ex.gap)
    for s in (1, 7, 12):
        res = _run(X, y, B=5, C=1.0, n_select=s, tol=0.0)
        assert res.stop == "budget"
        assert len(np.unique(np.concatenate(res.blocks))) == s
        assert res.selected.size <= s
    # a larger B reaches the same number of features in fewer activations
    counts = [len(_run(X, y, B=B, C=1.0, n_select=12, tol=0.0).blocks) for B in (2, 6)]
    assert counts[0] > counts[1]
    loose = _run(X, y, B=2, C=1.0, tol=0.5)
    assert loose.stop == "tolerance"


def test_stream_and_sparse_sources_match_the_array():
    import scipy.sparse as sp

    X, y, _, _ = _problem(70, 40, 4, seed=13)
    X[np.abs(X) < 0.8] = 0.0
    a = _run(X, y, B=3, C=1.0, max_activations=4)
    for source in (as_stream(X, block_size=9), sp.csr_matrix(X)):
        b = _run(source, y, B=3, C=1.0, max_activations=4)
        np.testing.assert_array_equal(a.selected, b.selected)
        np.testing.assert_allclose(a.weights, b.weights, rtol=1e-10)


def test_common_interface():
    X, y, _, support = _problem(200, 100, 5, seed=14)
    sel = METHODS["FGM"](X, y, 5, loss="squared_hinge", epochs=None)
    assert sel.name == "FGM" and sel.selected.size <= 5
    assert len(np.intersect1d(sel.selected, support)) >= 4
    poly = fit_fgm(X[:, :10], y, 12, loss="squared_hinge", degree=2)
    assert poly.selected.size <= 12 and poly.selected.max() < 65


# -- bad input -----------------------------------------------------------------------

def test_bad_input_is_refused_before_any_work():
    X, y, _, _ = _problem(30, 8, 2, seed=0)
    cases = [
        (dict(B=0), "B"), (dict(C=0.0), "C must"), (dict(C=np.nan), "C must"),
        (dict(tol=-1.0), "tol"), (dict(max_inner=0), "max_inner"),
        (dict(degree=5), "degree"), (dict(groups=np.arange(7)), "one label"),
        (dict(groups=[[0, 1], []]), "group 1"), (dict(groups=[[0, 9]]), "outside"),
        (dict(groups=[[0, 0]]), "twice"), (dict(groups=[[0], [1]], degree=2),
                                           "cannot be combined"),
        (dict(max_activations=0), "max_activations"),
    ]
    for options, message in cases:
        with pytest.raises(InputError, match=message):
            check_fgm(X, y, "squared_hinge", None, **options)
    with pytest.raises(InputError, match="budget"):
        check_fgm(X, y, "squared_hinge", 9)
    with pytest.raises(InputError, match="labels"):
        check_fgm(X, (y + 1) / 2, "squared_hinge", None)
    with pytest.raises(InputError, match="s must"):
        fit_fgm(X, y, 0, "squared_hinge")
    assert make_space(X).n_candidates == 8
    assert make_space(X, groups=np.arange(8) // 2).n_candidates == 4
    assert make_space(X, degree=2).n_candidates == 8 + 36
    assert np.isnan(FGMResult(np.zeros(0, int), np.zeros(0), 0.0, 8).gap)


# -- the paper's synthetic protocol (its Section 8.2), reduced ------------------------

@pytest.mark.slow
@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_synthetic_support_recovery(loss, fit_intercept):
    X, y, w, support = _problem(1024, 4096, 30, seed=0)
    res = _run(X, y, loss, B=5, C=10.0, max_activations=10, tol=0.0,
               fit_intercept=fit_intercept)
    assert res.selected.size <= 50
    assert len(np.intersect1d(res.selected, support)) >= 27
    rng = np.random.default_rng(99)
    Xt = rng.standard_normal((2048, 4096))
    yt = np.where(Xt @ w >= 0, 1.0, -1.0)
    pred = np.where(Xt[:, res.selected] @ res.weights + res.intercept >= 0, 1.0, -1.0)
    assert np.mean(pred == yt) >= 0.92
    # univariate top-50 recovers far fewer of the true features
    assert len(np.intersect1d(np.argsort(-np.abs(X.T @ y))[:50], support)) < 25


@pytest.mark.slow
def test_synthetic_regression_recovery():
    X, y, w, support = _problem(1024, 4096, 30, seed=0, task="regression")
    res = _run(X, y, "squared", B=5, C=1.0, max_activations=10, tol=0.0)
    assert set(support) <= set(res.selected)
    Xt = np.random.default_rng(98).standard_normal((1000, 4096))
    assert np.corrcoef(Xt[:, res.selected] @ res.weights, Xt @ w)[0, 1] > 0.999
