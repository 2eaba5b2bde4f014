"""An Asy-OS worker over ZeroMQ: a DEALER socket around ``WorkerDriver``.

What is ZeroMQ's own: the HELLO/CONFIG handshake, resending what the server has not
acknowledged, heartbeats, and resynchronising when the server reconfigures this
worker; every step and push is the driver's.
"""

import random
import time

import numpy as np
import zmq

from ...core.kept_set import kept_set, warm_up
from ...core.server_state import ProtocolError
from ...errors import InputError
from ...solvers import messages
from ...solvers.asy import (
    data_fingerprint,
    first_block_nu,
    group_fingerprint,
    worker_shard,
)
from ...solvers.session import Timeouts
from ...solvers.worker_loop import (
    Unacknowledged,
    WorkerDriver,
    WorkerPlan,
    worker_loop,
)
from ..base import blas_threads_in_use
from ..wire import Limits, WireError, decode, encode
from .common import (
    Dropper,
    LogLimit,
    client_key_name,
    load_keys,
    load_server_public,
    log,
    plain_client,
    read_secret,
    receive,
)

HELLO_REOPEN = 4   # unanswered HELLOs before the worker connects afresh


class Resync(Exception):
    """The server sent a CONFIG mid-run: restart from the state it holds."""

    def __init__(self, envelope):
        self.envelope = envelope


class ServerGone(RuntimeError):
    """No answer from the server for ``server_timeout`` seconds."""


class Refused(InputError):
    """The server refused this worker (its REFUSE's reason)."""


