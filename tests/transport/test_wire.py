"""The wire format (ZeroMQ frames, MPI's joined buffers): every message round trips,
and every malformed message is refused."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.core.losses import Loss
from asyos.core.server_state import ProtocolError
from asyos.solvers import messages as m
from asyos.solvers.worker_loop import WorkerPlan
from asyos.transport.wire import (
    HEADER,
    MAGIC,
    MORE,
    PROTOCOL,
    Kind,
    Limits,
    WireError,
    decode,
    encode,
    join,
    max_frame_bytes,
    split,
)

LIMITS = Limits(n=5, capacity=3, batch=4, run_id=77, workers=3)


def _bytes(frames):
    return [bytes(f) if not isinstance(f, np.ndarray) else f.tobytes() for f in frames]


def _names(message) -> tuple[str, ...]:
    """A message's fields (a named tuple's or a dataclass's)."""
    return message._fields if isinstance(message, tuple) else \
        tuple(message.__dataclass_fields__)


def _equal(a, b) -> bool:
    """Two messages with the same fields (arrays compared by value and dtype kind)."""
    if type(a) is not type(b):
        return False
    for name in _names(a):
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            x, y = np.asarray(x), np.asarray(y)
            if x.dtype.kind != y.dtype.kind or x.shape != y.shape or \
                    not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


