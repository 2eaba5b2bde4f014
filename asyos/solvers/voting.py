"""OS over several feature orders, its selection decided by a vote.

OS is a local search: which features it ends with depends on the order in which they
arrive (docs/algorithms.md, "Several orders, one vote").  Where the data barely
determine the support (few samples per true feature, as in the paper's classification
protocol, n = 1.2·s·log₂p), runs in different orders agree on the strong features and
scatter on the weak ones.  ``fit_os_voted`` runs OS in ``orders`` orders (the stream's
own, then seeded random ones, ``FeatureStream.reordered``), counts how often each
feature was kept, keeps the s most kept (ties go to the run with the lowest loss),
and fits OS once more on those s columns alone for their weights.  The runs are
sequential: memory stays O(n·s).

Only the first order reads every feature.  The others run over its contenders:
its selection, and the ``CONTENDERS``·s best of the rest by |x_jᵀ∇L(u)| / ‖x_j‖ both
at its final u (the closing sweep's score) and at u = 0 (the marginal screen of sure
independence screening, Fan & Lv 2008).  A feature that neither test ranks near the
top is one that orders do not trade; over the paper's classification protocol and
planted rare words the vote over contenders recalled as many true features as over
every feature (paired, 12–20 seeds), in a half to a fifth of the time, and on real
text a seventh (docs/results.md, "The later orders over the first order's
contenders").

The fronts' default stops the vote after two orders where they agree (``agreement``):
where the second order keeps at least ``AGREEMENT`` of the first's features, the
orders land in one basin, and the later ones only trade the few features the two
already trade (near-duplicate words on real text).  Where the vote pays, on the
paper's classification protocol and on planted rare words, the second order keeps
0.35–0.88 of the first's; on man pages 0.87–0.95 (docs/results.md, "A vote that stops
where the orders agree").
"""

import numpy as np

from ..core.kept_set import resolve_epochs
from ..core.losses import Loss
from ..core.sweep import sweep_candidates
from ..core.validate import check_at_least, check_sparsity
from ..errors import InputError
from ..streams import as_stream
from .result import FitResult
from .sequential import fit_os

# Passes per order when ``epochs`` is "auto": the vote averages out what a run would
# still change after its third pass (recall 0.642 against 0.649 for runs to
# convergence at p = 5000, s = 100, in 0.64 of the time: docs/results.md).
PASSES_PER_ORDER = 3
# A vote's tie goes to the features of the run with the lowest loss.
TIE_BREAK = 0.5
# The orders after the first run over its selection and this many times s more
# features by each of two scores (``contenders``).
CONTENDERS = 4
# Orders that vote when the fronts' "auto" is asked for, for a classification loss:
# recall 0.547 → 0.594 at p = 2048, s = 32 and 0.614 → 0.642 at p = 5000, s = 100
# (docs/results.md).  Regression at the paper's sizes ends in one place from any
# order, so it keeps one.
CLASSIFICATION_ORDERS = 8
# The fronts' "auto" stops after the second order where it keeps at least this part
# of the first's selection (``fit_os_voted``'s ``agreement``).
AGREEMENT = 0.85


def default_orders(loss) -> int:
    """The most orders of the fronts' ``"auto"`` (the estimators' ``n_orders``, the
    CLI's ``--orders``) for a sequential fit of a fixed size without groups."""
    return CLASSIFICATION_ORDERS if Loss.parse(loss).is_classification else 1


def resolve_orders(orders, loss, one_order: bool) -> tuple[int, float | None]:
    """``fit_os_voted``'s (orders, agreement) for the fronts' ``orders``: a number as
    given, with every order run; "auto" ``default_orders``, stopping where the first
    two agree (``AGREEMENT``), or one where only one order can run (``one_order``:
    Asy-OS, groups, a stream that cannot be read in another order)."""
    if not (isinstance(orders, str) and orders == "auto"):
        return int(orders), None
    orders = 1 if one_order else default_orders(loss)
    return orders, AGREEMENT if orders > 1 else None


def most_steps(n_features: int, s: int, orders: int, epochs, rule,
               sweep: int = 0) -> int:
    """The most feature steps ``fit_os_voted`` takes (a progress bar's total): every
    order's passes (the first over every feature, the others over at most
    (1 + 2·``CONTENDERS``)·s), each with the ``sweep`` arrivals that may end it, and
    with several orders the refit's on at most s features."""
    if orders == 1:
        return (n_features + sweep) * resolve_epochs(epochs, rule)
    passes = PASSES_PER_ORDER if epochs == "auto" else epochs
    field = min(n_features, (1 + 2 * CONTENDERS) * s)   # ``contenders``, at most
    return ((n_features + sweep) + (orders - 1) * (field + sweep)) * passes + \
        s * resolve_epochs("auto", rule)


