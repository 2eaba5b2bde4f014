"""What the ZeroMQ server and worker share: timeouts, fault injection, CURVE keys."""

import logging
import os
import random
import re
import secrets
import shutil
import socket
import tempfile
import time
from pathlib import Path

from ..._files import replace_file, space_checked
from ...errors import InputError
from .. import wire

log = logging.getLogger("asyos.zeromq")


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


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
def receive(socket, limits, *, flags: int = 0, envelope: int = 0, meter=None):
    """One multipart message, read frame by frame: (frames, None), or (None, reason)
    when it has more frames or bytes than any valid message (``wire.max_frames``,
    ``wire.max_bytes``; ``envelope``: routing frames before the header).  The rest of
    an oversized message is read and dropped at once, so a flood of frames costs no
    memory.  ``meter``: told the wire bytes of what was read (``guard.InFlight``)."""
    most_frames = envelope + wire.max_frames()
    most_bytes = wire.max_bytes(limits) + 1024 * envelope
    frames, size, reason, count, wired = [], 0, None, 0, 0
    frame = first = socket.recv(flags, copy=False)
    while True:
        length = len(frame.buffer)
        size += length
        if meter is not None and count >= envelope:   # routing frames: not on the wire
            wired += meter.wire_bytes(length)
        count += 1
        if reason is None:
            if len(frames) >= most_frames:
                reason = f"more than {most_frames - envelope} frames"
            elif size > most_bytes:
                reason = f"more than {most_bytes} bytes"
            else:
                frames.append(frame)
        if not frame.more:
            break
        frame = socket.recv(copy=False)
    if meter is not None:
        meter.read(first, wired)
    return (frames, None) if reason is None else (frames[:envelope], reason)


class LogLimit:
    """Warnings about bad messages, rate-limited: the first ``first`` are logged, then
    one line per ``every`` seconds counts the rest, so a flood cannot fill the disk."""

    def __init__(self, logger, first: int = 10, every: float = 10.0):
        self.logger, self.first, self.every = logger, first, every
        self.count, self.unlogged, self.last = 0, 0, 0.0

    def warning(self, message: str, *args) -> None:
        self.count += 1
        now = time.monotonic()
        if self.count <= self.first:
            self.logger.warning(message, *args)
            self.last = now
            return
        self.unlogged += 1
        if now - self.last >= self.every:
            self.logger.warning("%d more bad messages dropped (%d in all); the last: "
                                + message, self.unlogged, self.count, *args)
            self.unlogged, self.last = 0, now


def is_loopback(endpoint: str) -> bool:
    host = endpoint.split("://", 1)[-1].rsplit(":", 1)[0]
    return host in LOOPBACK_HOSTS


PLAIN_USER = "asyos"       # the PLAIN user name; the run secret is its password
HANDSHAKE_SECONDS = 5.0    # a connection that has not proven itself by then is cut


def plain_client(socket, secret: str) -> None:
    """Make ``socket`` prove the run ``secret`` in ZMTP's PLAIN handshake (set before
    it connects)."""
    socket.plain_username = PLAIN_USER.encode()
    socket.plain_password = secret.encode()


