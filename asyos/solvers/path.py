"""The model size chosen for the user: OS along a path of budgets s, warm-started, and
the size an information criterion picks.

Each size starts from the kept set the previous one ended with (its limit raised, so
the next pass first admits newcomers, then substitutes), so the path costs a few passes
per size rather than a cold start each.  The criteria are abess's special information
criterion (Zhu et al., PNAS 2020: n·log(RSS/n) + s·log p·log log n for the squared
loss) and the extended BIC (Chen & Chen, Biometrika 2008: n·log(RSS/n) + s·log n +
2·log C(p, s)); for the classification losses the fit term is the deviance 2n·L.
Cross-validation over samples needs the rows of X, so it lives with the estimators
(``OnlineSubstitution*(n_features_to_select="auto", criterion="cv")``).

For the squared loss the default search is shorter than a grid: s doubles (8, 16, 32,
…, each warm-started) until the criterion of the last fit's kept set, eliminated
backwards by exact least squares (``backward_rss``), is lowest well inside it; OS then
runs once more at that size.  A grid of 20 sizes plus its continuation cost 6-7 fits
at the final size on a problem with 100 true features; the doubling about 2.
"""

import math
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..core.kept_set import check_ridge, kept_set, resolve_epochs, resolve_rule, warm_up
from ..core.losses import Loss
from ..core.step_size import StepSize
from ..core.validate import (
    check_at_least,
    check_choice,
    check_labels,
    check_sparsity,
    warn_if_interpolating,
)
from ..errors import InputError, PathEdgeWarning
from ..streams import FeatureStream, Standardized, as_stream
from .result import FitResult
from .sequential import blas_limit, passes, refuse_all_zero

CRITERIA = ("sic", "ebic")
SEARCHES = ("auto", "grid", "refine")
PATH_POINTS = 20   # sizes on the default path
PAST_BEST = 3      # a path's continuation stops this many sizes past its best
INSIDE = 0.8       # the doubling stops once the best size is at most this share of s
FIRST = 8          # the doubling's first size
REFINE_FROM = 32   # "auto" refines where the grid's default largest size reaches this


def criterion_value(name: str, loss: Loss, objective: float, n: int, p: int,
                    s: int) -> float:
    """The criterion ``name`` ("sic" or "ebic") of a fit with ``s`` features whose
    mean loss is ``objective`` (lower is better)."""
    if loss is Loss.SQUARED:   # objective = RSS/(2n)
        fit = n * math.log(max(2.0 * objective, 1e-300))
    else:
        fit = 2.0 * n * objective
    if name == "sic":
        return fit + s * math.log(p) * math.log(max(math.log(n), 1.0))
    log_choose = math.lgamma(p + 1) - math.lgamma(s + 1) - math.lgamma(p - s + 1)
    return fit + s * math.log(n) + 2.0 * log_choose


def _continuation(sizes: list[int], ceiling: int) -> list[int]:
    """Sizes past the end of a path: its last spacing, up to twice its largest size
    (at most ``ceiling``)."""
    spacing = max(1, sizes[-1] - sizes[-2])
    top = min(2 * sizes[-1], ceiling)
    return list(range(sizes[-1] + spacing, top + 1, spacing))


def default_sizes(n: int, p: int, largest: int | None = None) -> list[int]:
    """1 … s_max in at most ``PATH_POINTS`` steps; s_max = ``largest``, else abess's
    default n / (log log n · log p), at most p."""
    if largest is None:
        largest = int(n / (max(math.log(max(math.log(n), 1.0)), 1.0) *
                           max(math.log(p), 1.0)))
    largest = max(1, min(int(largest), p))
    return sorted({int(round(v)) for v in np.linspace(1, largest, PATH_POINTS)})


@dataclass
class PathResult:
    """The fits along the path and the size the criterion chose."""

    sizes: list
    fits: list                 # a FitResult per size
    criterion: str
    values: list               # the criterion at each size
    chosen: int = 0            # index into ``sizes``
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def best(self) -> FitResult:
        return self.fits[self.chosen]

    def summary(self) -> dict:
        """What a results file keeps of the path (JSON-ready)."""
        return {"sizes": list(self.sizes), "criterion": self.criterion,
                "values": [float(v) for v in self.values],
                "objective": [float(f.objective) for f in self.fits],
                "chosen": int(self.sizes[self.chosen]),
                "selected": [f.selected.tolist() for f in self.fits],
                "search": "refine" if "elimination" in self.extra else "grid"}


