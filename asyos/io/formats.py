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
