"""The one result type: what every run returns — sequential OS, the staleness
simulator, Asy-OS over MPI or ZeroMQ — and what a results file holds.

Its fields are the keys of the results JSON (``io.results`` writes and reads it, with
the exact arrays in an ``.npz`` beside it), so a run in Python, a file on disk and
``asyos inspect`` all speak of the same things by the same names.
"""

from dataclasses import dataclass, field

import numpy as np


def _empty_trace() -> dict:
    return {"steps": [], "seconds": [], "objective": []}


@dataclass
class FitResult:
    """The selection and how it got there.

    ``trace``: the loss against steps and seconds, about 200 points (plus
    ``virtual_seconds`` for a virtual-clock simulation).  ``asy``: Asy-OS's statistics
    (workers, budgets, the staleness of every step and its bound, the u_C check,
    the carrier), None for sequential OS.  ``context``: what the command line adds
    around a run (data, config, truth, feature names) and, for a loaded file, where
    it came from (path, schema version, package versions).
    """

    selected: np.ndarray                  # sorted feature indices, |selected| ≤ s
    weights: np.ndarray                   # aligned with ``selected``
    objective_per_epoch: list = field(default_factory=list)
    objective: float = float("nan")       # the loss at the end
    eta: float = 0.0                      # step size in force at the end
    m: float = 1.0                        # block factor
    n_steps: int = 0
    seconds: float = 0.0
    trace: dict = field(default_factory=_empty_trace)
    substitutions_per_epoch: list | None = None   # sequential OS
    kept_bytes: int | None = None                 # memory of the kept set: O(n·s)
    standardization: dict | None = None           # {"mean", "scale"} per selected
    intercept: float | None = None                # fitted by the sparse kernel
    asy: dict | None = None
    virtual_seconds: float | None = None
    context: dict = field(default_factory=dict)

    @property
    def n_workers(self) -> int:
        """Asy-OS workers (1 for sequential OS)."""
        return 1 if self.asy is None else int(self.asy["n_workers"])

    @property
    def config(self) -> dict:
        return self.context.get("config", {})

    @property
    def data(self) -> dict:
        return self.context.get("data", {})

    def to_document(self) -> dict:
        """The results JSON's content (arrays as arrays; ``io.results`` writes it)."""
        document = {
            "selected": self.selected, "weights": self.weights,
            "objective_per_epoch": list(self.objective_per_epoch),
            "objective": self.objective, "eta": self.eta, "m": self.m,
            "n_steps": self.n_steps,
            "timings": {"seconds": self.seconds,
                        "us_per_step": 1e6 * self.seconds / max(self.n_steps, 1)},
            "trace": self.trace,
        }
        optional = {"substitutions_per_epoch": self.substitutions_per_epoch,
                    "standardization": self.standardization, "asy": self.asy,
                    "intercept": self.intercept,
                    "virtual_seconds": self.virtual_seconds}
        document.update({k: v for k, v in optional.items() if v is not None})
        if self.kept_bytes is not None:
            document["memory"] = {"kept_set_bytes": self.kept_bytes}
        return {**document, **{k: v for k, v in self.context.items()
                               if k not in ("path", "schema_version")}}

    @classmethod
    def from_document(cls, document: dict, selected=None, weights=None,
                      **context) -> "FitResult":
        """A result from a results JSON's content (``selected``/``weights``: the exact
        arrays, when there are some)."""
        timings = document.get("timings", {})
        kept = document.get("memory", {}).get("kept_set_bytes")
        own = {"selected", "weights", "objective_per_epoch", "objective", "eta", "m",
               "n_steps", "timings", "trace", "substitutions_per_epoch",
               "standardization", "asy", "virtual_seconds", "memory", "arrays",
               "intercept",
               "schema_version"}
        per_epoch = list(document.get("objective_per_epoch", []))
        return cls(
            selected=np.asarray(document.get("selected", []) if selected is None
                                else selected, dtype=np.int64),
            weights=np.asarray(document.get("weights", []) if weights is None
                               else weights, dtype=np.float64),
            objective_per_epoch=per_epoch,
            objective=float(document.get("objective", per_epoch[-1] if per_epoch
                                         else float("nan"))),
            eta=float(document.get("eta", 0.0)), m=float(document.get("m", 1.0)),
            n_steps=int(document.get("n_steps", 0)),
            seconds=float(timings.get("seconds", 0.0)),
            trace=document.get("trace") or _empty_trace(),
            substitutions_per_epoch=document.get("substitutions_per_epoch"),
            kept_bytes=None if kept is None else int(kept),
            standardization=document.get("standardization"),
            intercept=document.get("intercept"),
            asy=document.get("asy"), virtual_seconds=document.get("virtual_seconds"),
            context={**{k: v for k, v in document.items() if k not in own}, **context})
