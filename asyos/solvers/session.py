"""The control plane of an Asy-OS server whose workers come and go, with no I/O.

``AsyServer`` decides what a push, a pull or a final report does (the data plane).
Around it, a carrier whose workers are separate programs (ZeroMQ) needs a session
layer: who each worker is (an opaque peer identity and a configuration tag), the
HELLO/CONFIG handshake with its admission checks (the run secret, a CURVE key bound
to a shard, the data's and the groups' fingerprints), the replacement of a worker by
a newcomer and the fencing off of the old one, messages that predate a worker's last
configuration, liveness (silence past a timeout loses a worker), the agreement on p,
η and m once every shard is here, and what a checkpoint holds and a resume checks.

``Session`` is fed decoded envelopes with the peer they came from and the time, and
answers with ``Outgoing`` messages to send; the carrier keeps the sockets, the
polling, the timers' clock and the files.  Any carrier with workers that come and go
can reuse it as is.
"""

import hashlib
import hmac
import logging
import random
from dataclasses import dataclass

import numpy as np

from ..core.server_state import (
    NonFiniteUpdate,
    NotARequest,
    ProtocolError,
    ServerState,
)
from ..core.shards import LAYOUT, shard_size
from ..errors import InputError
from . import messages
from .asy import AsyConfig, group_fingerprint
from .asy_server import AsyServer
from .result import FitResult

log = logging.getLogger("asyos.session")


@dataclass(frozen=True)
class Outgoing:
    """A message to send to the peer ``identity``, with the header fields the carrier
    encodes: the worker it is for, the run id (0 in a refusal, which names no run)
    and the worker's configuration tag."""

    identity: bytes
    message: object
    worker: int
    run_id: int
    tag: int = 0


@dataclass
class Timeouts:
    """Seconds; the defaults suit a LAN, tests shorten them."""

    heartbeat_every: float = 1.0       # a worker says it is alive at least this often
    heartbeat_timeout: float = 10.0    # ... and is declared lost after this silence
    replace_timeout: float = 30.0      # a lost shard not replaced by then: run ends
    resend_after: float = 0.5          # unacknowledged messages are sent again
    server_timeout: float = 120.0      # a worker gives up on a silent server