class Gate:
    """Who may talk to a server socket, checked by ZeroMQ's authenticator during the
    handshake, before any message of the peer is read: with ``keys``, the CURVE
    client keys in KEYS/clients (``bindings``: each key's shard); without (loopback),
    ZMTP's PLAIN mechanism with the run secret as the password.  ZeroMQ buffers a
    message whole before the server sees it, so a peer that could send unproven
    frames could grow the server's memory without bound (docs/reliability.md, "Bad
    and hostile peers"); here it is cut off at its greeting, and a connection that
    has not proven itself within ``HANDSHAKE_SECONDS`` is closed.  Nobody is admitted
    by PLAIN until the secret is known (``admit``)."""

    def __init__(self, context, keys=None, secret: str | None = None):
        from zmq.auth.thread import ThreadAuthenticator

        self.keys, self.bindings = keys, None
        if keys is not None:
            clients = Path(keys) / "clients"
            if not clients.is_dir():
                raise InputError(f"{clients}: no directory of accepted client keys")
            self.bindings = key_bindings(clients)
        self.auth = ThreadAuthenticator(context)
        self.auth.start()
        if keys is not None:
            self.auth.configure_curve(domain="*", location=str(clients))
        self.admit(secret)

    def admit(self, secret: str | None) -> None:
        """Let PLAIN peers that prove ``secret`` in (no effect with keys)."""
        if secret is not None and self.keys is None:
            self.auth.configure_plain("*", {PLAIN_USER: secret})

    def guard(self, socket) -> None:
        """Put ``socket`` (the server's, before it binds) behind the gate."""
        socket.handshake_ivl = int(1000 * HANDSHAKE_SECONDS)
        if self.keys is not None:
            socket.curve_publickey, socket.curve_secretkey = load_keys(self.keys,
                                                                       "server")
            socket.curve_server = True
        else:
            socket.plain_server = True

    def user(self, frame) -> str | None:
        """The CURVE key a message came with (its shard's binding), else None."""
        return frame.get("User-Id") if self.keys is not None else None

    def stop(self) -> None:
        self.auth.stop()


def run_directory() -> Path:
    """Where loopback runs keep their secrets: a directory only its user can read
    (``$ASYOS_RUN_DIR``, default ``~/.asyos/runs``)."""
    return Path(os.environ.get("ASYOS_RUN_DIR") or Path.home() / ".asyos" / "runs")


def secret_path(endpoint: str) -> Path:
    """Where the secret of the loopback run at ``endpoint`` lives."""
    host, port = endpoint.split("://", 1)[-1].rsplit(":", 1)
    return run_directory() / f"{host.strip('[]')}-{port}.secret"


def new_secret() -> str:
    """A fresh run secret: 256 random bits, in hex."""
    return secrets.token_hex(32)


