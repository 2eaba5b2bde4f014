"""Sparse group hard thresholding (Xiang, Yang and Ye, 2014): projected gradient onto
{at most s1 features in at most s2 groups}, with the exact bi-level projection by
dynamic programming (``asyos.core.projection``) and ISTA, ISTA with line search,
FISTA and FISTA-C steps.  The mathematics is in docs/algorithms.md.
"""

from .solver import STARTS, VARIANTS, fit_sght, sght_solve

__all__ = ["STARTS", "VARIANTS", "fit_sght", "sght_solve"]