MESSAGES = [
    m.Push(3, 11, np.array([7, 9]), np.arange(5.0), np.array([7]), np.array([0.5]),
           np.array([0.75]), position=20, more=True),
    m.Push(1, 0, np.array([2]), -np.ones(5), np.zeros(0, np.int64), np.zeros(0),
           np.zeros(0), position=1, more=False),
    m.View(np.linspace(0, 1, 5), 42, 6, 17, 2, 0.125),
    m.View(np.zeros(5), 0, 0, 0),
    m.Ack(9),
    m.Final(4, 12, np.array([1, 3]), np.array([0.25, -1.5]), np.arange(5.0),
            np.arange(10.0).reshape(2, 5), np.array([0.1, 0.2, 0.3, 0.05]), blas_threads=2),
    m.Hello(3, 40, 5, 1.25, np.array([12, 99], np.int64)),
    m.Hello(3, 40, 5, 0.5),
    m.Config(WorkerPlan(3, Loss.LOGISTIC, 0.5, 1.5, 2, 4, "magnitude", 0.5, 1e-3,
                        True, 2).ints(),
             WorkerPlan(3, Loss.LOGISTIC, 0.5, 1.5, 2, 4).floats(), np.ones(5),
             np.array([4]), np.array([2.0]), last_push=6, position=33),
    m.Pull(), m.Heartbeat(), m.Done(), m.Refuse("unknown peer for worker 2"),
    m.Introduce(), m.Fail("feature 3 is not finite"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda msg: type(msg).__name__)
def test_every_message_round_trips_as_frames_and_as_one_mpi_buffer(message):
    frames = encode(message, 2, run_id=77, tag=5)
    for received in (_bytes(frames), split(bytearray(join(frames)))):
        envelope = decode(received, LIMITS)
        assert envelope.worker == 2 and envelope.run_id == 77 and envelope.tag == 5
        assert _equal(envelope.body, message), (envelope.body, message)
        more = isinstance(message, m.Push) and message.more
        assert bool(envelope.flags & MORE) == more


def _header(kind, seq=0, a=0, b=0, run_id=77, flags=0, magic=MAGIC, protocol=PROTOCOL):
    return HEADER.pack(magic, protocol, kind, 0, flags, run_id, seq, a, b)


def _push(seq, features, kept, more=True):
    return m.Push(seq, 4, np.array(features, np.int64), np.zeros(0),
                  np.array(kept, np.int64), np.full(len(kept), 0.5),
                  np.full(len(kept), 0.25), position=seq * 3, more=more)


BUNDLE = m.Bundle(np.array([2, 0], np.int64),
                  (_push(3, [7, 9], [7]), _push(1, [1], [], more=False)),
                  np.arange(5.0))
NODEVIEW = m.NodeView(np.linspace(0, 1, 5), 12, np.array([3, 0, 5], np.int64),
                      np.array([2, 1], np.int64),
                      (m.View(np.zeros(0), 12, 5, 20, 2, 0.5),
                       m.View(np.zeros(0), 12, 0, 13, 1, 0.5)))


def _same_bundle(a, b) -> bool:
    return np.array_equal(a.workers, b.workers) and np.array_equal(a.delta, b.delta) \
        and len(a.pushes) == len(b.pushes) and all(
            _equal(x, y) for x, y in zip(a.pushes, b.pushes))


def test_a_leaders_bundle_and_its_node_view_round_trip():
    """A BUNDLE carries its pushes' own fields (each's Δu left out) and their summed
    Δu; a NODEVIEW one u_C and each view's credit, budget and its worker's pushes
    applied."""
    for received in (_bytes(encode(BUNDLE, 2, run_id=77)),
                     split(bytearray(join(encode(BUNDLE, 2, run_id=77))))):
        envelope = decode(received, LIMITS)
        assert envelope.worker == 2 and _same_bundle(envelope.body, BUNDLE)
    body = decode(_bytes(encode(NODEVIEW, 2, run_id=77)), LIMITS).body
    assert body.version == 12 and np.array_equal(body.u, NODEVIEW.u)
    assert np.array_equal(body.through, NODEVIEW.through)
    assert body.workers.tolist() == [2, 1]
    assert all(_equal(x, y) for x, y in zip(body.views, NODEVIEW.views))
    lean = Limits(n=5, capacity=3, batch=4, run_id=77, vectors=False, workers=3)
    with pytest.raises(WireError, match="5 values, expected 0..0"):   # Σ Δu in memory
        decode(_bytes(encode(BUNDLE, 2, run_id=77)), lean)


def _bundle_frames(table, features=(7, 9, 1), kept=(7,), delta=5):
    return [_header(13, len(table)), np.array(table, "<i8").tobytes(), np.array(features, "<i8").tobytes(),
            np.array(kept, "<i8").tobytes(), np.full(len(kept), 0.5).tobytes(),
            np.full(len(kept), 0.5).tobytes(), np.ones(delta).tobytes()]


GOOD_TABLE = [(2, 3, 4, 9, 1, 2, 1), (0, 1, 4, 3, 0, 1, 0)]


@pytest.mark.parametrize("frames, problem", [
    (_bundle_frames([(5, 3, 4, 9, 1, 2, 1), GOOD_TABLE[1]]), "unknown worker"),
    (_bundle_frames([(2, -3, 4, 9, 1, 2, 1), GOOD_TABLE[1]]), "negative"),
    (_bundle_frames([(2, 3, 4, 9, 1, 0, 1), (0, 1, 4, 3, 0, 3, 0)]), "0..3 steps"),
    (_bundle_frames([(2, 3, 4, 9, 1, 5, 1), GOOD_TABLE[1]]), "1..4"),
    (_bundle_frames([(2, 3, 4, 9, 1, 2, 4), GOOD_TABLE[1]]), "0..3 allowed"),
    (_bundle_frames([(2, 3, 4, 9, 1, 1, 1), GOOD_TABLE[1]]), "names 2 steps"),
    (_bundle_frames(GOOD_TABLE, kept=()), "names 3 steps and 1 kept"),
    (_bundle_frames(GOOD_TABLE, delta=4), "4 values, expected 5..5"),
    ([_header(13, 3)] + _bundle_frames(GOOD_TABLE)[1:], "says 3 pushes"),
    ([_header(14, 0, 12, 1), np.ones(5).tobytes(), np.ones(3, "<i8").tobytes(),
      np.array([2, 20, 2, 1, 13, 1], "<i8").tobytes(), np.ones(1).tobytes()],
     "says 1 views"),
    ([_header(14, 0, 12, 1), np.ones(5).tobytes(), np.ones(3, "<i8").tobytes(),
      np.array([3, 20, 2], "<i8").tobytes(), np.ones(1).tobytes()], "unknown worker"),
    ([_header(14, 0, 12, 1), np.ones(5).tobytes(), np.ones(2, "<i8").tobytes(),
      np.array([1, 20, 2], "<i8").tobytes(), np.ones(1).tobytes()],
     "2 values, expected 3..3"),                                  # through: one a worker
])
def test_malformed_bundles_and_node_views_are_refused(frames, problem):
    assert _same_bundle(decode(_bundle_frames(GOOD_TABLE), LIMITS).body, m.Bundle(
        np.array([2, 0]), (m.Push(3, 4, np.array([7, 9]), np.zeros(0), np.array([7]),
                                  np.array([0.5]), np.array([0.5]), 9),
                           m.Push(1, 4, np.array([1]), np.zeros(0), np.zeros(0, int),
                                  np.zeros(0), np.zeros(0), 3, more=False)),
        np.ones(5)))
    with pytest.raises(WireError, match=problem):
        decode(frames, LIMITS)


def test_shared_memory_messages_leave_out_their_n_vectors_but_not_the_columns():
    """Between processes that share the n-vectors (``node_memory``), a FINAL's
    X_S w_S frame is empty and its kept columns still travel."""
    lean = Limits(n=5, capacity=3, batch=4, run_id=77, vectors=False)
    final = m.Final(4, 12, np.array([1, 3]), np.array([0.25, -1.5]), np.zeros(0),
                    np.arange(10.0).reshape(2, 5), np.array([0.1, 0.2, 0.3, 0.05]))
    assert _equal(decode(_bytes(encode(final, 2, run_id=77)), lean).body, final)
    unsent = m.Final(4, 12, np.array([1, 3]), np.array([0.25, -1.5]), np.zeros(0),
                     np.zeros((0, 5)), np.array([0.1, 0.2, 0.3, 0.05]))   # past the limit
    assert _equal(decode(_bytes(encode(unsent, 2, run_id=77)), lean).body, unsent)
    with pytest.raises(WireError, match="5 values, expected 0..0"):
        decode(_bytes(encode(MESSAGES[5], 2, run_id=77)), lean)   # a full X_S w_S


def test_a_frame_is_never_larger_than_the_columns_a_worker_may_send():
    """A FINAL's columns are the largest frame, bounded by what a worker sends at
    most (``messages.COLUMNS_LIMIT`` values), however large n × capacity."""
    assert max_frame_bytes(Limits(n=1000, capacity=3, batch=4)) == 8 * 3000
    assert max_frame_bytes(Limits(n=10**5, capacity=10**4, batch=4)) == \
        8 * m.COLUMNS_LIMIT



EMPTY_KEPT_SETS = [
    # a worker whose kept set ended empty (its shard held only all-zero columns, or
    # X is all zeros): no indices, no weights, its columns a (0, n) block
    m.Final(4, 12, np.zeros(0, np.int64), np.zeros(0), np.zeros(5), np.zeros((0, 5)),
            np.array([0.1, 0.2, 0.3, 0.05])),
    m.Push(2, 5, np.array([4]), np.zeros(5), np.zeros(0, np.int64), np.zeros(0),
           np.zeros(0), position=3),
]


@pytest.mark.parametrize("message", EMPTY_KEPT_SETS, ids=lambda msg: type(msg).__name__)
def test_an_empty_kept_set_round_trips_as_frames_and_as_one_mpi_buffer(message):
    """An empty kept set is a valid state: its zero-length frames and its (0, n)
    column block go through ``join`` (MPI, the socket pairs of ``--workers``) and
    back.  (``memoryview.cast`` refuses a shape with a zero in it.)"""
    frames = encode(message, 1, run_id=77)
    assert all(np.ndim(f) <= 1 for f in frames)   # a frame is flat
    for received in (_bytes(frames), split(join(frames)), split(bytearray(join(frames)))):
        body = decode(received, LIMITS).body
        assert _equal(body, message), (body, message)
    lean = Limits(n=5, capacity=3, batch=4, run_id=77, vectors=False)
    if isinstance(message, m.Final):   # as --workers and the MPI window send it
        message = m.Final(4, 12, np.zeros(0, np.int64), np.zeros(0), np.zeros(0),
                          np.zeros((0, 5)), np.array([0.1, 0.2, 0.3, 0.05]))
        assert _equal(decode(split(join(encode(message, 1, run_id=77))), lean).body,
                      message)


_SHAPES = st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.binary(max_size=24),
    st.tuples(_SHAPES, st.sampled_from(["<f8", "<i8", "u1"]), st.booleans())),
    min_size=1, max_size=8))
