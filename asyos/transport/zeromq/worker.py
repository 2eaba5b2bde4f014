"""An Asy-OS worker over ZeroMQ: a DEALER socket around ``worker_loop``."""

import random
import time

import numpy as np
import zmq

from ...core.kept_set import warm_up
from ...core.losses import Loss
from ...errors import InputError
from ...solvers.asy import (
    first_block_nu,
    group_fingerprint,
)
from ...solvers.worker_loop import PULL, Final, LocalView, Push, worker_loop
from ..base import blas_threads_in_use
from ..wire import PARAMS, Kind, Limits, WireError, decode, encode, flags
from .common import (
    Dropper,
    Timeouts,
    load_keys,
    load_server_public,
    log,
)


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
            public, secret = load_keys(keys, "client")
            server_public, _ = load_server_public(keys)
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
                       seconds, seq=self.view.last_push, a=final.steps,
                       b=blas_threads_in_use())
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
