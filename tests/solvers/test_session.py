"""The session layer without I/O: envelopes in, ``Outgoing`` messages out, time given.

The same decisions the ZeroMQ server's tests check over real sockets, here with no
socket at all, so a carrier other than ZeroMQ can rely on them."""

import numpy as np
import pytest

from asyos.errors import InputError
from asyos.solvers import messages as msg
from asyos.solvers.asy import AsyConfig
from asyos.solvers.session import Session, Timeouts
from asyos.transport.wire import Envelope, Kind, flags

N, P = 6, 10
SECRET = "s" * 64
KINDS = {msg.Hello: Kind.HELLO, msg.Pull: Kind.PULL, msg.Push: Kind.PUSH,
         msg.Heartbeat: Kind.HEARTBEAT, msg.Final: Kind.FINAL}


def _session(q=2, **extra) -> Session:
    config = AsyConfig.build(4, q, epochs=1, staleness=4, window=1, batch=1,
                             n_features=P)
    session = Session(np.linspace(-1, 1, N), config, secret=SECRET,
                      timeouts=Timeouts(heartbeat_timeout=5.0, replace_timeout=1.0),
                      **extra)
    session.begin(0.0)
    return session


def _envelope(body, worker, run_id=0, tag=0) -> Envelope:
    return Envelope(KINDS[type(body)], worker, flags(tag), run_id, body)


