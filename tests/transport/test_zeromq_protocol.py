"""The ZeroMQ server against raw sockets: duplicates, garbage, strangers (in process)."""

import threading
import time
import zipfile

import numpy as np
import pytest
import zmq

from asyos.core.kept_set import fitted_ridge
from asyos.core.losses import Loss
from asyos.errors import InputError
from asyos.solvers import messages as msg
from asyos.solvers.asy import AsyConfig
from asyos.transport.wire import (
    HEADER,
    MAGIC,
    PROTOCOL,
    Kind,
    Limits,
    decode,
    encode,
    max_frames,
)
from asyos.transport.zeromq import Timeouts, ZmqServer
from asyos.transport.zeromq.common import plain_client

N = 6
COLUMN = np.arange(1.0, N + 1)[None]   # a FINAL's one kept column (not constant)
NO_GROUPS = np.zeros(0, np.int64)   # a HELLO's groups frame: none
SECRET = "s3cret"                   # the run secret every loopback run has


@pytest.fixture
def server():
    config = AsyConfig.build(2, 1, eta=0.1, m=1.0, epochs=1, window=2, batch=2,
                             staleness=None)
    srv = ZmqServer("tcp://127.0.0.1:0", np.linspace(-1, 1, N), config,
                    timeouts=Timeouts(heartbeat_timeout=60), secret=SECRET)
    yield srv
    srv.close()


