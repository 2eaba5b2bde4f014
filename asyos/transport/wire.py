"""The one wire format of Asy-OS: a fixed little-endian struct header, then raw array
frames, for every message of ``solvers.messages``.  ZeroMQ sends the frames as one
multipart message; MPI packs them into one byte buffer (``join``/``split``).

Frame 0 is ``HEADER`` (magic, protocol version, kind, worker id, flags, run id, seq,
a, b); the other frames are raw little-endian float64 or int64 buffers whose number,
dtype and length depend on the kind.  Nothing is pickled, integers travel as integers.
``decode`` checks everything against the limits agreed in the handshake (n, budget,
batch, run id) and raises ``WireError`` naming the problem; receivers drop the message.

| kind      | dir | seq            | a          | b         | frames                                   |
|-----------|-----|----------------|------------|-----------|------------------------------------------|
| HELLO     | w→s | shard size     | q (workers)| n         | ν of its first block (f8 ×1), groups (i8 ×0 or 2), p (i8 ×1), secret (≤ 64 bytes), data (i8 ×0 or 2) |
| CONFIG    | s→w | last push      | position   | n         | plan (i8 ×8, f8 ×4), y (f8 ×n), selected (i8), weights (f8) |
| PULL      | w→s | 0              | 0          | 0         | —                                        |
| PUSH      | w→s | push number    | version    | position  | features (i8 ≤ batch), Δu (f8 ×n), selected (i8 ≤ capacity), weights (f8), importance (f8) |
| VIEW      | s→w | pushes applied | version    | credit    | u_C (f8 ×n), budget (i8 ×1), η (f8 ×1)   |
| ACK       | s→w | pushes applied | 0          | 0         | —                                        |
| HEARTBEAT | w→s | 0              | 0          | 0         | —                                        |
| FINAL     | w→s | last push      | steps      | BLAS threads | selected (i8), weights (f8), X_S w_S (f8 ×n), X_S (f8 ×n·k, a column after another; or none), seconds (f8 ×4) |
| DONE      | s→w | 0              | 0          | 0         | —                                        |
| REFUSE    | s→w | 0              | 0          | 0         | reason (UTF-8)                           |
| INTRODUCE | s→w | 0              | 0          | 0         | —                                        |
| FAIL      | w→s | 0              | 0          | 0         | reason (UTF-8): its data, found unusable mid-run |
| BUNDLE    | l→s | pushes (m)     | 0          | 0         | table (i8 ×7m), features (i8), selected (i8), weights (f8), importance (f8), Σ Δu (f8 ×n) |
| NODEVIEW  | s→l | 0              | version    | views (m) | u_C (f8 ×n), through (i8 ×q), table (i8 ×3m), η (f8 ×1) |

A HELLO's groups frame is empty, or (number of groups, fingerprint) of the group labels
the worker read (``solvers.asy.group_fingerprint``); its data frame is (bytes per value,
fingerprint) of the data (``solvers.asy.data_fingerprint``).  A CONFIG carries the
worker's ``solvers.worker_loop.WorkerPlan``: its integers (``INTS``: capacity, loss,
epochs, batch, rule, adaptive push, group budget s2_t, closing sweep, its
rounds) as int64, then its reals
(``FLOATS``: η, m, damping, ridge) as float64.  A VIEW's
credit is cumulative: the steps the worker may have pushed in all.

A BUNDLE (from a node's leader, ``solvers.leader``) packs m pushes of distinct workers:
its table has one row per push (worker, push number, version, position, more, steps,
kept), and its features, selected, weights and importance are the pushes' own, one
after another (a row's steps and kept say how many are its).  A NODEVIEW's table has
one row per view (worker, credit, budget); all its views are of u_C at ``version``.

Flags: bit 0 of a PUSH = "and pull again" (the worker wants a view in answer); bits
1–31 = the configuration tag (ZeroMQ): the one in the worker's last CONFIG, which the
server changes at every (re)configuration, so a message sent before it is recognised
as stale.
"""

