"""The one runner every experiment uses: units of work → rows → CSV → mean ± SE.

An experiment is a list of ``Unit``s, each a module-level function and its keyword
arguments (so that a ``multiprocessing.Pool`` can pickle it).  A unit is one repetition
of one setting, e.g. "regression, p = 2000, rep 3": it draws the problem once and
returns one row (a flat dict) per method it ran.  ``run_units`` runs the units, in a
pool when ``jobs > 1``, under one tqdm bar; ``write_csv`` writes the rows and
``summarize`` reduces them to mean ± standard error across repetitions.
"""

from __future__ import annotations

import csv
import io
import math
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.writable import replace_file

__all__ = ["Unit", "run_units", "write_csv", "summarize", "format_table",
           "problem_seed", "single_threaded_blas", "ERROR_COLUMN", "BLAS_ENV"]

# The error metric of each task (the paper's), named as in the CSV and metrics.evaluate.
ERROR_COLUMN = {"regression": "recovery_error", "classification": "test_error"}


@dataclass(frozen=True)
class Unit:
    """One call ``func(**kwargs) -> list[dict]``: one repetition of one setting."""

    func: Callable[..., list]
    kwargs: dict = field(default_factory=dict)

    def __call__(self) -> list[dict]:
        return self.func(**self.kwargs)


def problem_seed(seed: int, rep: int) -> list[int]:
    """The seed of repetition ``rep``: ``[seed, rep]`` for ``np.random.default_rng``.

    Independent streams for every (seed, rep), and no overlap between the reps of
    ``--seed 0`` and ``--seed 1`` (which ``seed + rep`` would give).
    """
    return [int(seed), int(rep)]


# BLAS thread counts for subprocesses (the MPI runs) that start after this one.
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded_blas() -> None:
    """One BLAS thread in this process (threadpoolctl, which scikit-learn brings).

    Repetitions run side by side (``--jobs``) and the timings should measure the
    methods, not thread contention: with a multi-threaded OpenBLAS on a busy machine
    the same LASSO path ran 20-30 times slower than single-threaded.  Without
    threadpoolctl this does nothing.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(limits=1, user_api="blas")


def _call(indexed: tuple[int, Unit]) -> tuple[int, list[dict]]:
    index, unit = indexed
    return index, unit()


def run_units(units: Sequence[Unit], jobs: int = 1, *, desc: str = "runs",
              progress: bool = True) -> list[dict]:
    """Run every unit (in a pool of ``jobs`` processes when ``jobs > 1``) and return
    their rows in the units' order, whatever order they finished in."""
    if jobs < 1:
        raise InputError(f"jobs must be >= 1, got {jobs}")
    from tqdm import tqdm

    results: list[list[dict] | None] = [None] * len(units)
    bar = tqdm(total=len(units), desc=desc, unit="run", file=sys.stderr,
               disable=not progress, mininterval=0.5)
    single_threaded_blas()
    try:
        if jobs == 1 or len(units) <= 1:
            for index, unit in enumerate(units):
                results[index] = unit()
                bar.update(1)
        else:
            with multiprocessing.Pool(min(jobs, len(units)),
                                      initializer=single_threaded_blas) as pool:
                for index, rows in pool.imap_unordered(_call, enumerate(units)):
                    results[index] = rows
                    bar.update(1)
    finally:
        bar.close()
    return [row for rows in results for row in rows]


def write_csv(path: Path, rows: Sequence[dict]) -> Path:
    """Rows → CSV with the union of their keys as columns (first-seen order);
    a key a row lacks is an empty cell."""
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns, restval="")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    replace_file(path, text.getvalue().encode())   # whole or not at all
    return path


def _cell(value):
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def mean_se(values: Iterable[float]) -> tuple[float, float, int]:
    """Mean, standard error (sample sd / √k; 0 for one value) and count k of the
    finite values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if v.size == 0:
        return math.nan, math.nan, 0
    se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0
    return float(np.mean(v)), se, int(v.size)


def summarize(rows: Sequence[dict], keys: Sequence[str],
              metrics: Sequence[str]) -> list[dict]:
    """Group rows by ``keys`` (first-seen order) and give mean/SE of each metric:
    ``{**keys, metric: mean, metric + "_se": se, "reps": k}``."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    out = []
    for values, members in groups.items():
        entry = dict(zip(keys, values))
        count = 0
        for metric in metrics:
            mean, se, k = mean_se(m.get(metric) for m in members
                                  if isinstance(m.get(metric), (int, float)))
            if k:
                entry[metric], entry[metric + "_se"] = mean, se
                count = max(count, k)
        entry["reps"] = count
        out.append(entry)
    return out


def format_table(summary: Sequence[dict], keys: Sequence[str],
                 metrics: Sequence[str]) -> str:
    """A plain-text table: the keys, then "mean ± se" per metric (blank if absent)."""
    header = [*keys, *metrics, "reps"]
    body = []
    for entry in summary:
        cells = [str(entry.get(k, "")) for k in keys]
        for metric in metrics:
            if metric in entry:
                cells.append(f"{entry[metric]:.4f} ± {entry[metric + '_se']:.4f}")
            else:
                cells.append("")
        cells.append(str(entry.get("reps", "")))
        body.append(cells)
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in body]
    return "\n".join(lines)