def _socket(server, secret=SECRET):
    """A DEALER that passes the server's PLAIN handshake with ``secret``."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.linger = 0
    plain_client(sock, secret)
    sock.connect(server.endpoint)
    return sock


def _exchange(server, sock, frames, rounds=6):
    """Send ``frames``, let the server work, return the decoded replies."""
    sock.send_multipart(frames)
    replies = []
    for _ in range(rounds):
        server.tick(0.01)
        while sock.poll(0):
            replies.append(decode(sock.recv_multipart(), Limits(N, 10, 10)))
    return replies


def _push(joined, seq, delta, more=True, version=0):
    """Worker 0's push number ``seq`` (one step from view ``version``), tagged with its
    configuration."""
    run_id, tag = joined
    return encode(msg.Push(seq, version, np.array([seq - 1]), delta, np.array([seq - 1]),
                           np.array([0.5]), np.array([0.5]), position=seq, more=more),
                  0, run_id=run_id, tag=tag)


def _hello(worker=0, n=N, token=SECRET):
    return encode(msg.Hello(1, 5, n, 1.0, NO_GROUPS, 5, token), worker)


def _joined(server, sock):
    [config] = _exchange(server, sock, _hello())
    assert config.kind == Kind.CONFIG and config.body.y.size == N
    [view] = _exchange(server, sock, encode(msg.Pull(), 0, run_id=config.run_id,
                                            tag=config.tag))
    assert view.kind == Kind.VIEW and view.body.version == 0 and view.body.credit == 4
    return config.run_id, config.tag


def test_a_duplicated_push_is_applied_once(server):
    sock = _socket(server)
    joined = _joined(server, sock)
    delta = np.arange(N, dtype=float)
    [view] = _exchange(server, sock, _push(joined, 1, delta))
    assert view.kind == Kind.VIEW and view.body.through == 1
    assert view.body.credit == 5          # topped up to the depth, 4 unspent
    replies = _exchange(server, sock, _push(joined, 1, delta))   # a resend
    assert [r.kind for r in replies] == [Kind.VIEW] and replies[0].body.through == 1
    assert server.state.clock == 1
    np.testing.assert_array_equal(server.state.u, delta)
    [ack] = _exchange(server, sock, _push(joined, 2, delta, more=False))
    assert ack.kind == Kind.ACK and ack.body.through == 2 and server.state.clock == 2


@pytest.mark.parametrize("make, refused", [
    (lambda run: [b"garbage bytes"], False),
    (lambda run: [HEADER.pack(MAGIC, PROTOCOL + 1, int(Kind.PULL), 0, 0, run, 0, 0,
                              0)], False),
    (lambda run: [HEADER.pack(MAGIC, PROTOCOL, 77, 0, 0, run, 0, 0, 0)], False),
    (lambda run: encode(msg.Pull(), 0, run_id=run + 1), True),           # other run
    (lambda run: [HEADER.pack(MAGIC, PROTOCOL, int(Kind.PUSH), 0, 0, run, 1, 0, 0),
                  np.ones(2).tobytes()], False),                          # truncated
    (lambda run: _hello(n=N + 1), True),
    (lambda run: _hello(worker=3), True),
    (lambda run: _hello(token=""), True),                               # no secret
    (lambda run: _hello(token="guess"), True),
    (lambda run: encode(msg.Pull(), 7, run_id=run), True),               # no worker 7
], ids=["garbage", "version", "kind", "run-id", "truncated", "wrong-n", "bad-shard",
        "no-secret", "wrong-secret", "unknown-worker"])
def test_bad_messages_are_dropped_or_refused_and_change_nothing(server, make, refused):
    sock = _socket(server)
    joined = _joined(server, sock)
    _exchange(server, sock, _push(joined, 1, np.ones(N)))
    before = server.state.u.copy(), server.state.clock
    stranger = _socket(server)
    replies = _exchange(server, stranger, make(joined[0]))
    assert [r.kind for r in replies] == ([Kind.REFUSE] if refused else [])
    assert np.all(server.state.u == before[0]) and server.state.clock == before[1]
    # ... and the server keeps serving its worker
    [view] = _exchange(server, sock, _push(joined, 2, np.ones(N)))
    assert view.kind == Kind.VIEW and server.state.clock == before[1] + 1


def test_a_stranger_impersonating_a_worker_is_refused(server):
    sock = _socket(server)
    joined = _joined(server, sock)
    [refusal] = _exchange(server, _socket(server), _push(joined, 1, np.ones(N)))
    assert refusal.kind == Kind.REFUSE and "unknown peer" in refusal.body.reason
    assert server.state.clock == 0


def test_an_oversized_message_is_cut_off_without_harm(server):
    sock = _socket(server)
    joined = _joined(server, sock)
    huge = _socket(server)
    huge.send_multipart([HEADER.pack(MAGIC, PROTOCOL, int(Kind.PUSH), 0, 0, joined[0], 1,
                                     0, 0),
                         b"\0" * (1 << 22)])
    for _ in range(10):
        server.tick(0.02)
    assert server.state.clock == 0
    [view] = _exchange(server, sock, _push(joined, 1, np.ones(N)))
    assert view.kind == Kind.VIEW and server.state.clock == 1


def test_a_push_from_before_a_reconfiguration_is_dropped(server):
    sock = _socket(server)
    run_id, tag = _joined(server, sock)
    server.session.send_config(0)     # e.g. a resynchronisation: a new tag
    server._flush()
    assert sock.poll(5000)
    config = decode(sock.recv_multipart(), Limits(N, 10, 10))
    assert config.kind == Kind.CONFIG and config.tag != tag
    assert _exchange(server, sock, _push((run_id, tag), 1, np.ones(N))) == []
    assert server.state.clock == 0    # the stale push changed nothing
    time.sleep(server.timeouts.resend_after)   # its resend: the CONFIG was lost?
    [again] = _exchange(server, sock, _push((run_id, tag), 1, np.ones(N)))
    assert again.kind == Kind.CONFIG and again.tag == config.tag and server.state.clock == 0
    [view] = _exchange(server, sock, encode(msg.Pull(), 0, run_id=run_id, tag=config.tag))
    assert view.kind == Kind.VIEW
    [view] = _exchange(server, sock, _push((run_id, config.tag), 1, np.ones(N)))
    assert view.kind == Kind.VIEW and server.state.clock == 1


def test_a_push_beyond_its_credit_or_from_a_view_never_sent_resynchronises(server):
    """The server checks what a push claims: credit it holds, a view it was sent."""
    sock = _socket(server)
    joined = _joined(server, sock)
    [config] = _exchange(server, sock, _push(joined, 1, np.ones(N), version=3))
    assert config.kind == Kind.CONFIG and server.state.clock == 0


def test_after_the_run_a_late_final_still_gets_its_done(server):
    """A worker whose DONE was lost resends FINAL: the lingering server answers it."""
    sock = _socket(server)
    joined = _joined(server, sock)
    lingering = threading.Thread(target=server._linger)
    lingering.start()
    final = encode(msg.Final(0, 1, np.array([0]), np.array([0.5]), np.zeros(N),
                             COLUMN), 0,
                   run_id=joined[0], tag=joined[1])
    sock.send_multipart(final)
    assert sock.poll(5000)
    assert decode(sock.recv_multipart(), Limits(N, 10, 10)).kind == Kind.DONE
    stranger = _socket(server)
    stranger.send_multipart(final)          # not this run's worker: no answer
    lingering.join(timeout=30)
    assert not lingering.is_alive() and not stranger.poll(0)
    assert server.state.clock == 0


def test_a_flood_of_frames_is_dropped_unparsed_and_logged_sparingly(server, caplog):
    """A message with a million empty frames, and many bad messages: each is dropped
    before it is parsed or kept (or, while it is still coming, its connection is cut:
    it is larger than any valid message), the run goes on, and the log stays short."""
    sock = _socket(server)
    joined = _joined(server, sock)
    caplog.set_level("WARNING", logger="asyos")
    flood = _socket(server)
    flood.send_multipart([b""] * 1_000_000)
    start = time.monotonic()
    for _ in range(200):
        server.tick(0.01)
        if server.refused or server.in_flight.cut:
            break
    assert server.refused + server.in_flight.cut == 1
    assert time.monotonic() - start < 30
    assert f"more than {max_frames()} frames" in caplog.text or \
        "cut off a peer" in caplog.text
    refused = server.refused
    stranger = _socket(server)   # one oversized frame: ZeroMQ cuts the peer off
    stranger.send_multipart([*encode(msg.Pull(), 0, run_id=joined[0], tag=joined[1]),
                             b"x" * (1 << 20)])
    for _ in range(3000):
        sock.send_multipart([b"garbage"])
    deadline = time.monotonic() + 60
    while server.refused < refused + 3000 and time.monotonic() < deadline:
        server.tick(0.01)
    for _ in range(20):
        server.tick(0.01)
    assert server.refused == refused + 3000
    assert len(caplog.records) <= 12          # 10 lines, then counts
    [view] = _exchange(server, sock, _push(joined, 1, np.ones(N)))  # still serving
    assert view.kind == Kind.VIEW and view.body.through == 1


DATA = np.array([8, 12345], np.int64)    # (bytes per value, hash): worker 0's data


def _two_shards(q=2, heartbeat_timeout=60.0):
    config = AsyConfig.build(q, q, eta=0.1, m=1.0, epochs=1, window=1, batch=1,
                             staleness=None)
    return ZmqServer("tcp://127.0.0.1:0", np.linspace(-1, 1, N), config,
                     timeouts=Timeouts(heartbeat_timeout=heartbeat_timeout),
                     secret=SECRET)


def _shard_hello(t, q=2, p=6, data=DATA):
    size = len(range(t, p, q))   # below 128·q features shards are every q-th one
    return encode(msg.Hello(q, size, N, 1.0, NO_GROUPS, p, SECRET, data=data), t)


def test_a_hello_that_contradicts_itself_is_refused_at_once():
    """A shard that is not shard t of the p its own HELLO reports: nothing to agree."""
    server = _two_shards()
    try:
        [refusal] = _exchange(server, _socket(server), encode(
            msg.Hello(2, 2, N, 1.0, NO_GROUPS, 6, SECRET, data=DATA), 1))
    finally:
        server.close()
    assert refusal.kind == Kind.REFUSE
    assert "2 features, but shard 1 of p = 6 has 3" in refusal.body.reason


@pytest.mark.parametrize("other, problem", [
    (_shard_hello(1, p=7), "p = 7 features, the other workers 6"),
    (_shard_hello(1, data=np.array([8, 54321])),
     "data differ from the other workers' (same shape, other values)"),
    (_shard_hello(1, data=np.array([4, 54321])), "32-bit values, the other workers' 64"),
    (_shard_hello(1, data=np.zeros(0, np.int64)), "data differ"),   # no fingerprint
])
def test_two_shards_that_read_other_data_wait_for_a_worker_on_the_right_data(
        other, problem, caplog):
    """Two shards, two data: neither voice is a majority, so nobody is refused (the
    first HELLO's data were kept for good, and a worker that read the wrong file and
    died locked the right ones out); the server says so, and the worker restarted on
    the right data takes its shard over, the run starts, the wrong one is fenced off.
    A third shard whose data agree with neither is refused once two agree."""
    server = _two_shards()
    try:
        first, wrong, right = (_socket(server) for _ in range(3))
        assert _exchange(server, first, _shard_hello(0)) == []
        assert _exchange(server, wrong, other) == []   # no refusal: it waits
        assert "the workers read different data" in caplog.text
        replies = _exchange(server, right, _shard_hello(1))
        assert [r.kind for r in replies] == [Kind.CONFIG]
        [refusal] = [decode(wrong.recv_multipart(), Limits(N, 10, 10))]
        assert refusal.kind == Kind.REFUSE and "taken over" in refusal.body.reason
        assert first.poll(1000) and decode(first.recv_multipart(),
                                           Limits(N, 10, 10)).kind == Kind.CONFIG
    finally:
        server.close()
    # what the refusal of a minority says (three shards, two agree)
    server = _two_shards(q=3)
    try:
        liar = _socket(server)
        p, data = (7, DATA) if "p = 7" in problem else (6, decode(
            other, Limits(N)).body.data)
        assert _exchange(server, liar, _shard_hello(0, 3, p, data)) == []
        assert _exchange(server, _socket(server), _shard_hello(1, 3)) == []
        assert _exchange(server, _socket(server), _shard_hello(2, 3)) == []
        [refusal] = [decode(liar.recv_multipart(), Limits(N, 10, 10))]
        assert refusal.kind == Kind.REFUSE and problem in refusal.body.reason
        assert "run id" not in refusal.body.reason
        # shard 0's worker on the right data joins the two that agree: the run starts
        assert [r.kind for r in _exchange(server, _socket(server),
                                          _shard_hello(0, 3))] == [Kind.CONFIG]
    finally:
        server.close()


def test_a_peer_that_lies_about_the_data_and_dies_locks_nobody_out():
    """The peer that said HELLO first, as shard 0 on other data, and went: the right
    workers of both shards still start the run."""
    server = _two_shards()
    try:
        liar = _socket(server)
        assert _exchange(server, liar, _shard_hello(0, p=7)) == []
        liar.close()
        one, zero = _socket(server), _socket(server)
        assert _exchange(server, one, _shard_hello(1)) == []
        assert [r.kind for r in _exchange(server, zero, _shard_hello(0))] == \
            [Kind.CONFIG]
        assert one.poll(1000)
        assert decode(one.recv_multipart(), Limits(N, 10, 10)).kind == Kind.CONFIG
        assert server.session.data_features == 6
    finally:
        server.close()


def _checkpointed(checkpoint, labels, s, resume, heartbeat_timeout=60.0):
    """A one-worker server that checkpoints to ``checkpoint`` (or resumes from it)."""
    config = AsyConfig.build(s, 1, eta=0.1, m=1.0, epochs=1, window=2, batch=2,
                             staleness=None)
    return ZmqServer("tcp://127.0.0.1:0", labels, config, checkpoint=checkpoint,
                     resume=resume, secret=SECRET,
                     timeouts=Timeouts(heartbeat_timeout=heartbeat_timeout))


def test_a_checkpoint_is_written_at_start_and_resumes_only_its_own_run(tmp_path):
    checkpoint = tmp_path / "ck.npz"
    y = np.linspace(-1, 1, N)

    def server(s=2, labels=y, resume=False):
        return _checkpointed(checkpoint, labels, s, resume)

    first = server()
    try:
        _joined(first, _socket(first))   # the run starts: a checkpoint exists at once
        assert checkpoint.is_file()
    finally:
        first.close()
    server(resume=True).close()   # the same run resumes
    for other, what in ((dict(s=3), "settings"), (dict(labels=-y), "labels")):
        with pytest.raises(InputError, match=f"another run: its {what}"):
            server(resume=True, **other)


def test_a_replacement_takes_over_a_live_shard_and_fences_the_old_worker(server):
    old = _socket(server)
    joined = _joined(server, old)
    _exchange(server, old, _push(joined, 1, np.ones(N)))
    new = _socket(server)
    [config] = _exchange(server, new, _hello())
    assert config.kind == Kind.CONFIG and config.body.last_push == 1   # its state
    [refusal] = [decode(old.recv_multipart(), Limits(N)) for _ in range(1)
                 if old.poll(1000)]
    assert refusal.kind == Kind.REFUSE and "taken over" in refusal.body.reason
    clock = server.state.clock
    [late] = _exchange(server, old, _push(joined, 2, np.ones(N)))   # fenced off
    assert late.kind == Kind.REFUSE and server.state.clock == clock


def _serve(server, within: float = 10.0):
    """``server.serve()``'s result, which must come within ``within`` seconds."""
    try:
        start = time.monotonic()
        result = server.serve()
    finally:
        server.close()
    assert time.monotonic() - start < within
    return result