def write_secret(path: Path, token: str | None = None) -> str:
    """The run secret ``token`` (None: a fresh one) in ``path``: created 0600 inside a
    0700 directory, then renamed into place, so no other user can read it at any
    moment.  A server already bound admits the token before it writes the file: a
    worker that reads it earlier is refused at the handshake, and libzmq never
    retries a refused handshake."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    reclaim_secrets(path.parent, path)
    token = token or new_secret()
    # a full disk: one line, no file
    replace_file(path, token.encode(), mode=0o600, exclusive=True)
    return token


def reclaim_secrets(directory: Path, keep: Path | None = None) -> None:
    """Remove the secrets of servers that are gone (a SIGKILLed server cannot remove
    its own): a server writes its secret only once it listens, so a secret whose
    loopback port refuses a connection belongs to nobody."""
    if not directory.is_dir():
        return
    for secret in directory.glob("*.secret"):
        host, _, port = secret.stem.rpartition("-")
        if secret == keep or not port.isdigit() or host not in LOOPBACK_HOSTS:
            continue
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
        except ConnectionRefusedError:
            secret.unlink(missing_ok=True)
        except OSError:   # unreachable for another reason: leave it
            pass


def read_secret(path: Path) -> str | None:
    """The run secret in ``path``, or None while the server has not written it."""
    try:
        return Path(path).read_text().strip()
    except FileNotFoundError:
        return None


SHARD_KEY = re.compile(r"shard-(\d+)")   # clients/shard-T.key serves shard T only


def _held_keys(directory: Path) -> list[str]:
    """The key files already in ``directory`` (``make_keys`` never overwrites them
    silently)."""
    found = [*directory.glob("server.key*"), *directory.glob("*.key_secret"),
             *directory.glob("clients/*.key")]
    return sorted({str(path.relative_to(directory)) for path in found})


def make_keys(directory, force: bool = False, workers: int | None = None) -> Path:
    """``asyos keys DIR``: CURVE key pairs (zmq.auth) for a server and its workers.

    DIR/server.key_secret stays on the server; the workers get DIR/server.key and a
    client secret; DIR/clients/ holds the public keys the server accepts.  Without
    ``workers``, one client pair (``client``) serves any shard.  With ``workers`` = q,
    each shard t gets its own pair ``shard-t``, which the server accepts for shard t
    only: a machine that holds one worker's key cannot serve, or push for, another's.
    The keys are made in a private (0700) directory inside DIR, the secrets made 0600
    there, and only then renamed into place: no other user can read a secret at any
    moment.  Existing keys are kept unless ``force`` (which removes them all first).
    """
    import zmq.auth

    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise InputError(f"{directory} is a file; give a directory for the keys")
    clients = ["client"] if workers is None else [f"shard-{t}" for t in range(workers)]
    existing = _held_keys(directory) if directory.is_dir() else []
    if existing and not force:
        shown = ", ".join(existing[:4]) + (", ..." if len(existing) > 4 else "")
        raise InputError(f"{directory} already holds keys ({shown}); give --force to "
                         "replace them")
    made = [folder for folder in (directory, directory / "clients")
            if not folder.exists()]   # removed again if no key can be written
    with space_checked(directory, *made[:1],
                       kept="no key written (keys there before are kept)"):
        (directory / "clients").mkdir(parents=True, exist_ok=True)
        private = Path(tempfile.mkdtemp(prefix=".keys-", dir=directory))   # 0700
        try:
            for name in ("server", *clients):
                zmq.auth.create_certificates(private, name)
        except BaseException:
            shutil.rmtree(private, ignore_errors=True)
            for folder in reversed(made):
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
            raise
    try:
        for secret in private.glob("*.key_secret"):
            secret.chmod(0o600)
        for name in existing:   # --force: no key of the old set stays valid
            (directory / name).unlink()
        for name in clients:
            (private / f"{name}.key").replace(directory / "clients" / f"{name}.key")
            (private / f"{name}.key_secret").replace(directory / f"{name}.key_secret")
        for name in ("server.key", "server.key_secret"):
            (private / name).replace(directory / name)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    return directory


def client_key_name(directory, t: int) -> str:
    """The client key a worker of shard ``t`` uses: its own (``shard-t``) where
    ``asyos keys --workers`` made one, else the shared ``client`` key."""
    return f"shard-{t}" if (Path(directory) / f"shard-{t}.key_secret").exists() \
        else "client"


def key_bindings(clients: Path) -> dict[str, int | None]:
    """Each accepted client key (its z85 text, as ZeroMQ reports a peer's User-Id)
    and the shard it may serve: T for ``shard-T.key``, None (any) for other names."""
    import zmq.auth

    bound = {}
    for path in sorted(clients.glob("*.key")):
        try:
            public, _ = zmq.auth.load_certificate(path)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read client key {path}: {exc}") from None
        match = SHARD_KEY.fullmatch(path.stem)
        bound[public.decode("ascii")] = int(match.group(1)) if match else None
    return bound


def check_bind(endpoint: str, keys) -> None:
    if endpoint.startswith(("ipc://", "inproc://")):
        return
    if not endpoint.startswith("tcp://") or ":" not in endpoint[len("tcp://"):]:
        raise InputError(f"--bind {endpoint!r} is not a ZeroMQ endpoint: give "
                         "tcp://HOST:PORT (e.g. tcp://127.0.0.1:5555)")
    host = endpoint.split("://", 1)[-1].rsplit(":", 1)[0]
    if host not in LOOPBACK_HOSTS and keys is None:
        raise InputError(f"binding to {endpoint} exposes the server beyond this machine: "
                         "give --keys DIR (made by `asyos keys DIR`) to require CURVE, "
                         "or bind to 127.0.0.1")


def load_keys(directory, name: str) -> tuple[bytes, bytes]:
    import zmq.auth

    path = Path(directory) / f"{name}.key_secret"
    try:
        return zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read CURVE key {path}: {exc}") from None


# -- the server ----------------------------------------------------------------------------

def main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# -- the worker ----------------------------------------------------------------------------

def load_server_public(directory) -> tuple[bytes, bytes | None]:
    import zmq.auth

    path = Path(directory) / "server.key"
    try:
        return zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the server's public key {path}: {exc}") from None
