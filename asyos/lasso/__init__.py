"""The Lasso family: L1-penalised least squares (and L1 classification by FISTA) by
coordinate descent with gap-safe screening (Ndiaye et al., 2017) or SAIF (Ren et al.,
2018), warm-started paths, the fused Lasso by a change of variables, and λ chosen for
a given number of features.  The mathematics is in docs/algorithms.md.

``path``: checks, the design (dense, sparse, or a fused transform) and the warm-started
path; ``screening``: the coordinate-descent and gap-safe kernels; ``saif``: the SAIF
loop; ``selector``: FISTA, λ_max and the λ that selects s features.
"""

from .path import SCREENINGS, solve_path
from .selector import fista, fit_lasso, lambda_for_s, lambda_max

__all__ = ["SCREENINGS", "fista", "fit_lasso", "lambda_for_s", "lambda_max", "solve_path"]