import struct
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .._version import PROTOCOL_VERSION
from ..errors import AsyosError
from ..solvers import messages as m
from ..solvers.worker_loop import WorkerPlan

MAGIC = b"ASYO"
PROTOCOL = PROTOCOL_VERSION   # asyos/_version.py keeps its history
HEADER = struct.Struct("<4sHHIIQqqq")
ONE_INT, ONE_FLOAT = struct.Struct("<q"), struct.Struct("<d")
WIRE_DTYPES = (np.dtype("<i8"), np.dtype("<f8"))   # the frames' two value types
MORE = 1
TAG_LIMIT = 1 << 31
REASON_LIMIT = 4096
TOKEN_LIMIT = 64    # a run secret: 32 random bytes in hex


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
    INTRODUCE = 11
    FAIL = 12
    BUNDLE = 13
    NODEVIEW = 14


KINDS = {m.Hello: Kind.HELLO, m.Config: Kind.CONFIG, m.Pull: Kind.PULL,
         m.Push: Kind.PUSH, m.View: Kind.VIEW, m.Ack: Kind.ACK,
         m.Heartbeat: Kind.HEARTBEAT, m.Final: Kind.FINAL, m.Done: Kind.DONE,
         m.Refuse: Kind.REFUSE, m.Introduce: Kind.INTRODUCE, m.Fail: Kind.FAIL,
         m.Bundle: Kind.BUNDLE, m.NodeView: Kind.NODEVIEW}
BUNDLE_ROW = 7      # worker, seq, version, position, more, steps, kept
NODEVIEW_ROW = 3    # worker, credit, budget


_KIND_OF = {int(kind): kind for kind in Kind}
# the kinds as plain ints, as ``decode`` compares them
HELLO, PUSH, FINAL, REFUSE, BUNDLE, NODEVIEW = (
    int(k) for k in (Kind.HELLO, Kind.PUSH, Kind.FINAL, Kind.REFUSE, Kind.BUNDLE,
                     Kind.NODEVIEW))


class WireError(AsyosError):
    """A malformed, truncated, oversized or out-of-protocol message."""


class ForeignRun(WireError):
    """A well-formed message of another run (e.g. from a worker of a server that was
    restarted without its checkpoint)."""


@dataclass(frozen=True)
class Limits:
    """What the handshake fixed; every frame is checked against it."""

    n: int                      # samples: length of Δu, u_C, y and of a column
    capacity: int = 1 << 20     # most kept features a worker may report
    batch: int = 1 << 20        # most steps in one push
    run_id: int = 0             # 0: not known yet (a worker before its CONFIG)
    vectors: bool = True        # False: Δu, u_C and X_S w_S travel through shared
    #                             memory (``node_memory``), their frames are empty
    workers: int = 1            # q: the workers a NODEVIEW counts, the most a BUNDLE

    @classmethod
    def of(cls, config, n: int, run_id: int = 0, *, vectors: bool = True,
           widest: bool = False) -> "Limits":
        """The limits of a run's messages under ``config`` (a ``solvers.asy.AsyConfig``):
        the one statement of them for every carrier.  A configuration re-sized for p
        or for a timed step (``AsyConfig.for_features``, ``for_step``) has limits of
        its own, so a receiver takes them from the configuration it runs under now.
        ``widest``: for the pushes of any pipeline the run may be re-sized to (what a
        socket fixes before the workers' HELLO, ``MAXMSGSIZE``)."""
        batch = config.most_batch if widest else config.batch
        return cls(n, max(config.capacities), batch, run_id, vectors, config.n_workers)


class Envelope(NamedTuple):
    """A decoded message and what the header says around it (a named tuple: one is
    built for every message received)."""

    kind: Kind
    worker: int
    flags: int
    run_id: int
    body: object                # a solvers.messages value

    @property
    def tag(self) -> int:
        return self.flags >> 1


def flags(tag: int, more: bool = False) -> int:
    """The flags field: configuration ``tag`` (< 2³¹) and the MORE bit."""
    return (tag << 1) | (MORE if more else 0)