def test_join_and_split_round_trip_any_frames_empty_ones_included(specs):
    """Property: whatever the frames (bytes, arrays of any shape with zeros in it,
    non-contiguous views), ``split(join(frames))`` gives back each frame's bytes."""
    frames = []
    for spec in specs:
        if isinstance(spec, bytes):
            frames.append(spec)
            continue
        shape, dtype, strided = spec
        wide = (*shape[:-1], 2 * shape[-1])   # every other column: a strided view
        array = np.arange(int(np.prod(wide)), dtype=dtype).reshape(wide)
        frames.append(array[..., ::2] if strided else array[..., :shape[-1]].copy())
    expected = [bytes(f) if isinstance(f, bytes) else f.tobytes() for f in frames]
    for buffer in (join(frames), bytearray(join(frames)), memoryview(join(frames))):
        assert [bytes(f) for f in split(buffer)] == expected

def test_a_push_travels_as_integers_and_floats_only():
    push = MESSAGES[0]
    frames = encode(push, 2, run_id=77)
    magic, protocol, kind, worker, flags, run_id, seq, a, b = HEADER.unpack(frames[0])
    assert (magic, protocol, Kind(kind), worker, flags, run_id, seq, a, b) == \
        (MAGIC, PROTOCOL, Kind.PUSH, 2, MORE, 77, 3, 11, 20)
    assert [f.dtype.str for f in frames[1:]] == ["<i8", "<f8", "<i8", "<f8", "<f8"]
    body = decode(_bytes(frames), LIMITS).body
    assert body.features.dtype == np.int64 and body.delta.dtype == np.float64


