"""Asy-OS over ZeroMQ: the same ``ServerState`` and ``worker_loop`` as MPI, for machines
that come and go (Yang et al., KDD 2016, Algorithms 2-3).

The server binds a ROUTER socket; each worker connects a DEALER, says HELLO with its
shard, and receives its whole configuration (loss, η, m, epochs, budget, pipeline, y,
and the state to resume from) in the CONFIG answer.  Messages are ``wire`` frames.

Reliability, all in terms of the state machine:
- every push carries (worker, sequence number); the server applies each number at
  most once and in order (``ServerState.push(seq=...)``), answers with a view or an
  ACK saying how many pushes of that worker it has applied, and the worker resends
  what is unacknowledged after ``resend_after`` seconds;
- a worker silent for ``heartbeat_timeout`` is lost (``ServerState.lose``); the server
  keeps its last acknowledged kept set, position and applied Δu, so u_C = Σ_t applied_t
  still holds and a replacement started with the same shard resumes from there
  (``rejoin``), or the run ends without it after ``replace_timeout``;
- the server checkpoints its state atomically every ``checkpoint_every`` seconds and
  on SIGTERM; a resumed server resynchronises every worker to its checkpointed state.

``ASYOS_DROP_PERCENT`` (fault injection, for tests) makes every receiving side drop
that percentage of incoming messages at random.
"""

from ...solvers.session import Timeouts
from .common import make_keys
from .server import ZmqServer
from .worker import ServerGone, ZmqWorker

__all__ = ["ServerGone", "Timeouts", "ZmqServer", "ZmqWorker", "make_keys"]