# -- encoding ------------------------------------------------------------------------------
def _fields(message) -> tuple[int, int, int, list]:
    """(seq, a, b, arrays) of a message."""
    if isinstance(message, m.Push):
        return message.seq, message.version, message.position, [
            message.features, message.delta, message.selected, message.weights,
            message.importance]
    if isinstance(message, m.View):   # a one-value frame is its 8 bytes
        return message.through, message.version, message.credit, [
            message.u, ONE_INT.pack(message.budget), ONE_FLOAT.pack(message.eta)]
    if isinstance(message, m.Ack):
        return message.through, 0, 0, []
    if isinstance(message, m.Final):
        return message.seq, message.steps, message.blas_threads, [
            message.selected, message.weights, message.contribution, message.columns,
            message.seconds]
    if isinstance(message, m.Hello):
        return message.shard_size, message.n_workers, message.n_samples, [
            np.array([message.nu]), message.groups, np.array([message.n_features]),
            message.token.encode()[:TOKEN_LIMIT], message.data]
    if isinstance(message, m.Config):
        return message.last_push, message.position, message.y.shape[0], [
            message.plan_ints, message.plan_floats, message.y, message.selected,
            message.weights]
    if isinstance(message, (m.Refuse, m.Fail)):
        return 0, 0, 0, [message.reason.encode()[:REASON_LIMIT]]
    if isinstance(message, m.Bundle):
        pushes = message.pushes
        table = np.array([(t, p.seq, p.version, p.position, p.more, p.features.size,
                           p.selected.size) for t, p in zip(message.workers, pushes,
                                                             strict=True)], np.int64)
        return len(pushes), 0, 0, [table] + [
            np.concatenate([getattr(p, name) for p in pushes]) for name in
            ("features", "selected", "weights", "importance")] + [message.delta]
    if isinstance(message, m.NodeView):
        views = message.views
        table = np.array([(t, v.credit, v.budget) for t, v in
                          zip(message.workers, views, strict=True)], np.int64)
        eta = views[0].eta if views else 0.0
        return 0, message.version, len(views), [
            message.u, message.through, table, np.array([eta], np.float64)]
    return 0, 0, 0, []


def encode(message, worker: int = 0, *, run_id: int = 0, tag: int = 0) -> list:
    """Frames of one message; arrays go as raw little-endian buffers (no copy if they
    already are contiguous float64/int64)."""
    kind = KINDS[type(message)]
    seq, a, b, arrays = _fields(message)
    more = isinstance(message, m.Push) and message.more
    frames = [HEADER.pack(MAGIC, PROTOCOL, int(kind), worker, flags(tag, more), run_id,
                          int(seq), int(a), int(b))]
    for array in arrays:
        if isinstance(array, bytes) or (type(array) is np.ndarray and array.ndim == 1
                                        and array.dtype in WIRE_DTYPES
                                        and array.flags.c_contiguous):
            frames.append(array)   # as it is: a frame already
            continue
        array = np.asarray(array)
        dtype = "<i8" if array.dtype.kind in "iub" else "<f8"
        # flat: a frame is a run of values, whatever the array's shape (a FINAL
        # of an empty kept set carries its columns as a (0, n) array)
        frames.append(np.ascontiguousarray(array, dtype=dtype).reshape(-1))
    return frames


def octets(frame) -> bytes | memoryview:
    """``frame``'s bytes as bytes or a flat byte view, without a copy where it is
    contiguous (bytes as they are: ``decode`` reads every frame of every push
    through this).  Any buffer of any shape, empty ones included: ``memoryview.cast``
    refuses a shape with a zero in it ((0, n), the columns of an empty kept set),
    and an empty kept set is a valid state of every worker."""
    if type(frame) is bytes:
        return frame
    view = memoryview(frame)
    if not view.c_contiguous:
        return memoryview(view.tobytes())
    if view.ndim == 1 and view.format == "B":
        return view
    if view.nbytes == 0:
        return memoryview(b"")
    return view.cast("B")


