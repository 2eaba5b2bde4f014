"""The Asy-OS server over ZeroMQ: a ROUTER socket in front of ``ServerState``."""

import hashlib
import hmac
import os
import random
import signal
import time
import zipfile
from pathlib import Path

import numpy as np
import zmq

from ...core.kept_set import RULES
from ...core.server_state import (
    NonFiniteUpdate,
    NotARequest,
    ProtocolError,
    ServerState,
)
from ...core.shards import shard_size
from ...errors import InputError
from ...solvers import messages
from ...solvers.asy import AsyConfig, group_fingerprint
from ...solvers.asy_server import AsyServer
from ...solvers.result import FitResult
from ..wire import ForeignRun, Limits, WireError, decode, encode
from .common import (
    Dropper,
    LogLimit,
    Timeouts,
    check_bind,
    key_bindings,
    load_keys,
    log,
    main_thread,
    receive,
)


class ZmqServer:
    """Carry ``AsyServer`` on a ROUTER socket until every shard finished or was lost.

    What is ZeroMQ's own: who each worker is (its socket identity and configuration
    tag), the HELLO/CONFIG handshake, liveness (heartbeats, loss, replacement) and
    checkpoints; every protocol decision is ``AsyServer``'s.
    """

    def __init__(self, bind: str, y: np.ndarray, config: AsyConfig,
                 *, timeouts: Timeouts | None = None, keys=None,
                 checkpoint=None, checkpoint_every: float = 30.0, resume: bool = False,
                 record_order: bool = False, group_of=None, secret: str | None = None):
        """``secret``: the run secret a worker's HELLO must carry (a loopback run
        without CURVE keys); None accepts any HELLO."""
        check_bind(bind, keys)
        self.secret = secret
        self.y, self.config, self.record_order = y, config, record_order
        self.group_of = group_of     # group-aware Asy-OS: checked ids or None
        self.fingerprint = np.zeros(0, np.int64) if group_of is None else \
            group_fingerprint(group_of)
        self.timeouts = timeouts or Timeouts()
        self.checkpoint_path = Path(checkpoint) if checkpoint else None
        self.checkpoint_every = checkpoint_every
        n, q = y.shape[0], config.n_workers
        self.nu: dict[int, float] = {}
        self.shard_sizes: dict[int, int] = {}
        self.data_features: int | None = None   # p, as the first HELLO reports it
        self.data_fingerprint: np.ndarray | None = None   # ... and its fingerprint
        self.run_id = random.getrandbits(63) or 1
        if resume:
            self._resume()
        else:   # started once every shard said HELLO (p = Σ shard sizes)
            self.server = AsyServer(y, config, record_order=record_order,
                                    group_of=group_of)
        self.state = self.server.state
        self.limits = Limits(n, max(config.capacities), config.batch, self.run_id)
        self.bad = LogLimit(log)   # malformed or refused messages
        self.identity: list[bytes | None] = [None] * q
        # configuration tags: (this server's random boot id, joins) per worker; a
        # worker's message with another tag predates its last (re)configuration
        self.boot = random.getrandbits(14) + 1
        self.tags = [0] * q
        self.active = [False] * q
        self.config_sent = [0.0] * q
        self.closing = False
        self.last_seen = [time.monotonic()] * q
        self.lost_at: dict[int, float] = {}
        self.drop = Dropper()
        self.refused = 0
        self.context = zmq.Context.instance()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.linger = 0
        self.socket.setsockopt(zmq.MAXMSGSIZE, 8 * (2 * n + 4 * max(config.capacities)
                                                    + config.batch) + 4096)
        self._auth = None
        self.bindings: dict[str, int | None] | None = None   # CURVE key → its shard
        if keys is not None:
            self._secure(keys)
        try:
            self.socket.bind(bind)
        except zmq.ZMQError as exc:
            self.close()
            raise InputError(f"cannot bind {bind}: {exc}") from None
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = False
        self._last_checkpoint = time.monotonic()

    def _secure(self, keys) -> None:
        from zmq.auth.thread import ThreadAuthenticator

        clients = Path(keys) / "clients"
        if not clients.is_dir():
            raise InputError(f"{clients}: no directory of accepted client keys")
        self._auth = ThreadAuthenticator(self.context)
        self._auth.start()
        self.bindings = key_bindings(clients)
        self._auth.configure_curve(domain="*", location=str(clients))
        public, secret = load_keys(keys, "server")
        self.socket.curve_publickey, self.socket.curve_secretkey = public, secret
        self.socket.curve_server = True

    # -- checkpoints ----------------------------------------------------------------------
    def _resume(self) -> None:
        if self.checkpoint_path is None or not self.checkpoint_path.exists():
            raise InputError(f"--resume needs the checkpoint file given by --checkpoint "
                             f"(not found: {self.checkpoint_path})")
        try:
            with zipfile.ZipFile(self.checkpoint_path) as archive:
                damaged = archive.testzip()   # np.load alone misses a bad CRC
            if damaged is not None:
                raise ValueError(f"{damaged} is damaged")
            with np.load(self.checkpoint_path, allow_pickle=False) as saved:
                arrays = dict(saved)
            state = ServerState.restore(arrays)
            self.run_id = int(arrays["run_id"])
            eta, m = (float(v) for v in arrays["step"])
            data = int(arrays["n_features"]), arrays["data_fingerprint"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"cannot resume from {self.checkpoint_path}: not a whole "
                             f"asyos checkpoint ({str(exc).split('.')[0]})") from None
        if state.u.size != self.y.shape[0] or \
                len(state.workers) != self.config.n_workers:
            raise InputError(f"{self.checkpoint_path} is for another run (n or q differ)")
        for key, what in (("fingerprint_labels", "labels"),
                          ("fingerprint_config", "settings (-s, --loss, --epochs, "
                           "--eta, --m, --budget, --group-sparsity)")):
            if key not in arrays or not np.array_equal(arrays[key],
                                                       self._fingerprint()[key]):
                raise InputError(f"{self.checkpoint_path} is for another run: its {what} "
                                 "differ from this server's")
        self.server = AsyServer(self.y, self.config, state=state,
                                record_order=self.record_order, group_of=self.group_of)
        self.server.start(data[0], eta, m)
        # the workers that rejoin must have read the data the run started on
        self.data_features, self.data_fingerprint = data
        self.server.monitor.per_epoch = arrays["per_epoch"].tolist()
        log.info("resumed run %#x at clock %d", self.run_id, state.clock)

    def _fingerprint(self) -> dict[str, np.ndarray]:
        """What a checkpoint belongs to: the labels, the user's configuration, and p
        (hashes, so a resume can say which one differs)."""
        c = self.config
        settings = repr((c.s, c.n_workers, int(c.loss), c.epochs, c.eta, c.m, c.s2,
                         c.budget_rule, c.rule, c.ridge))
        return {"fingerprint_labels": _digest(self.y.tobytes()),
                "fingerprint_config": _digest(settings.encode())}

    def save_checkpoint(self) -> None:
        """Write the state atomically: a temp file, fsync, rename."""
        if self.checkpoint_path is None or not self.server.started:
            return
        path = self.checkpoint_path
        tmp = path.with_name(path.name + ".tmp")
        # 0600: the checkpoint holds the labels (the run id in it admits nobody)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                       "wb") as f:
            monitor = self.server.monitor
            np.savez(f, **self.state.snapshot(), **self._fingerprint(),
                     run_id=np.array(self.run_id),
                     step=np.array([self.server.step_size, self.server.m]),
                     n_features=np.array(monitor.n_features),
                     data_fingerprint=self.data_fingerprint,
                     per_epoch=np.array(monitor.per_epoch))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # -- sending --------------------------------------------------------------------------
    def _send(self, worker: int, message) -> None:
        identity = self.identity[worker]
        if identity is None:
            return
        frames = encode(message, worker, run_id=self.run_id, tag=self.tags[worker])
        self.socket.send_multipart([identity, *frames])   # copies u_C at once

    def _send_all(self, replies) -> None:
        for worker, message in replies:
            self._send(worker, message)

    def _send_config(self, worker: int) -> None:
        """(Re)configure ``worker`` from its record; its older messages become stale."""
        self.state.rejoin(worker)
        self.tags[worker] = (self.boot << 16) | ((self.tags[worker] + 1) & 0xFFFF)
        self.active[worker] = False
        self._repeat_config(worker)

    def _repeat_config(self, worker: int) -> None:
        """Send ``worker`` its current configuration (again, if that one was lost: its
        record has not changed, since no message with the new tag was accepted)."""
        self.config_sent[worker] = time.monotonic()
        record = self.state.workers[worker]
        c = self.config
        params = [int(c.loss), c.epochs, c.capacities[worker], c.batch,
                  self.server.eta, self.server.m,
                  -1 if c.staleness is None else c.staleness,
                  0 if c.s2 is None else c.group_budgets[worker], c.adaptive,
                  RULES.index(c.rule), 0.0 if c.ridge is None else c.ridge]
        self._send(worker, messages.Config(np.array(params, dtype=np.float64), self.y,
                                           record.selected, record.weights,
                                           last_push=record.messages,
                                           position=record.position))
        self.last_seen[worker] = time.monotonic()
        self.lost_at.pop(worker, None)

    def _refuse(self, identity: bytes, reason: str) -> None:
        """Tell a peer why it is refused; a refusal names no run (run id 0), so a
        stranger learns nothing it could use."""
        self.bad.warning("refused a peer: %s", reason)
        self.refused += 1
        frames = encode(messages.Refuse(reason), 0, run_id=0)
        self.socket.send_multipart([identity, *frames])

    # -- receiving ------------------------------------------------------------------------
    def _hello(self, identity: bytes, t: int, hello: messages.Hello) -> None:
        if self.secret is not None and not hmac.compare_digest(
                hello.token.encode("utf-8", "replace"), self.secret.encode()):
            return self._refuse(identity, "not authorised: a worker of this run reads "
                                "its secret from the server's run directory (run it "
                                "as the same user), or give both sides --keys")
        q = hello.n_workers
        if hello.n_samples != self.y.shape[0]:
            return self._refuse(identity, f"shard {t}/{q} has n = {hello.n_samples} "
                                "samples, which the labels do not have")
        if q != self.config.n_workers or not 0 <= t < q:
            return self._refuse(identity, f"shard {t}/{q} does not fit this run of "
                                f"{self.config.n_workers} workers")
        mismatch = self._groups_mismatch(hello.groups) or self._data_mismatch(t, hello)
        if mismatch:
            return self._refuse(identity, f"shard {t}/{q}: {mismatch}")
        record = self.state.workers[t]
        if self.identity[t] not in (None, identity) and not record.lost and \
                not record.finished and t in self.nu:
            # a replacement for a worker that is only suspected: the newcomer takes
            # the shard; every later message of the old one comes from a peer that is
            # no longer this shard's, and is refused (fenced off by its identity)
            log.warning("shard %d/%d: a new worker takes over from the old one", t, q)
            self._refuse(self.identity[t], f"shard {t}/{q} was taken over by a new "
                         "worker")
            if self.server.started:
                self._send_all(self.server.lose(t))
        if self.identity[t] == identity and self.active[t]:
            return   # a late copy of a HELLO this worker already had answered
        self.identity[t] = identity
        self.last_seen[t] = time.monotonic()
        if record.finished:
            return self._send(t, messages.Done())
        self.nu[t] = hello.nu
        self.shard_sizes[t] = hello.shard_size
        self.data_features = hello.n_features
        self.data_fingerprint = hello.data
        if not self.server.started and len(self.nu) == len(self.state.workers):
            self._start()
        elif self.server.started:
            if record.lost or record.messages:
                log.info("shard %d/%d joins at push %d, position %d", t, q,
                         record.messages, record.position)
            self._send_config(t)

    def _data_mismatch(self, t: int, hello: messages.Hello) -> str | None:
        """Why a worker's data does not fit the others': every worker must have read
        the same p (the first accepted HELLO fixes it), and shard t of p has a known
        size."""
        p = hello.n_features
        if p < 1:
            return f"reports p = {p} features"
        if self.data_features is not None and p != self.data_features:
            return (f"the worker read data with p = {p} features, the other workers "
                    f"{self.data_features}: give every worker the same data")
        theirs, ours = hello.data, self.data_fingerprint
        if ours is not None and not np.array_equal(theirs, ours):
            if theirs.size == ours.size == 2 and theirs[0] != ours[0]:
                return (f"the worker's data hold {8 * int(theirs[0])}-bit values, the "
                        f"other workers' {8 * int(ours[0])}-bit: give every worker the "
                        "same --dtype")
            return ("the worker's data differ from the other workers' (same shape, "
                    "other values): give every worker the same data")
        if self.group_of is None:
            expected = shard_size(p, self.config.n_workers, t)
            if hello.shard_size != expected:
                return (f"{hello.shard_size} features, but shard {t} of p = {p} has "
                        f"{expected}")
        return None

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
                self._refuse(self.identity[t], reason)
            raise InputError(reason)
        try:
            eta_m = self.config.eta_and_m(self.y.shape[0], max(self.nu.values()))
        except InputError as exc:   # the workers are told before the server ends
            for t in range(len(self.state.workers)):
                self._refuse(self.identity[t], str(exc))
            raise
        self.server.start(p, *eta_m)
        self.config = self.server.config   # the pipeline sized for p
        log.info("all %d shards here (p = %d): eta = %.4g, m = %.4g",
                 len(self.state.workers), p, self.server.eta, self.server.m)
        for worker in range(len(self.state.workers)):
            self._send_config(worker)
        self.save_checkpoint()   # a run that has started can always be resumed

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

    def _handle(self, identity: bytes, frames, user: str | None = None) -> None:
        """One message from ``identity``; ``user``: its CURVE key (None without)."""
        try:
            envelope = decode(frames, self.limits)
        except ForeignRun:   # a worker of an earlier server: it must start again
            return self._refuse(identity, "this server runs another run (restarted "
                                "without --resume?): start the worker again to join it")
        except WireError as exc:
            self.bad.warning("dropped a malformed message: %s", exc)
            self.refused += 1
            return
        t, body = envelope.worker, envelope.body
        wrong_key = self._key_mismatch(user, t)
        if wrong_key:   # checked on every message: a key speaks for its shard only
            return self._refuse(identity, f"shard {t}: {wrong_key}")
        if self.closing:   # the run is over: its workers are told so, nothing changes
            if 0 <= t < len(self.identity) and self.identity[t] == identity:
                self._send(t, messages.Done())
            return None
        if isinstance(body, messages.Hello):
            return self._hello(identity, t, body)
        if not 0 <= t < len(self.state.workers):
            return self._refuse(identity, f"unknown worker {t}")
        if self.identity[t] != identity:
            if self.identity[t] is None and self.server.started and \
                    not self.state.workers[t].finished:
                # a socket nobody introduced, for a shard nobody holds: this run's
                # worker after the server restarted, or a stranger who learnt the run
                # id.  It gets nothing but a request for a HELLO, whose secret or key
                # admits it as at the start.
                frames = encode(messages.Introduce(), t, run_id=self.run_id)
                return self.socket.send_multipart([identity, *frames])
            return self._refuse(identity, f"unknown peer for worker {t}: say HELLO")
        self.last_seen[t] = time.monotonic()
        if self.state.workers[t].lost:
            return self._send_config(t)   # it was only slow: it resumes from its state
        if isinstance(body, messages.Heartbeat):
            return None
        if envelope.tag != self.tags[t]:
            log.info("dropped a stale %s from worker %d", envelope.kind.name, t)
            if not self.active[t] and time.monotonic() - self.config_sent[t] > \
                    self.timeouts.resend_after:
                self._repeat_config(t)   # it still works from the old one
            return None
        self.active[t] = True
        finished = self.state.workers[t].finished
        try:
            self._send_all(self.server.handle(t, body))
            if self.state.workers[t].finished and not finished:
                self.save_checkpoint()   # a resume need not wait for it again
        except NonFiniteUpdate as exc:   # recomputing would give the same numbers
            for worker, peer in enumerate(self.identity):
                if peer is not None:
                    self._refuse(peer, str(exc))
            raise
        except NotARequest:
            log.warning("worker %d sent a %s: dropped", t, envelope.kind.name)
            self.refused += 1
        except ProtocolError as exc:   # e.g. a view this server never sent
            log.info("resynchronising worker %d: %s", t, exc)
            self.refused += 1
            self._send_config(t)

    # -- the loop -------------------------------------------------------------------------
    def _check_liveness(self, now: float) -> None:
        for t, record in enumerate(self.state.workers):
            # every shard of a started run, rejoined after a resume or not: one that
            # stays silent past the timeout is lost like any other
            if record.finished or record.lost or not self.server.started:
                continue
            if now - self.last_seen[t] > self.timeouts.heartbeat_timeout:
                log.warning("worker of shard %d/%d lost (silent for %.1f s); start a "
                            "replacement with --shard %d/%d", t, len(self.state.workers),
                            now - self.last_seen[t], t, len(self.state.workers))
                self.lost_at[t] = now
                self._send_all(self.server.lose(t))

    def _finished(self, now: float) -> bool:
        if not self.state.done:
            return False
        return all(now - self.lost_at[t] > self.timeouts.replace_timeout
                   for t in self.state.lost_workers)

    def serve(self, check=None) -> FitResult:
        """Run until done; returns the run's result (as MPI runs do).

        ``check()``, when given, runs after every step and may raise to end the run
        (a deadline, a worker process that died: ``transport.local``).
        """
        signals = (signal.SIGTERM, signal.SIGINT)
        previous = [signal.signal(s, self._on_signal) for s in signals] \
            if main_thread() else None
        try:
            while not self.tick():
                if check is not None:
                    check()
            self._linger()
        finally:
            if previous is not None:
                for s, handler in zip(signals, previous):
                    signal.signal(s, handler)
        self.save_checkpoint()
        return self._result()

    def tick(self, timeout: float = 0.05) -> bool:
        """Handle what arrives within ``timeout`` s, then the timers; True when done."""
        self._receive(timeout)
        now = time.monotonic()
        self._check_liveness(now)
        if self._stop:   # SIGTERM/SIGINT, acted on between messages
            self.save_checkpoint()
            if self._stop == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(143)
        if now - self._last_checkpoint > self.checkpoint_every:
            self.save_checkpoint()
            self._last_checkpoint = now
        return self._finished(now)

    def _receive(self, timeout: float) -> bool:
        """Handle every message that arrives within ``timeout`` s; True if any did."""
        if not self.socket.poll(int(timeout * 1000)):
            return False
        while True:
            try:
                frames, oversized = receive(self.socket, self.limits, flags=zmq.NOBLOCK,
                                            envelope=1)
            except zmq.Again:
                return True
            if oversized:
                self.refused += 1
                self.bad.warning("dropped a message with %s", oversized)
            elif not self.drop():
                user = frames[0].get("User-Id") if self.bindings is not None else None
                self._handle(bytes(frames[0].buffer), frames[1:], user)

    def _linger(self) -> None:
        """After the run, answer late FINALs (whose DONE was lost) until the workers
        have been quiet for two resend periods, so none waits for a server that left."""
        self.closing = True
        quiet = 2 * self.timeouts.resend_after
        deadline = time.monotonic() + 10 * quiet
        while self._receive(quiet) and time.monotonic() < deadline:
            pass

    def _on_signal(self, signum, frame) -> None:
        self._stop = signum

    def _result(self) -> FitResult:
        result = self.server.result("zeromq")
        lost = [f"{t}/{self.config.n_workers}" for t in self.state.lost_workers]
        result.asy.update(lost_shards=lost, partial=bool(lost),
                          dropped_messages=self.drop.dropped,
                          refused_messages=self.refused)
        return result

    def close(self) -> None:
        self.socket.close(linger=0)
        if self._auth is not None:
            self._auth.stop()


def _digest(data: bytes) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(data).digest()[:8], dtype=np.int64).copy()
