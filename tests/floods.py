"""A local attacker that floods the server's port
with raw ZMTP bytes, with or without the run secret: used by the ZeroMQ tests and
(benchmarks/faults.py)."""

import socket
import time

# what the attacker sends again and again after its greeting
FLOODS = {
    "empty-frames": (b"\x01\x00" + b"") * 4096,                      # "more" set
    "endless-message": (b"\x03" + (8192).to_bytes(8, "big") + b"x" * 8192) * 8,
}


def _command(body: bytes) -> bytes:
    return (b"\x04" + bytes([len(body)]) if len(body) < 256 else
            b"\x06" + len(body).to_bytes(8, "big")) + body


def _greeting(mechanism: bytes) -> bytes:
    return b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + \
        mechanism.ljust(20, b"\0") + b"\x00" + b"\x00" * 31


DEALER = b"\x0bSocket-Type" + (6).to_bytes(4, "big") + b"DEALER"


def _read_command(sock) -> bytes:
    flags, size = sock.recv(1), sock.recv(1)[0]
    if flags == b"\x06":
        size = int.from_bytes(bytes([size]) + sock.recv(7), "big")
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return body


def flood(host: str, port: int, frames: bytes, seconds: float,
          password: str | None = None) -> tuple[int, bool]:
    """A ZMTP 3.0 greeting, a handshake, then ``frames`` over and over for
    ``seconds``.  Without ``password`` the NULL mechanism, as a peer without the run
    secret must claim (a READY, then frames); with it, PLAIN with the run secret as
    the password, as an insider who can read the secret file passes (HELLO, WELCOME,
    INITIATE, READY).  Returns (bytes sent, whether the server cut it off)."""
    sent, deadline = 0, time.monotonic() + seconds
    with socket.create_connection((host, port)) as attacker:
        try:
            if password is None:
                attacker.sendall(_greeting(b"NULL") + _command(b"\x05READY" + DEALER))
            else:
                attacker.sendall(_greeting(b"PLAIN"))
                attacker.recv(64, socket.MSG_WAITALL)            # the server's greeting
                attacker.sendall(_command(b"\x05HELLO" + bytes([5]) + b"asyos" +
                                          bytes([len(password)]) + password.encode()))
                assert _read_command(attacker).startswith(b"\x07WELCOME")
                attacker.sendall(_command(b"\x08INITIATE" + DEALER))
                assert _read_command(attacker).startswith(b"\x05READY")
            while time.monotonic() < deadline:
                attacker.sendall(frames)
                sent += len(frames)
        except OSError:   # reset or broken pipe: the server closed the connection
            return sent, True
    return sent, False