def test_a_server_killed_after_its_workers_finished_resumes_to_the_result(tmp_path):
    """The checkpoint written when the last worker finished lets a resumed server
    write the result at once, without waiting for workers that are gone."""
    checkpoint = tmp_path / "ck.npz"
    y = np.linspace(-1, 1, N)

    def server(resume=False):
        return _checkpointed(checkpoint, y, 2, resume)

    first = server()
    try:
        sock = _socket(first)
        joined = _joined(first, sock)
        final = encode(msg.Final(0, 1, np.array([0]), np.array([0.5]), np.zeros(N),
                             COLUMN), 0,
                       run_id=joined[0], tag=joined[1])
        assert [r.kind for r in _exchange(first, sock, final)][:1] == [Kind.DONE]
    finally:
        first.close()   # killed before it wrote its results
    result = _serve(server(resume=True))
    assert result.selected.tolist() == [0]
    assert result.asy["lost_shards"] == [] and not result.asy["partial"]
    # the checkpoint kept the finished worker's column: the resumed server refits it
    ridge = fitted_ridge(Loss.SQUARED, N, None) * float(COLUMN[0] @ COLUMN[0]) / N
    fitted = float(COLUMN[0] @ y) / (float(COLUMN[0] @ COLUMN[0]) + N * ridge)
    assert result.weights.tolist() == [pytest.approx(fitted, rel=1e-9)]
    assert result.asy["refit"]["newton_steps"] >= 1