@pytest.mark.parametrize("frames, problem", [
    ([], "empty"),
    ([b"garbage"], "header has 7 bytes"),
    ([_header(3, magic=b"NOPE")], "bad magic"),
    ([_header(3, protocol=2)], "protocol version 2"),                 # before credit
    ([_header(99)], "unknown message kind"),
    ([_header(3, run_id=78)], "run id"),
    ([_header(5), np.ones(4).tobytes(), np.ones(1, "<i8").tobytes(),
      np.ones(1).tobytes()], "4 values, expected 5..5"),               # a short u_C
    ([_header(5), b"\x00" * 41, np.ones(1, "<i8").tobytes(), np.ones(1).tobytes()],
     "not a whole number"),
    ([_header(5)], "VIEW has 0 data frames, expected 3"),
    ([_header(5), np.ones(5).tobytes(), np.ones(1, "<i8").tobytes()],
     "2 data frames, expected 3"),                                     # no η
    ([_header(5), np.ones(5).tobytes(), b"", np.ones(1).tobytes()],
     "0 values, expected 1..1"),                                       # no budget
    ([_header(4, 1), np.ones(9, "<i8").tobytes(), np.ones(5).tobytes(), b"", b"",
      b""], "9 values, expected 1..4"),                                # over the batch
    ([_header(4, 1), b"", np.ones(5).tobytes(), b"", b"", b""],
     "0 values, expected 1..4"),
    ([_header(4, 1), np.ones(1, "<i8").tobytes(), np.ones(5).tobytes(),
      np.ones(4, "<i8").tobytes(), np.ones(4).tobytes(), np.ones(4).tobytes()],
     "4 values, expected 0..3"),
    ([_header(4, 1), np.ones(1, "<i8").tobytes(), np.ones(5).tobytes(),
      np.ones(2, "<i8").tobytes(), np.ones(1).tobytes(), np.ones(2).tobytes()],
     "2 kept indices but 1 weights"),
    ([_header(4, 1), np.ones(1, "<i8").tobytes(), np.ones(5).tobytes(),
      np.ones(2, "<i8").tobytes(), np.ones(2).tobytes(), np.ones(1).tobytes()],
     "2 kept indices but 1 importances"),
    ([_header(4, 1), np.ones(1, "<i8").tobytes(), np.ones(5).tobytes(), b"", b""],
     "PUSH has 4 data frames, expected 5"),                            # protocol 6's
    ([_header(4, -1), np.ones(1, "<i8").tobytes(), np.ones(5).tobytes(), b"", b"",
      b""], "negative"),
    ([_header(5, 0, 3, -2), np.ones(5).tobytes(), np.ones(1, "<i8").tobytes(),
      np.ones(1).tobytes()], "negative"),                              # credit < 0
    ([_header(10), b"x" * 5000], "too long"),
    ([_header(8), np.ones(2, "<i8").tobytes(), np.ones(2).tobytes(),
      np.ones(5).tobytes(), np.ones(9).tobytes(), np.ones(4).tobytes()],
     "2 kept indices but 9 column values"),                           # a short column
    ([_header(8), np.ones(2, "<i8").tobytes(), np.ones(2).tobytes(),
      np.ones(5).tobytes(), np.ones(10).tobytes(), np.ones(3).tobytes()],
     "FINAL frame has 3 values, expected 4..4"),                      # protocol 10's
    ([_header(8), np.ones(1, "<i8").tobytes(), np.ones(1).tobytes(),
      np.ones(5).tobytes(), np.ones(5).tobytes()],
     "FINAL has 4 data frames, expected 5"),                          # protocol 9's
])
def test_malformed_messages_are_refused_with_a_reason(frames, problem):
    with pytest.raises(WireError, match=problem):
        decode(frames, LIMITS)


def test_a_worker_before_its_config_accepts_any_run_and_a_hello_any_run():
    view = encode(MESSAGES[2], 1, run_id=123)
    assert decode(view, Limits(n=5)).run_id == 123       # run id 0: not known yet
    hello = encode(MESSAGES[6], 1, run_id=999)
    assert decode(hello, LIMITS).body.n_workers == 3          # HELLO opens a new run


