"""A stream over a 2-D HDF5 dataset (h5py, the optional ``hdf5`` extra).

HDF5 files hold many arrays, so a dataset is named: ``HDF5Stream(path, "X")``.  The
dataset is (n_samples, n_features) as written by most tools; a block reads its b
columns by one h5py hyperslab selection (indices sorted, as h5py requires, then put
back in stream order), so memory is one block, never the whole dataset.  Chunking the
dataset by columns (``chunks=(n, k)``) makes those reads sequential.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from .array import check_design_shape
from .base import FeatureStream


def open_dataset(path, name: str):
    """(h5py.File, dataset) for ``path`` and ``name``, or InputError naming them."""
    try:
        import h5py
    except ImportError:
        raise InputError(f"{path}: reading HDF5 needs h5py "
                         "(pip install 'asyos[hdf5]')") from None
    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise InputError(f"{path}: not a readable HDF5 file ({exc})") from None
    if name not in handle or not isinstance(handle[name], h5py.Dataset):
        names = []
        handle.visititems(lambda key, obj: names.append(key)
                          if isinstance(obj, h5py.Dataset) else None)
        handle.close()
        raise InputError(f"{path}: no dataset {name!r}; it has "
                         f"{', '.join(names) or 'no datasets'}")
    dataset = handle[name]
    if dataset.dtype.kind not in "biuf":
        handle.close()
        raise InputError(f"{path}:{name}: dtype {dataset.dtype} is not numeric")
    return handle, dataset


class HDF5Stream(FeatureStream):
    """Columns of the (n, p) dataset ``name`` of the HDF5 file ``path``."""

    def __init__(self, path, name: str = "X", *, block_size: int = 256,
                 shuffle: bool = False, seed: int = 0, dtype="float64"):
        super().__init__(block_size=block_size, shuffle=shuffle, seed=seed,
                         dtype=dtype)
        self.path, self.name = Path(path), name
        self._file, self._data = open_dataset(self.path, name)
        try:
            self.n_samples, self.n_features = check_design_shape(
                self._data.shape, f"{self.path}:{name}")
        except InputError:
            self._file.close()
            raise

    def holds_dataset(self, name: str) -> bool:
        """Whether the file also has a dataset ``name`` (e.g. its labels ``y``)."""
        return name in self._file

    def _read(self, indices: np.ndarray) -> np.ndarray:
        order = np.argsort(indices, kind="stable")
        ascending = indices[order]
        unique, back = np.unique(ascending, return_inverse=True)
        block = np.empty((len(indices), self.n_samples), dtype=self._data.dtype)
        block[order] = self._data[:, unique].T[back]
        return block