def contenders(stream, y, s: int, loss, first: FitResult, every: int) -> np.ndarray:
    """The features the orders after ``first`` run over: its selection and the
    ``every``·s best of the others by |x_jᵀ∇L(u)| / ‖x_j‖ at its final u and at
    u = 0 (sorted, unique).  Reads the stream twice (once where it holds its columns
    in memory in one product's form: ``column_scores``)."""
    loss = Loss.parse(loss)
    u = np.zeros(stream.n_samples)
    if first.selected.size:
        u += first.weights @ stream.columns(first.selected)
    if first.intercept:
        u += first.intercept
    ranked = [sweep_candidates(lambda: stream.step_blocks(0), at, y, loss,
                               first.selected, every * s, stream)
              for at in (u, np.zeros_like(u))]
    return np.unique(np.concatenate([first.selected, *ranked]))


def fit_os_voted(source, y, s, *, orders: int = 8, seed: int = 0, epochs="auto",
                 loss="squared", contenders_per_s: int | None = CONTENDERS,
                 agreement: float | None = None, **options) -> FitResult:
    """OS in ``orders`` feature orders; the ``s`` features kept most often, refit.

    Parameters
    ----------
    source, y, s, loss : as for ``fit_os``
        The data, the budget and the loss.
    orders : int, default=8
        How many orders: the stream's own, then ``orders - 1`` random orders drawn
        from ``seed + 1``, ``seed + 2``, …  (1: ``fit_os`` itself).
    seed : int, default=0
        The first random order's seed.
    contenders_per_s : int or None, default=CONTENDERS
        The orders after the first run over its ``contenders`` (this many times s by
        each score); None: over every feature.
    agreement : float in (0, 1] or None, default=None
        Stop after the second order where it keeps at least this part of the first
        order's selection (the vote is then the better of the two, refit); None: run
        every order.
    epochs : int or "auto", default="auto"
        Passes per order ("auto": ``PASSES_PER_ORDER``, or ``fit_os``'s own with one
        order); the refit on the chosen features runs to convergence.
    **options : keyword arguments
        ``fit_os``'s other options (eta, m, rule, ridge, intercept, blas_threads…),
        passed to every run.

    Returns
    -------
    FitResult
        The refit's selection, weights and history; ``context["vote"]`` holds the
        orders that ran and the most that could, the passes per order, each order's
        loss, the second order's agreement with the first, and the votes of the
        selected features.
    """
    orders = check_at_least("orders", orders, 1, integer=True)
    seed = check_at_least("seed", seed, 0, integer=True)
    if agreement is not None and (isinstance(agreement, bool) or not (
            isinstance(agreement, (int, float, np.floating)) and 0 < agreement <= 1)):
        raise InputError(f"agreement must be a number in (0, 1] or None, got "
                         f"{agreement!r}")
    if orders == 1:
        return fit_os(source, y, s, loss=loss, epochs=epochs, **options)
    if options.get("groups") is not None:
        raise InputError("orders > 1 does not take groups: the vote counts features, "
                         "not groups")
    stream = as_stream(source)
    s = check_sparsity(s, stream.n_features)
    passes = PASSES_PER_ORDER if epochs == "auto" else epochs
    runs = [fit_os(stream, y, s, loss=loss, epochs=passes, **options)]
    field = stream
    if contenders_per_s is not None:
        every = check_at_least("contenders_per_s", contenders_per_s, 1, integer=True)
        field = stream.subset(contenders(stream, y, s, loss, runs[0], every))
    agreed = None
    for k in range(1, orders):
        runs.append(fit_os(field.reordered(seed + k), y, min(s, field.n_features),
                           loss=loss, epochs=passes, **options))
        if k == 1:
            agreed = agreement_of(runs[0], runs[1])
            if agreement is not None and agreed >= agreement:
                break
    votes = np.zeros(stream.n_features)
    for run in runs:
        votes[run.selected] += 1
    best = min(runs, key=lambda run: run.objective)
    votes[best.selected] += TIE_BREAK
    kept = np.flatnonzero(votes)
    chosen = np.sort(kept[np.argsort(-votes[kept], kind="stable")[:s]])
    result = fit_os(stream.subset(chosen), y, len(chosen), loss=loss, **options)
    result.n_steps += sum(run.n_steps for run in runs)
    result.seconds += sum(run.seconds for run in runs)
    result.context["vote"] = {
        "orders": len(runs), "most_orders": orders, "agreement": agreed,
        "passes_per_order": passes, "contenders": field.n_features,
        "objectives": [run.objective for run in runs],
        "votes": np.floor(votes[result.selected]).astype(int).tolist()}
    return result


def agreement_of(first: FitResult, second: FitResult) -> float:
    """The part of ``first``'s selection that ``second`` keeps too (1 where
    ``first`` selects nothing)."""
    if not first.selected.size:
        return 1.0
    return np.intersect1d(first.selected, second.selected).size / first.selected.size
