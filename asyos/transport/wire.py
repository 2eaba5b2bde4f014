"""The ZeroMQ wire format: a fixed little-endian struct header, then raw array frames.

Every message is a multipart ZeroMQ message: frame 0 is ``HEADER`` (magic, protocol
version, kind, worker id, flags, run id, seq, a, b), the other frames are raw
little-endian float64 or int64 buffers whose number, dtype and length depend on the
kind.  Nothing is pickled.  ``decode`` checks everything against the limits agreed in
the handshake (n, budget, batch, run id) and raises ``WireError`` naming the problem;
receivers log it and drop the message.

| kind      | dir | seq            | a          | b         | frames                                   |
|-----------|-----|----------------|------------|-----------|------------------------------------------|
| HELLO     | w→s | shard size     | q (shards) | n         | ν of its first block (f8 ×1), groups (i8 ×0 or 2) |
| CONFIG    | s→w | last push      | position   | n         | params (f8 ×8), y (f8 ×n), selected (i8), weights (f8) |
| PULL      | w→s | 0              | 0          | 0         | —                                        |
| PUSH      | w→s | push number    | version    | position  | features (i8 ≤ batch), Δu (f8 ×n), selected (i8 ≤ budget), weights (f8) |
| VIEW      | s→w | pushes applied | version    | 0         | u_C (f8 ×n)                              |
| ACK       | s→w | pushes applied | 0          | 0         | —                                        |
| HEARTBEAT | w→s | 0              | 0          | 0         | —                                        |
| FINAL     | w→s | last push      | steps      | BLAS threads | selected (i8), weights (f8), X_S w_S (f8 ×n), seconds (f8 ×3) |
| DONE      | s→w | 0              | 0          | 0         | —                                        |
| REFUSE    | s→w | 0              | 0          | 0         | reason (UTF-8)                           |

A HELLO's groups frame is empty, or (number of groups, fingerprint) of the group labels
the worker read (``solvers.asy.group_fingerprint``): group-aware Asy-OS (issue 8), where
the server refuses a worker whose labels are not its own.  The CONFIG params carry the
worker's group budget s2_t (0: no groups).

Flags: bit 0 of a PUSH = "and pull again" (the worker wants a view in answer); bits
1–31 = the configuration tag: the one in the worker's last CONFIG, which the server
changes at every (re)configuration, so a message sent before it is recognised as stale.
"""

import struct
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..errors import AsyosError

MAGIC = b"ASYO"
PROTOCOL = 2   # 2: HELLO carries the group labels' fingerprint, CONFIG s2_t
HEADER = struct.Struct("<4sHHIIQqqq")
MORE = 1
TAG_LIMIT = 1 << 31
PARAMS = ("loss", "epochs", "budget", "window", "batch", "eta", "m", "staleness",
          "group_budget")
REASON_LIMIT = 4096


class Kind(IntEnum):
    HELLO = 1
    CONFIG = 2
    PULL = 3
    PUSH = 4
    VIEW = 5
    ACK = 6
    HEARTBEAT = 7
    FINAL = 8
    DONE = 9
    REFUSE = 10


class WireError(AsyosError):
    """A malformed, truncated, oversized or out-of-protocol message."""


@dataclass(frozen=True)
class Limits:
    """What the handshake fixed; every frame is checked against it."""

    n: int                      # samples: length of Δu, u_C, y
    budget: int = 1 << 20       # most kept features a worker may report
    batch: int = 1 << 20        # most steps in one push
    run_id: int = 0             # 0: not known yet (a worker before its CONFIG)


@dataclass(frozen=True)
class Message:
    kind: Kind
    worker: int
    flags: int
    run_id: int
    seq: int
    a: int
    b: int
    arrays: tuple = ()

    @property
    def more(self) -> bool:
        return bool(self.flags & MORE)

    @property
    def tag(self) -> int:
        return self.flags >> 1


def flags(tag: int, more: bool = False) -> int:
    """The flags field: configuration ``tag`` (< 2³¹) and the MORE bit."""
    return (tag << 1) | (MORE if more else 0)

