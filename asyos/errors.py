"""Exceptions that are part of the interface.

``InputError`` is what a user can fix (a wrong shape, a NaN, an impossible s); the CLI
turns it into a one-line message and exit status 2.  It is always raised *before* any
state is changed.
"""

import signal
import warnings


class AsyosError(Exception):
    """Base class of every error asyos raises on purpose."""


class InputError(AsyosError, ValueError):
    """Bad user input: data, labels or parameters. CLI exit status 2."""


class PartialRun(AsyosError):
    """An Asy-OS run that ended without some of its shards (lost and not replaced).
    Its results are written, marked ``partial``, but it is not a success: the CLI
    exits with status 3 unless the user accepted partial results."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where ^C raises ``KeyboardInterrupt`` (``raise_terminated``), so
    that whatever ends cleanly on ^C ends cleanly on SIGTERM.  The CLI says
    "asyos: terminated" and exits with status 143 (128 + 15)."""


def raise_terminated(signum, frame):
    """A SIGTERM handler: ``signal.signal(signal.SIGTERM, raise_terminated)``.  Once:
    a second SIGTERM (mpiexec forwards one while something else signals the rank too)
    is ignored, so it cannot cut short the clean end the first began."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


class ConvergenceWarning(UserWarning):
    """A solver stopped at its iteration cap before its convergence test held (SGHT,
    the Lasso path, FGM).  The message names the solver, the cap and how far from
    convergence it stopped.  The solvers below the estimators may not import
    scikit-learn, so this is asyos's own class; the scikit-learn estimators pass
    ``sklearn.exceptions.ConvergenceWarning`` as the solvers' ``convergence_warning``
    instead, and any solver takes ``convergence_warning=None`` to stay silent."""


def warn_unconverged(category, message: str, stacklevel: int = 3) -> None:
    """A solver's ``convergence_warning`` (``category``) with ``message``, at the
    caller of the solver that calls this; None stays silent."""
    if category is not None:
        warnings.warn(message, category, stacklevel=stacklevel)


class StallWarning(UserWarning):
    """A pass of OS swapped features without lowering the loss: the substitutions are
    not paying (the paper's rule on columns of very different scales does this).  The
    fitted rule stops after such a pass instead."""


class DegenerateWarning(UserWarning):
    """A result that is valid arithmetic but probably not what was meant: a constant
    (or all-zero) column selected with a nonzero weight, which in a model without an
    intercept only stands in for one."""


def warn_constant_selected(indices, stacklevel: int = 3) -> None:
    """The ``DegenerateWarning`` for selected constant columns ``indices`` (nonzero
    weights), the same words for every solver that finds them."""
    if len(indices):
        warnings.warn(f"selected constant column(s) {list(map(int, indices))} with a "
                      "nonzero weight: the model has no intercept, so a constant "
                      "column stands in for one; centre y or standardize the columns "
                      "to fit without it", DegenerateWarning, stacklevel=stacklevel + 1)


def warn_zero_labels(constant: bool = False, stacklevel: int = 3) -> None:
    """The ``DegenerateWarning`` for labels OS sees as all zero (``constant``: a
    constant y, all zero once centred for its intercept): every weight is then 0, and
    which features are "selected" is arbitrary, the same words on every front."""
    what = ("y is constant: centred for the intercept it is all zero" if constant
            else "the labels are all zero")
    warnings.warn(f"{what}, so every weight is 0 and the selected features mean "
                  "nothing (are these the right labels?)", DegenerateWarning,
                  stacklevel=stacklevel + 1)


class PathEdgeWarning(UserWarning):
    """A path over sizes s picked its largest size: the criterion was still falling
    there, so the best size may lie beyond the path (raise ``max_features``)."""
