"""The Asy-OS server over ZeroMQ: a ROUTER socket in front of ``ServerState``."""

import os
import random
import signal
import time
from pathlib import Path

import numpy as np
import zmq

from ...core.server_state import (
    DuplicatePush,
    OutOfOrderPush,
    ProtocolError,
    ServerState,
)
from ...errors import InputError
from ...solvers.asy import (
    AsyConfig,
    ServerMonitor,
    check_u,
    group_fingerprint,
)
from ..wire import Kind, Limits, WireError, decode, encode, flags
from .common import (
    Dropper,
    Timeouts,
    check_bind,
    load_keys,
    log,
    main_thread,
)


class ZmqServer:
    """Serve ``ServerState`` on a ROUTER socket until every shard finished or was lost."""

    def __init__(self, bind: str, y: np.ndarray, config: AsyConfig,
                 *, timeouts: Timeouts | None = None, keys=None,
                 checkpoint=None, checkpoint_every: float = 30.0, resume: bool = False,
                 record_order: bool = False, group_of=None):
        check_bind(bind, keys)
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
        public, secret = load_keys(keys, "server")
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
                         "budget": self.config.budgets[t], "blas_threads": message.b,
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
            if main_thread() else None
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