def test_a_resumed_server_refuses_a_replacement_that_read_other_data(tmp_path):
    """The checkpoint keeps the data's p and fingerprint: after a resume, a worker
    that read other data is refused as it would have been before."""
    checkpoint = tmp_path / "ck.npz"

    def server(resume=False):
        return _checkpointed(checkpoint, np.linspace(-1, 1, N), 2, resume)

    first = server()
    try:
        hello = msg.Hello(1, 5, N, 1.0, NO_GROUPS, 5, SECRET, data=DATA)
        assert [r.kind for r in _exchange(first, _socket(first), encode(hello, 0))] \
            == [Kind.CONFIG]   # started: the checkpoint is written
    finally:
        first.close()
    resumed = server(resume=True)
    try:
        other = msg.Hello(1, 5, N, 1.0, NO_GROUPS, 5, SECRET,
                          data=np.array([8, 54321]))
        [refusal] = _exchange(resumed, _socket(resumed), encode(other, 0))
        assert refusal.kind == Kind.REFUSE and "data differ" in refusal.body.reason
        [config] = _exchange(resumed, _socket(resumed), encode(hello, 0))
        assert config.kind == Kind.CONFIG
    finally:
        resumed.close()


def _resumable(tmp_path, heartbeat_timeout=60.0):
    """A server with a secret and a checkpoint, and a maker of its resumed copies."""
    checkpoint = tmp_path / "ck.npz"

    def server(resume=False):
        return _checkpointed(checkpoint, np.linspace(-1, 1, N), 2, resume,
                             heartbeat_timeout)

    first = server()
    try:
        sock = _socket(first)
        joined = _joined(first, sock)
        _exchange(first, sock, _push(joined, 1, np.ones(N)))
    finally:
        first.close()   # killed: the checkpoint is what is left
    return server, checkpoint, joined


