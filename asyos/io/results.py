"""Results: a JSON document people can read, and an ``.npz`` of the weights beside it.

The JSON holds the selection, its history (objective per epoch, the trace of loss vs
steps and seconds, Asy-OS per-worker and staleness statistics), the configuration and
the package versions; the ``.npz`` (same name, suffix ``.npz``) holds the arrays
exactly (selected indices, weights, standardization statistics).  ``schema_version``
lets readers evolve: ``load_result`` reads version 1 (JSON only) and 2.
"""

import json
import platform
from pathlib import Path

import numpy as np

from .._version import __version__
from ..errors import InputError
from ..solvers.result import FitResult

SCHEMA_VERSION = 2   # 2: weights also in an .npz beside the JSON ("arrays")


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


def arrays_path(path) -> Path:
    """The ``.npz`` that goes with the results JSON ``path``."""
    return Path(path).with_suffix(".npz")


def _arrays(result: FitResult) -> dict[str, np.ndarray]:
    arrays = {"selected": np.asarray(result.selected, dtype=np.int64),
              "weights": np.asarray(result.weights, dtype=np.float64)}
    for name, values in (result.standardization or {}).items():
        arrays[f"standardization_{name}"] = np.asarray(values, dtype=np.float64)
    return arrays


def _replace(path: Path, write) -> None:
    """Write through a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
    tmp.replace(path)


def write_result(path, result: FitResult) -> None:
    """Write ``result`` (plus schema and versions) to ``path``, and its arrays to
    the ``.npz`` beside it."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        raise InputError(f"{path}: the results file is JSON (its arrays go to a .npz "
                         "beside it); give another name")
    npz = arrays_path(path)
    document = {"schema_version": SCHEMA_VERSION, **result.to_document(),
                "arrays": npz.name, "versions": package_versions()}
    _replace(npz, lambda f: np.savez(f, **_arrays(result)))
    text = json.dumps(document, indent=1, default=_plain).encode()
    _replace(path, lambda f: f.write(text))


def read_result(path) -> dict:
    return json.loads(Path(path).read_text())


def load_result(path) -> FitResult:
    """Read a results JSON (schema 1 or 2) and, when there is one, its ``.npz``: the
    same ``FitResult`` the run returned, with ``context`` saying where it came from
    (path, schema_version, versions) and what the command line added (data, config,
    truth)."""
    path = Path(path)
    try:
        document = read_result(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable results file ({exc})") from None
    version = document.get("schema_version") if isinstance(document, dict) else None
    if version not in (1, SCHEMA_VERSION):
        raise InputError(f"{path}: unknown results schema_version {version!r} (this "
                         f"asyos reads 1 and {SCHEMA_VERSION})")
    selected = weights = None
    if version >= 2 and document.get("arrays"):
        npz = path.with_name(document["arrays"])
        if npz.is_file():   # exact floats; the JSON copy is the fallback
            with np.load(npz, allow_pickle=False) as arrays:
                selected, weights = arrays["selected"], arrays["weights"]
    return FitResult.from_document(document, selected, weights, path=path,
                                   schema_version=int(version))
