"""What an iterative solver with an iteration cap returns, and how it ends."""

from dataclasses import dataclass, field

import numpy as np

from ..errors import warn_unconverged


@dataclass
class Iterates:
    """The final iterate, the objective after every accepted iteration, and whether
    the solver's convergence test held before its cap."""

    w: np.ndarray
    objective: list = field(default_factory=list)
    converged: bool = False

    def finish(self, w: np.ndarray, convergence_warning, message: str):
        """Close with the final iterate ``w``; a solver stopped by its cap warns with
        ``convergence_warning`` (None: silent) and ``message``, at its caller."""
        self.w = w
        if not self.converged:
            warn_unconverged(convergence_warning, message, stacklevel=4)
        return self