def fit_path(source, y, sizes=None, *, loss="squared", criterion="sic",
             max_features=None, epochs="auto", rule="auto", ridge=None,
             standardize=False, progress=None, intercept=False,
             blas_threads: int | None = 1, extend: bool = True,
             search: str = "auto") -> PathResult:
    """OS for every budget in ``sizes``, each warm-started from the last, and the size
    ``criterion`` picks.  η and m are the default rule's (the path is the fitted
    rule's home: "auto" runs it on dense data).

    Parameters
    ----------
    source, y, loss, epochs, rule, ridge, standardize, progress, intercept :
        As for ``fit_os``.
    sizes : list of int, optional
        Increasing budgets; None: ``default_sizes`` up to ``max_features`` (or the
        doubling search, ``search``).
    criterion : {"sic", "ebic"}
        abess's special information criterion or the extended BIC.
    max_features : int, optional
        The largest size of the default grid (None: abess's n / (log log n · log p)).
    blas_threads : int or None
        As ``fit_os`` (one by default: the kernels' products are too small for more,
        and idle BLAS threads that spin slow a loaded machine down).
    extend : bool
        When the default grid's criterion is lowest at its largest size, go on past
        it (the same spacing, up to twice as far each time, warm-started) until a size
        beats the ones after it or s reaches min(p, n − 1); a grid that still ends at
        its best size warns (``PathEdgeWarning``).
    search : {"auto", "grid", "refine"}
        "grid" runs the sizes as above; "refine" (the squared loss, with neither
        ``sizes`` nor ``max_features`` given) doubles s and refines by backward
        elimination (the module's docstring); "auto" refines where it can and the
        grid's default largest size is at least ``REFINE_FROM``.

    Returns
    -------
    PathResult
        The sizes run, a ``FitResult`` and a criterion value for each, and the index
        of the chosen one (``best`` is its fit).
    """
    loss = Loss.parse(loss)
    stream: FeatureStream = as_stream(source)
    if standardize:
        stream = Standardized(stream)
    n, p = stream.n_samples, stream.n_features
    y = check_labels(y, loss, n)
    check_choice("criterion", criterion, CRITERIA)
    check_choice("search", search, SEARCHES)
    refine = sizes is None and max_features is None and loss is Loss.SQUARED
    if search == "refine" and not refine:
        raise InputError("search='refine' is for the squared loss, with neither sizes "
                         "nor max_features given")
    # "auto": on small problems the grid costs little, and where n is small against
    # log p, least squares on a selected set fits noise features well enough to pass
    # the criterion, which the grid's ridge-fitted OS objective does not
    refine = search == "refine" or (refine and search == "auto" and
                                    default_sizes(n, p)[-1] >= REFINE_FROM)
    # the doubling's fits only find candidates for the last one: two passes each,
    # unless the user set the passes
    scouting = 2 if isinstance(epochs, str) and epochs == "auto" else None
    extend = extend and sizes is None and max_features is None
    if refine:
        sizes = [1]
    elif sizes is None:
        if max_features is not None:
            max_features = check_sparsity(max_features, p)
        sizes = default_sizes(n, p, max_features)
    sizes = [check_sparsity(size, p) for size in sizes]
    if not sizes or any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise InputError(f"sizes must be a nonempty increasing list of budgets, got "
                         f"{sizes}")
    warn_if_interpolating(sizes[-1], n)
    rule = resolve_rule(rule)
    epochs = resolve_epochs(epochs, rule)
    ridge = check_ridge(ridge)
    if blas_threads is not None:
        blas_threads = check_at_least("blas_threads", blas_threads, 1, integer=True)
    fits, values = [], []

    def run(part: list[int], start=None, most: int | None = None) -> list[int]:
        """OS at each size of ``part`` on one kept set of room for the largest,
        warm-started from the fit ``start`` (the path's last so far) if given; a
        continuation (``start``) stops once ``PAST_BEST`` sizes in a row are worse
        than the best.  ``most``: at most that many passes.  Returns the sizes run."""
        step = StepSize()
        largest = part[-1]
        m = step.block_factor(n, largest)
        kept, blocks = kept_set(stream, largest, None, rule, ridge=ridge, loss=loss,
                                intercept=bool(intercept))
        warm_up(kept)
        if start is not None and start.selected.size:
            kept.load(start.selected, stream.columns(start.selected), start.weights)
        state = step.state(loss, n, largest)
        for size in part:
            kept.set_limit(size)
            with blas_limit(blas_threads):
                fit = passes(kept, blocks, y, loss, m, state,
                             min(epochs, most or epochs), rule == "fitted", p, progress)
            if not fits:
                refuse_all_zero(fit, stream, y)
            if intercept:
                fit.intercept = kept.intercept
            if standardize:
                mean, scale = stream.stats(fit.selected)
                fit.standardization = {"mean": mean, "scale": scale}
            fits.append(fit)
            values.append(criterion_value(criterion, loss, fit.objective, n, p,
                                          len(fit.selected)))
            if start is not None and len(values) - 1 - int(np.argmin(values)) >= \
                    PAST_BEST:
                return part[:part.index(size) + 1]
        return part

    if refine:
        # least squares interpolates as s nears n, and its RSS, heading for 0, then
        # sends any criterion to the largest size: the search stays below n/2
        return _refine(run, stream, y, criterion, max(1, min(p, n // 2)), fits, values,
                       bool(intercept), scouting)
    run(sizes)
    chosen = int(np.argmin(values))
    while extend and chosen == len(sizes) - 1 and len(sizes) > 1:
        # the default path ended at its best size: the best may lie beyond it
        more = _continuation(sizes, min(p, n - 1))
        if not more:
            break
        sizes = sizes + run(more, start=fits[-1])
        chosen = int(np.argmin(values))
    if chosen == len(sizes) - 1 and len(sizes) > 1:
        warnings.warn(f"{criterion} picked s = {sizes[-1]}, the largest size on the "
                      "path: the best size may be larger (raise max_features)",
                      PathEdgeWarning, stacklevel=2)
    return PathResult(sizes, fits, criterion, values, chosen,
                      sum(f.seconds for f in fits))


class _Start(NamedTuple):
    """A kept set to warm-start from (``fit_path``'s ``run``)."""
    selected: np.ndarray
    weights: np.ndarray


def _refine(run, stream, y, criterion: str, ceiling: int, fits: list, values: list,
            intercept: bool, scouting: int | None) -> PathResult:
    """The doubling search (squared loss): OS at s = 8, 16, 32, … (``run``, each
    warm-started from the last) until the criterion of the last fit's kept set,
    eliminated backwards (``backward_rss``), is lowest at a size k at most ``INSIDE``
    of s, or s reaches ``ceiling``; then OS at k, warm-started from the k features
    the elimination keeps.  ``fits`` and ``values`` are ``run``'s lists; the
    doubling's warm-started fits take at most ``scouting`` passes (None: all)."""
    n, p = stream.n_samples, stream.n_features
    ran = [min(FIRST, ceiling)]   # below it, a pass costs about as much anyway
    run(ran)   # from cold: all its passes (two left the truth half found at s = 8)
    while True:
        fit, size = fits[-1], ran[-1]
        order, rss = backward_rss(stream.columns(fit.selected), y, intercept)
        curve = [criterion_value(criterion, Loss.SQUARED, rss[k] / (2 * n), n, p, k)
                 for k in range(1, len(rss))]
        best = 1 + int(np.argmin(curve)) if curve else 1
        if best <= INSIDE * size or size >= ceiling:
            break
        ran.append(min(2 * size, ceiling))
        run(ran[-1:], start=fit, most=scouting)
    keep = np.sort(order[:best])
    run([best], start=_Start(fit.selected[keep], fit.weights[keep]))
    by_size = dict(zip(ran, zip(fits[:-1], values[:-1])))
    by_size[best] = (fits[-1], values[-1])   # the refined fit stands for its size
    sizes = sorted(by_size)
    if best == ceiling:
        warnings.warn(f"{criterion} picked s = {best}, the largest size searched "
                      f"(min(p, n/2)): the best size may be larger",
                      PathEdgeWarning, stacklevel=3)
    return PathResult(sizes, [by_size[k][0] for k in sizes], criterion,
                      [by_size[k][1] for k in sizes], sizes.index(best),
                      sum(f.seconds for f in fits),
                      extra={"elimination": {"from": size, "values": curve}})


def backward_rss(columns: np.ndarray, y: np.ndarray, intercept: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Least squares on the s rows of ``columns`` (s × n), then backward elimination:
    drop the column whose removal raises the RSS least, refit, repeat.  Exact, by
    downdating G⁻¹ = (X_S X_Sᵀ)⁻¹: dropping column i raises the RSS by w_i²/[G⁻¹]_ii
    and moves w by −w_i G⁻¹e_i/[G⁻¹]_ii (the optimal-brain-surgeon step, exact for the
    squared loss).  O(n·s² + s³).  ``intercept``: an unpenalised intercept in every
    model (columns and y centred).  Returns (the columns in the order they leave
    last, so ``order[:k]`` is the model of size k; RSS_k for k = 0..s)."""
    X = np.asarray(columns, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if intercept:
        X = X - X.mean(axis=1, keepdims=True)
        y = y - y.mean()
    s = X.shape[0]
    gram = X @ X.T
    gram[np.diag_indices(s)] += 1e-12 * max(float(np.trace(gram)) / max(s, 1), 1e-300)
    inverse = np.linalg.inv(gram)
    b = X @ y
    w = inverse @ b
    rss = np.empty(s + 1)
    rss[s] = max(float(y @ y - b @ w), 0.0)
    alive = np.ones(s, dtype=bool)
    dropped = []
    for k in range(s, 0, -1):
        diagonal = np.diag(inverse)
        with np.errstate(divide="ignore", invalid="ignore"):
            cost = np.where(alive, w * w / diagonal, np.inf)
        i = int(np.argmin(cost))
        rss[k - 1] = rss[k] + max(float(cost[i]), 0.0)
        column = inverse[:, i].copy()
        w -= column * (w[i] / column[i])
        inverse -= np.outer(column, column) / column[i]
        alive[i], w[i] = False, 0.0
        inverse[i, :] = inverse[:, i] = 0.0
        dropped.append(i)
    return np.array(dropped[::-1], dtype=np.int64), rss