def join(frames) -> bytes:
    """One buffer of ``frames`` (MPI): their count and lengths, then their bytes."""
    raw = [octets(f) for f in frames]
    table = np.array([len(raw), *(len(r) for r in raw)], dtype="<i8")
    return b"".join([table.tobytes(), *raw])


def split(buffer, most_frames: int = 8) -> list:
    """The frames ``join`` packed (views into ``buffer``); WireError when malformed."""
    raw = octets(buffer)
    if len(raw) < 8:
        raise WireError("buffer too short for a frame table")
    (count,) = struct.unpack_from("<q", raw)
    if not 0 < count <= most_frames or len(raw) < 8 * (1 + count):
        raise WireError(f"bad frame count {count}")
    lengths = list(struct.unpack_from(f"<{count}q", raw, 8))
    # summed as Python ints: an int64 sum of huge lengths could wrap to the right size
    if min(lengths) < 0 or sum(lengths) != len(raw) - 8 * (1 + count):
        raise WireError("frame lengths do not add up to the buffer")
    frames, at = [], 8 * (1 + count)
    for length in lengths:
        frames.append(raw[at:at + length])
        at += length
    return frames


# -- decoding ------------------------------------------------------------------------------
KEPT_FRAMES = {int(Kind.CONFIG): (3, 4), int(Kind.PUSH): (2, 3),
               int(Kind.FINAL): (0, 1)}


@lru_cache(maxsize=64)
def _layout(kind: Kind, limits: Limits) -> list[tuple[str, int, int]]:
    """(dtype, least, most) length of each frame after the header, for ``kind``."""
    n, k, b, q = limits.n, limits.capacity, limits.batch, limits.workers
    v = n if limits.vectors else 0   # an n-vector's frame
    f8, i8 = "<f8", "<i8"
    layouts = {
        Kind.HELLO: [(f8, 1, 1), (i8, 0, 2), (i8, 1, 1), ("bytes", 0, TOKEN_LIMIT),
                     (i8, 0, 2)],
        Kind.CONFIG: [(i8, len(WorkerPlan.INTS), len(WorkerPlan.INTS)),
                      (f8, len(WorkerPlan.FLOATS), len(WorkerPlan.FLOATS)),
                      (f8, n, n), (i8, 0, k), (f8, 0, k)],   # y: never shared
        Kind.PULL: [], Kind.ACK: [], Kind.HEARTBEAT: [], Kind.DONE: [],
        Kind.INTRODUCE: [],
        Kind.PUSH: [(i8, 1, b), (f8, v, v), (i8, 0, k), (f8, 0, k), (f8, 0, k)],
        Kind.VIEW: [(f8, v, v), (i8, 1, 1), (f8, 1, 1)],
        Kind.FINAL: [(i8, 0, k), (f8, 0, k), (f8, v, v),
                     (f8, 0, min(n * k, m.COLUMNS_LIMIT)), (f8, 4, 4)],
        Kind.REFUSE: [("bytes", 0, REASON_LIMIT)],
        Kind.FAIL: [("bytes", 0, REASON_LIMIT)],
        Kind.BUNDLE: [(i8, BUNDLE_ROW, BUNDLE_ROW * q), (i8, 1, q * b), (i8, 0, q * k),
                      (f8, 0, q * k), (f8, 0, q * k), (f8, v, v)],
        Kind.NODEVIEW: [(f8, v, v), (i8, q, q), (i8, NODEVIEW_ROW, NODEVIEW_ROW * q),
                        (f8, 1, 1)],
    }
    return layouts[kind]


@lru_cache(maxsize=1)
def max_frames() -> int:
    """The most frames a valid message has: its header and the longest layout."""
    return 1 + max(len(_layout(kind, Limits(1))) for kind in Kind)


def max_frame_bytes(limits: Limits) -> int:
    """The largest frame of a valid message under ``limits`` (ZeroMQ's
    ``MAXMSGSIZE``, which bounds a frame): a FINAL's kept columns, n · capacity
    values, at most ``messages.COLUMNS_LIMIT`` (a worker past it sends none)."""
    return max(most if dtype == "bytes" else 8 * most
               for kind in Kind for dtype, _, most in _layout(kind, limits))


