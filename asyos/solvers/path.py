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
"""

import math
import warnings
from dataclasses import dataclass, field

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
from .sequential import blas_limit, passes

CRITERIA = ("sic", "ebic")
PATH_POINTS = 20   # sizes on the default path
PAST_BEST = 3      # a path's continuation stops this many sizes past its best


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
                "selected": [f.selected.tolist() for f in self.fits]}


def fit_path(source, y, sizes=None, *, loss="squared", criterion="sic",
             max_features=None, epochs="auto", rule="auto", ridge=None,
             standardize=False, progress=None, intercept=False,
             blas_threads: int | None = 1, extend: bool = True) -> PathResult:
    """OS for every budget in ``sizes`` (increasing; None: ``default_sizes`` up to
    ``max_features``), each warm-started from the last, and the size ``criterion``
    ("sic" or "ebic") picks.  Other arguments as for ``fit_os``; η and m are the
    default rule's (the path is the fitted rule's home: "auto" runs it on dense data).
    ``blas_threads``: as ``fit_os`` (one by default: the kernels' products are too
    small for more, and idle BLAS threads that spin slow a loaded machine down).
    ``extend``: when the default path's criterion is lowest at its largest size, go
    on past it (the same spacing, up to twice as far each time, warm-started) until a
    size beats the ones after it or s reaches min(p, n − 1); a path that still ends at
    its best size warns (``PathEdgeWarning``).
    """
    loss = Loss.parse(loss)
    stream: FeatureStream = as_stream(source)
    if standardize:
        stream = Standardized(stream)
    n, p = stream.n_samples, stream.n_features
    y = check_labels(y, loss, n)
    check_choice("criterion", criterion, CRITERIA)
    extend = extend and sizes is None and max_features is None
    if sizes is None:
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

    def run(part: list[int], start=None) -> list[int]:
        """OS at each size of ``part`` on one kept set of room for the largest,
        warm-started from the fit ``start`` (the path's last so far) if given; a
        continuation (``start``) stops once ``PAST_BEST`` sizes in a row are worse
        than the best.  Returns the sizes run."""
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
                fit = passes(kept, blocks, y, loss, m, state, epochs, rule == "fitted",
                             p, progress)
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