def test_after_a_resume_a_stranger_who_knows_the_run_id_learns_and_moves_nothing(
        tmp_path):
    """The run id is in the checkpoint and the log: it must not admit anyone.  A
    socket the resumed server does not know is asked to introduce itself and gets
    nothing else (no labels, no view); without the secret its HELLO is refused; the
    worker that has the secret rejoins from its state."""
    server, checkpoint, joined = _resumable(tmp_path)
    resumed = server(resume=True)
    try:
        stranger = _socket(resumed)
        u = resumed.state.u.copy()
        pull = encode(msg.Pull(), 0, run_id=joined[0], tag=joined[1])
        for frames in (pull, _push(joined, 1, np.full(N, 50.0))):
            assert [r.kind for r in _exchange(resumed, stranger, frames)] == \
                [Kind.INTRODUCE]
        [refusal] = _exchange(resumed, stranger, _hello(token="guess"))
        assert refusal.kind == Kind.REFUSE and "not authorised" in refusal.body.reason
        assert [r.kind for r in _exchange(resumed, stranger, pull)] == [Kind.INTRODUCE]
        np.testing.assert_array_equal(resumed.state.u, u)
        assert resumed.session.identity == [None]
        worker = _socket(resumed)
        [config] = _exchange(resumed, worker, _hello())
        assert config.kind == Kind.CONFIG and config.run_id == joined[0]
    finally:
        resumed.close()
    assert checkpoint.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_checkpoint_is_refused_with_one_line(tmp_path, damage):
    server, checkpoint, _ = _resumable(tmp_path)
    data = bytearray(checkpoint.read_bytes())
    if damage == "truncated":   # a kill during a copy, a full disk
        data = data[: len(data) // 2]
    else:                       # a bad sector inside u_C's values: its CRC fails
        with zipfile.ZipFile(checkpoint) as archive:
            u = archive.getinfo("u.npy")
        data[u.header_offset + 30 + len("u.npy") + u.compress_size - 1] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    with pytest.raises(InputError, match="not a whole asyos checkpoint"):
        server(resume=True)


def test_a_resumed_server_declares_a_shard_that_never_rejoins_lost(tmp_path):
    """Liveness does not depend on a HELLO this server saw: a worker killed while the
    server was down is lost after the heartbeat timeout, and the run ends partial."""
    server, _, _ = _resumable(tmp_path, heartbeat_timeout=0.5)
    resumed = server(resume=True)
    resumed.timeouts = Timeouts(heartbeat_timeout=0.5, replace_timeout=0.2)
    result = _serve(resumed)
    assert result.asy["lost_shards"] == ["0/1"] and result.asy["partial"]


def test_ten_thousand_random_and_mutated_messages_change_nothing():
    """A fuzz against the live server (with its run secret, as every loopback run
    has): random bytes, random frame lists, and valid messages with one byte flipped
    or frames cut, dropped, repeated or swapped; the state never changes and the
    server keeps serving its worker."""
    config = AsyConfig.build(2, 1, eta=0.1, m=1.0, epochs=1, window=2, batch=2,
                             staleness=None)
    server = ZmqServer("tcp://127.0.0.1:0", np.linspace(-1, 1, N), config,
                       timeouts=Timeouts(heartbeat_timeout=60), secret=SECRET)
    try:
        _fuzz(server)
    finally:
        server.close()


def _fuzz(server):
    sock = _socket(server)
    [config] = _exchange(server, sock, _hello())
    joined = config.run_id, config.tag
    _exchange(server, sock, encode(msg.Pull(), 0, run_id=joined[0], tag=joined[1]))
    _exchange(server, sock, _push(joined, 1, np.ones(N)))
    u, clock = server.state.u.copy(), server.state.clock
    rng = np.random.default_rng(0)
    valid = [_push(joined, 9, np.ones(N)), _hello(token="not it"),
             encode(msg.Pull(), 0),
             encode(msg.Final(0, 1, np.array([0]), np.array([0.5]), np.zeros(N),
                             COLUMN), 0,
                    run_id=joined[0], tag=joined[1])]
    stranger = _socket(server)
    for k in range(10_000):
        frames = [bytearray(f) for f in valid[k % len(valid)]]
        kind = k % 5
        if kind == 0:       # random frames
            frames = [rng.bytes(int(rng.integers(0, 80)))
                      for _ in range(int(rng.integers(1, 6)))]
        elif kind == 1:     # one byte flipped
            f = frames[int(rng.integers(len(frames)))]
            if f:
                f[int(rng.integers(len(f)))] ^= 1 << int(rng.integers(8))
        elif kind == 2:     # a frame cut short
            f = int(rng.integers(len(frames)))
            frames[f] = frames[f][:int(rng.integers(len(frames[f]) + 1))]
        elif kind == 3:     # a frame dropped or repeated
            f = int(rng.integers(len(frames)))
            frames = frames[:f] + frames[f + 1:] if rng.random() < 0.5 else \
                frames[:f] + [frames[f]] + frames[f:]
        else:               # two frames swapped
            i, j = rng.integers(len(frames), size=2)
            frames[i], frames[j] = frames[j], frames[i]
        stranger.send_multipart([bytes(f) for f in frames] or [b""])
        if k % 500 == 499:
            for _ in range(5):
                server.tick(0.001)
            while stranger.poll(0):
                stranger.recv_multipart()   # refusals: read and ignore
    for _ in range(50):
        server.tick(0.01)
    assert np.array_equal(server.state.u, u) and server.state.clock == clock
    [view] = _exchange(server, sock, _push(joined, 2, np.ones(N)))
    assert view.kind == Kind.VIEW and server.state.clock == clock + 1


def test_a_worker_refused_at_its_handshake_connects_afresh(tmp_path, monkeypatch):
    """A worker that read the run secret before the server's authenticator took it
    is refused at the handshake, and libzmq never retries a refused handshake: after
    a few unanswered HELLOs the worker connects afresh, and its HELLO arrives once
    the server admits the secret (which ``asyos server`` now does before it writes
    the file)."""
    import os
    import subprocess
    import sys

    from asyos.transport.zeromq.common import secret_path, write_secret

    monkeypatch.setenv("ASYOS_RUN_DIR", str(tmp_path / "runs"))
    np.save(tmp_path / "X.npy", np.random.default_rng(0).standard_normal((N, 4)))
    config = AsyConfig.build(2, 1, eta=0.1, m=1.0, epochs=1, staleness=None)
    srv = ZmqServer("tcp://127.0.0.1:0", np.linspace(-1, 1, N), config,
                    timeouts=Timeouts(heartbeat_timeout=60))   # admits nobody yet
    token = write_secret(secret_path(srv.endpoint))
    worker = subprocess.Popen([sys.executable, "-m", "asyos.worker", "--connect",
                               srv.endpoint, "--shard", "0/1", "--data",
                               str(tmp_path / "X.npy"), "--server-timeout", "30"],
                              env=dict(os.environ), stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3.0)   # its first handshake was refused
        assert not srv.socket.poll(0)
        srv.secret = token
        assert srv.socket.poll(15_000), "the worker never shook hands again"
        frames = srv.socket.recv_multipart(copy=False)
        assert decode(frames[1:], Limits.of(config, N)).kind == Kind.HELLO
    finally:
        worker.kill()
        worker.communicate()
        srv.close()


def test_a_push_from_a_shard_that_finished_is_dropped_and_the_run_goes_on():
    """Worker 0 sent its FINAL; a PUSH or PULL under its current tag afterwards (an
    insider's, or a confused worker's) has nothing to resynchronise: dropped and
    counted, while worker 1 goes on (it crashed the server with exit 1)."""
    server = _two_shards()
    try:
        socks = [_socket(server), _socket(server)]
        for t, sock in enumerate(socks):
            sock.send_multipart(_shard_hello(t))
        configs = []
        for _ in range(20):
            server.tick(0.01)
        for sock in socks:
            assert sock.poll(1000)
            configs.append(decode(sock.recv_multipart(), Limits(N, 10, 10)))
        assert [c.kind for c in configs] == [Kind.CONFIG, Kind.CONFIG]
        run_id, tag = configs[0].run_id, configs[0].tag
        final = encode(msg.Final(0, 0, np.zeros(0, np.int64), np.zeros(0), np.zeros(N),
                                 np.zeros((0, N))), 0, run_id=run_id, tag=tag)
        _exchange(server, socks[0], final)
        assert server.state.workers[0].finished
        refused = server.refused
        for late in (encode(msg.Pull(), 0, run_id=run_id, tag=tag),
                     encode(msg.Push(1, 0, np.array([0]), np.ones(N), np.array([0]),
                                     np.array([0.5]), np.array([0.5]), position=1),
                            0, run_id=run_id, tag=tag)):
            _exchange(server, socks[0], late)
        assert server.refused == refused + 2 and server.state.clock == 0
        [view] = _exchange(server, socks[1], encode(msg.Pull(), 1, run_id=run_id,
                                                    tag=configs[1].tag))
        assert view.kind == Kind.VIEW
    finally:
        server.close()