@lru_cache(maxsize=64)   # asked for every received message
def max_bytes(limits: Limits) -> int:
    """The most bytes a valid message can carry under ``limits``: a receiver checks
    this before it parses, and stops reading a message that exceeds it."""
    return HEADER.size + max(sum(most if dtype == "bytes" else 8 * most
                                 for dtype, _, most in _layout(kind, limits))
                             for kind in Kind)


_EMPTY = np.zeros(0)


def _bundle(count: int, arrays: list, limits: Limits) -> m.Bundle:
    """A BUNDLE's pushes, cut out of its concatenated frames by its table."""
    table, features, selected, weights, importance, delta = arrays
    table = table.reshape(-1, BUNDLE_ROW)
    if table.shape[0] != count:
        raise WireError(f"BUNDLE says {count} pushes, its table has {table.shape[0]}")
    steps, kept = table[:, 5], table[:, 6]
    if table[:, :4].min() < 0 or table[:, 0].max() >= limits.workers:
        raise WireError("BUNDLE: a push with a negative counter or an unknown worker")
    if steps.min() < 1 or steps.max() > limits.batch or kept.min() < 0 or \
            kept.max() > limits.capacity:
        raise WireError(f"BUNDLE: a push of {steps.min()}..{steps.max()} steps or "
                        f"{kept.min()}..{kept.max()} kept features (1..{limits.batch} "
                        f"and 0..{limits.capacity} allowed)")
    if int(steps.sum()) != features.size or int(kept.sum()) != selected.size or \
            weights.size != selected.size or importance.size != selected.size:
        raise WireError(f"BUNDLE: its table names {int(steps.sum())} steps and "
                        f"{int(kept.sum())} kept features, its frames hold "
                        f"{features.size}, {selected.size}, {weights.size} and "
                        f"{importance.size}")
    at_step = np.concatenate([[0], np.cumsum(steps)]).tolist()
    at_kept = np.concatenate([[0], np.cumsum(kept)]).tolist()
    pushes = tuple(
        m.Push(seq, version, features[at_step[i]:at_step[i + 1]], _EMPTY,
               selected[at_kept[i]:at_kept[i + 1]], weights[at_kept[i]:at_kept[i + 1]],
               importance[at_kept[i]:at_kept[i + 1]], position, more=bool(more))
        for i, (_, seq, version, position, more, _, _) in enumerate(table.tolist()))
    return m.Bundle(table[:, 0].copy(), pushes, delta)


def _body(kind: Kind, seq: int, a: int, b: int, more: bool, arrays: list, n: int):
    if kind == Kind.PUSH:
        return m.Push(seq, a, *arrays[:2], *arrays[2:], position=b, more=more)
    if kind == Kind.VIEW:
        return m.View(arrays[0], a, seq, b, int(arrays[1][0]), float(arrays[2][0]))
    if kind == Kind.ACK:
        return m.Ack(seq)
    if kind == Kind.FINAL:
        selected, weights, contribution, columns, seconds = arrays
        return m.Final(seq, a, selected, weights, contribution,
                       columns.reshape(-1, n) if n else columns.reshape(0, 0), seconds,
                       blas_threads=b)
    if kind == Kind.HELLO:
        return m.Hello(a, seq, b, float(arrays[0][0]), arrays[1], int(arrays[2][0]),
                       arrays[3], arrays[4])
    if kind == Kind.CONFIG:
        return m.Config(*arrays, last_push=seq, position=a)
    if kind == Kind.REFUSE:
        return m.Refuse(arrays[0])
    if kind == Kind.FAIL:
        return m.Fail(arrays[0])
    if kind == Kind.NODEVIEW:
        u, through, table, eta = arrays
        table = table.reshape(-1, NODEVIEW_ROW)
        return m.NodeView(u, a, through, table[:, 0].copy(), tuple(
            m.View(_EMPTY, a, int(through[t]), int(credit), int(budget),
                   float(eta[0])) for t, credit, budget in table.tolist()))
    return {Kind.PULL: m.Pull, Kind.HEARTBEAT: m.Heartbeat, Kind.DONE: m.Done,
            Kind.INTRODUCE: m.Introduce}[kind]()


