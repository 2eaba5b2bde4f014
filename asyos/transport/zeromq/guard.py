"""A bound on what one connected peer can make the server hold.

ZeroMQ delivers a multipart message only once its last frame has come, and holds the
frames of an unfinished one meanwhile; a peer that passed the handshake (an insider
holding the run secret or a CURVE key) could send a message that never ends, or
millions of empty frames (about 60 bytes of memory each for 2 on the wire), and grow
the server without bound: 1.4 GB in 4 s on loopback.  libzmq has no option for it
(``MAXMSGSIZE`` bounds one frame), so the server measures each connection itself:
the bytes its kernel received (``TCP_INFO``) against the bytes of the messages the
server read from it (``SRCFD``, with ZMTP's framing counted exactly).  What was
received before the server last read every message there was, and is still unread,
belongs to a message that has not ended; past the largest valid message the
connection is cut (``shutdown``), libzmq frees what it held, and the event is logged.
docs/reliability.md, "Bad and hostile peers", gives the bound.
"""

import logging
import os
import socket
import struct
import time
from dataclasses import dataclass

import zmq
from zmq.utils.monitor import recv_monitor_message

log = logging.getLogger("asyos.zeromq")

TCP_BYTES_RECEIVED = 128   # offset of tcpi_bytes_received in Linux's struct tcp_info
TCP_INFO_SIZE = 232
SLACK = 64 * 1024          # the handshake, ZMTP's commands, a message's framing
CHECK_SECONDS = 0.005      # how often the connections are measured while serving
CURVE_OVERHEAD = 33        # a CURVE MESSAGE command: its name, nonce, MAC and flags
PEERS_FACTOR = 4           # what all connections may hold: this many single bounds


def wire_bytes(size: int, curve: bool) -> int:
    """The bytes a frame of ``size`` takes on the wire in ZMTP 3 (short or long
    framing; under CURVE, inside a MESSAGE command)."""
    body = size + (CURVE_OVERHEAD if curve else 0)
    return body + (2 if body <= 255 else 9)


@dataclass
class _Peer:
    sock: socket.socket   # a duplicate of libzmq's descriptor, to measure and cut
    received: int = 0     # what the kernel had received at the last check
    read: int = 0         # the wire bytes of every message the server read from it


class InFlight:
    """Per-connection bound on the bytes of unfinished messages (``bound``), and on
    all connections together (``PEERS_FACTOR`` bounds), for a TCP server socket."""

    def __init__(self, server_socket, bound: int, curve: bool, warn=None):
        self.bound = bound + SLACK
        self.curve = curve
        self.warn = warn or log.warning
        self.monitor = server_socket.get_monitor_socket(
            zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        self.server_socket = server_socket
        self.peers: dict[int, _Peer] = {}
        self.cut = 0
        self.next_check = 0.0
        self.since_drain = False

    def wire_bytes(self, size: int) -> int:
        return wire_bytes(size, self.curve)

    def read(self, first_frame, wired: int) -> None:
        """The server read a message of ``wired`` bytes on the wire (``wire_bytes``
        of its frames after the routing one, which came in the handshake);
        ``first_frame`` tells from which connection."""
        peer = self.peers.get(first_frame.get(zmq.SRCFD))
        if peer is not None:
            peer.read += wired

    def drained(self) -> None:
        """The server read every message there was: whatever a connection had
        received by the last check and is still unread is of a message not ended."""
        self.since_drain = True

    def check(self) -> None:
        """Measure every connection (at most every ``CHECK_SECONDS``) and cut those
        over the bound: what each had received by the previous check, less what the
        server read from it, when the server drained its socket in between."""
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + CHECK_SECONDS
        self._events()
        judge, self.since_drain = self.since_drain, False
        unfinished = {}
        for fd, peer in list(self.peers.items()):
            try:
                received = _received(peer.sock)
            except OSError:
                self._forget(fd)
                continue
            if judge:
                unfinished[fd] = peer.received - peer.read
            peer.received = received
        for fd, held in unfinished.items():
            if held > self.bound:
                self._cut(fd, held, f"more than the {self.bound} a connection may hold")
        total = sum(held for fd, held in unfinished.items() if fd in self.peers)
        if total > PEERS_FACTOR * self.bound:
            fd = max((fd for fd in unfinished if fd in self.peers),
                     key=unfinished.get)
            self._cut(fd, unfinished[fd], f"connections together held {total}, more "
                      f"than {PEERS_FACTOR * self.bound}")

    def _events(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            fd = event["value"]
            if event["event"] == zmq.EVENT_ACCEPTED:
                self._forget(fd)
                try:
                    sock = socket.socket(fileno=os.dup(fd))
                except OSError:   # gone already
                    continue
                try:
                    _received(sock)   # a TCP connection (an ipc one has no TCP_INFO)
                except OSError:
                    sock.close()
                    continue
                self.peers[fd] = _Peer(sock)
            else:
                self._forget(fd)

    def _cut(self, fd: int, held: int, why: str) -> None:
        peer = self.peers.pop(fd)
        self.cut += 1
        self.warn("cut off a peer (descriptor %d): %d bytes of a message it has not "
                  "ended, %s", fd, held, why)
        try:   # libzmq reads the end and frees what it held; the last close resets
            #      the connection (else a peer past a full window waits out
            #      FIN-WAIT-2, a minute)
            peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 struct.pack("ii", 1, 0))
            peer.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        peer.sock.close()

    def _forget(self, fd: int) -> None:
        peer = self.peers.pop(fd, None)
        if peer is not None:
            peer.sock.close()

    def close(self) -> None:
        for fd in list(self.peers):
            self._forget(fd)
        try:
            self.server_socket.disable_monitor()
        except zmq.ZMQError:
            pass
        self.monitor.close(linger=0)


def _received(sock: socket.socket) -> int:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_SIZE)
    return struct.unpack_from("<Q", info, TCP_BYTES_RECEIVED)[0]
