"""Results: a JSON document people can read, and an ``.npz`` of the weights beside it.

The JSON holds the selection, its history (objective per epoch, the trace of loss vs
steps and seconds, Asy-OS per-worker and staleness statistics), the configuration and
the package versions; the ``.npz`` (same name, suffix ``.npz``) holds the arrays
exactly (selected indices, weights, standardization statistics).  ``schema_version``
lets readers evolve: ``load_result`` reads version 1 (JSON only) and 2.
"""

import json
import platform
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._version import __version__
from ..errors import InputError

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


def _arrays(payload: dict) -> dict[str, np.ndarray]:
    arrays = {"selected": np.asarray(payload["selected"], dtype=np.int64),
              "weights": np.asarray(payload["weights"], dtype=np.float64)}
    for name, values in (payload.get("standardization") or {}).items():
        arrays[f"standardization_{name}"] = np.asarray(values, dtype=np.float64)
    return arrays


def _replace(path: Path, write) -> None:
    """Write through a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
    tmp.replace(path)


def write_result(path, payload: dict) -> None:
    """Write ``payload`` (plus schema and versions) to ``path``, and its arrays to
    the ``.npz`` beside it."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        raise InputError(f"{path}: the results file is JSON (its arrays go to a .npz "
                         "beside it); give another name")
    npz = arrays_path(path)
    document = {"schema_version": SCHEMA_VERSION, **payload, "arrays": npz.name,
                "versions": package_versions()}
    _replace(npz, lambda f: np.savez(f, **_arrays(payload)))
    text = json.dumps(document, indent=1, default=_plain).encode()
    _replace(path, lambda f: f.write(text))


def read_result(path) -> dict:
    return json.loads(Path(path).read_text())


@dataclass
class Result:
    """A results file as objects: what was selected, how it got there, with what."""

    path: Path
    schema_version: int
    selected: np.ndarray          # sorted feature indices
    weights: np.ndarray           # aligned with ``selected``
    config: dict
    data: dict
    history: dict                 # objective per epoch, trace, and Asy-OS statistics
    document: dict = field(repr=False)   # the whole JSON

    @property
    def objective(self) -> float | None:
        return self.document.get("objective")

    @property
    def n_workers(self) -> int:
        """Asy-OS workers (1 for a sequential run)."""
        return int(self.document.get("asy", {}).get("n_workers", 1))


def load_result(path) -> Result:
    """Read a results JSON (schema 1 or 2) and, when there is one, its ``.npz``."""
    path = Path(path)
    try:
        document = read_result(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable results file ({exc})") from None
    version = document.get("schema_version") if isinstance(document, dict) else None
    if version not in (1, SCHEMA_VERSION):
        raise InputError(f"{path}: unknown results schema_version {version!r} (this "
                         f"asyos reads 1 and {SCHEMA_VERSION})")
    selected = np.asarray(document.get("selected", []), dtype=np.int64)
    weights = np.asarray(document.get("weights", []), dtype=np.float64)
    if version >= 2 and document.get("arrays"):
        npz = path.with_name(document["arrays"])
        if npz.is_file():   # exact floats; the JSON copy is the fallback
            with np.load(npz, allow_pickle=False) as arrays:
                selected, weights = arrays["selected"], arrays["weights"]
    history = {key: document[key] for key in
               ("objective_per_epoch", "substitutions_per_epoch", "trace", "timings",
                "asy", "truth") if key in document}
    return Result(path=path, schema_version=int(version), selected=selected,
                  weights=weights, config=document.get("config", {}),
                  data=document.get("data", {}), history=history, document=document)
