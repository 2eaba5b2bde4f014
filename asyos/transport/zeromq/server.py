"""The Asy-OS server over ZeroMQ: a ROUTER socket in front of a ``Session``."""

import signal
import time
import zipfile
from pathlib import Path

import numpy as np
import zmq

from ..._files import replace_file
from ...errors import InputError
from ...solvers.asy import AsyConfig
from ...solvers.result import FitResult
from ...solvers.session import Session, Timeouts
from ..wire import (
    ForeignRun,
    Limits,
    WireError,
    decode,
    encode,
    max_bytes,
    max_frame_bytes,
)
from .common import (
    Dropper,
    Gate,
    LogLimit,
    check_bind,
    log,
    main_thread,
    receive,
)
from .guard import CHECK_SECONDS, InFlight

CURVE_FRAME_OVERHEAD = 64   # ≥ 8 + 1 + 8 + 16 bytes: name, flags, nonce, MAC


class ZmqServer:
    """Carry a ``Session`` (admission, identities, liveness around ``AsyServer``) on
    a ROUTER socket until every shard finished or was lost.

    What is ZeroMQ's own: the socket and its limits, its ``Gate`` (CURVE or PLAIN),
    polling, the clock the session's timers read, signals, and the checkpoint file.
    """

    def __init__(self, bind: str, y: np.ndarray, config: AsyConfig,
                 *, timeouts: Timeouts | None = None, keys=None,
                 checkpoint=None, checkpoint_every: float = 30.0, resume: bool = False,
                 record_order: bool = False, group_of=None, secret: str | None = None):
        """``secret``: the run secret of a loopback run without CURVE ``keys``: the
        password of ZMTP's PLAIN handshake, and what a worker's HELLO must carry; None:
        nobody joins until it is set (``secret``, once the bound port names its
        file)."""
        check_bind(bind, keys)
        self.checkpoint_path = Path(checkpoint) if checkpoint else None
        self.checkpoint_every = checkpoint_every
        self.bad = LogLimit(log)   # malformed or refused messages
        self.context = zmq.Context()   # its own: one authenticator per context
        self.gate = Gate(self.context, keys, secret)
        self.session = Session(y, config, timeouts=timeouts or Timeouts(),
                               secret=secret, bindings=self.gate.bindings,
                               record_order=record_order, group_of=group_of,
                               saved=self._read_checkpoint() if resume else None,
                               source=str(self.checkpoint_path), warn=self.bad.warning)
        self._limits = None, None
        self.drop = Dropper()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.linger = 0
        # a frame as CURVE carries it is its plaintext plus the MESSAGE command's
        # name, flags, nonce and MAC: a FINAL of a full kept set's columns, within
        # the limit, was over it by those bytes, and libzmq dropped the connection
        # the socket's limit is fixed before any HELLO: it admits the frames of every
        # pipeline the run may be re-sized to once p is known
        widest = Limits.of(config, y.shape[0], widest=True)
        self.socket.setsockopt(zmq.MAXMSGSIZE,
                               max_frame_bytes(widest) + CURVE_FRAME_OVERHEAD)
        self.gate.guard(self.socket)
        # what one connection may hold of a message it has not ended: the largest
        # valid one (an insider's endless message was held whole, without bound)
        self.in_flight = InFlight(self.socket, max_bytes(widest), keys is not None,
                                  warn=self.bad.warning)
        try:
            self.socket.bind(bind)
        except zmq.ZMQError as exc:
            self.close()
            raise InputError(f"cannot bind {bind}: {exc}") from None
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = False
        self._last_checkpoint = time.monotonic()
        self.session.begin(self._last_checkpoint)

    @property
    def limits(self) -> Limits:
        """What every message is checked against: the limits of the configuration the
        session runs under now, which is re-sized for p once every shard said HELLO
        (a push of the re-sized batch, checked against the first, was dropped for
        good and the run never ended)."""
        config, run_id = self.session.config, self.session.run_id
        made_for, limits = self._limits
        if made_for is not config or limits.run_id != run_id:   # asked for every
            #                                        message: made once per config
            limits = Limits.of(config, self.session.y.shape[0], run_id)
            self._limits = config, limits
        return limits

    @property
    def state(self):
        return self.session.state

    @property
    def timeouts(self) -> Timeouts:
        return self.session.timeouts

    @timeouts.setter
    def timeouts(self, timeouts: Timeouts) -> None:
        self.session.timeouts = timeouts

    @property
    def secret(self) -> str | None:
        """The run secret a HELLO must carry: set once the bound port is known (its
        file is named after it)."""
        return self.session.secret

    @secret.setter
    def secret(self, secret: str | None) -> None:
        self.session.secret = secret
        self.gate.admit(secret)

    @property
    def refused(self) -> int:
        return self.session.refused

    # -- checkpoints -------------------------------------------------------------------
    def _read_checkpoint(self) -> dict:
        path = self.checkpoint_path
        if path is None:
            raise InputError("--resume needs --checkpoint FILE, the checkpoint to "
                             "resume from")
        if not path.exists():
            raise InputError(f"--resume: the checkpoint {path} does not exist")
        try:
            with zipfile.ZipFile(path) as archive:
                damaged = archive.testzip()   # np.load alone misses a bad CRC
            if damaged is not None:
                raise ValueError(f"{damaged} is damaged")
            with np.load(path, allow_pickle=False) as saved:
                return dict(saved)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"cannot resume from {path}: not a whole asyos "
                             f"checkpoint ({str(exc).split('.')[0]})") from None

    def save_checkpoint(self) -> None:
        """Write the session's snapshot atomically: a temp file, fsync, rename."""
        self.session.checkpoint_due = False
        arrays = self.session.snapshot()
        if self.checkpoint_path is None or arrays is None:
            return
        # 0600: the checkpoint holds the labels (the run id in it admits nobody); a
        # full disk ends the run with one line, the previous checkpoint whole
        replace_file(self.checkpoint_path, lambda f: np.savez(f, **arrays), mode=0o600,
                     kept="the previous checkpoint there is kept whole")

    # -- the socket --------------------------------------------------------------------
    def _flush(self) -> None:
        """Send what the session answered; save a checkpoint it asked for."""
        for out in self.session.take():
            frames = encode(out.message, out.worker, run_id=out.run_id, tag=out.tag)
            self.socket.send_multipart([out.identity, *frames])   # copies u_C at once
        if self.session.checkpoint_due:
            self.save_checkpoint()

    def _handle(self, identity: bytes, frames, user: str | None = None) -> None:
        """One message from ``identity``; ``user``: its CURVE key (None without)."""
        try:
            envelope = decode(frames, self.limits)
            self.session.receive(identity, envelope, time.monotonic(), user)
        except ForeignRun:   # a worker of an earlier server: it must start again
            self.session.foreign(identity)
        except WireError as exc:
            self.bad.warning("dropped a malformed message: %s", exc)
            self.session.refused += 1
        finally:   # refusals go out even before an error ends the run
            self._flush()

    # -- the loop ----------------------------------------------------------------------
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

    def tick(self, timeout: float = 2 * CHECK_SECONDS) -> bool:
        """Handle what arrives within ``timeout`` s, then the timers; True when done."""
        self._receive(timeout)
        now = time.monotonic()
        self.session.check_liveness(now)
        self._flush()
        if self._stop:   # SIGTERM/SIGINT, acted on between messages
            self.save_checkpoint()
            if self._stop == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(143)
        if now - self._last_checkpoint > self.checkpoint_every:
            self.save_checkpoint()
            self._last_checkpoint = now
        return self.session.finished()

    def _receive(self, timeout: float) -> bool:
        """Handle every message that arrives within ``timeout`` s; True if any did."""
        if not self.socket.poll(int(timeout * 1000)):
            self.in_flight.drained()
            self.in_flight.check()
            return False
        while True:
            try:
                frames, oversized = receive(self.socket, self.limits, flags=zmq.NOBLOCK,
                                            envelope=1, meter=self.in_flight)
            except zmq.Again:
                self.in_flight.drained()
                self.in_flight.check()
                return True
            self.in_flight.check()
            if oversized:
                self.session.refused += 1
                self.bad.warning("dropped a message with %s", oversized)
            elif not self.drop():
                user = self.gate.user(frames[0])
                self._handle(bytes(frames[0].buffer), frames[1:], user)

    def _linger(self) -> None:
        """After the run, answer late FINALs (whose DONE was lost) until the workers
        have been quiet for two resend periods, so none waits for a server that left."""
        self.session.closing = True
        quiet = 2 * self.timeouts.resend_after
        deadline = time.monotonic() + 10 * quiet
        while self._receive(quiet) and time.monotonic() < deadline:
            pass

    def _on_signal(self, signum, frame) -> None:
        self._stop = signum

    def _result(self) -> FitResult:
        return self.session.result("zeromq", dropped_messages=self.drop.dropped)

    def close(self) -> None:
        self.in_flight.close()
        self.socket.close(linger=0)
        self.gate.stop()
        self.context.term()

