"""The feature generating machine (Tan, Tsang and Wang, 2014): a cutting-plane method
that adds the B most violated features of a (possibly implicit, e.g. degree-2) feature
space per round and solves a multiple-kernel subproblem over the active groups.  The
mathematics is in docs/algorithms.md.

``cutting_plane``: the outer loop and the checks; ``search``: the most-violated-feature
search over explicit, streamed and polynomial spaces; ``apg``: the compiled
accelerated proximal-gradient subproblem solver.
"""

from .cutting_plane import FGMResult, check_fgm, fgm, fit_fgm, make_space

__all__ = ["FGMResult", "check_fgm", "fgm", "fit_fgm", "make_space"]
