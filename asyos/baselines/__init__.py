"""The comparators of the OS paper (Proj-GD/IHT, Grafting, online L1/L0 coordinate
descent) and of the SGHT paper (sparse group Lasso, OMP, gOMP).

Each returns a ``Selection`` (``asyos.core.selection``) so the experiments score every
method alike; the registry of legend names lives with the experiments
(``asyos.experiments.comparators.METHODS``).  The Lasso, FGM and SGHT, which users
call in their own right, have their own packages.
"""

from .grafting import fit_grafting
from .iht import fit_iht
from .online_cd import fit_l0_cd, fit_l1_cd

__all__ = ["fit_grafting", "fit_iht", "fit_l0_cd", "fit_l1_cd"]