@lru_cache(maxsize=64)
def _plans(limits: Limits) -> dict:
    """Each kind's frames as ``decode`` checks them: (text, dtype, least, most)
    bytes of each frame after the header, worked out once per ``limits`` (a push's
    frames are checked at every push)."""
    return {int(kind): tuple((dtype == "bytes", dtype,
                              least if dtype == "bytes" else 8 * least,
                              most if dtype == "bytes" else 8 * most)
                             for dtype, least, most in _layout(kind, limits))
            for kind in Kind}


def decode(frames, limits: Limits) -> Envelope:
    """Parse and check one message; WireError (never anything else) when it is bad."""
    if not frames:
        raise WireError("empty message")
    head = bytes(frames[0])
    if len(head) != HEADER.size:
        raise WireError(f"header has {len(head)} bytes, expected {HEADER.size}")
    magic, protocol, number, worker, flag_bits, run_id, seq, a, b = HEADER.unpack(head)
    if magic != MAGIC:
        raise WireError(f"bad magic {magic!r}: not an asyos message")
    if protocol != PROTOCOL:
        raise WireError(f"protocol version {protocol}, this side speaks {PROTOCOL}")
    kind = _KIND_OF.get(number)
    if kind is None:
        raise WireError(f"unknown message kind {number}")
    if limits.run_id and run_id != limits.run_id and number != HELLO and \
            not (number == REFUSE and run_id == 0):   # a refusal names no run
        raise ForeignRun(f"run id {run_id:#x} is not this run's")
    plan = _plans(limits)[number]
    if len(frames) != 1 + len(plan):
        raise WireError(f"{kind.name} has {len(frames) - 1} data frames, expected "
                        f"{len(plan)}")
    arrays = []
    for (text, dtype, least, most), frame in zip(plan, frames[1:]):
        raw = octets(frame)
        size = len(raw)
        if text:
            if size > most:
                raise WireError(f"{kind.name} text of {size} bytes is too long")
            arrays.append(bytes(raw).decode("utf-8", errors="replace"))
            continue
        if size & 7:
            raise WireError(f"{kind.name} frame of {size} bytes is not a whole "
                            "number of 8-byte values")
        if not least <= size <= most:
            raise WireError(f"{kind.name} frame has {size // 8} values, expected "
                            f"{least // 8}..{most // 8}")
        arrays.append(np.frombuffer(raw, dtype=dtype))
    if number in KEPT_FRAMES:
        indices, weights = (arrays[i] for i in KEPT_FRAMES[number])
        if indices.size != weights.size:
            raise WireError(f"{kind.name}: {indices.size} kept indices but "
                            f"{weights.size} weights")
        if number == PUSH and arrays[4].size != indices.size:
            raise WireError(f"PUSH: {indices.size} kept indices but "
                            f"{arrays[4].size} importances")
        if number == FINAL and arrays[3].size not in (0, indices.size * limits.n):
            raise WireError(f"FINAL: {indices.size} kept indices but "
                            f"{arrays[3].size} column values (n = {limits.n})")
    if seq < 0 or a < 0 or (number != HELLO and b < 0):
        raise WireError(f"{kind.name}: negative counter")
    if number == BUNDLE:
        return Envelope(kind, worker, flag_bits, run_id, _bundle(seq, arrays, limits))
    if number == NODEVIEW and (arrays[2].size != NODEVIEW_ROW * b or
                               arrays[2][::NODEVIEW_ROW].max() >= limits.workers or
                               arrays[2].min() < 0):
        raise WireError(f"NODEVIEW says {b} views, its table has "
                        f"{arrays[2].size // NODEVIEW_ROW} or names an unknown worker")
    body = _body(kind, seq, a, b, bool(flag_bits & MORE), arrays, limits.n)
    return Envelope(kind, worker, flag_bits, run_id, body)
