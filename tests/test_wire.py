"""The ZeroMQ wire format: round trips, and every malformed message is refused."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyos.transport.wire import (
    HEADER,
    MAGIC,
    PROTOCOL,
    Kind,
    Limits,
    WireError,
    decode,
    encode,
)

LIMITS = Limits(n=5, budget=3, batch=4, run_id=77)


def _bytes(frames):
    return [bytes(f) if not isinstance(f, np.ndarray) else f.tobytes() for f in frames]


def test_a_push_round_trips():
    frames = encode(Kind.PUSH, 2, np.array([7, 9]), np.arange(5.0), np.array([7]),
                    np.array([0.5]), flags=1, run_id=77, seq=3, a=11, b=20)
    message = decode(_bytes(frames), LIMITS)
    assert (message.kind, message.worker, message.flags, message.seq, message.a,
            message.b) == (Kind.PUSH, 2, 1, 3, 11, 20)
    features, delta, selected, weights = message.arrays
    assert features.tolist() == [7, 9] and delta.tolist() == [0, 1, 2, 3, 4]
    assert selected.tolist() == [7] and weights.tolist() == [0.5]


@pytest.mark.parametrize("frames, problem", [
    ([], "empty"),
    ([b"garbage"], "header has 7 bytes"),
    ([HEADER.pack(b"NOPE", PROTOCOL, 3, 0, 0, 77, 0, 0, 0)], "bad magic"),
    ([HEADER.pack(MAGIC, 1, 3, 0, 0, 77, 0, 0, 0)], "protocol version 1"),   # older
    ([HEADER.pack(MAGIC, PROTOCOL, 99, 0, 0, 77, 0, 0, 0)], "unknown message kind"),
    ([HEADER.pack(MAGIC, PROTOCOL, 3, 0, 0, 78, 0, 0, 0)], "run id"),
    ([HEADER.pack(MAGIC, PROTOCOL, 5, 0, 0, 77, 0, 0, 0), np.ones(4).tobytes()],
     "4 values, expected 5..5"),
    ([HEADER.pack(MAGIC, PROTOCOL, 5, 0, 0, 77, 0, 0, 0), b"\x00" * 41],
     "not a whole number"),
    ([HEADER.pack(MAGIC, PROTOCOL, 5, 0, 0, 77, 0, 0, 0)], "0 data frames"),
    ([HEADER.pack(MAGIC, PROTOCOL, 4, 0, 0, 77, 1, 0, 0), np.ones(9, "<i8").tobytes(),
      np.ones(5).tobytes(), b"", b""], "9 values, expected 1..4"),
    ([HEADER.pack(MAGIC, PROTOCOL, 4, 0, 0, 77, 1, 0, 0), np.ones(1, "<i8").tobytes(),
      np.ones(5).tobytes(), np.ones(2, "<i8").tobytes(), np.ones(1).tobytes()],
     "2 kept indices but 1 weights"),
    ([HEADER.pack(MAGIC, PROTOCOL, 4, 0, 0, 77, -1, 0, 0), np.ones(1, "<i8").tobytes(),
      np.ones(5).tobytes(), b"", b""], "negative"),
])
def test_malformed_messages_are_refused_with_a_reason(frames, problem):
    with pytest.raises(WireError, match=problem):
        decode(frames, LIMITS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=6),
       st.integers(0, 11), st.integers(0, 3), st.booleans())
def test_the_decoder_never_fails_otherwise(frames, kind, n_extra, valid_header):
    """Fuzz: arbitrary frames (after a valid or random header) → Message or WireError."""
    if valid_header:
        frames = [HEADER.pack(MAGIC, PROTOCOL, kind, 0, 0, 77, 0, 0, 5)] + frames
    try:
        message = decode(frames, LIMITS)
    except WireError:
        return
    for array in message.arrays:
        assert isinstance(array, (np.ndarray, str))
        if isinstance(array, np.ndarray):
            assert array.size <= max(LIMITS.n, LIMITS.budget, LIMITS.batch, 8)


def test_header_size_is_fixed():
    assert HEADER.size == struct.calcsize("<4sHHIIQqqq") == 48
