"""asyos: Online Substitution feature selection in O(n·s) memory."""

from ._version import PROTOCOL_VERSION, __version__

__all__ = ["__version__", "PROTOCOL_VERSION"]
