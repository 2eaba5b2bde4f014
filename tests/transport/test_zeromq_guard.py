"""The per-connection bound on unfinished messages (``guard.InFlight``): ZMTP's
framing counted exactly, honest traffic never cut, an unended message cut."""

import os
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from asyos.transport.zeromq.guard import SLACK, InFlight, wire_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from floods import FLOODS, flood  # noqa: E402

SIZES = ([0], [5, 300], [1, 2, 3, 255, 256, 70_000], [8000] * 10, [1 << 20])


def _pair(tmp_path, curve: bool):
    """A ROUTER behind PLAIN or CURVE and a DEALER that passes it."""
    context = zmq.Context()
    auth = ThreadAuthenticator(context)
    auth.start()
    router, dealer = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
    for sock in (router, dealer):
        sock.linger = 0
    if curve:
        server = zmq.auth.load_certificate(
            zmq.auth.create_certificates(tmp_path, "server")[1])
        client = zmq.auth.load_certificate(
            zmq.auth.create_certificates(tmp_path, "client")[1])
        auth.configure_curve(domain="*", location=zmq.auth.CURVE_ALLOW_ANY)
        router.curve_server = True
        router.curve_publickey, router.curve_secretkey = server
        dealer.curve_publickey, dealer.curve_secretkey = client
        dealer.curve_serverkey = server[0]
    else:
        auth.configure_plain("*", {"u": "p"})
        router.plain_server = True
        dealer.plain_username, dealer.plain_password = b"u", b"p"
    return context, auth, router, dealer


@pytest.mark.parametrize("curve", [False, True], ids=["plain", "curve"])
def test_what_a_connection_received_is_what_the_server_read_plus_the_handshake(
        tmp_path, curve):
    """The kernel's count of received bytes (TCP_INFO) against ``wire_bytes`` of the
    frames read: they differ by the handshake alone, whatever the frames' sizes, so
    honest traffic never drifts towards the bound."""
    context, auth, router, dealer = _pair(tmp_path, curve)
    guard = InFlight(router, 0, curve)
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer.connect(f"tcp://127.0.0.1:{port}")
        left = []
        for sizes in SIZES * 3:
            dealer.send_multipart([b"x" * k for k in sizes])
            frames = router.recv_multipart(copy=False)
            guard._events()
            guard.read(frames[0], sum(guard.wire_bytes(len(f.buffer))
                                      for f in frames[1:]))
            time.sleep(0.02)
            [peer] = guard.peers.values()
            left.append(peer.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232))
            left[-1] = int.from_bytes(left[-1][128:136], "little") - peer.read
        assert len(set(left)) == 1 and 0 < left[0] < SLACK, left
    finally:
        guard.close()
        auth.stop()
        context.destroy(linger=0)


def test_wire_bytes_follows_zmtp_framing():
    assert wire_bytes(0, False) == 2 and wire_bytes(255, False) == 257
    assert wire_bytes(256, False) == 265
    assert wire_bytes(0, True) == 35 and wire_bytes(222, True) == 257
    assert wire_bytes(223, True) == 265


def test_honest_messages_larger_than_the_bound_in_total_are_never_cut(tmp_path):
    """Ten thousand messages, 40 MB in all, each within the bound: read as they come,
    none is held, no connection is cut."""
    context, auth, router, dealer = _pair(tmp_path, False)
    guard = InFlight(router, 1 << 16, False)
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer.connect(f"tcp://127.0.0.1:{port}")
        sender = threading.Thread(target=lambda: [
            dealer.send_multipart([b"h", np.ones(512).tobytes()]) for _ in range(10_000)])
        sender.start()
        got = 0
        while got < 10_000:
            if not router.poll(100):
                guard.drained()
                guard.check()
                continue
            frames = router.recv_multipart(copy=False)
            guard.read(frames[0], sum(guard.wire_bytes(len(f.buffer))
                                      for f in frames[1:]))
            got += 1
            if not router.poll(0):
                guard.drained()
            guard.check()
        sender.join()
        assert guard.cut == 0
    finally:
        guard.close()
        auth.stop()
        context.destroy(linger=0)


@pytest.mark.parametrize("frames", ["empty-frames", "endless-message"])
def test_an_insider_whose_message_never_ends_is_cut_off(frames):
    """A peer that passed the PLAIN handshake with the secret, then frames that never
    end a message: its connection is cut once it holds more than the bound, and the
    server process grows by a few MB (it grew 1.4 GB in 4 s without the bound)."""
    from asyos.solvers.asy import AsyConfig
    from asyos.transport.zeromq import ZmqServer

    server = ZmqServer("tcp://127.0.0.1:0", np.linspace(-1, 1, 528),
                       AsyConfig.build(20, 2), secret="s3cret")
    port = int(server.endpoint.rsplit(":", 1)[1])
    result = {}
    attacker = threading.Thread(target=lambda: result.update(
        sent=flood("127.0.0.1", port, FLOODS[frames], 3.0, password="s3cret")))

    def rss() -> float:
        status = Path(f"/proc/{os.getpid()}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0]) / 1024

    try:
        before = rss()
        attacker.start()
        deadline = time.monotonic() + 10
        while attacker.is_alive() and time.monotonic() < deadline:
            server.tick()
        attacker.join(5)
        assert result["sent"][1], "the attacker was not cut off"
        assert server.in_flight.cut >= 1
        assert rss() < before + 64
    finally:
        server.close()
