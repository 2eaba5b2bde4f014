"""Grafting (Perkins & Theiler 2003): the online L1 baseline of Yang, Fujimaki,
Kusumura & Liu (KDD 2016).

It reads features through the same stream as OS but keeps every feature that passes
its gradient test until the L1 re-optimisation zeroes it, so its memory (the active
columns) is not bounded by s; ``peak_active`` records how large it got.
"""

from __future__ import annotations

import numpy as np

from ..core.losses import loss_grad
from ..core.selection import Selection, selection
from ..core.validate import (
    check_at_least,
    check_int,
    check_problem,
    check_stream_problem,
)
from ..errors import InputError
from ..lasso.selector import fista, lambda_for_s
from ..streams import FeatureStream, as_stream
from .iht import spectral_norm_sq

__all__ = ["fit_grafting"]

# The step 1/L of each re-optimisation: L from 20 Lanczos steps (within ~1e-4 of
# ‖X_A‖₂² for the active sets met here, where 50 steps cost as much as the FISTA
# itself) and 1% margin on top, since Lanczos never overestimates.
_LIP_ITERS = 20
_LIP_MARGIN = 1.01


def fit_grafting(X, y, s: int, loss="squared", epochs: int = 2,
                 lam: float | None = None, max_inner: int = 500,
                 tol: float = 1e-6) -> Selection:
    """Grafting with λ₀ = λ₂ = 0 (Perkins, Lacker & Theiler 2003 also allow ℓ0 and ℓ2
    penalties) over ``epochs`` passes of the stream.

    X is an (n, p) array or a FeatureStream.  For each arriving j not active: if
    |x_jᵀ g| > λ (the gradient test, g = dL/du at the current fit) j joins the active
    set A with w_j = 0, f(w_A) + λ‖w_A‖₁ is re-optimised by FISTA warm-started from
    the previous w_A (≤ ``max_inner`` iterations, relative change < ``tol``), and
    every feature of A left at exactly 0 is dropped with its column.

    λ defaults to ``lambda_for_s``, which needs X as an array; a stream
    needs ``lam=``.  Passes stop early once a whole pass admits nothing (nothing
    changes after that).  ``n_iter`` = passes run; ``peak_active`` = the largest |A|,
    counted right after an admission.  The selection is A cut to the top s by |w|.
    """
    epochs = check_int("epochs", epochs, 1)
    if isinstance(X, FeatureStream):
        stream = X
        y, s, loss = check_stream_problem(stream, y, s, loss)
        if lam is None:
            raise InputError("Grafting over a FeatureStream needs lam= (the default "
                             "λ comes from the LASSO path, which needs X as an array)")
    else:
        X, y, s, loss = check_problem(X, y, s, loss)
        stream = as_stream(X)
        if lam is None:
            lam = lambda_for_s(X, y, s, loss)
    lam = check_at_least("lam", lam, 0)

    n = stream.n_samples
    code = int(loss)
    active: list[int] = []          # global indices of A, aligned with XA rows and wA
    XA = np.zeros((0, n))           # the stored active columns, one per row
    wA = np.zeros(0)
    g = loss_grad(code, np.zeros(n), y, np.empty(n))
    peak = 0
    passes = 0
    for epoch in range(epochs):
        passes += 1
        admitted = False
        for index, block in stream.blocks(epoch):
            start = 0
            while start < len(index):
                # The gradient test for the rest of the block at the current g; the
                # first feature that passes is admitted and g changes after it.
                rest = index[start:]
                score = np.abs(block[start:] @ g)
                passes_test = (score > lam) & ~np.isin(rest, active)
                if not passes_test.any():
                    break
                k = start + int(np.argmax(passes_test))
                active.append(int(index[k]))
                XA = np.vstack([XA, block[k]])
                wA = np.append(wA, 0.0)
                peak = max(peak, len(active))
                lip = _LIP_MARGIN * loss.curvature * spectral_norm_sq(
                    XA, iters=_LIP_ITERS) / n
                wA, _ = fista(XA.T, y, lam, loss, w0=wA, lip=lip,
                              max_iter=max_inner, tol=tol, convergence_warning=None)
                keep = wA != 0.0
                if not keep.all():
                    active = [j for j, kept in zip(active, keep) if kept]
                    XA, wA = XA[keep], wA[keep]
                loss_grad(code, np.ascontiguousarray(XA.T @ wA), y, g)
                admitted = True
                start = k + 1
        if not admitted:
            break
    return selection(active, wA, s, "Grafting", passes, peak_active=peak)
