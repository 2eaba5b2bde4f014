"""Results: a JSON document people can read, and an ``.npz`` of the weights beside it.

The JSON holds the selection, its history (objective per epoch, the trace of loss vs
steps and seconds, Asy-OS per-worker and staleness statistics), the configuration and
the package versions; the ``.npz`` holds the arrays exactly (selected indices, weights,
standardization statistics).  ``schema_version`` lets readers evolve: ``load_result``
reads version 1 (JSON only) and 2.

The two files are one unit: the ``.npz`` is named by the hash of its content
(``results.<sha256[:16]>.npz`` beside ``results.json``), the JSON records that hash,
and the JSON's atomic rename is the only commit.  An interrupted write leaves the
previous result whole; the loader refuses arrays whose hash does not match; the
previous run's arrays are removed once the new JSON is in place.  Both files are
fsynced, and a temporary file never outlives a failed write; a full disk is one
``InputError`` naming the results file (``asyos/_files.py``), the previous result
whole.  A JSON whose arrays file is missing is refused, not read from its own
copy of the weights.
"""

import hashlib
import io
import json
import math
import platform
from pathlib import Path

import numpy as np

from .._version import __version__
from ..errors import InputError
from ..solvers.result import FitResult
from .writable import alive, replace_file, writable

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


def check_out(path) -> Path:
    """``--out``, checked before any work: a JSON file name in a directory that exists
    and that we may write to."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        raise InputError(f"{path}: the results file is JSON (its arrays go to a .npz "
                         "beside it); give another name")
    if path.is_dir():
        raise InputError(f"--out {path} is a directory; give a file name such as "
                         f"{path / 'results.json'}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"--out {path}: directory {parent} does not exist")
    if not writable(parent):
        raise InputError(f"--out {path}: directory {parent} is not writable")
    return path


def check_new_out(path, force: bool = False) -> Path:
    """``--out`` as a front checks it before any work: ``check_out``, and not the
    results of an earlier run unless ``force`` (a finished run is not replaced by
    accident)."""
    path = check_out(path)
    if path.exists() and not force:
        raise InputError(f"--out {path} exists; give another name, or --force to "
                         "replace it")
    return path


def arrays_path(path, digest: str) -> Path:
    """The ``.npz`` that goes with the results JSON ``path`` and has hash ``digest``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{digest[:16]}.npz")


def _arrays(result: FitResult) -> dict[str, np.ndarray]:
    arrays = {"selected": np.asarray(result.selected, dtype=np.int64),
              "weights": np.asarray(result.weights, dtype=np.float64)}
    for name, values in (result.standardization or {}).items():
        arrays[f"standardization_{name}"] = np.asarray(values, dtype=np.float64)
    return arrays


def check_finite(result: FitResult) -> None:
    """A diverged run is an error, never a result with NaN in it."""
    values = [result.objective, *result.objective_per_epoch]
    if not (all(math.isfinite(v) for v in values if v is not None)
            and np.all(np.isfinite(np.asarray(result.weights, dtype=np.float64)))):
        raise InputError(f"the run diverged: objective {result.objective!r}, weights "
                         "with NaN or inf; nothing written (try a smaller --eta, or "
                         "--standardize)")


def write_result(path, result: FitResult) -> None:
    """Write ``result`` (plus schema and versions) to ``path``, and its arrays to
    the hash-named ``.npz`` beside it (see the module docstring)."""
    path = check_out(path)
    check_finite(result)
    buffer = io.BytesIO()
    np.savez(buffer, **_arrays(result))
    arrays = buffer.getvalue()
    digest = hashlib.sha256(arrays).hexdigest()
    npz = arrays_path(path, digest)
    previous = _arrays_of(path)
    _reclaim(path, previous)
    document = {"schema_version": SCHEMA_VERSION, **result.to_document(),
                "arrays": npz.name, "arrays_sha256": digest,
                "versions": package_versions()}
    text = json.dumps(document, indent=1, default=_plain, allow_nan=False).encode()
    # a full disk: one line naming the results file, the previous result whole
    kept = ("nothing written (the previous result there is kept whole)"
            if previous is not None else "nothing written")
    replace_file(npz, arrays, named=path, kept=kept)
    try:
        replace_file(path, text, kept=kept)
    except BaseException:   # interrupted: the previous result stays whole, alone
        if npz != previous:
            npz.unlink(missing_ok=True)
        raise
    if previous is not None and previous != npz:
        previous.unlink(missing_ok=True)


def _reclaim(path: Path, keep: Path | None) -> None:
    """Remove what a write killed midway left beside ``path``: temporary files of
    processes that are gone, and arrays files that no results JSON names (``keep``
    is the one the JSON at ``path`` names)."""
    for tmp in path.parent.glob(f".{path.stem}.*.tmp"):
        pid = tmp.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not alive(int(pid)):
            tmp.unlink(missing_ok=True)
    for npz in path.parent.glob(f"{path.stem}.*.npz"):
        digest = npz.name[len(path.stem) + 1:-len(".npz")]
        if len(digest) == 16 and all(c in "0123456789abcdef" for c in digest) and \
                npz != keep:
            npz.unlink(missing_ok=True)


def _arrays_of(path: Path) -> Path | None:
    """The arrays file an existing results JSON at ``path`` names, if any."""
    try:
        name = json.loads(path.read_text()).get("arrays")
    except (OSError, ValueError, AttributeError):
        return None
    return path.with_name(name) if isinstance(name, str) and "/" not in name else None


def read_result(path) -> dict:
    return json.loads(Path(path).read_text())


def load_result(path) -> FitResult:
    """Read a results JSON (schema 1 or 2) and, when there is one, its ``.npz``: the
    same ``FitResult`` the run returned, with ``context`` saying where it came from
    (path, schema_version, versions) and what the command line added (data, config,
    truth).

    Parameters
    ----------
    path : str or Path
        The results JSON a run wrote (``--out``).

    Returns
    -------
    FitResult
        The run's result; an ``InputError`` names what is wrong with a file that is
        not one (unreadable, another schema, arrays of another run)."""
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
        npz = path.with_name(str(document["arrays"]))
        if not npz.is_file():   # the two are one unit: half of one is not a result
            raise InputError(f"{path}: its arrays file {npz} is missing (a results "
                             "JSON and the .npz it names are copied together)")
        data = npz.read_bytes()   # exact floats
        digest = document.get("arrays_sha256")
        if digest is not None and hashlib.sha256(data).hexdigest() != digest:
            raise InputError(f"{npz} does not belong to {path} (its hash differs "
                             "from the one the results record)")
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            selected, weights = arrays["selected"], arrays["weights"]
    try:
        result = FitResult.from_document(document, selected, weights, path=path,
                                         schema_version=int(version))
        if result.selected.ndim != 1 or result.weights.shape != result.selected.shape:
            raise ValueError("selected and weights must be vectors of one length")
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise InputError(f"{path}: malformed results file ({exc})") from None
    return result
