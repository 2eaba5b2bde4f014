"""The data formats asyos reads, by extension, and what reading any of them starts
with: that the file exists and is not empty, and (for svmlight) scikit-learn's reader.
Both readers use these, the one that loads a file (``io/data.py``) and the one that
converts it in bounded memory (``io/convert.py``)."""

from pathlib import Path

from ..errors import InputError

SVMLIGHT_SUFFIXES = {".svm", ".svmlight", ".libsvm"}
TEXT_SUFFIXES = {".csv", ".txt", ".tsv"}
HDF5_SUFFIXES = {".h5", ".hdf5"}
FORMATS = (".npy, .csv, .txt, .tsv, .svm, .svmlight, .libsvm, .h5, .hdf5 or a .csc "
           "directory")


def existing(path) -> Path:
    """``path``, refused with its name when it is missing or empty."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a file")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty")
    return path


def svmlight_reader():
    """scikit-learn's ``load_svmlight_file`` (the ``io`` extra), or why it is not."""
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        raise InputError("reading svmlight needs scikit-learn "
                         "(pip install 'asyos[io]')") from None
    return load_svmlight_file


# -- how wide an svmlight file may say it is ------------------------------------------
#
# An svmlight line names its features by index, so one index sets p for the whole
# file, and every reader holds arrays of p entries: the conversion's count (one int32
# or int64 per feature, ``io/convert.py``), a loaded file's CSC ``indptr`` and the
# run's per-feature arrays.  A typo (index 2·10⁹ in a 30-byte file) would ask for tens
# of GB before a byte of data is read.  Refused before that, when the arrays would not
# fit in the memory this process may use, or when the file is far too small to be
# that wide: more than 2²⁴ features and more than 64 per byte of the file (the text of
# a wide sparse file that is data, p = 10⁶–10⁷ with few nonzeros, passes both).
ALWAYS_WIDE = 1 << 24
FEATURES_PER_BYTE = 64


def memory_budget() -> int | None:
    """Bytes this process may still allocate: the least of the machine's available
    memory, the headroom under its address-space limit and under its cgroup's
    limit (None where none can be read)."""
    import resource

    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) << 10)
    except (OSError, ValueError, IndexError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        used = 0
        try:
            with open("/proc/self/status") as f:
                used = next((int(line.split()[1]) << 10 for line in f
                             if line.startswith("VmSize:")), 0)
        except (OSError, ValueError):
            pass
        limits.append(max(soft - used, 0))
    try:
        cap = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if cap != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text())
            limits.append(max(int(cap) - used, 0))
    except (OSError, ValueError):
        pass
    return min(limits) if limits else None


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def check_width(source: Path, row: int, p: int, per_feature: int) -> None:
    """Refuse the svmlight file ``source`` whose largest feature index (on data row
    ``row``, 0-based) implies ``p`` features, each costing ``per_feature`` bytes,
    before anything of size p is allocated."""
    need = p * per_feature
    budget = memory_budget()
    size = source.stat().st_size
    if budget is not None and need > budget:
        why = (f"whose per-feature arrays need {_size(need)}, more than the "
               f"{_size(budget)} of memory this process may use")
    elif p > ALWAYS_WIDE and p > FEATURES_PER_BYTE * size:
        why = (f"more than a file of {size} bytes can hold (at most "
               f"{max(ALWAYS_WIDE, FEATURES_PER_BYTE * size):,}: {FEATURES_PER_BYTE} "
               f"per byte, or {ALWAYS_WIDE:,})")
    else:
        return
    number, index = _widest(source, row)
    raise InputError(f"{source}: line {number}: feature index {index} implies p = "
                     f"{p:,} features, {why}; is it a typo?")


def _widest(source: Path, row: int) -> tuple[int, int | str]:
    """(1-based line, largest feature index as written) of the data row ``row``
    (0-based) of an svmlight file: blank lines and comments (# to the end of the
    line) hold no row."""
    seen = -1
    with open(source, "rb") as f:
        for number, line in enumerate(f, 1):
            data = line.split(b"#", 1)[0].split()
            if data:
                seen += 1
                if seen == row:
                    found = [int(token.split(b":", 1)[0]) for token in data[1:]
                             if token.split(b":", 1)[0].isdigit()]
                    return number, max(found) if found else "?"
    return row + 1, "?"
