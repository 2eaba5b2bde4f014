"""Asy-OS on this machine, by name: the one dispatcher behind the CLI's
``--workers Q`` and ``--simulate Q`` and the estimators' ``backend=``.

* "shared": q processes sharing u_C in memory, no server process (``shared``);
* "simulated": q virtual workers in this process, the staleness simulator, where the
  view each step reads is as old as ``delay`` says (``solvers.simulator``);
* "zeromq": a loopback ZeroMQ server here and q worker processes (``local``).

MPI is chosen by starting under mpiexec, and ``asyos server``/``asyos worker`` spread
a run over machines; both take the same configuration (``AsyConfig``).  Each backend
takes its own options (``OPTIONS``); a front that is given one its backend does not
take says so in its own spelling (``refuse_options``).
"""

from ..core.projection import group_constraint
from ..errors import InputError, PartialRun
from ..solvers.asy import AsyConfig
from ..solvers.result import FitResult
from ..solvers.simulator import fit_simulated

BACKENDS = ("shared", "simulated", "zeromq")
# what sets each backend's staleness: the bound τ its server enforces, or the
# simulator's delay (the age of the view every step reads)
BOUND = {"shared": ("the server's staleness bound τ", "staleness"),
         "zeromq": ("the server's staleness bound τ", "staleness"),
         "simulated": ("the simulator's delay τ", "delay")}
OPTIONS = {"shared": {"staleness", "window", "batch", "groups", "record_order"},
           "zeromq": {"staleness"},
           "simulated": {"delay", "random_delay", "groups", "record_order"}}


def refuse_options(backend: str, given: dict, spell) -> None:
    """Raise InputError for the first option in ``given`` (name → value, only those
    the user set) that ``backend`` does not take.  ``spell(name, value)`` writes an
    option as the front's user types it and ``spell("backend", b)`` a backend (the CLI:
    ``--delay``, ``--simulate Q``; the estimators: ``delay=2``, ``backend='shared'``)."""
    for name, value in given.items():
        if name in OPTIONS[backend]:
            continue
        takers = [b for b in BACKENDS if name in OPTIONS[b]]
        what, option = BOUND[backend]
        raise InputError(f"{spell(name, value)} is for "
                         f"{' or '.join(spell('backend', b) for b in takers)}; with "
                         f"{spell('backend', backend)} {what} is {spell(option, None)}")


def fit_asy(backend: str, stream, y, s, n_workers: int, *, loss, epochs, eta, m,
            rule, ridge, budget="auto", sweep="auto", groups=None, s2=None,
            staleness="auto",
            window="auto", batch="auto", delay=None, random_delay=False, seed=0,
            record_order=False, progress=None, timeout=300.0,
            allow_partial=False) -> FitResult:
    """Asy-OS with ``n_workers`` workers on ``backend``; options as for
    ``solvers.asy.AsyConfig.build`` and ``solvers.simulator.fit_simulated`` (each
    backend takes its own, ``OPTIONS``).  ``groups``/``s2``: group-aware Asy-OS.  A run
    that lost workers raises PartialRun, or on "shared" with ``allow_partial`` returns
    the partial result (``asy["lost_shards"]``) for the caller to write first."""
    algorithm = dict(loss=loss, epochs=epochs, eta=eta, m=m, rule=rule, ridge=ridge,
                     budget=budget, sweep=sweep)
    if backend == "simulated":
        result = fit_simulated(stream, y, s, n_workers, delay=delay,
                               random_delay=random_delay, seed=seed,
                               record_order=record_order, groups=groups, s2=s2,
                               **algorithm)
    elif backend == "shared":
        from . import shared

        group_of, s2 = group_constraint(groups, s2, stream.n_features) or (None, None)
        config = AsyConfig.build(s, n_workers, staleness=staleness, window=window,
                                 batch=batch, n_features=stream.n_features, s2=s2,
                                 **algorithm)
        result = shared.run(stream, y, config, group_of=group_of,
                            record_order=record_order, progress=progress)
        lost = result.asy["lost_shards"]
        if lost and not allow_partial:
            raise PartialRun(f"workers {', '.join(lost)} died during the fit")
    elif backend == "zeromq":   # it never returns a partial result (PartialRun)
        from .local import fit_loopback

        result = fit_loopback(stream, y, s, n_workers, staleness=staleness,
                              timeout=timeout, **algorithm)
    else:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got "
                         f"{backend!r}")
    return result