def _hello(t, q=2, token=SECRET, n=N):
    return msg.Hello(q, P // q, n, 1.0, np.zeros(0, np.int64), P, token)


def _join_all(session, q=2, now=0.0) -> dict[int, object]:
    """Every shard says HELLO; returns each worker's CONFIG."""
    for t in range(q):
        session.receive(f"peer{t}".encode(), _envelope(_hello(t, q), t), now)
    configs = {out.worker: out for out in session.take()
               if isinstance(out.message, msg.Config)}
    assert sorted(configs) == list(range(q))
    return configs


def test_a_hello_without_the_secret_gets_a_refusal_that_names_nothing():
    session = _session()
    session.receive(b"stranger", _envelope(_hello(0, token="guess"), 0), 0.0)
    [out] = session.take()
    assert isinstance(out.message, msg.Refuse) and out.run_id == 0
    assert "not authorised" in out.message.reason and str(N) not in out.message.reason
    assert not session.server.started and session.identity == [None, None]


def test_the_run_starts_when_every_shard_is_here_and_configures_each_once():
    session = _session()
    session.receive(b"peer0", _envelope(_hello(0), 0), 0.0)
    assert session.take() == [] and not session.server.started
    configs = _join_all(session)
    assert session.server.started and session.checkpoint_due
    assert {out.identity for out in configs.values()} == {b"peer0", b"peer1"}
    assert all(out.run_id == session.run_id and out.tag for out in configs.values())


def test_other_data_wait_for_a_majority_and_are_then_refused_with_the_reason():
    """Each shard's latest HELLO is one voice: two shards on two data refuse nobody
    (a worker on the wrong file, gone, kept the right ones out for good), the
    session says so; of three, the one the other two outvote is refused."""
    said = []
    session = _session(warn=lambda text, *args: said.append(text % args))
    session.receive(b"peer0", _envelope(_hello(0), 0), 0.0)
    other = msg.Hello(2, (P + 2) // 2, N, 1.0, np.zeros(0, np.int64), P + 2, SECRET)
    session.receive(b"peer1", _envelope(other, 1), 0.0)
    assert session.take() == [] and not session.server.started
    assert any("shard 0: p = 10; shard 1: p = 12" in text for text in said)
    session.receive(b"peer1b", _envelope(_hello(1), 1), 0.0)   # the right data
    assert session.server.started and session.data_features == P
    config = AsyConfig.build(3, 3, epochs=1, staleness=4, window=1, batch=1)
    session = Session(np.linspace(-1, 1, N), config, secret=SECRET,
                      timeouts=Timeouts())
    liar = msg.Hello(3, 4, N, 1.0, np.zeros(0, np.int64), P + 2, SECRET)
    session.receive(b"liar", _envelope(liar, 0), 0.0)
    for t in (1, 2):
        session.receive(f"peer{t}".encode(), _envelope(
            msg.Hello(3, len(range(t, P, 3)), N, 1.0, np.zeros(0, np.int64), P,
                      SECRET), t), 0.0)
    [out] = session.take()
    assert isinstance(out.message, msg.Refuse) and out.identity == b"liar"
    assert "p = 12 features, the other workers 10" in out.message.reason


def test_a_replacement_fences_the_old_worker_off():
    session = _session()
    _join_all(session)
    session.receive(b"newcomer", _envelope(_hello(0), 0), 1.0)
    sent = session.take()
    refusals = [out for out in sent if isinstance(out.message, msg.Refuse)]
    assert [out.identity for out in refusals] == [b"peer0"]
    assert any(isinstance(out.message, msg.Config) and out.identity == b"newcomer"
               for out in sent)
    config = next(out for out in sent if isinstance(out.message, msg.Config))
    session.receive(b"peer0", _envelope(msg.Pull(), 0, session.run_id, config.tag),
                    2.0)
    [out] = session.take()
    assert isinstance(out.message, msg.Refuse) and out.identity == b"peer0"


def test_a_message_from_before_the_last_config_is_stale():
    session = _session()
    configs = _join_all(session)
    old_tag = configs[0].tag
    session.send_config(0)   # a resynchronisation: a new tag
    [new] = session.take()
    assert new.tag != old_tag
    session.receive(b"peer0", _envelope(msg.Pull(), 0, session.run_id, old_tag), 0.1)
    assert session.take() == []   # dropped; the CONFIG is repeated only after a while
    session.receive(b"peer0", _envelope(msg.Pull(), 0, session.run_id, new.tag), 0.2)
    [view] = session.take()
    assert isinstance(view.message, msg.View) and view.worker == 0


def test_silence_past_the_timeout_loses_a_shard_and_a_lost_run_ends():
    session = _session()
    configs = _join_all(session)
    for t in range(2):
        session.receive(f"peer{t}".encode(),
                        _envelope(msg.Heartbeat(), t, session.run_id, configs[t].tag),
                        4.0)
    session.check_liveness(8.0)
    assert session.state.lost_workers == []
    session.receive(b"peer1", _envelope(msg.Heartbeat(), 1, session.run_id,
                                        configs[1].tag), 8.5)
    session.check_liveness(9.5)
    assert session.state.lost_workers == [0]
    assert not session.finished()   # the shard may still be replaced ...
    session.check_liveness(10.4)
    assert not session.state.workers[0].given_up
    session.check_liveness(10.6)    # ... for ``replace_timeout``: then it is given up
    assert session.state.workers[0].given_up


def test_a_resumed_session_introduces_unknown_peers_and_admits_the_secret():
    session = _session()
    _join_all(session)
    saved = session.snapshot()
    resumed = _session(saved=saved, source="ckpt")
    assert resumed.run_id == session.run_id and resumed.server.started
    resumed.receive(b"stranger", _envelope(msg.Pull(), 0, resumed.run_id), 0.0)
    [out] = resumed.take()
    assert isinstance(out.message, msg.Introduce) and resumed.identity == [None, None]
    resumed.receive(b"stranger", _envelope(_hello(0, token="guess"), 0), 0.0)
    assert isinstance(resumed.take()[0].message, msg.Refuse)
    resumed.receive(b"peer0", _envelope(_hello(0), 0), 0.0)
    [config] = resumed.take()
    assert isinstance(config.message, msg.Config) and config.identity == b"peer0"


def test_a_checkpoint_of_another_run_is_refused():
    saved = _session()
    _join_all(saved)
    arrays = saved.snapshot()
    arrays["fingerprint_labels"] = arrays["fingerprint_labels"] + 1
    with pytest.raises(InputError, match="ckpt is for another run: its labels"):
        _session(saved=arrays, source="ckpt")
    del arrays["run_id"]
    with pytest.raises(InputError, match="not a whole asyos checkpoint"):
        _session(saved=arrays, source="ckpt")


def test_a_checkpoint_of_shards_cut_another_way_is_refused():
    """A checkpoint of an asyos whose shards were every q-th feature at every p (it
    wrote no layout) holds kept sets and positions of other shards: refused, named."""
    saved = _session()
    _join_all(saved)
    arrays = saved.snapshot()
    assert int(arrays["shard_layout"]) == 2
    _session(saved=dict(arrays), source="ckpt")   # its own layout resumes
    del arrays["shard_layout"]
    with pytest.raises(InputError, match="ckpt was written by an asyos that cut the "
                       "shards another way .layout 1, this one 2."):
        _session(saved=arrays, source="ckpt")
