"""asyos: Online Substitution feature selection in O(n·s) memory."""

from ._version import PROTOCOL_VERSION, __version__
from .core.losses import Loss
from .errors import AsyosError, InputError
from .solvers.sequential import OSResult, fit_os

__all__ = ["__version__", "PROTOCOL_VERSION", "fit_os", "OSResult", "Loss",
           "AsyosError", "InputError"]
