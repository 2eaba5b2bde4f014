"""A local attacker that does not hold the run secret and floods the server's port
with raw ZMTP bytes: used by the ZeroMQ tests and by the fault suite
(benchmarks/faults.py)."""

import socket
import time

# what the attacker sends again and again after its greeting
FLOODS = {
    "empty-frames": (b"\x01\x00" + b"") * 4096,                      # "more" set
    "endless-message": (b"\x03" + (8192).to_bytes(8, "big") + b"x" * 8192) * 8,
}


def flood(host: str, port: int, frames: bytes, seconds: float) -> tuple[int, bool]:
    """A ZMTP 3.0 greeting (NULL mechanism, as an unauthenticated peer must claim), a
    READY, then ``frames`` over and over for ``seconds``.  Returns (bytes sent,
    whether the server cut it off)."""
    greeting = b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + \
        b"NULL".ljust(20, b"\0") + b"\x00" + b"\x00" * 31
    ready = b"\x04" + bytes([28]) + b"\x05READY" + b"\x0bSocket-Type" + \
        (6).to_bytes(4, "big") + b"DEALER"
    sent, deadline = 0, time.monotonic() + seconds
    with socket.create_connection((host, port)) as attacker:
        try:
            attacker.sendall(greeting + ready)
            while time.monotonic() < deadline:
                attacker.sendall(frames)
                sent += len(frames)
        except OSError:   # reset or broken pipe: the server closed the connection
            return sent, True
    return sent, False
