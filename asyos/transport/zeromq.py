"""Asy-OS over ZeroMQ: the same ``ServerState`` and ``worker_loop`` as MPI, for machines
that come and go (spec §3.1–3.4).

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

import logging
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zmq

from ..core.kept_set import warm_up
from ..core.losses import Loss
from ..core.server_state import (
    DuplicatePush,
    OutOfOrderPush,
    ProtocolError,
    ServerState,
)
from ..errors import InputError
from ..solvers.asy import (
    AsyConfig,
    ServerMonitor,
    check_u,
    first_block_nu,
    group_fingerprint,
)
from ..solvers.worker_loop import PULL, Final, LocalView, Push, worker_loop
from .wire import PARAMS, Kind, Limits, WireError, decode, encode, flags

log = logging.getLogger("asyos.zeromq")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


@dataclass
class Timeouts:
    """Seconds; the defaults suit a LAN, tests shorten them."""

    heartbeat_every: float = 1.0       # a worker says it is alive at least this often
    heartbeat_timeout: float = 10.0    # ... and is declared lost after this silence
    replace_timeout: float = 30.0      # a lost shard not replaced by then: run ends
    resend_after: float = 0.5          # unacknowledged messages are sent again
    server_timeout: float = 120.0      # a worker gives up on a silent server


class Dropper:
    """Fault injection: drop ``ASYOS_DROP_PERCENT`` % of received messages."""

    def __init__(self):
        percent = float(os.environ.get("ASYOS_DROP_PERCENT", "0") or 0)
        if not 0 <= percent < 100:
            raise InputError(f"ASYOS_DROP_PERCENT must be in [0, 100), got {percent}")
        self.rate = percent / 100.0
        self.random = random.Random(os.environ.get("ASYOS_DROP_SEED"))
        self.dropped = 0

    def __call__(self) -> bool:
        if self.rate and self.random.random() < self.rate:
            self.dropped += 1
            return True
        return False


# -- security ------------------------------------------------------------------------------
def make_keys(directory) -> Path:
    """``asyos keys DIR``: a server key pair and one client key pair, CURVE (zmq.auth).

    DIR/server.key_secret stays on the server, DIR/client.key_secret goes to the
    workers with DIR/server.key; DIR/clients/ holds the public keys the server accepts.
    """
    import zmq.auth

    directory = Path(directory)
    (directory / "clients").mkdir(parents=True, exist_ok=True)
    zmq.auth.create_certificates(directory, "server")
    public, _ = zmq.auth.create_certificates(directory, "client")
    Path(public).replace(directory / "clients" / "client.key")
    for secret in directory.glob("*.key_secret"):
        secret.chmod(0o600)
    return directory


def _check_bind(endpoint: str, keys) -> None:
    if endpoint.startswith(("ipc://", "inproc://")):
        return
    host = endpoint.split("://", 1)[-1].rsplit(":", 1)[0]
    if host not in LOOPBACK_HOSTS and keys is None:
        raise InputError(f"binding to {endpoint} exposes the server beyond this machine: "
                         "give --keys DIR (made by `asyos keys DIR`) to require CURVE, "
                         "or bind to 127.0.0.1")


def _load_keys(directory, name: str) -> tuple[bytes, bytes]:
    import zmq.auth

    path = Path(directory) / f"{name}.key_secret"
    try:
        return zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read CURVE key {path}: {exc}") from None


# -- the server ----------------------------------------------------------------------------
class ZmqServer:
    """Serve ``ServerState`` on a ROUTER socket until every shard finished or was lost."""

    def __init__(self, bind: str, y: np.ndarray, config: AsyConfig,
                 *, timeouts: Timeouts | None = None, keys=None,
                 checkpoint=None, checkpoint_every: float = 30.0, resume: bool = False,
                 record_order: bool = False, group_of=None):
        _check_bind(bind, keys)
        self.y, self.config, self.record_order = y, config, record_order
        self.group_of = group_of     # group-aware Asy-OS (issue 8): checked ids or None
        self.fingerprint = np.zeros(0, np.int64) if group_of is None else \
            group_fingerprint(group_of)
        self.timeouts = timeouts or Timeouts()
        self.checkpoint_path = Path(checkpoint) if checkpoint else None
        self.checkpoint_every = checkpoint_every
        n, q = y.shape[0], config.n_workers
        self.monitor = None          # once every shard said HELLO (p = Σ shard sizes)
        self.eta = self.m = None
        self.nu: dict[int, float] = {}
        self.shard_sizes: dict[int, int] = {}
        self.run_id = random.getrandbits(63) or 1
        if resume:
            self._resume()
        else:
            self.state = ServerState(n, q, config.staleness, config.window, config.batch)
        self.limits = Limits(n, max(config.budgets), config.batch, self.run_id)
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
        self.stats: list[dict | None] = [None] * q
        self.drop = Dropper()
        self.refused = 0
        self.context = zmq.Context.instance()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.linger = 0
        self.socket.setsockopt(zmq.MAXMSGSIZE, 8 * (2 * n + 4 * max(config.budgets)
                                                    + config.batch) + 4096)
        self._auth = None
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
        self._auth.configure_curve(domain="*", location=str(clients))
        public, secret = _load_keys(keys, "server")
        self.socket.curve_publickey, self.socket.curve_secretkey = public, secret
        self.socket.curve_server = True

    # -- checkpoints ----------------------------------------------------------------------
    def _resume(self) -> None:
        if self.checkpoint_path is None or not self.checkpoint_path.exists():
            raise InputError(f"--resume needs the checkpoint file given by --checkpoint "
                             f"(not found: {self.checkpoint_path})")
        try:
            with np.load(self.checkpoint_path, allow_pickle=False) as saved:
                arrays = dict(saved)
            self.state = ServerState.restore(arrays)
            self.run_id = int(arrays["run_id"])
            self.eta, self.m = (float(v) for v in arrays["step"])
        except (OSError, ValueError, KeyError) as exc:
            raise InputError(f"cannot resume from {self.checkpoint_path}: {exc}") from None
        if self.state.u.size != self.y.shape[0] or \
                len(self.state.workers) != self.config.n_workers:
            raise InputError(f"{self.checkpoint_path} is for another run (n or q differ)")
        self.monitor = ServerMonitor(self.y, self.config, int(arrays["n_features"]),
                                     self.record_order, self.group_of)
        self.monitor.per_epoch = arrays["per_epoch"].tolist()
        self.monitor.skip_to(self.state.clock)
        log.info("resumed run %#x at clock %d", self.run_id, self.state.clock)

    def save_checkpoint(self) -> None:
        """Write the state atomically: a temp file, fsync, rename."""
        if self.checkpoint_path is None or self.eta is None:
            return
        path = self.checkpoint_path
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **self.state.snapshot(), run_id=np.array(self.run_id),
                     step=np.array([self.eta, self.m]),
                     n_features=np.array(self.monitor.n_features),
                     per_epoch=np.array(self.monitor.per_epoch))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # -- sending --------------------------------------------------------------------------
    def _send(self, worker: int, kind: Kind, *arrays, **fields) -> None:
        identity = self.identity[worker]
        if identity is None:
            return
        frames = encode(kind, worker, *arrays, run_id=self.run_id, **fields)
        self.socket.send_multipart([identity, *frames])   # copies u_C at once

    def _send_views(self, granted) -> None:
        for worker in granted:
            u, version = self.state.view(worker)
            self._send(worker, Kind.VIEW, u, seq=self.state.workers[worker].messages,
                       a=version)

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
        params = [int(c.loss), c.epochs, c.budgets[worker], c.window, c.batch,
                  self.eta, self.m, -1 if c.staleness is None else c.staleness,
                  0 if c.s2 is None else c.group_budgets[worker]]
        self._send(worker, Kind.CONFIG, np.array(params, dtype=np.float64), self.y,
                   record.selected, record.weights, seq=record.messages,
                   a=record.position, b=self.y.shape[0],
                   flags=flags(self.tags[worker]))
        self.last_seen[worker] = time.monotonic()
        self.lost_at.pop(worker, None)

    def _refuse(self, identity: bytes, reason: str) -> None:
        log.warning("refused a peer: %s", reason)
        self.refused += 1
        frames = encode(Kind.REFUSE, 0, reason.encode()[:4096], run_id=self.run_id)
        self.socket.send_multipart([identity, *frames])

    # -- receiving ------------------------------------------------------------------------
    def _hello(self, identity: bytes, message) -> None:
        t, q = message.worker, message.a
        if message.b != self.y.shape[0]:
            return self._refuse(identity, f"shard {t}/{q} has n = {message.b} samples, "
                                f"the labels have {self.y.shape[0]}")
        if q != self.config.n_workers or not 0 <= t < q:
            return self._refuse(identity, f"shard {t}/{q} does not fit this run of "
                                f"{self.config.n_workers} workers")
        mismatch = self._groups_mismatch(message.arrays[1])
        if mismatch:
            return self._refuse(identity, f"shard {t}/{q}: {mismatch}")
        record = self.state.workers[t]
        if self.identity[t] not in (None, identity) and not record.lost and \
                not record.finished and t in self.nu:
            return self._refuse(identity, f"shard {t}/{q} already has a live worker")
        if self.identity[t] == identity and self.active[t]:
            return   # a late copy of a HELLO this worker already had answered
        self.identity[t] = identity
        self.last_seen[t] = time.monotonic()
        if record.finished:
            return self._send(t, Kind.DONE)
        self.nu[t] = float(message.arrays[0][0])
        self.shard_sizes[t] = message.seq
        if self.eta is None and len(self.nu) == len(self.state.workers):
            self._start()
        elif self.eta is not None:
            if record.lost or record.messages:
                log.info("shard %d/%d joins at push %d, position %d", t, q,
                         record.messages, record.position)
            self._send_config(t)

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
        self.monitor = ServerMonitor(self.y, self.config, p, self.record_order,
                                     self.group_of)
        self.eta, self.m = self.config.step(self.y.shape[0], max(self.nu.values()))
        log.info("all %d shards here (p = %d): eta = %.4g, m = %.4g",
                 len(self.state.workers), p, self.eta, self.m)
        for worker in range(len(self.state.workers)):
            self._send_config(worker)

    def _push(self, t: int, message) -> None:
        features, delta, selected, weights = message.arrays
        try:
            _, granted = self.state.push(t, delta, message.a, features.size,
                                         seq=message.seq,
                                         kept=(selected, weights, message.b))
        except DuplicatePush:
            if message.more and self.state.refresh(t):
                return self._send_views([t])
            return self._send(t, Kind.ACK, seq=self.state.workers[t].messages)
        except OutOfOrderPush as exc:  # the worker resends the missing ones in order
            return log.info("dropped: %s", exc)
        except ProtocolError as exc:   # a view this server never sent
            log.info("resynchronising worker %d: %s", t, exc)
            return self._send_config(t)
        self.monitor.on_push(self.state, t, features)
        if message.more:
            granted = granted + self.state.request_pull(t)
        else:
            self._send(t, Kind.ACK, seq=self.state.workers[t].messages)
        self._send_views(granted)

    def _final(self, t: int, message) -> None:
        record = self.state.workers[t]
        if record.finished:
            return self._send(t, Kind.DONE)
        if message.seq != record.messages:
            return log.info("worker %d finished at push %d but %d are applied: waits",
                            t, message.seq, record.messages)
        selected, weights, contribution, seconds = message.arrays
        granted = self.state.finish(t, selected, weights, contribution)
        self.stats[t] = {"steps": message.a, "kept": selected.size,
                         "budget": self.config.budgets[t],
                         "compute_seconds": seconds[0], "read_seconds": seconds[1],
                         "communicate_seconds": seconds[2]}
        self._send(t, Kind.DONE)
        self._send_views(granted)

    def _handle(self, identity: bytes, frames) -> None:
        try:
            message = decode(frames, self.limits)
        except WireError as exc:
            log.warning("dropped a malformed message: %s", exc)
            self.refused += 1
            return
        t = message.worker
        if self.closing:   # the run is over: its workers are told so, nothing changes
            if 0 <= t < len(self.identity) and self.identity[t] == identity:
                self._send(t, Kind.DONE)
            return None
        if message.kind == Kind.HELLO:
            return self._hello(identity, message)
        if not 0 <= t < len(self.state.workers):
            return self._refuse(identity, f"unknown worker {t}")
        if self.identity[t] != identity:
            if self.identity[t] is not None or self.eta is None or \
                    self.state.workers[t].finished:
                return self._refuse(identity, f"unknown peer for worker {t}: say HELLO")
            self.identity[t] = identity   # this run's worker, after a server restart
            return self._send_config(t)
        self.last_seen[t] = time.monotonic()
        if self.state.workers[t].lost:
            return self._send_config(t)   # it was only slow: it resumes from its state
        if message.kind != Kind.HEARTBEAT:
            if message.tag != self.tags[t]:
                log.info("dropped a stale %s from worker %d", message.kind.name, t)
                if not self.active[t] and time.monotonic() - self.config_sent[t] > \
                        self.timeouts.resend_after:
                    self._repeat_config(t)   # it still works from the old one
                return
            self.active[t] = True
        try:
            if message.kind == Kind.PUSH:
                self._push(t, message)
            elif message.kind == Kind.PULL:
                if self.state.workers[t].pulled_version is not None:
                    self.state.refresh(t)
                    self._send_views([t])
                elif not self.state.is_waiting(t):
                    self._send_views(self.state.request_pull(t))
            elif message.kind == Kind.FINAL:
                self._final(t, message)
            elif message.kind != Kind.HEARTBEAT:
                log.warning("worker %d sent a %s: dropped", t, message.kind.name)
        except ProtocolError as exc:
            log.warning("dropped from worker %d: %s", t, exc)
            self.refused += 1

    # -- the loop -------------------------------------------------------------------------
    def _check_liveness(self, now: float) -> None:
        for t, record in enumerate(self.state.workers):
            if record.finished or record.lost or t not in self.nu or self.eta is None:
                continue
            if now - self.last_seen[t] > self.timeouts.heartbeat_timeout:
                log.warning("worker of shard %d/%d lost (silent for %.1f s); start a "
                            "replacement with --shard %d/%d", t, len(self.state.workers),
                            now - self.last_seen[t], t, len(self.state.workers))
                self.lost_at[t] = now
                self._send_views(self.state.lose(t))

    def _finished(self, now: float) -> bool:
        if not self.state.done:
            return False
        return all(now - self.lost_at[t] > self.timeouts.replace_timeout
                   for t in self.state.lost_workers)

    def serve(self, check=None) -> dict:
        """Run until done; returns the results payload (same keys as MPI runs).

        ``check()``, when given, runs after every step and may raise to end the run
        (a deadline, a worker process that died: ``transport.local``).
        """
        previous = signal.signal(signal.SIGTERM, self._on_sigterm) \
            if _main_thread() else None
        try:
            while not self.step():
                if check is not None:
                    check()
            self._linger()
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        self.save_checkpoint()
        return self._payload()

    def step(self, timeout: float = 0.05) -> bool:
        """Handle what arrives within ``timeout`` s, then the timers; True when done."""
        self._receive(timeout)
        now = time.monotonic()
        self._check_liveness(now)
        if self._stop:
            self.save_checkpoint()
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
                frames = self.socket.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return True
            if not self.drop():
                self._handle(bytes(frames[0].buffer), frames[1:])

    def _linger(self) -> None:
        """After the run, answer late FINALs (whose DONE was lost) until the workers
        have been quiet for two resend periods, so none waits for a server that left."""
        self.closing = True
        quiet = 2 * self.timeouts.resend_after
        deadline = time.monotonic() + 10 * quiet
        while self._receive(quiet) and time.monotonic() < deadline:
            pass

    def _on_sigterm(self, signum, frame) -> None:
        self._stop = True

    def _payload(self) -> dict:
        workers = []
        for t, record in enumerate(self.state.workers):
            stats = self.stats[t] or {"steps": record.pushes, "kept": record.selected.size,
                                      "budget": self.config.budgets[t],
                                      "compute_seconds": 0.0, "read_seconds": 0.0,
                                      "communicate_seconds": 0.0}
            workers.append({**stats, "lost": record.lost})
        payload = self.monitor.payload(self.state, workers, self.eta, self.m)
        payload["asy"]["transport"] = "zeromq"
        payload["asy"]["lost_shards"] = [f"{t}/{len(workers)}"
                                         for t in self.state.lost_workers]
        payload["asy"]["dropped_messages"] = self.drop.dropped
        payload["asy"]["refused_messages"] = self.refused
        check_u(payload["asy"]["u_check_max_abs_diff"], self.state.u)
        return payload

    def close(self) -> None:
        self.socket.close(linger=0)
        if self._auth is not None:
            self._auth.stop()


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# -- the worker ----------------------------------------------------------------------------
class Resync(Exception):
    """The server sent a CONFIG mid-run: restart from the state it holds."""

    def __init__(self, message):
        self.message = message


class ServerGone(RuntimeError):
    """No answer from the server for ``server_timeout`` seconds."""


class ZmqWorker:
    """Drive ``worker_loop`` for shard ``t`` of ``q`` over a DEALER socket."""

    def __init__(self, connect: str, shard, t: int, q: int, *,
                 timeouts: Timeouts | None = None, keys=None, group_of=None):
        """``shard``: ``solvers.asy.worker_shard`` of the worker's data (whole groups
        when ``group_of``, the checked group ids, is given: issue 8)."""
        self.shard, self.t, self.q = shard, t, q
        self.group_of = group_of
        self.n = shard.n_samples
        self.timeouts = timeouts or Timeouts()
        self.drop = Dropper()
        self.context = zmq.Context.instance()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.linger = 0
        # a DEALER blocks sending while no server is connected: never wait forever
        self.socket.sndtimeo = max(1, int(1000 * self.timeouts.resend_after))
        self.socket.identity = f"shard-{t}-{random.getrandbits(32):08x}".encode()
        if keys is not None:
            public, secret = _load_keys(keys, "client")
            server_public, _ = _load_server_public(keys)
            self.socket.curve_publickey, self.socket.curve_secretkey = public, secret
            self.socket.curve_serverkey = server_public
        self.socket.connect(connect)
        self.endpoint = connect
        self.limits = Limits(self.n)
        self.run_id = 0
        self.tag = 0       # from the last CONFIG; sent back in every message
        self.last_heard = self.last_sent = time.monotonic()
        self.communicate = 0.0

    # -- messages -------------------------------------------------------------------------
    def _send(self, kind: Kind, *arrays, more: bool = False, **fields) -> list:
        frames = encode(kind, self.t, *arrays, run_id=self.run_id,
                        flags=flags(self.tag, more), **fields)
        self._transmit(frames)
        return frames

    def _transmit(self, frames) -> None:
        """Send, or give up after ``resend_after`` (no server): resends cover it."""
        try:
            self.socket.send_multipart(frames, copy=False)
        except zmq.Again:
            self._check_server()
        self.last_sent = time.monotonic()

    def _receive(self, timeout: float):
        """The next valid message within ``timeout`` seconds, or None."""
        if not self.socket.poll(int(timeout * 1000)):
            self._check_server()
            return None
        frames = self.socket.recv_multipart(copy=False)
        if self.drop():
            return None
        try:
            message = decode(frames, self.limits)
        except WireError as exc:
            log.warning("dropped a malformed message from the server: %s", exc)
            return None
        self.last_heard = time.monotonic()
        if message.kind == Kind.REFUSE:
            raise InputError(f"the server refused shard {self.t}/{self.q}: "
                             f"{message.arrays[0]}")
        return message

    def _check_server(self) -> None:
        silent = time.monotonic() - self.last_heard
        if silent > self.timeouts.server_timeout:
            raise ServerGone(f"no answer from the server at {self.endpoint} for "
                             f"{silent:.0f} s")

    # -- the run --------------------------------------------------------------------------
    def run(self) -> None:
        """Handshake, then steps until the server says DONE; resynchronise on CONFIG."""
        nu = first_block_nu(self.shard)
        fingerprint = np.zeros(0, np.int64) if self.group_of is None else \
            group_fingerprint(self.group_of)
        warm_up()
        message = None
        while message is None or message.kind != Kind.CONFIG:
            if message is not None and message.kind == Kind.DONE:
                return
            self._send(Kind.HELLO, np.array([nu]), fingerprint,
                       seq=self.shard.n_features, a=self.q, b=self.n)
            deadline = time.monotonic() + self.timeouts.resend_after
            message = None
            while message is None and time.monotonic() < deadline:
                message = self._receive(deadline - time.monotonic())
        while True:
            try:
                return self._run_from(message)
            except Resync as resync:
                log.info("shard %d/%d resynchronised by the server", self.t, self.q)
                message = resync.message

    def _run_from(self, config) -> None:
        self.run_id, self.tag = config.run_id, config.tag
        params = dict(zip(PARAMS, config.arrays[0].tolist()))
        budget, batch = int(params["budget"]), int(params["batch"])
        self.limits = Limits(self.n, budget, batch, self.run_id)
        y = np.array(config.arrays[1])
        window = int(params["window"])
        resume = (np.array(config.arrays[2]), np.array(config.arrays[3]), config.a)
        s2_t = int(params["group_budget"])
        loop = worker_loop(self.shard, y, budget, Loss(int(params["loss"])),
                           params["eta"], params["m"], int(params["epochs"]), batch,
                           resume=resume if config.seq or config.a else None,
                           groups=(self.group_of, s2_t) if s2_t else None)
        view = LocalView(self.n, window, last_push=config.seq)
        self.unacked: dict[int, list] = {}
        self.acked = config.seq
        self.view = view
        view.requested()
        self._send(Kind.PULL)
        request = next(loop)
        while True:
            start = time.perf_counter()
            if request is PULL:
                self._absorb(lambda: view.must_wait)
                self.communicate += time.perf_counter() - start
                request = loop.send(view.current())
            elif isinstance(request, Push):
                push, request = request, next(loop)
                start = time.perf_counter()
                more = request is PULL
                seq = view.requested(push.delta, answer=more)
                frames = self._send(Kind.PUSH, push.features, push.delta, push.selected,
                                    push.weights, more=more, seq=seq,
                                    a=push.version, b=push.position)
                self.unacked[seq] = frames
                self._absorb(lambda: False)
                self.communicate += time.perf_counter() - start
            elif isinstance(request, Final):
                return self._finish(request)

    def _absorb(self, wait_while) -> None:
        """Handle what arrived; keep waiting (and resending, heart-beating) while
        ``wait_while()``."""
        resend_at = time.monotonic() + self.timeouts.resend_after
        while True:
            waiting = wait_while()
            message = self._receive(min(0.05, self.timeouts.resend_after)
                                    if waiting else 0)
            if message is not None:
                self._on_message(message)
                continue
            now = time.monotonic()
            if waiting and now > resend_at:
                self._resend()
                resend_at = now + self.timeouts.resend_after
            if now - self.last_sent > self.timeouts.heartbeat_every:
                self._send(Kind.HEARTBEAT)
            if not waiting:
                return

    def _newer(self, config) -> bool:
        """A CONFIG from another server boot, or a later one from this boot."""
        return (config.tag >> 16) != (self.tag >> 16) or \
            (config.tag & 0xFFFF) > (self.tag & 0xFFFF)

    def _on_message(self, message) -> None:
        if message.kind == Kind.CONFIG:
            if self._newer(message):
                raise Resync(message)
            return
        if message.kind in (Kind.VIEW, Kind.ACK):
            for seq in [s for s in self.unacked if s <= message.seq]:
                del self.unacked[seq]
            if message.kind == Kind.VIEW:
                self.view.answered(message.arrays[0], message.a, message.seq)
        elif message.kind == Kind.DONE:
            raise ServerGone("the server ended the run before this worker finished")

    def _resend(self) -> None:
        """Everything unacknowledged, in order (the server ignores what it has), or
        the pull whose view has not come."""
        for seq in sorted(self.unacked):
            self._transmit(self.unacked[seq])
        if self.view.must_wait and not self.unacked:
            self._send(Kind.PULL)

    def _finish(self, final: Final) -> None:
        self._absorb(lambda: bool(self.unacked))
        seconds = np.array([final.compute_seconds, final.read_seconds, self.communicate])
        while True:
            self._send(Kind.FINAL, final.selected, final.weights, final.contribution,
                       seconds, seq=self.view.last_push, a=final.steps)
            deadline = time.monotonic() + self.timeouts.resend_after
            while time.monotonic() < deadline:
                message = self._receive(deadline - time.monotonic())
                if message is None:
                    continue
                if message.kind == Kind.DONE:
                    return
                self._on_message(message)

    def close(self) -> None:
        self.socket.close(linger=0)


def _load_server_public(directory) -> tuple[bytes, bytes | None]:
    import zmq.auth

    path = Path(directory) / "server.key"
    try:
        return zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the server's public key {path}: {exc}") from None