# -- encoding ------------------------------------------------------------------------------
def encode(kind: Kind, worker: int = 0, *arrays, flags: int = 0, run_id: int = 0,
           seq: int = 0, a: int = 0, b: int = 0) -> list:
    """Frames of one message; arrays go as raw little-endian buffers (no copy if they
    already are contiguous float64/int64/bytes)."""
    header = HEADER.pack(MAGIC, PROTOCOL, int(kind), worker, flags, run_id, seq, a, b)
    frames = [header]
    for array in arrays:
        if isinstance(array, bytes):
            frames.append(array)
        else:
            array = np.asarray(array)
            dtype = "<i8" if array.dtype.kind in "iu" else "<f8"
            frames.append(np.ascontiguousarray(array, dtype=dtype))
    return frames


# -- decoding ------------------------------------------------------------------------------
KEPT_FRAMES = {Kind.CONFIG: (2, 3), Kind.PUSH: (2, 3), Kind.FINAL: (0, 1)}


def _layout(kind: Kind, limits: Limits) -> list[tuple[str, int, int]]:
    """(dtype, least, most) length of each frame after the header, for ``kind``."""
    n, k, b = limits.n, limits.budget, limits.batch
    f8, i8 = "<f8", "<i8"
    layouts = {
        Kind.HELLO: [(f8, 1, 1), (i8, 0, 2)],
        Kind.CONFIG: [(f8, len(PARAMS), len(PARAMS)), (f8, n, n), (i8, 0, k),
                      (f8, 0, k)],
        Kind.PULL: [], Kind.ACK: [], Kind.HEARTBEAT: [], Kind.DONE: [],
        Kind.PUSH: [(i8, 1, b), (f8, n, n), (i8, 0, k), (f8, 0, k)],
        Kind.VIEW: [(f8, n, n)],
        Kind.FINAL: [(i8, 0, k), (f8, 0, k), (f8, n, n), (f8, 3, 3)],
        Kind.REFUSE: [("bytes", 0, REASON_LIMIT)],
    }
    return layouts[kind]


def decode(frames, limits: Limits) -> Message:
    """Parse and check one message; WireError (never anything else) when it is bad."""
    if not frames:
        raise WireError("empty message")
    head = bytes(frames[0])
    if len(head) != HEADER.size:
        raise WireError(f"header has {len(head)} bytes, expected {HEADER.size}")
    magic, protocol, kind, worker, flags, run_id, seq, a, b = HEADER.unpack(head)
    if magic != MAGIC:
        raise WireError(f"bad magic {magic!r}: not an asyos message")
    if protocol != PROTOCOL:
        raise WireError(f"protocol version {protocol}, this side speaks {PROTOCOL}")
    try:
        kind = Kind(kind)
    except ValueError:
        raise WireError(f"unknown message kind {kind}") from None
    if limits.run_id and run_id != limits.run_id and kind != Kind.HELLO:
        raise WireError(f"run id {run_id:#x} is not this run's ({limits.run_id:#x})")
    layout = _layout(kind, limits)
    if len(frames) != 1 + len(layout):
        raise WireError(f"{kind.name} has {len(frames) - 1} data frames, expected "
                        f"{len(layout)}")
    arrays = []
    for (dtype, least, most), frame in zip(layout, frames[1:], strict=True):
        raw = memoryview(frame).cast("B")
        if dtype == "bytes":
            if len(raw) > most:
                raise WireError(f"{kind.name} text of {len(raw)} bytes is too long")
            arrays.append(bytes(raw).decode("utf-8", errors="replace"))
            continue
        if len(raw) % 8:
            raise WireError(f"{kind.name} frame of {len(raw)} bytes is not a whole "
                            "number of 8-byte values")
        count = len(raw) // 8
        if not least <= count <= most:
            raise WireError(f"{kind.name} frame has {count} values, expected "
                            f"{least}..{most}")
        arrays.append(np.frombuffer(raw, dtype=dtype))
    if kind in KEPT_FRAMES:
        indices, weights = (arrays[i] for i in KEPT_FRAMES[kind])
        if indices.size != weights.size:
            raise WireError(f"{kind.name}: {indices.size} kept indices but "
                            f"{weights.size} weights")
    if seq < 0 or a < 0 or (kind != Kind.HELLO and b < 0):
        raise WireError(f"{kind.name}: negative counter")
    return Message(kind, worker, flags, run_id, seq, a, b, tuple(arrays))
