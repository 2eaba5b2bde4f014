"""Results as JSON: the selection, its history, the configuration and the versions.

A ``schema_version`` lets later readers (``asyos.load_result``) evolve the format.
"""

import json
import platform
from pathlib import Path

import numpy as np

from .._version import __version__

SCHEMA_VERSION = 1


def package_versions() -> dict:
    """Versions of what produced a result, for reproducibility."""
    import numba

    versions = {"asyos": __version__, "python": platform.python_version(),
                "numpy": np.__version__, "numba": numba.__version__}
    try:
        import mpi4py

        versions["mpi4py"] = mpi4py.__version__
    except ImportError:
        pass
    return versions


def _plain(value):
    """numpy scalars and arrays → JSON-native values."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_result(path, payload: dict) -> None:
    """Write ``payload`` (plus schema and versions) to ``path`` atomically."""
    document = {"schema_version": SCHEMA_VERSION, **payload,
                "versions": package_versions()}
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=1, default=_plain))
    tmp.replace(path)


def read_result(path) -> dict:
    return json.loads(Path(path).read_text())
