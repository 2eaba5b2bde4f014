"""Fitting the weights of a fixed support: min_w L(X_S w) + (λ/2)‖w‖², by Newton.

Two users: the metrics' squared-hinge refit (every method's selection is judged by
it), and the end of an Asy-OS run under the fitted rule, whose workers each fitted
their own kept features against a stale view of the others': once the support is
settled, the server fits it jointly, so the run's weights and objective are a
function of the features it chose alone (as sequential OS's fitted weights are), not
of the interleaving that led there (docs/algorithms.md, "The joint refit").

The Hessian X_Sᵀ D X_S + λI (D the per-sample second derivative; for the squared
hinge the generalised one, 1 on the active margin) is positive definite for λ > 0, so
each Newton step is one s×s solve, O(n·s² + s³); Armijo backtracking keeps every step
a descent step, and the squared loss ends after one.  Near the minimiser the decrease
a step promises falls below the rounding of F itself, where Armijo's test passes or
fails by chance (an Asy-OS run's refit, started at its workers' weights, backtracked
through all 100 steps and 2,000 evaluations of F: 0.1 s after a 0.3 s run): there
the full Newton step is taken and the refit ends, as the quadratic model is then
far more exact than F's evaluation.
"""

import numpy as np

from .losses import Loss

MAX_STEPS = 100
TOLERANCE = 1e-10   # stop when ‖∇F‖ ≤ TOLERANCE · max(1, ‖∇F at the start‖) ...
#                     (and, for the squared hinge, the active margin stopped moving)
UNRESOLVED = 1e-13  # ... or when a step promises less than this · |F|: below F's rounding


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))   # 1 / (1 + e^(−z)), without overflow


def loss_terms(loss: Loss, u: np.ndarray, y: np.ndarray):
    """L(u) (averaged over the n samples, as ``core.losses.loss_value``), dL/du and
    the per-sample second derivative, each divided by n."""
    n = u.size
    if loss is Loss.SQUARED:
        r = u - y
        return 0.5 * (r @ r) / n, r / n, np.full(n, 1.0 / n)
    z = y * u
    if loss is Loss.SQUARED_HINGE:
        h = np.maximum(1.0 - z, 0.0)
        return 0.5 * (h @ h) / n, -y * h / n, (h > 0.0) / n
    value = float(np.mean(np.logaddexp(0.0, -z)))
    p = _sigmoid(z)
    return value, -y * (1.0 - p) / n, p * (1.0 - p) / n


def newton_refit(Xs: np.ndarray, y: np.ndarray, loss: Loss, lam: float,
                 start: np.ndarray | None = None,
                 max_steps: int = MAX_STEPS) -> tuple[np.ndarray, int]:
    """The minimiser of L(X_S w) + (λ/2)‖w‖² over w (``Xs``: the n×k columns of the
    support, ``lam`` > 0), from ``start`` (zeros by default); returns (w, Newton steps
    taken)."""
    loss = Loss.parse(loss)
    n, k = Xs.shape
    w = np.zeros(k) if start is None else np.array(start, dtype=np.float64)
    if k == 0:
        return w, 0

    def objective(w):
        value, d1, d2 = loss_terms(loss, Xs @ w, y)
        return value + 0.5 * lam * (w @ w), d1, d2

    f, d1, d2 = objective(w)
    grad = Xs.T @ d1 + lam * w
    tol = TOLERANCE * max(1.0, float(np.linalg.norm(grad)))
    taken = 0
    for taken in range(1, max_steps + 1):
        hessian = (Xs.T * d2) @ Xs
        hessian[np.diag_indices(k)] += lam
        try:
            d = np.linalg.solve(hessian, -grad)
        except np.linalg.LinAlgError:   # only if λ is lost to rounding
            d = np.linalg.lstsq(hessian, -grad, rcond=None)[0]
        slope = float(grad @ d)
        if not slope < 0.0:   # not a descent direction: already at rounding level
            break
        if -slope <= UNRESOLVED * abs(f):   # F cannot tell this step's gain
            w = w + d
            break
        t = 1.0
        for _ in range(60):
            f_new, d1_new, d2_new = objective(w + t * d)
            if f_new <= f + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            break   # no decrease representable in floating point
        w = w + t * d
        if loss is Loss.SQUARED and t == 1.0:   # F is quadratic: the step was exact
            break
        settled = loss is not Loss.SQUARED_HINGE or np.array_equal(d2_new > 0, d2 > 0)
        f, d1, d2 = f_new, d1_new, d2_new
        grad = Xs.T @ d1 + lam * w
        if settled and np.linalg.norm(grad) <= tol:
            break
    return w, taken


def joint_refit(columns: np.ndarray, y: np.ndarray, loss: Loss, ridge: float,
                start: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The fitted rule's weights on a settled support: ``columns`` (k × n, X_Sᵀ)
    fitted jointly from ``start`` with λ = ``ridge`` · the largest ‖x‖²/n among them
    (the rule's relative ridge, ``core.kept_set.fitted_ridge``).  Returns (w, X_S w,
    Newton steps); ``start`` unchanged when every column is zero (no w moves u)."""
    n = columns.shape[1]
    nu = float(np.max(np.einsum("kr,kr->k", columns, columns))) / n if len(columns) \
        else 0.0
    start = np.asarray(start, dtype=np.float64)
    if not nu > 0.0:
        return start, start @ columns, 0
    w, steps = newton_refit(columns.T, y, loss, ridge * nu, start)
    return w, w @ columns, steps
