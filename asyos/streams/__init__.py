"""Feature streams: the columns of X, block by block, from wherever they live.

``as_stream`` picks the stream for an object; every stream has the interface of
``FeatureStream`` (blocks, columns, shard).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..errors import InputError
from .array import ArrayStream
from .base import FeatureStream
from .csc_file import CSCFileStream, is_csc, save_csc
from .gaussian import GaussianStream
from .generator import GeneratorStream
from .hdf5 import HDF5Stream
from .interactions import InteractionStream, interaction_count
from .npy import NpyStream, save_feature_major
from .sparse import SparseStream
from .standardize import Standardized

__all__ = ["ArrayStream", "CSCFileStream", "FeatureStream", "GaussianStream",
           "GeneratorStream", "HDF5Stream", "InteractionStream", "NpyStream",
           "interaction_count", "SparseStream", "Standardized", "as_stream",
           "save_csc", "save_feature_major"]


def _is_sparse(obj) -> bool:
    # scipy is loaded already if obj is a scipy matrix; never import it just to ask.
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(obj)


def as_stream(obj, **options) -> FeatureStream:
    """The feature stream that reads ``obj``.

    Parameters
    ----------
    obj : FeatureStream, array-like, scipy.sparse matrix, str or Path
        A FeatureStream is returned as it is; an ndarray (or nested list) becomes an
        ArrayStream, a scipy.sparse matrix a SparseStream, a path to a ``.npy`` an
        NpyStream and to a ``.csc`` directory a CSCFileStream.
    **options : keyword arguments
        ``block_size``, ``shuffle`` and ``seed`` of the new stream; refused for an
        existing stream rather than silently ignored.

    Returns
    -------
    FeatureStream
        Columns feature by feature, in blocks.
    """
    if isinstance(obj, FeatureStream):
        if options:
            raise InputError(f"cannot apply {sorted(options)} to an existing stream")
        return obj
    if _is_sparse(obj):
        return SparseStream(obj, **options)
    if isinstance(obj, (str, Path)):
        if Path(obj).suffix.lower() == ".npy":
            return NpyStream(obj, **options)
        if is_csc(obj):
            return CSCFileStream(obj, **options)
        raise InputError(f"{obj}: as_stream reads only .npy files and .csc "
                         "directories")
    if isinstance(obj, (np.ndarray, list, tuple)):
        return ArrayStream(obj, **options)
    raise InputError(f"cannot make a feature stream from {type(obj).__name__}")
