"""The default step size η and block factor m, derived from the data as it streams.

Theorem 1 of Yang et al. (KDD 2016) wants the step on the block S ∪ {j} below 1/L_F,
L_F being the smoothness constant restricted to s+1 columns, estimated by the
random-matrix bound for standardised Gaussian-like columns:

    L̂_F = curv · κ · ν_max,   κ = (1 + sqrt((s+1)/n))²,   ν_max = max_j ‖x_j‖² / n

with ν_max the running maximum over the columns seen so far (η only shrinks as larger
columns arrive).  Algorithm 1 steps by η on the newcomer and by η/m on the kept block,
i.e. it is a gradient step in the diagonal metric diag(η/m on S, η on j).  When the
newcomer is weakly correlated with S, the descent condition splits into η/m < 1/L_F on
the block and η < 1/(curv·‖x_j‖²/n) on the newcomer, so the default rule is

    η = min(1, m · BLOCK_FACTOR / κ) / (curv · ν_max),   m_auto = κ / BLOCK_FACTOR

With m = m_auto the newcomer takes the exact coordinate-minimising step of squared loss
(which admits features more readily, the lever of Theorem 3) while the block keeps the
step BLOCK_FACTOR / L̂_F = 0.9 / L̂_F (rather than the 0.5 / L_F that Theorem 1 favours:
Theorem 3 rewards larger steps, and 0.9 gave better recall).  With m = 1 the rule is the
plain η = 0.9 / L̂_F.  A safeguard (not in the paper) halves η whenever a step raises
the loss, which Theorem 1 forbids for steps inside the bound.  What the rule buys in
recall is measured in docs/architecture.md ("Step size").
"""

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .losses import Loss
from .validate import check_at_least

BLOCK_FACTOR = 0.9

# The kernels' step-size state is one float64 array (compiled kernels update it in
# place); these constants name its slots: η in force, whether the default rule adapts
# it, the rule's η·ν_max, the running ν_max, the safeguard's shrink factor, the loss
# after the last step, and the count of substitutions (kept features dropped).
ETA, ADAPTIVE, COEF, NU_MAX, SHRINK, LAST_LOSS, SUBSTITUTIONS = range(7)


def check_scale(nu_max: float) -> None:
    """The default rule divides by ν_max = max ‖x‖²/n: when that overflows, η would
    silently be 0 and nothing would be learnt."""
    if not math.isfinite(nu_max):
        raise InputError("a feature's squared norm ‖x‖²/n overflows float64 (values "
                         "beyond about 1e150): rescale the data")


def block_kappa(n_samples: int, capacity: int) -> float:
    """κ = (1 + sqrt((s+1)/n))²: the random-matrix factor (λ_max(X_BᵀX_B)/n ≈ κ for
    an n×(s+1) standard Gaussian block X_B)."""
    return (1.0 + math.sqrt((capacity + 1.0) / n_samples)) ** 2


def _is_auto(value) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() == "auto")


@dataclass(frozen=True)
class StepSize:
    """η and m as the user gave them: a number, or None for the default rule."""

    eta: float | None = None
    m: float | None = None

    @classmethod
    def parse(cls, eta="auto", m="auto") -> "StepSize":
        """``"auto"``/None → the default rule; otherwise a positive η, an m ≥ 1."""
        if not _is_auto(eta):
            try:
                eta = float(eta)
            except (TypeError, ValueError):
                raise InputError(f"eta must be a positive number or 'auto', "
                                 f"got {eta!r}") from None
            if not (eta > 0.0 and math.isfinite(eta)):
                raise InputError(f"eta must be a positive finite number, got {eta!r}")
        else:
            eta = None
        if not _is_auto(m):
            try:
                m = float(m)
            except (TypeError, ValueError):
                raise InputError(f"m must be a number ≥ 1 or 'auto', got {m!r}") from None
            m = check_at_least("m", m, 1.0)
        else:
            m = None
        return cls(eta=eta, m=m)

    def block_factor(self, n_samples: int, capacity: int) -> float:
        """m in force: the user's, else κ/BLOCK_FACTOR when η is automatic, else 1."""
        if self.m is not None:
            return self.m
        if self.eta is None:
            return block_kappa(n_samples, capacity) / BLOCK_FACTOR
        return 1.0

    def coefficient(self, loss: Loss, n_samples: int, capacity: int) -> float:
        """The rule's η · ν_max: min(1, m · BLOCK_FACTOR / κ) / curv."""
        m = self.block_factor(n_samples, capacity)
        return min(1.0, m * BLOCK_FACTOR / block_kappa(n_samples, capacity)) / \
            loss.curvature

    def state(self, loss: Loss, n_samples: int, capacity: int) -> np.ndarray:
        """The kernels' step-size state (slots ``ETA`` … ``SUBSTITUTIONS``).

        With ``ADAPTIVE`` set the kernel keeps η = shrink · coef / ν_max.
        """
        state = np.zeros(SUBSTITUTIONS + 1)
        state[ETA] = 0.0 if self.eta is None else self.eta
        state[ADAPTIVE] = float(self.eta is None)
        state[COEF] = self.coefficient(loss, n_samples, capacity)
        state[SHRINK] = 1.0
        state[LAST_LOSS] = np.inf
        return state
