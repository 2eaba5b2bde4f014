"""The feature generating machine (FGM; Tan, Tsang & Wang, JMLR 2014, Algorithm 1).

A cutting-plane method: each activation adds the B candidates (features or groups) with
the largest gradient scores c_j² (the most violated constraint, their Algorithm 2 and
eq. (27)), then the subproblem on every activated block is re-solved in the primal by
the accelerated proximal gradient of ``fgm_apg`` (their Section 5.2, Algorithms 3-4).
Only the activated columns are ever held (a compact (k, n) cache, their Section 5.5),
so FGM selects from spaces too large to store: a feature stream read block by block,
or the degree-2 products of ``InteractionStream``, searched without building them
(``fgm_search``).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
from scipy.optimize import minimize_scalar

from ..core.losses import Loss, dual_loss_term, loss_grad, loss_value
from ..core.selection import Selection, selection
from ..core.validate import (
    check_at_least,
    check_int,
    check_labels,
    check_positive,
    check_problem,
)
from ..errors import ConvergenceWarning, InputError
from ..streams import FeatureStream, InteractionStream, as_stream
from .apg import apg
from .search import (
    ArraySpace,
    GroupSpace,
    PolynomialSpace,
    StreamSpace,
    block_scores,
)

__all__ = ["FGMResult", "dual_value", "fgm", "fit_fgm", "make_space"]

ETA2 = 0.36         # τ shrinks by η² when a new activation starts (authors' code)
DEFAULT_C = {Loss.SQUARED: 1.0, Loss.SQUARED_HINGE: 10.0, Loss.LOGISTIC: 10.0}


@dataclass
class FGMResult:
    """A fitted FGM: the selection, its model, and how the run went."""

    selected: np.ndarray        # sorted feature numbers (of the mapped space) with w ≠ 0
    weights: np.ndarray         # aligned; a feature in several blocks: the sum
    intercept: float
    n_features: int             # dimension of the space selected from
    blocks: list = field(default_factory=list)      # candidate ids of each activation
    objective: list = field(default_factory=list)   # F_0 (no feature), F_1, ..., F_t
    dual: list = field(default_factory=list)        # D(α) at each search (exact mode)
    violations: list = field(default_factory=list)  # ½(Σ new scores − θ), for (37)
    apg_iterations: list = field(default_factory=list)  # per activation
    stop: str = ""              # which rule ended the run
    seconds: float = 0.0
    cache_bytes: int = 0        # memory of the column cache: O(n·t·B)

    @property
    def gap(self) -> float:
        """Relative duality gap (F − D)/F after the last search: a certificate of
        global optimality (docs/algorithms.md, "FGM") when there is no intercept."""
        if not self.dual:
            return math.nan
        F = self.objective[len(self.dual) - 1]      # D[k] is at the α of F[k]
        return (F - self.dual[-1]) / F if F > 0 else 0.0


def dual_value(loss: Loss, r: np.ndarray, y: np.ndarray, C: float,
               top_sum: float) -> float:
    """D(α) = h(α) − ½ top_B(c(α)²) (Tan et al., Lemma 1), α read off r = −∂P/∂z
    (h, the loss's part, is ``core.losses.dual_loss_term``)."""
    return dual_loss_term(loss, r, y, C) - 0.5 * top_sum


class _Cache:
    """The activated columns (Tan et al., Section 5.5), one row each, grown by
    doubling."""

    def __init__(self, n: int):
        self._rows = np.zeros((0, n))
        self.size = 0
        self.features = np.zeros(0, dtype=np.int64)
        self.starts = [0]

    def add(self, features: np.ndarray, columns: np.ndarray) -> None:
        k = len(features)
        if self.size + k > self._rows.shape[0]:
            grown = np.zeros((max(2 * self._rows.shape[0], self.size + k),
                              self._rows.shape[1]))
            grown[:self.size] = self._rows[:self.size]
            self._rows = grown
        self._rows[self.size:self.size + k] = columns
        self.size += k
        self.features = np.concatenate([self.features, features])
        self.starts.append(self.size)

    @property
    def rows(self) -> np.ndarray:
        return self._rows[:self.size]

    @property
    def nbytes(self) -> int:
        return int(self._rows.nbytes)


def _gradient_weights(code: int, z, y, C: float) -> np.ndarray:
    """r = −∂P/∂z = α⊙y, with P = C·n·L."""
    return -C * len(y) * loss_grad(code, np.ascontiguousarray(z), y, np.empty(len(y)))


def _best_constant(code: int, y, C: float) -> float:
    """The bias of the model with no feature (our convention): argmin_b P(b·1)."""
    f = lambda b: loss_value(code, np.full(len(y), b), y)  # noqa: E731
    lo, hi = float(y.min()) - 1.0, float(y.max()) + 1.0
    return float(minimize_scalar(f, bounds=(lo, hi), method="bounded",
                                 options={"xatol": 1e-10}).x)


def fgm(space, y, *, loss="squared_hinge", B: int = 5, C: float | None = None,
        n_select: int | None = None, max_activations: int | None = None,
        tol: float = 1e-3, inner_tol: float = 1e-3, max_inner: int = 20,
        fit_intercept: bool = False, exclude_active: bool = False,
        convergence_warning=ConvergenceWarning) -> FGMResult:
    """Run FGM (Tan et al., Algorithm 1) on a space of ``fgm_search`` (``make_space``).

    Each activation ranks the candidates by c_j² at the current model and activates
    the best B as one new block (exact mode: active candidates compete too, so a block
    may recombine them; ``exclude_active`` ranks only new ones).  Stops when
    no constraint is violated (37), when F falls by at most ``tol``·F_0 (38), after
    ``max_activations`` (default 10, or 4·⌈n_select/B⌉ with a budget), or once
    ``n_select`` candidates are active: the activation that reaches the budget keeps
    only its best new candidates, so at most ``n_select`` are ever active.
    Inputs are checked by ``fit_fgm``/``make_space``; here they are trusted.

    Scaling: the scores c_j² = (x_jᵀr)² grow with ‖x_j‖², so the selection depends on
    the columns' scale (degree-2 products doubly so); Tan et al. scale the base
    features to [0, 1].  A space made with ``normalize=True`` uses every candidate at
    unit norm (scores c_j²/‖x_j‖², the model fitted on x_j/‖x_j‖, the returned
    weights mapped back to the raw columns), which makes the run invariant to a
    positive rescaling of each column of X (see ``search``'s Scaling).
    Stopping at ``max_activations`` issues ``convergence_warning`` (a Warning class;
    None: none) with the last decrease of F against ``tol``·F_0.  (The
    subproblem's ``max_inner`` cap is part of the method, an inexact inner solve as
    in Tan et al.'s code, and is not warned about.)
    """
    start = time.perf_counter()
    loss = Loss.parse(loss)
    code = int(loss)
    C = DEFAULT_C[loss] if C is None else C
    if max_activations is None:
        max_activations = 10 if n_select is None else 4 * math.ceil(n_select / B)
    n = len(y)
    b = _best_constant(code, y, C) if fit_intercept else 0.0
    z = np.full(n, b)
    r = _gradient_weights(code, z, y, C)
    F0 = C * n * loss_value(code, z, y)
    result = FGMResult(selected=np.zeros(0, np.int64), weights=np.zeros(0),
                       intercept=b, n_features=space.n_features, objective=[F0])
    cache = _Cache(n)
    active = np.zeros(0, dtype=np.int64)          # sorted active candidate ids
    w = np.zeros(0)
    tau = 0.1 * n * C                             # τ₀ of the authors' code
    result.stop = "max_activations"
    for t in range(max_activations):
        ids, scores = space.top(r, B, active if exclude_active else active[:0])
        starts = np.asarray(cache.starts, dtype=np.int64)
        held = block_scores(cache.rows, starts, r)
        theta = held.max() if held.size else 0.0
        violation = 0.5 * (scores.sum() - theta)                      # for (37)
        result.violations.append(float(violation))
        if not exclude_active:
            result.dual.append(dual_value(loss, r, y, C, float(scores.sum())))
        if t > 0 and violation <= 1e-9 * max(F0, 1e-300):           # (37)
            result.stop = "no violation"
            break
        new = ~np.isin(ids, active)
        if n_select is not None and new.sum() > n_select - active.size:
            keep = np.cumsum(new) <= n_select - active.size          # best new first
            ids = ids[~new | keep]
        features = space.members(ids)
        cache.add(features, space.columns(features))
        active = np.union1d(active, ids)
        result.blocks.append(ids)
        w = np.concatenate([w, np.zeros(len(features))])
        w, b, tau, F, iters = apg(cache.rows, np.asarray(cache.starts, np.int64), y,
                                  code, float(C), w, float(b), float(tau),
                                  bool(fit_intercept), float(inner_tol), int(max_inner))
        tau *= ETA2
        r = _gradient_weights(code, w @ cache.rows + b, y, C)
        result.objective.append(float(F))
        result.apg_iterations.append(int(iters))
        if n_select is not None and active.size >= n_select:
            result.stop = "budget"
            break
        if result.objective[-2] - F <= tol * F0:                    # (38)
            result.stop = "tolerance"
            break
    features, inverse = np.unique(cache.features, return_inverse=True)
    weights = np.zeros(features.size)
    np.add.at(weights, inverse, w)                 # repeated features add up
    if space.normalize:                            # unit columns' weights → raw ones
        weights = weights / space.norms(features)
    nonzero = weights != 0.0
    result.selected, result.weights = features[nonzero], weights[nonzero]
    result.intercept = float(b)
    result.cache_bytes = cache.nbytes
    result.seconds = time.perf_counter() - start
    if result.stop == "max_activations" and convergence_warning is not None:
        _warn_cap(result, max_activations, tol, n_select, convergence_warning)
    return result


def _warn_cap(result: FGMResult, max_activations: int, tol: float, n_select,
              category) -> None:
    """FGM stopped at its activation cap: how far from (38) and the budget it was
    (the violation (37) and the duality gap were last measured before the last
    activation, so they are not quoted)."""
    scale = max(abs(result.objective[0]), 1e-300)
    decrease = (result.objective[-2] - result.objective[-1]) / scale
    active = np.unique(np.concatenate(result.blocks)).size if result.blocks else 0
    budget = "" if n_select is None else f"{active} of {n_select} candidates active, "
    warnings.warn(f"FGM stopped at max_activations={max_activations} with {budget}"
                  f"the objective still falling by {decrease:.2g}·F0 at the last "
                  f"activation (tol={tol:g}·F0); raise max_activations, or scale the "
                  f"features (FGM ranks candidates by their gradient scores)",
                  category, stacklevel=3)


def _check_groups(groups, m: int) -> list:
    """``groups`` as a list of nonempty int64 arrays of feature numbers < m: either a
    label per feature (disjoint groups, ordered by label) or a list of index lists
    (which may overlap)."""
    if isinstance(groups, np.ndarray) or (
            isinstance(groups, (list, tuple)) and groups
            and all(isinstance(g, (Integral, str)) for g in groups)):
        labels = np.asarray(groups)
        if labels.ndim != 1 or labels.shape[0] != m:
            raise InputError(f"groups as labels must have one label per feature "
                             f"({m}), got shape {labels.shape}")
        _, codes = np.unique(labels, return_inverse=True)
        order = np.argsort(codes, kind="stable")
        cuts = np.flatnonzero(np.diff(codes[order])) + 1
        return [part.astype(np.int64) for part in np.split(order, cuts)]
    if not isinstance(groups, (list, tuple)) or not groups:
        raise InputError("groups must be a label per feature or a nonempty list of "
                         "feature-index lists")
    out = []
    for k, g in enumerate(groups):
        g = np.asarray(g)
        if g.ndim != 1 or g.size == 0 or g.dtype.kind not in "iu":
            raise InputError(f"group {k} must be a nonempty 1-D list of integers")
        if g.min() < 0 or g.max() >= m:
            raise InputError(f"group {k} holds a feature outside 0..{m - 1}")
        if np.unique(g).size != g.size:
            raise InputError(f"group {k} lists a feature twice")
        out.append(g.astype(np.int64))
    return out


def make_space(X, *, groups=None, degree: int = 1, normalize: bool = False):
    """The candidate space for X (checked): an array or scipy.sparse matrix, or a
    ``FeatureStream``; ``groups`` (Tan et al., Section 4.2) or ``degree=2`` (the
    implicit products of their Section 6.2; degree 3 enumerates
    ``InteractionStream``'s columns block by block).  ``normalize``: every candidate
    column at unit norm (scale-invariant scores; ``search``'s Scaling)."""
    degree = check_int("degree", degree, 1, 4)
    if degree > 1:
        if groups is not None:
            raise InputError("groups= and a polynomial degree > 1 cannot be combined")
        stream = InteractionStream(as_stream(X) if hasattr(X, "tocsc") else X,
                                   degree=degree)
        return (PolynomialSpace(stream, normalize=normalize) if degree == 2
                else StreamSpace(stream, normalize))
    base = (StreamSpace(X, normalize) if isinstance(X, FeatureStream)
            else ArraySpace(X, normalize))
    return base if groups is None else GroupSpace(base, _check_groups(groups,
                                                                      base.n_features))


def _check_options(B, C, tol, inner_tol, max_inner, max_activations) -> None:
    check_int("B (candidates per activation)", B, 1)
    check_int("max_inner", max_inner, 1)
    if max_activations is not None:
        check_int("max_activations", max_activations, 1)
    if C is not None:
        check_positive("C", C)
    check_at_least("tol", tol, 0)
    check_at_least("inner_tol", inner_tol, 0)


def check_fgm(X, y, loss, n_select, *, groups=None, degree: int = 1, B: int = 5,
              C=None, tol=1e-3, inner_tol=1e-3, max_inner=20, max_activations=None,
              normalize: bool = False):
    """(space, y, loss) for an FGM run, every input checked before any work is done."""
    _check_options(B, C, tol, inner_tol, max_inner, max_activations)
    loss = Loss.parse(loss)
    if isinstance(X, FeatureStream):
        y = check_labels(y, loss, X.n_samples)
    elif hasattr(X, "tocsc"):                                   # scipy.sparse
        X = X.tocsc().astype(np.float64)
        if not np.all(np.isfinite(X.data)):
            raise InputError("X and y must be finite (no NaN or inf)")
        y = check_labels(y, loss, X.shape[0])
    else:
        X, y, _, loss = check_problem(X, y, 1, loss)
    space = make_space(X, groups=groups, degree=degree, normalize=bool(normalize))
    if n_select is not None:
        check_int("n_select (budget)", n_select, 1, space.n_candidates + 1)
    return space, y, loss


def fit_fgm(X, y, s: int, loss="squared", *, B: int = 5, C: float | None = None,
            fit_intercept: bool = False, degree: int = 1,
            max_activations: int | None = None, tol: float = 0.0,
            inner_tol: float = 1e-3, max_inner: int = 20,
            exclude_active: bool = False, normalize_scores: bool = False,
            convergence_warning=ConvergenceWarning) -> Selection:
    """FGM behind the common baseline interface: at most ``s`` features of X (or of
    its degree-``degree`` products), numbered as in ``InteractionStream``.

    ``tol`` defaults to 0 here so that the run goes on until the budget s is met (or no
    constraint is violated); C defaults to 10 for classification (the authors' MATLAB
    default) and 1 for squared loss.  ``n_iter`` counts activations.
    ``normalize_scores``: candidates at unit norm (``fgm``'s Scaling); by default the
    raw scores c_j², which assume features on a common scale such as [0, 1].
    """
    if degree == 1 and not isinstance(X, FeatureStream):
        X, y, s, loss = check_problem(X, y, s, loss)
    space, y, loss = check_fgm(X, y, loss, s, degree=degree, B=B, C=C, tol=tol,
                               inner_tol=inner_tol, max_inner=max_inner,
                               max_activations=max_activations,
                               normalize=normalize_scores)
    result = fgm(space, y, loss=loss, B=B, C=C, n_select=s,
                 max_activations=max_activations, tol=tol, inner_tol=inner_tol,
                 max_inner=max_inner, fit_intercept=fit_intercept,
                 exclude_active=exclude_active,
                 convergence_warning=convergence_warning)
    return selection(result.selected, result.weights, s, "FGM", len(result.blocks))
