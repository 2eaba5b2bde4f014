"""asyos: Online Substitution feature selection in O(n·s) memory."""

from . import _signals

if _signals.is_command():   # before anything slow: ^C interrupts from here on
    _signals.at_entry()

from importlib import import_module  # noqa: E402

# first: numba fixes a kernel's cache folder when it decorates it
from . import _kernel_cache  # noqa: E402, F401
from ._version import PROTOCOL_VERSION, __version__  # noqa: E402
from .core.losses import Loss  # noqa: E402
from .core.projection import bilevel_projection  # noqa: E402
from .errors import AsyosError, InputError  # noqa: E402
from .solvers.result import FitResult  # noqa: E402
from .solvers.sequential import fit_os  # noqa: E402

# Public names whose modules need an optional extra (scikit-learn) or are heavy to
# import: loaded on first use, so ``import asyos`` stays lean.
_LAZY = {
    "OnlineSubstitutionRegressor": ".estimators.os",
    "OnlineSubstitutionClassifier": ".estimators.os",
    "OnlineSubstitutionSelector": ".estimators.os",
    "load_result": ".io.results",
    "FGMClassifier": ".estimators.fgm",
    "FGMRegressor": ".estimators.fgm",
    "SGHTRegressor": ".estimators.sght",
    "SGHTClassifier": ".estimators.sght",
    "Lasso": ".estimators.lasso",
    "GroupLasso": ".estimators.lasso",
    "FusedLasso": ".estimators.lasso",
    "lasso_path": ".estimators.lasso",
}


# the extra that provides each optional package, for the message when one is missing
_EXTRAS = {"sklearn": "sklearn", "h5py": "hdf5", "matplotlib": "plot"}


def __getattr__(name):
    if name in _LAZY:
        try:
            module = import_module(_LAZY[name], __name__)
        except ModuleNotFoundError as exc:
            package = (exc.name or "").partition(".")[0]
            if package not in _EXTRAS:
                raise
            raise ImportError(f"asyos.{name} needs {package}: pip install "
                              f"'asyos[{_EXTRAS[package]}]'") from exc
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'asyos' has no attribute {name!r}")


__all__ = ["__version__", "PROTOCOL_VERSION", "fit_os", "FitResult", "Loss",
           "AsyosError", "InputError", "bilevel_projection", *_LAZY]
