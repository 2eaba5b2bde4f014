"""The Asy-OS protocol's messages as typed values, the same on every carrier.

``AsyServer`` (one server) and ``WorkerDriver`` (one worker side) exchange these; the
simulator hands them over in memory, MPI and ZeroMQ encode them with
``transport.wire`` (a struct header and raw arrays, never pickle).  The two a push's
round trip builds at every push, ``Push`` and ``View``, are named tuples (a third of a
frozen dataclass's construction cost, as immutable); ``replace`` changes fields of
either kind.  The session
messages (``Hello``, ``Config``, ``Heartbeat``, ``Fail``, ``Refuse``) are ZeroMQ's, whose workers
come and go; under MPI every rank opens the job itself and a dead rank ends the job.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

# The most column values a FINAL carries (512 MiB of float64: an MPI message stays
# far below its 2 GiB count limit, and the server's memory for the refit bounded);
# a worker whose n × kept exceeds it sends none, and the run keeps its own weights.
COLUMNS_LIMIT = 1 << 26


def replace(message, **changes):
    """A copy of ``message`` (a named tuple or a dataclass) with ``changes``."""
    if isinstance(message, tuple):
        return message._replace(**changes)
    return dataclasses.replace(message, **changes)


def _ints() -> np.ndarray:
    return np.zeros(0, np.int64)


def _floats() -> np.ndarray:
    return np.zeros(0)


@dataclass(frozen=True, slots=True)
class Pull:
    """Worker → server: a view and credit to step, please."""


class Push(NamedTuple):
    """Worker → server: the summed Δu of ``features.size`` OS steps, all computed from
    view ``version`` plus the worker's own steps, and its kept set after them (its
    resume state) with what each kept feature is worth (``importance``, ranked by
    adaptive budgets).  ``more``: answer with a view and credit (a pull rides on it)."""

    seq: int                 # 1, 2, ... per worker: applied at most once, in order
    version: int
    features: np.ndarray     # int64, the features these steps processed, in order
    delta: np.ndarray        # float64 (n)
    selected: np.ndarray     # int64
    weights: np.ndarray      # float64
    importance: np.ndarray   # float64 ≥ 0, aligned with ``selected``
    position: int            # features processed so far, this push included
    more: bool = True


@dataclass(frozen=True, slots=True)
class Final:
    """Worker → server, once, after its last push (``seq``): its kept set and
    X_S w_S, which the server checks against u_C, the kept columns (the server refits
    the final support jointly, and checks it for constant columns), and what it
    measured."""

    seq: int
    steps: int
    selected: np.ndarray
    weights: np.ndarray
    contribution: np.ndarray
    columns: np.ndarray      # float64 (len(selected), n): X_S(t)ᵀ; (0, n): not sent
    # compute, read, communicate (all its time outside the kernel) and, of that, wait
    # (blocked for a view or credit)
    seconds: np.ndarray = field(default_factory=lambda: np.zeros(4))
    blas_threads: int = 0


class View(NamedTuple):
    """Server → worker: u_C at ``version`` (steps applied), including the worker's
    pushes 1..``through``; ``credit``: the steps it may have pushed in all (it may
    take credit − steps taken more); ``budget``: the kept-set size granted from now on
    (adaptive budgets; 0 under fixed budgets); ``eta``: the step size in force (the
    server halves the default η when a push raised the loss; 0: the configured η)."""

    u: np.ndarray
    version: int
    through: int
    credit: int
    budget: int = 0
    eta: float = 0.0


@dataclass(frozen=True, slots=True)
class Ack:
    """Server → worker: its pushes 1..``through`` are applied (no view wanted)."""

    through: int


@dataclass(frozen=True, slots=True)
class Done:
    """Server → worker: the run is over for it."""


@dataclass(frozen=True, slots=True)
class Bundle:
    """Leader → server (``solvers.leader``): the pushes of its node's workers that
    arrived together, one per worker, in the order they arrived, each with its Δu
    left out (``delta`` of size 0), and their Δu summed: one n-vector crosses the
    network for the node.  The server applies them as that many pushes in that
    order (``ServerState.push_bundle``), so each step's staleness is counted as if
    they had come one by one."""

    workers: np.ndarray      # int64, one per push
    pushes: tuple            # Push, aligned with ``workers``
    delta: np.ndarray        # float64 (n): Σ Δu of ``pushes``


@dataclass(frozen=True, slots=True)
class NodeView:
    """Server → leader: views for some of its node's workers, all of u_C at one
    ``version`` (the same clock), u_C sent once for the node.  ``through``: every
    worker's pushes applied at ``version`` (the leader publishes u_C with them, as
    ``NodeVectors`` does on the server's node); ``views``: the Views to hand on, their
    u_C left out, aligned with ``workers``."""

    u: np.ndarray
    version: int
    through: np.ndarray      # int64 (q)
    workers: np.ndarray      # int64
    views: tuple             # View, u of size 0


@dataclass(frozen=True, slots=True)
class Hello:
    """Worker → server (ZeroMQ): shard t of q, its size and n, the ν of its first
    block (for the step size), the fingerprint of its group labels (or empty), p of
    the data it read its shard from and that data's fingerprint (every worker must
    have read the same: ``solvers.asy.data_fingerprint``), and the run's secret on
    loopback (empty with CURVE keys)."""

    n_workers: int
    shard_size: int
    n_samples: int
    nu: float
    groups: np.ndarray = field(default_factory=_ints)
    n_features: int = 0
    token: str = ""
    data: np.ndarray = field(default_factory=_ints)


@dataclass(frozen=True, slots=True)
class Config:
    """Server → worker (ZeroMQ): everything it needs besides its data, and the state
    to resume from (its last push, position and kept set)."""

    plan_ints: np.ndarray    # int64: worker_loop.WorkerPlan.INTS, in order
    plan_floats: np.ndarray  # float64: WorkerPlan.FLOATS, in order
    y: np.ndarray
    selected: np.ndarray = field(default_factory=_ints)
    weights: np.ndarray = field(default_factory=_floats)
    last_push: int = 0
    position: int = 0


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Worker → server (ZeroMQ): still here."""


@dataclass(frozen=True, slots=True)
class Introduce:
    """Server → peer (ZeroMQ): "who are you?"  A message from a socket the server
    does not know (it was restarted, or the peer reconnected) earns this and nothing
    else; the peer answers with a HELLO, whose secret or key admits it again."""


@dataclass(frozen=True, slots=True)
class Fail:
    """Worker → server (ZeroMQ): its data cannot be stepped on (NaN, a scale that
    overflows), found mid-run: the run ends with ``reason``, as it does for a
    non-finite push, instead of losing the shard after the heartbeat timeout and
    writing a partial result."""

    reason: str


@dataclass(frozen=True, slots=True)
class Refuse:
    """Server → peer (ZeroMQ): why it is not taken."""

    reason: str
