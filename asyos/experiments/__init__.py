"""The experiments of Yang, Fujimaki, Kusumura & Liu (KDD 2016, Section 5): sweeps
vs p, epochs and workers, and the MPI speedup, each writing a CSV of every run and a
figure of mean ± standard error.

    python -m asyos.experiments {vs-p,vs-epochs,vs-workers,speedup} [--quick] ...

Modules: ``runner`` (units of work → pool → rows → CSV → mean ± SE, shared by every
experiment), ``sweeps`` (Figs. 1-2), ``speedup`` (Fig. 3 and the virtual-clock model),
``plot`` (matplotlib, imported only when drawing), ``cli``; ``comparators`` wraps
third-party methods.
"""

from .cli import EXPERIMENTS, add_arguments, main, run

__all__ = ["EXPERIMENTS", "add_arguments", "main", "run"]