class ZmqWorker:
    """Drive shard ``t`` of ``q`` over a DEALER socket."""

    def __init__(self, connect: str, data, t: int, q: int, *,
                 timeouts: Timeouts | None = None, keys=None, group_of=None,
                 secret_file=None):
        """``data``: the worker's feature stream, of which it works on shard ``t``
        (``solvers.asy.worker_shard``: whole groups when ``group_of``, the checked
        group ids, is given); the server checks that every worker read the same p.
        ``secret_file``: where the loopback server writes its run secret (read at
        each HELLO, so a worker may start before its server)."""
        self.secret_file = secret_file
        self.shard, self.t, self.q = worker_shard(data, q, t, group_of), t, q
        self.data_features = data.n_features
        self.data_fingerprint = data_fingerprint(data)
        self.group_of = group_of
        self.n = data.n_samples
        self.timeouts = timeouts or Timeouts()
        self.drop = Dropper()
        self.context = zmq.Context.instance()
        self.keys, self.endpoint = keys, connect
        self.socket, self.password = None, None
        self._open(None if secret_file is None else read_secret(secret_file))
        self.limits = Limits(self.n)
        self.bad = LogLimit(log)
        self.run_id = 0
        self.tag = 0       # from the last CONFIG; sent back in every message
        self.last_heard = self.last_sent = time.monotonic()
        self.heard = False   # whether any server of this endpoint ever answered
        self.communicate = self.waited = 0.0   # waited: blocked, part of it

    # -- messages -------------------------------------------------------------------------
    def _open(self, password: str | None) -> None:
        """A fresh DEALER socket to the server: with CURVE keys, or proving the run
        secret ``password`` in the PLAIN handshake (loopback; None: no secret yet, so
        no server admits it until it reopens with one).  Its identity is new: a server
        meets it as a stranger and asks for its HELLO (``INTRODUCE``)."""
        if self.socket is not None:
            self.socket.close(linger=0)
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.linger = 0
        # a DEALER blocks sending while no server is connected: never wait forever
        self.socket.sndtimeo = max(1, int(1000 * self.timeouts.resend_after))
        self.socket.identity = f"shard-{self.t}-{random.getrandbits(32):08x}".encode()
        if self.keys is not None:
            public, secret = load_keys(self.keys, client_key_name(self.keys, self.t))
            server_public, _ = load_server_public(self.keys)
            self.socket.curve_publickey, self.socket.curve_secretkey = public, secret
            self.socket.curve_serverkey = server_public
        elif password is not None:
            plain_client(self.socket, password)
        self.password = password
        try:
            self.socket.connect(self.endpoint)
        except zmq.ZMQError as exc:
            self.socket.close(linger=0)
            raise InputError(f"--connect {self.endpoint!r} is not a ZeroMQ endpoint "
                             f"({exc}); e.g. tcp://192.0.2.10:5555") from None

    def _current_secret(self) -> str | None:
        """The run secret as the server's file says now, the socket reopened when it
        changed (a restarted server writes a new one, and its handshake refuses the
        old one silently); None while there is no file."""
        if self.secret_file is None:
            return ""
        token = read_secret(self.secret_file)
        if token is not None and token != self.password:
            self._open(token)
        return token

    def _send(self, message) -> list:
        frames = encode(message, self.t, run_id=self.run_id, tag=self.tag)
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
        """The next valid message within ``timeout`` seconds, as an envelope, or None."""
        if not self.socket.poll(int(timeout * 1000)):
            self._check_server()
            return None
        frames, oversized = receive(self.socket, self.limits)
        if oversized:
            self.bad.warning("dropped a message from the server with %s", oversized)
            return None
        if self.drop():
            return None
        try:
            envelope = decode(frames, self.limits)
        except WireError as exc:
            self.bad.warning("dropped a malformed message from the server: %s", exc)
            return None
        self.last_heard = time.monotonic()
        self.heard = True
        if isinstance(envelope.body, messages.Refuse):
            raise Refused(f"the server refused shard {self.t}/{self.q}: "
                          f"{envelope.body.reason}")
        return envelope

    def _check_server(self) -> None:
        silent = time.monotonic() - self.last_heard
        if silent > self.timeouts.server_timeout:
            if self.heard:   # its keys were good: the server ended, or went away
                hint = ("; it answered this worker before: its run is over (it may "
                        "have ended without this shard, given up after "
                        "--replace-timeout), or it was stopped and not resumed "
                        "(--server-timeout sets the wait)")
            elif self.keys is None:
                hint = ("; either it has not started, or its run is over (a worker "
                        "that comes after the end has nothing to join and cannot tell "
                        "the two apart; --server-timeout sets the wait)")
            else:
                hint = ("; either it has not started, its run is over, or it does not "
                        "hold this worker's public key in its KEYS/clients/ (it never "
                        "answers a key it does not know): check the keys")
            raise ServerGone(f"no answer from the server at {self.endpoint} for "
                             f"{silent:.0f} s{hint}")

    # -- the run --------------------------------------------------------------------------
    def run(self) -> None:
        """Handshake, then steps until the server says DONE; resynchronise on CONFIG."""
        self.nu = first_block_nu(self.shard)
        # the server's CONFIG names the rule: compile both now, before the server
        # counts this worker's silences
        warm_up(*(kept_set(self.shard, 1, rule=rule)[0]
                  for rule in ("fitted", "magnitude")), asy=True)
        envelope, unanswered = None, 0
        while envelope is None or not isinstance(envelope.body, messages.Config):
            if envelope is not None and isinstance(envelope.body, messages.Done):
                return
            if unanswered and unanswered % HELLO_REOPEN == 0:
                # libzmq never retries a handshake the server refused (one that
                # raced its authenticator): a fresh socket shakes hands again
                self._open(self.password)
            self._hello()
            unanswered += 1
            deadline = time.monotonic() + self.timeouts.resend_after
            envelope = None
            while envelope is None and time.monotonic() < deadline:
                envelope = self._receive(deadline - time.monotonic())
        while True:
            try:
                return self._run_from(envelope)
            except Resync as resync:
                log.info("shard %d/%d resynchronised by the server", self.t, self.q)
                envelope = resync.envelope
            except Refused:
                raise
            except InputError as exc:   # its data, found unusable mid-run
                self._fail(str(exc))
                raise

    def _fail(self, reason: str) -> None:
        """Tell the server this worker's data cannot be stepped on, so that the run
        ends with ``reason`` now (it would otherwise lose the shard after the
        heartbeat timeout and write a partial result); resent until the server's
        answer, at most three times."""
        for _ in range(3):
            self._send(messages.Fail(reason))
            deadline = time.monotonic() + self.timeouts.resend_after
            try:
                while time.monotonic() < deadline:
                    self._receive(deadline - time.monotonic())
            except (Refused, ServerGone):   # the run is over: told
                return

    def _hello(self) -> None:
        """Introduce this worker: its shard, its data, and the run's secret (on
        loopback: read afresh each time, since a restarted server writes a new one)."""
        token = self._current_secret()
        if token is None:   # no server yet: wait for it
            return
        groups = np.zeros(0, np.int64) if self.group_of is None else \
            group_fingerprint(self.group_of)
        self._send(messages.Hello(self.q, self.shard.n_features, self.n, self.nu,
                                  groups, self.data_features, token,
                                  self.data_fingerprint))

    def _run_from(self, envelope) -> None:
        config = envelope.body
        self.run_id, self.tag = envelope.run_id, envelope.tag
        try:
            plan = WorkerPlan.received(config.plan_ints, config.plan_floats)
        except ProtocolError as exc:   # malformed, as a frame that does not decode
            raise WireError(str(exc)) from None
        self.limits = Limits(self.n, plan.capacity, plan.batch, self.run_id)
        y = np.array(config.y)
        resume = (np.array(config.selected), np.array(config.weights), config.position)
        groups = (self.group_of, plan.group_budget) if plan.group_budget else None
        loop = worker_loop(self.shard, y, plan, groups=groups,
                           resume=resume if config.last_push or config.position else None)
        driver = WorkerDriver(loop, self.n, config.last_push, config.position)
        self.driver = driver
        self.unacked = Unacknowledged()
        self._send(driver.start())
        while True:
            start = time.perf_counter()
            self._absorb(lambda: driver.blocked)
            if driver.ending:
                driver.advance()
                self.communicate += time.perf_counter() - start
                return self._finish()
            self.communicate += time.perf_counter() - start
            push = driver.advance()
            if push is None:   # its last pull took no steps: it is ending
                continue
            start = time.perf_counter()
            self.unacked.sent(push.seq, self._send(push))
            self.communicate += time.perf_counter() - start

    def _absorb(self, wait_while) -> None:
        """Handle what arrived; keep waiting (and resending, heart-beating) while
        ``wait_while()``."""
        resend_at = time.monotonic() + self.timeouts.resend_after
        while True:
            waiting = wait_while()
            start = time.perf_counter()
            envelope = self._receive(min(0.05, self.timeouts.resend_after)
                                     if waiting else 0)
            if waiting:
                self.waited += time.perf_counter() - start
            if envelope is not None:
                self._on_message(envelope)
                continue
            now = time.monotonic()
            if waiting and now > resend_at:
                self._resend()
                resend_at = now + self.timeouts.resend_after
            if now - self.last_sent > self.timeouts.heartbeat_every:
                self._send(messages.Heartbeat())
            if not waiting:
                return

    def _newer(self, envelope) -> bool:
        """A CONFIG from another server boot, or a later one from this boot."""
        return (envelope.tag >> 16) != (self.tag >> 16) or \
            (envelope.tag & 0xFFFF) > (self.tag & 0xFFFF)

    def _on_message(self, envelope) -> None:
        body = envelope.body
        if isinstance(body, messages.Config):
            if self._newer(envelope):
                raise Resync(envelope)
            return
        if isinstance(body, (messages.View, messages.Ack)):
            self.unacked.answered(body)
            self.driver.receive(body)
        elif isinstance(body, messages.Introduce):   # the server restarted
            self._hello()
        elif isinstance(body, messages.Done):
            raise ServerGone("the server ended the run before this worker finished")

    def _resend(self) -> None:
        """What ``Unacknowledged`` says is due: pushes kept as their frames, a pull
        (through a socket reopened first if the server's secret changed: a restarted
        server then introduces itself and resynchronises this worker)."""
        self._current_secret()
        for item in self.unacked.due(self.driver.blocked):
            if isinstance(item, list):
                self._transmit(item)
            else:
                self._send(item)

    def _finish(self) -> None:
        self._absorb(lambda: bool(self.unacked))
        self.unacked.final = self.driver.final_message(self.communicate,
                                                       blas_threads_in_use(),
                                                       self.waited)
        while True:
            for item in self.unacked.due(blocked=False):
                self._send(item)
            deadline = time.monotonic() + self.timeouts.resend_after
            while time.monotonic() < deadline:
                envelope = self._receive(deadline - time.monotonic())
                if envelope is None:
                    continue
                if isinstance(envelope.body, messages.Done):
                    return
                self._on_message(envelope)

    def close(self) -> None:
        self.socket.close(linger=0)