@pytest.mark.parametrize("buffer, problem", [
    (b"", "too short"),
    (np.array([0], "<i8").tobytes(), "bad frame count 0"),
    (np.array([9, 1], "<i8").tobytes(), "bad frame count 9"),
    (np.array([2, 3], "<i8").tobytes() + b"abc", "bad frame count 2"),
    (np.array([1, 4], "<i8").tobytes() + b"abc", "do not add up"),
    (np.array([1, -3], "<i8").tobytes() + b"abc", "do not add up"),
    # lengths whose int64 sum wraps around to the buffer's length
    (np.array([3, 2**63 - 1, 2**63 - 1, 5], "<i8").tobytes() + b"abc",
     "do not add up"),
], ids=["empty", "no-frames", "too-many", "short-table", "too-long", "negative",
        "wrapping"])
def test_malformed_mpi_buffers_are_refused(buffer, problem):
    with pytest.raises(WireError, match=problem):
        split(buffer)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=6),
       st.integers(0, 14), st.booleans(), st.integers(-2, 6))
def test_the_decoder_never_fails_otherwise(frames, kind, valid_header, counter):
    """Fuzz: arbitrary frames (after a valid or random header) → a message of the
    protocol within the limits, or WireError."""
    if valid_header:
        frames = [_header(kind, counter, counter, counter)] + frames
    for attempt in (frames, join(frames) if frames else b""):
        try:
            envelope = decode(split(attempt) if isinstance(attempt, bytes) else attempt,
                              LIMITS)
        except WireError:
            continue
        body = envelope.body
        assert type(body) in {type(msg) for msg in MESSAGES} | {m.Bundle, m.NodeView}
        for name in _names(body):
            value = getattr(body, name)
            if isinstance(value, np.ndarray):
                assert value.size <= max(LIMITS.n, LIMITS.budget, LIMITS.batch, 9)
                assert value.dtype in (np.int64, np.float64)
            elif isinstance(value, int) and not isinstance(value, bool) and \
                    not isinstance(body, m.Hello):   # a HELLO's n may be anything
                assert value >= 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_split_never_fails_otherwise(buffer):
    try:
        frames = split(buffer)
    except WireError:
        return
    assert sum(len(f) for f in frames) + 8 * (1 + len(frames)) == len(buffer)


def test_header_size_is_fixed():
    assert HEADER.size == struct.calcsize("<4sHHIIQqqq") == 48


def test_a_config_carries_the_worker_plan_integers_as_integers():
    plan = WorkerPlan(3, Loss.SQUARED_HINGE, 0.25, 2.0, 5, 4, "magnitude", 0.5, 1e-3,
                      True, 2, 9, 2)
    config = m.Config(plan.ints(), plan.floats(), np.ones(5))
    frames = encode(config, 0, run_id=77)
    from asyos.core.kept_set import RULES

    assert np.frombuffer(frames[1], "<i8").tolist() == [
        3, int(Loss.SQUARED_HINGE), 5, 4, RULES.index("magnitude"), 1, 2, 9, 2]
    body = decode(_bytes(frames), LIMITS).body
    assert WorkerPlan.received(body.plan_ints, body.plan_floats) == plan
    assert WorkerPlan.received(plan.ints(), WorkerPlan(3, Loss.SQUARED, 0.25, 2.0,
                                                       5).floats()).ridge is None


@pytest.mark.parametrize("field, value, problem", [
    (4, 7, "substitution rule 7"), (1, 99, "loss 99"), (0, 0, "capacity 0"),
    (5, 2, "adaptive 2"), (6, -1, "group budget -1"), (7, -3, "sweep -3"),
    (8, 0, "in 0 rounds"),
])
def test_a_plan_out_of_range_is_refused_naming_it(field, value, problem):
    ints = WorkerPlan(3, Loss.SQUARED, 0.25, 2.0, 5).ints()
    ints[field] = value
    with pytest.raises(ProtocolError, match=problem):
        WorkerPlan.received(ints, WorkerPlan(3, Loss.SQUARED, 0.25, 2.0, 5).floats())


@pytest.mark.parametrize("floats, problem", [
    ([0.0, 1.0, 1.0, 0.0], "eta 0.0"), ([0.1, 1.0, 1.5, 0.0], "damping 1.5"),
    ([0.1, 1.0, 1.0, float("nan")], "ridge nan"), ([0.1, 0.5, 1.0, 0.0], "m 0.5"),
])
def test_a_plan_with_bad_reals_is_refused(floats, problem):
    with pytest.raises(ProtocolError, match=problem):
        WorkerPlan.received(WorkerPlan(3, Loss.SQUARED, 0.25, 2.0, 5).ints(),
                            np.array(floats))
