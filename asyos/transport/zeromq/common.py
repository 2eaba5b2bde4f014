"""What the ZeroMQ server and worker share: timeouts, fault injection, CURVE keys."""

import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError

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


def check_bind(endpoint: str, keys) -> None:
    if endpoint.startswith(("ipc://", "inproc://")):
        return
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
