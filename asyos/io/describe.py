"""What an Asy-OS server knows of the features: their shape, never their values.

The server holds y and u (length n); it needs n and p (to split the features among
the workers and check the budgets), the labels when the data file carries them, and,
for a space of products, how to name a feature.  ``describe_features`` reads exactly
that: a header where the format has one (``.npy``, ``.csc``, HDF5: opened, nothing
read), one pass of bounded memory over a text file otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..streams import InteractionStream, interaction_count
from .convert import count_rows
from .data import _open, load_features
from .formats import SVMLIGHT_SUFFIXES, TEXT_SUFFIXES


@dataclass(frozen=True)
class FeatureShape:
    """The features as the server sees them: how many, over how many samples."""

    n_samples: int
    n_features: int
    degree: int = 1          # > 1: the products of up to ``degree`` of ...
    n_base: int = 0          # ... this many columns of the file

    def names(self, indices) -> list[str] | None:
        """"x3*x17" for a product feature (as ``InteractionStream.names``); None for
        the file's own columns."""
        if self.degree == 1:
            return None
        # the numbering depends only on d: a one-sample space of zeros names it
        return InteractionStream(np.zeros((1, self.n_base)), self.degree).names(indices)


def describe_features(path, *, degree: int = 1,
                      label_column: int | None = None) -> tuple[FeatureShape,
                                                                np.ndarray | None]:
    """(shape of the features of ``path``, its labels or None), with the checks of
    ``load_features`` on everything but the values (the workers check those)."""
    file, _, suffix = _open(path, "X", label_column)
    if suffix in TEXT_SUFFIXES or suffix in SVMLIGHT_SUFFIXES:
        n, p, labels = count_rows(file, label_column)
    else:   # a memory map, a .csc directory or an HDF5 dataset: opened, not read
        stream, labels = load_features(path)
        n, p = stream.n_samples, stream.n_features
    if degree == 1:
        return FeatureShape(n, p), labels
    return FeatureShape(n, interaction_count(p, degree), degree, p), labels