class Session:
    """One run's admission, identities, configuration tags and liveness around an
    ``AsyServer``.  ``secret``: the run secret a HELLO must carry (None: any HELLO,
    e.g. behind CURVE); ``bindings``: each accepted CURVE key and the shard it may
    serve (None for any), or None without keys.  ``saved``: a checkpoint's arrays to
    resume from (``snapshot``), read from ``source``.  ``warn``: where refusals are
    reported (a rate-limited logger, so a flood of strangers cannot fill a disk)."""

    def __init__(self, y: np.ndarray, config: AsyConfig, *, timeouts: Timeouts,
                 secret: str | None = None, bindings=None, record_order=False,
                 group_of=None, saved: dict | None = None, source: str = "",
                 warn=None):
        self.y, self.config, self.timeouts = y, config, timeouts
        self.warn = warn or log.warning
        self.secret, self.bindings = secret, bindings
        self.record_order, self.group_of = record_order, group_of
        self.fingerprint = np.zeros(0, np.int64) if group_of is None else \
            group_fingerprint(group_of)
        q = config.n_workers
        self.nu: dict[int, float] = {}
        self.shard_sizes: dict[int, int] = {}
        # (p, data fingerprint) each shard's latest HELLO reports, until they agree
        self.claims: dict[int, tuple[int, np.ndarray]] = {}
        self.data_features: int | None = None   # p, once the shards agreed on it
        self.data_fingerprint: np.ndarray | None = None   # ... and their fingerprint
        self.run_id = random.getrandbits(63) or 1
        if saved is not None:
            self._resume(saved, source)
        else:   # started once every shard said HELLO (p = Σ shard sizes)
            self.server = AsyServer(y, config, record_order=record_order,
                                    group_of=group_of)
        self.state = self.server.state
        self.identity: list[bytes | None] = [None] * q
        # configuration tags: (this server's random boot id, joins) per worker; a
        # worker's message with another tag predates its last (re)configuration
        self.boot = random.getrandbits(14) + 1
        self.tags = [0] * q
        self.active = [False] * q
        self.config_sent = [0.0] * q
        self.last_seen = [0.0] * q
        self.lost_at: dict[int, float] = {}
        self.closing = False
        self.refused = 0
        self.checkpoint_due = False   # the carrier writes one when it can
        self.outbox: list[Outgoing] = []
        self.now = 0.0

    def begin(self, now: float) -> None:
        """The carrier is listening: every shard's silence counts from ``now``."""
        self.now = now
        self.last_seen = [now] * len(self.last_seen)
        self.lost_at = {t: now for t in self.state.lost_workers} | self.lost_at

    def take(self) -> list[Outgoing]:
        """The messages to send, in order; the outbox is emptied."""
        out, self.outbox = self.outbox, []
        return out

    # -- checkpoints -------------------------------------------------------------------
    def snapshot(self) -> dict[str, np.ndarray] | None:
        """What a checkpoint holds (None before the run started): the server's state,
        what the run belongs to, its id and step, and the data's fingerprint."""
        if not self.server.started:
            return None
        monitor = self.server.monitor
        return {**self.state.snapshot(), **self._fingerprints(),
                "run_id": np.array(self.run_id),
                "step": np.array([self.server.step_size, self.server.m]),
                "n_features": np.array(monitor.n_features),
                "shard_layout": np.array(LAYOUT),
                "data_fingerprint": self.data_fingerprint,
                "per_epoch": np.array(monitor.per_epoch)}

    def _resume(self, saved: dict, source: str) -> None:
        try:
            state = ServerState.restore(saved)
            run_id = int(saved["run_id"])
            eta, m = (float(v) for v in saved["step"])
            data = int(saved["n_features"]), saved["data_fingerprint"]
            per_epoch = saved["per_epoch"].tolist()
        except (ValueError, KeyError) as exc:
            raise InputError(f"cannot resume from {source}: not a whole asyos "
                             f"checkpoint ({str(exc).split('.')[0]})") from None
        layout = int(saved.get("shard_layout", 1))
        if layout != LAYOUT:   # its workers' kept sets and positions are of other shards
            raise InputError(f"{source} was written by an asyos that cut the shards "
                             f"another way (layout {layout}, this one {LAYOUT}): resume "
                             "it with the asyos that wrote it")
        if state.u.size != self.y.shape[0] or \
                len(state.workers) != self.config.n_workers:
            raise InputError(f"{source} is for another run (n or q differ)")
        for key, what in (("fingerprint_labels", "labels"),
                          ("fingerprint_config", "settings (-s, --loss, --epochs, "
                           "--eta, --m, --budget, --group-sparsity)")):
            if key not in saved or not np.array_equal(saved[key],
                                                      self._fingerprints()[key]):
                raise InputError(f"{source} is for another run: its {what} "
                                 "differ from this server's")
        self.run_id = run_id
        self.server = AsyServer(self.y, self.config, state=state,
                                record_order=self.record_order, group_of=self.group_of)
        self.server.start(data[0], eta, m)
        # the workers that rejoin must have read the data the run started on
        self.data_features, self.data_fingerprint = data
        self.server.monitor.per_epoch = per_epoch
        log.info("resumed run %#x at clock %d", self.run_id, state.clock)

    def _fingerprints(self) -> dict[str, np.ndarray]:
        """What a checkpoint belongs to: the labels and the user's configuration
        (hashes, so a resume can say which one differs)."""
        c = self.config
        settings = repr((c.s, c.n_workers, int(c.loss), c.epochs, c.eta, c.m, c.s2,
                         c.budget_rule, c.rule, c.ridge))
        return {"fingerprint_labels": _digest(self.y.tobytes()),
                "fingerprint_config": _digest(settings.encode())}

    # -- sending -----------------------------------------------------------------------
    def _send(self, worker: int, message) -> None:
        identity = self.identity[worker]
        if identity is not None:
            self.outbox.append(Outgoing(identity, message, worker, self.run_id,
                                        self.tags[worker]))

    def _send_all(self, replies) -> None:
        for worker, message in replies:
            self._send(worker, message)

    def send_config(self, worker: int) -> None:
        """(Re)configure ``worker`` from its record; its older messages become stale."""
        self.server.rejoin(worker)
        self.tags[worker] = (self.boot << 16) | ((self.tags[worker] + 1) & 0xFFFF)
        self.active[worker] = False
        self._repeat_config(worker)

    def _repeat_config(self, worker: int) -> None:
        """Send ``worker`` its current configuration (again, if that one was lost: its
        record has not changed, since no message with the new tag was accepted)."""
        self.config_sent[worker] = self.now
        record = self.state.workers[worker]
        plan = self.config.plan(worker, self.server.eta, self.server.m)
        self._send(worker, messages.Config(plan.ints(), plan.floats(), self.y,
                                           record.selected, record.weights,
                                           last_push=record.messages,
                                           position=record.position))
        self.last_seen[worker] = self.now
        self.lost_at.pop(worker, None)

    def refuse(self, identity: bytes, reason: str) -> None:
        """Tell a peer why it is refused; a refusal names no run (run id 0), so a
        stranger learns nothing it could use."""
        self.warn("refused a peer: %s", reason)
        self.refused += 1
        self.outbox.append(Outgoing(identity, messages.Refuse(reason), 0, 0))

    def foreign(self, identity: bytes) -> None:
        """A well-formed message of another run: a worker of an earlier server."""
        self.refuse(identity, "this server runs another run (restarted without "
                    "--resume?): start the worker again to join it")

    # -- admission ---------------------------------------------------------------------
    def _hello(self, identity: bytes, t: int, hello: messages.Hello) -> None:
        if self.secret is not None and not hmac.compare_digest(
                hello.token.encode("utf-8", "replace"), self.secret.encode()):
            return self.refuse(identity, "not authorised: a worker of this run reads "
                               "its secret from the server's run directory (run it "
                               "as the same user), or give both sides --keys")
        q = hello.n_workers
        if hello.n_samples != self.y.shape[0]:
            return self.refuse(identity, f"shard {t}/{q} has n = {hello.n_samples} "
                               "samples, which the labels do not have")
        if q != self.config.n_workers or not 0 <= t < q:
            return self.refuse(identity, f"shard {t}/{q} does not fit this run of "
                               f"{self.config.n_workers} workers")
        mismatch = self._groups_mismatch(hello.groups) or self._data_mismatch(t, hello)
        if mismatch:
            return self.refuse(identity, f"shard {t}/{q}: {mismatch}")
        record = self.state.workers[t]
        if self.identity[t] not in (None, identity) and not record.lost and \
                not record.finished and t in self.nu:
            # a replacement for a worker that is only suspected: the newcomer takes
            # the shard; every later message of the old one comes from a peer that is
            # no longer this shard's, and is refused (fenced off by its identity)
            log.warning("shard %d/%d: a new worker takes over from the old one", t, q)
            self.refuse(self.identity[t], f"shard {t}/{q} was taken over by a new "
                        "worker")
            if self.server.started:
                self._send_all(self.server.lose(t))
        if self.identity[t] == identity and self.active[t]:
            return   # a late copy of a HELLO this worker already had answered
        self.identity[t] = identity
        self.last_seen[t] = self.now
        if record.finished:
            return self._send(t, messages.Done())
        self.nu[t] = hello.nu
        self.shard_sizes[t] = hello.shard_size
        if self.server.started:
            if record.lost or record.messages:
                log.info("shard %d/%d joins at push %d, position %d", t, q,
                         record.messages, record.position)
            self.send_config(t)
        else:
            self.claims[t] = (hello.n_features, hello.data)
            self._agree()

    def _data_mismatch(self, t: int, hello: messages.Hello) -> str | None:
        """Why a worker's HELLO cannot be taken: its shard is not shard t of the p it
        reports, or the run already agreed on other data (it started, or resumed)."""
        p = hello.n_features
        if p < 1:
            return f"reports p = {p} features"
        if self.group_of is None:
            expected = shard_size(p, self.config.n_workers, t)
            if hello.shard_size != expected:
                return (f"{hello.shard_size} features, but shard {t} of p = {p} has "
                        f"{expected}")
        if self.data_features is None:
            return None
        return _data_differ((p, hello.data),
                            (self.data_features, self.data_fingerprint))

    def _agree(self) -> None:
        """Agree on the data (p and its fingerprint) from the shards' latest HELLOs,
        each shard one voice, and start once every shard's agrees.  Data that a strict
        majority of the q shards read win, and the others' workers are refused; short
        of one, nobody is refused and the run waits, since a worker that read the
        wrong file, or a peer that lies and dies, must not lock the others out (the
        first HELLO's p was kept for good): a newer HELLO for a shard replaces its
        older, so the worker restarted on the right data settles it."""
        q = len(self.state.workers)
        voices: dict[tuple, list[int]] = {}
        for t, (p, data) in self.claims.items():
            voices.setdefault((p, data.tobytes()), []).append(t)
        if len(voices) == 1:
            if len(self.claims) == q:
                self.data_features, self.data_fingerprint = self.claims[0]   # all alike
                self._start()
            return
        majority = [shards for shards in voices.values() if 2 * len(shards) > q]
        if not majority:
            said = "; ".join(f"shard{'s' * (len(shards) > 1)} "
                             f"{', '.join(map(str, shards))}: p = {p}"
                             for (p, _), shards in voices.items())
            self.warn("the workers read different data (%s): the run starts once "
                      "every shard's agree; start the worker that read the wrong "
                      "data again on the right data", said)
            return
        agreed = self.claims[majority[0][0]]
        for t in [t for t in self.claims if t not in majority[0]]:
            self.refuse(self.identity[t],
                        f"shard {t}/{q}: {_data_differ(self.claims[t], agreed)}")
            self.identity[t] = None
            del self.claims[t], self.nu[t], self.shard_sizes[t]

    def _groups_mismatch(self, theirs: np.ndarray) -> str | None:
        """Why a worker's group labels (HELLO's fingerprint) do not fit this run."""
        ours = self.fingerprint
        if np.array_equal(theirs, ours):
            return None
        if ours.size == 0:
            return "the worker has group labels (--groups), but this run is not " \
                "group-aware: give the server --groups and --group-sparsity too"
        if theirs.size == 0:
            return f"this run is group-aware ({ours[0]} groups, s2 = " \
                f"{self.config.s2}): give the worker the server's --groups file"
        if theirs.size != 2:
            return "malformed group fingerprint"
        return f"the worker's group labels ({theirs[0]} groups) differ from the " \
            f"server's ({ours[0]} groups): give both the same --groups file"

    def _start(self) -> None:
        """Every shard said HELLO: fix p, η and m, and configure every worker."""
        p = sum(self.shard_sizes.values())
        if self.config.s > p:
            reason = f"s = {self.config.s} exceeds the {p} features of all shards"
            for t in range(len(self.state.workers)):
                self.refuse(self.identity[t], reason)
            raise InputError(reason)
        try:
            eta_m = self.config.eta_and_m(self.y.shape[0], max(self.nu.values()))
        except InputError as exc:   # the workers are told before the server ends
            for t in range(len(self.state.workers)):
                self.refuse(self.identity[t], str(exc))
            raise
        self.server.start(p, *eta_m)
        self.config = self.server.config   # the pipeline sized for p
        log.info("all %d shards here (p = %d): eta = %.4g, m = %.4g",
                 len(self.state.workers), p, self.server.eta, self.server.m)
        for worker in range(len(self.state.workers)):
            self.send_config(worker)
        self.checkpoint_due = True   # a run that has started can always be resumed

    def _key_mismatch(self, user: str | None, t: int) -> str | None:
        """Why the CURVE key ``user`` (a peer's z85 public key) may not speak for
        shard ``t``: keys made by ``asyos keys --workers`` serve one shard each."""
        if self.bindings is None:
            return None
        shard = self.bindings.get(user or "", -1)
        if shard is None or shard == t:
            return None
        if shard == -1:   # the authenticator admitted it, so the key list changed
            return "its CURVE key is not among the server's client keys"
        return f"its CURVE key serves shard {shard} only, not shard {t}"

    # -- every message -----------------------------------------------------------------
    def receive(self, identity: bytes, envelope, now: float,
                user: str | None = None) -> None:
        """One decoded message from the peer ``identity`` at time ``now``; ``user``:
        its CURVE key (None without)."""
        self.now = now
        t, body = envelope.worker, envelope.body
        wrong_key = self._key_mismatch(user, t)
        if wrong_key:   # checked on every message: a key speaks for its shard only
            return self.refuse(identity, f"shard {t}: {wrong_key}")
        if self.closing:   # the run is over: its workers are told so, nothing changes
            if 0 <= t < len(self.identity) and self.identity[t] == identity:
                self._send(t, messages.Done())
            return None
        if isinstance(body, messages.Hello):
            return self._hello(identity, t, body)
        if not 0 <= t < len(self.state.workers):
            return self.refuse(identity, f"unknown worker {t}")
        if self.identity[t] != identity:
            if self.identity[t] is None and self.server.started and \
                    not self.state.workers[t].finished:
                # a socket nobody introduced, for a shard nobody holds: this run's
                # worker after the server restarted, or a stranger who learnt the run
                # id.  It gets nothing but a request for a HELLO, whose secret or key
                # admits it as at the start.
                self.outbox.append(Outgoing(identity, messages.Introduce(), t,
                                            self.run_id))
                return None
            return self.refuse(identity, f"unknown peer for worker {t}: say HELLO")
        self.last_seen[t] = now
        if isinstance(body, messages.Fail):   # its data: no other worker can step them
            return self._fail(f"worker {t}: {body.reason}")
        if self.state.workers[t].lost:
            return self.send_config(t)   # it was only slow: it resumes from its state
        if isinstance(body, messages.Heartbeat):
            return None
        if envelope.tag != self.tags[t]:
            log.info("dropped a stale %s from worker %d", envelope.kind.name, t)
            if not self.active[t] and now - self.config_sent[t] > \
                    self.timeouts.resend_after:
                self._repeat_config(t)   # it still works from the old one
            return None
        self.active[t] = True
        finished = self.state.workers[t].finished
        try:
            self._send_all(self.server.handle(t, body))
            if self.state.workers[t].finished and not finished:
                self.checkpoint_due = True   # a resume need not wait for it again
        except NonFiniteUpdate as exc:   # recomputing would give the same numbers
            self._fail(str(exc))
        except NotARequest:
            log.warning("worker %d sent a %s: dropped", t, envelope.kind.name)
            self.refused += 1
        except ProtocolError as exc:   # e.g. a view this server never sent
            self.refused += 1
            if self.state.workers[t].finished:   # nothing left to resynchronise
                log.warning("worker %d sent a %s after its FINAL: dropped", t,
                            envelope.kind.name)
                return None
            log.info("resynchronising worker %d: %s", t, exc)
            self.send_config(t)

    def _fail(self, reason: str) -> None:
        """End the run for ``reason``: every worker is told, then InputError (the
        carrier writes nothing and exits 2)."""
        for peer in self.identity:
            if peer is not None:
                self.refuse(peer, reason)
        raise InputError(reason)

    # -- timers ------------------------------------------------------------------------
    def check_liveness(self, now: float) -> None:
        """Lose every shard of a started run (rejoined after a resume or not) whose
        worker has been silent past the heartbeat timeout."""
        self.now = now
        for t, record in enumerate(self.state.workers):
            if record.finished or record.lost or not self.server.started:
                continue
            if now - self.last_seen[t] > self.timeouts.heartbeat_timeout:
                log.warning("worker of shard %d/%d lost (silent for %.1f s); start a "
                            "replacement with --shard %d/%d", t, self.config.n_workers,
                            now - self.last_seen[t], t, self.config.n_workers)
                self.lost_at[t] = now
                self._send_all(self.server.lose(t))
        for t in self.state.lost_workers:   # until then, it holds the sweeps' barrier
            if not self.state.workers[t].given_up and \
                    now - self.lost_at[t] > self.timeouts.replace_timeout:
                log.warning("shard %d/%d was not replaced in %.0f s: the run ends "
                            "without it", t, self.config.n_workers,
                            self.timeouts.replace_timeout)
                self._send_all(self.server.give_up(t))

    def finished(self) -> bool:
        """Every shard finished, or was lost and not replaced in time
        (``check_liveness`` gave it up)."""
        return self.state.done and all(self.state.workers[t].given_up
                                       for t in self.state.lost_workers)

    def result(self, transport: str, **counts) -> FitResult:
        result = self.server.result(transport)
        lost = [f"{t}/{self.config.n_workers}" for t in self.state.lost_workers]
        result.asy.update(lost_shards=lost, partial=bool(lost),
                          refused_messages=self.refused, **counts)
        return result


def _data_differ(theirs: tuple, ours: tuple) -> str | None:
    """How a worker's (p, data fingerprint) differ from the run's, or None."""
    (p, data), (p_ours, data_ours) = theirs, ours
    if p != p_ours:
        return (f"the worker read data with p = {p} features, the other workers "
                f"{p_ours}: give every worker the same data")
    if not np.array_equal(data, data_ours):
        if data.size == data_ours.size == 2 and data[0] != data_ours[0]:
            return (f"the worker's data hold {8 * int(data[0])}-bit values, the "
                    f"other workers' {8 * int(data_ours[0])}-bit: give every worker "
                    "the same --dtype")
        return ("the worker's data differ from the other workers' (same shape, "
                "other values): give every worker the same data")
    return None


def _digest(data: bytes) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(data).digest()[:8], dtype=np.int64).copy()
