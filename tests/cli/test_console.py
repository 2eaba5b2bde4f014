"""The ``asyos`` console script as a user meets it: every subcommand in a real process
(``python -m asyos``, what the ``asyos`` entry point runs), TOML configs whose keys are
the flags, bad flags and bad configs (exit status 2 and a message), plot and inspect.
Variations of a subcommand already run in a process call ``main`` in this one."""

import json
import socket
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
import zmq.auth

from asyos import load_result
from asyos.cli.main import build_parser, main
from asyos.cli.run import main as run_main
from asyos.io.config import TABLES, config_arguments
from asyos.transport.zeromq.common import client_key_name, key_bindings

ROOT = Path(__file__).resolve().parents[2]
GUARD = 120   # hang guard, not a speed assertion
PNG = b"\x89PNG\r\n\x1a\n"


def _asyos(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "asyos", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=GUARD)


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "asyos", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_console_script_is_the_cli_main():
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "asyos"]
    assert script.value == "asyos.cli.main:main"


@pytest.fixture(scope="module")
def sequential(tmp_path_factory):
    """`asyos run` from a TOML file, with one flag overriding it, verbose."""
    d = tmp_path_factory.mktemp("run")
    (d / "run.toml").write_text('features = 300\nepochs = 3\nquiet = true\n'
                                '[run]\nsparsity = 10\nout = "r.json"\n'
                                '[server]\nworkers = 7\n')
    proc = _asyos("run", "--config", "run.toml", "--epochs", "1", "-v", cwd=d)
    return d, proc


def test_run_reads_the_config_and_the_command_line_overrides_it(sequential):
    d, proc = sequential
    assert proc.returncode == 0, proc.stderr
    result = json.loads((d / "r.json").read_text())
    assert result["config"]["s"] == 10 and result["config"]["epochs"] == 1
    assert result["data"]["n_features"] == 300
    assert "INFO settings from run.toml" in proc.stderr          # --verbose: logging
    assert "INFO synthetic regression: n = 99, p = 300, s = 10" in proc.stderr
    assert "selected 10 features" in proc.stdout
    loaded = load_result(d / "r.json")
    assert loaded.context["schema_version"] == 2
    assert [f.name for f in d.glob("r.*.npz")] == [result["arrays"]]
    np.testing.assert_array_equal(loaded.selected, result["selected"])
    np.testing.assert_array_equal(loaded.weights, result["weights"])   # exact


def test_python_m_asyos_run_takes_the_same_config(sequential, monkeypatch):
    d, _ = sequential
    monkeypatch.chdir(d)   # the config's relative paths are the user's
    assert run_main(["--config", "run.toml", "--epochs", "1", "--out",
                     "again.json"]) == 0
    again = json.loads((d / "again.json").read_text())
    assert again["selected"] == json.loads((d / "r.json").read_text())["selected"]


def test_plot_and_inspect_a_sequential_run(sequential, capsys):
    d, _ = sequential
    assert main(["plot", str(d / "r.json"), "--out", str(d / "r.png")]) == 0
    image = (d / "r.png").read_bytes()
    assert image.startswith(PNG) and len(image) > 10_000
    assert main(["inspect", str(d / "r.json"), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "schema 2" in out and "selected             10 features" in out
    assert "... 7 more" in out


def test_server_and_workers_from_one_config_then_plot_and_inspect(tmp_path, capsys):
    port = _port()
    (tmp_path / "zmq.toml").write_text(
        f'features = 200\nsparsity = 12\nseed = 2\n'
        f'[server]\nworkers = 2\nbind = "tcp://127.0.0.1:{port}"\nout = '
        f'"{tmp_path / "z.json"}"\nquiet = true\n'
        f'[worker]\nconnect = "tcp://127.0.0.1:{port}"\n')
    config = tmp_path / "zmq.toml"
    procs = [_start("server", "--config", config)] + \
        [_start("worker", "--config", config, "--shard", f"{t}/2") for t in range(2)]
    for proc in procs:
        proc.wait(timeout=GUARD)
        assert proc.returncode == 0, proc.stderr.read()
    result = load_result(tmp_path / "z.json")
    assert result.n_workers == 2 and result.asy["transport"] == "zeromq"
    assert result.data["n_features"] == 200 and result.selected.size <= 12
    proc = _asyos("plot", tmp_path / "z.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "z.png").read_bytes().startswith(PNG)
    assert main(["inspect", str(tmp_path / "z.json")]) == 0
    # adaptive budgets: the first grant and what each worker kept, as the run said
    kept = [w["kept"] for w in result.asy["workers"]]
    cut = result.asy["cut"]   # what the closing cut dropped to leave s
    assert sum(kept) - cut == result.selected.size
    assert (f"2 workers (zeromq), budgets adaptive (first [6, 6], kept at the end "
            f"{kept}" + (f", {cut} cut to s" if cut else "") + ")") in \
        capsys.readouterr().out


def test_keys_and_convert(tmp_path):
    proc = _asyos("keys", tmp_path / "keys")
    assert proc.returncode == 0, proc.stderr
    keys = tmp_path / "keys"
    assert sorted(p.name for p in keys.iterdir()) == [
        "client.key_secret", "clients", "server.key", "server.key_secret"]
    assert [p.name for p in (keys / "clients").iterdir()] == ["client.key"]
    for secret in keys.glob("*.key_secret"):
        assert secret.stat().st_mode & 0o777 == 0o600
    before = (keys / "server.key_secret").read_bytes()
    again = _asyos("keys", keys)   # existing keys are kept unless --force
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "already holds keys" in again.stderr
    assert (keys / "server.key_secret").read_bytes() == before
    assert _asyos("keys", keys, "--force").returncode == 0
    assert (keys / "server.key_secret").read_bytes() != before
    not_a_directory = _asyos("keys", keys / "server.key")
    assert not_a_directory.returncode == 2 and "is a file" in not_a_directory.stderr
    # one key per shard: --force replaces the shared key, which is no longer accepted
    assert _asyos("keys", keys, "--workers", "3", "--force").returncode == 0
    assert sorted(p.name for p in (keys / "clients").iterdir()) == [
        "shard-0.key", "shard-1.key", "shard-2.key"]
    assert not (keys / "client.key_secret").exists()
    bound = key_bindings(keys / "clients")
    for t in range(3):
        public, _ = zmq.auth.load_certificate(keys / f"shard-{t}.key_secret")
        assert bound[public.decode()] == t
        assert client_key_name(keys, t) == f"shard-{t}"
    assert client_key_name(keys, 3) == "client"
    zero = _asyos("keys", tmp_path / "other", "--workers", "0")
    assert zero.returncode == 2 and "--workers must be" in zero.stderr
    table = np.arange(12.0).reshape(4, 3)
    np.savetxt(tmp_path / "d.csv", table, delimiter=",")
    (tmp_path / "c.toml").write_text("label-column = 0\nquiet = true\ndtype = 'float32'\n")
    proc = _asyos("convert", tmp_path / "d.csv", tmp_path / "X.npy", "--config",
                  tmp_path / "c.toml", "--labels-out", tmp_path / "y.npy")
    assert proc.returncode == 0, proc.stderr
    X = np.load(tmp_path / "X.npy")
    assert X.dtype == np.float32 and np.isfortran(X)
    np.testing.assert_array_equal(X, table[:, 1:])
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), table[:, 0])


def test_experiments_take_their_flags_from_a_config(tmp_path):
    (tmp_path / "e.toml").write_text("[experiments]\nreps = 0\n")
    proc = _asyos("experiments", "vs-p", "--config", tmp_path / "e.toml")
    assert proc.returncode == 2
    assert "--reps: must be >= 1" in proc.stderr


def test_bad_flags_exit_2_with_a_message(capsys):
    proc = _asyos("run", "--bogus", "1")
    assert proc.returncode == 2 and "unrecognized arguments: --bogus 1" in proc.stderr
    assert "Traceback" not in proc.stderr
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect"])
    assert exit_info.value.code == 2
    assert "the following arguments are required: results" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("sparsty = 3", "unknown key 'sparsty' for `asyos run` (known keys: batch,"),
    ("[run]\nsparsty = 3", "[run]: unknown key 'sparsty' for `asyos run` (known "
                           "keys: batch,"),
    ("[rnu]\nsparsity = 3", "unknown table [rnu] (known tables: [run], [server], "
                            "[worker], [keys], [convert], [make], [experiments], "
                            "[plot], [inspect]); did you mean [run]?"),
    ("[worker.extra]\nx = 1", "unknown table [worker.extra] ([worker] holds `asyos "
                              "worker`'s flags, no tables)"),
    ("run = 3", "[run] is a table of `asyos run`'s settings, got the key run = 3"),
    ("[[run]]\nsparsity = 3", "[run] is a table of `asyos run`'s settings, got an "
                              "array of tables"),
    ("[run.extra]\nx = 1", "unknown table [run.extra]"),
    ("epochs = 'two'", "argument --epochs: expected a whole number or 'auto', got "
                       "'two'"),
    ("epochs = [1, 2]", "epochs takes one value, got a list"),
    ("quiet = 'yes'", "quiet is a switch; give true or false"),
    ("[run]\nloss = 'huber'", "unknown loss 'huber'"),
    ("epochs = ", "not valid TOML"),
])
def test_bad_configs_exit_2_with_a_message(tmp_path, capsys, text, message):
    (tmp_path / "bad.toml").write_text(text)
    argv = ["run", "--config", str(tmp_path / "bad.toml"), "-p", "50", "-s", "3"]
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_the_known_tables_are_the_subcommands():
    assert sorted(TABLES) == sorted(build_parser()[1])


def test_a_typo_in_a_table_name_exits_2_with_one_line(tmp_path):
    (tmp_path / "typo.toml").write_text("[rnu]\nsparsity = 3\n[server]\nworkers = 2\n")
    for command in ("run", "server", "inspect"):
        proc = _asyos(command, "--config", tmp_path / "typo.toml", "r.json")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "typo.toml: unknown table [rnu] (known tables: [run], [server]" \
            in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_config_file_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["inspect", "r.json", "--config", str(tmp_path / "none.toml")])
    assert exit_info.value.code == 2
    assert "none.toml: cannot read it" in capsys.readouterr().err


def test_a_flag_added_later_is_a_config_key_at_once(tmp_path):
    # flags added to `asyos run` after the config code (--groups, --group-sparsity,
    # or one added now) are config keys with no change to the config code
    _, subparsers = build_parser()
    run = subparsers["run"]
    run.add_argument("--future-list", nargs="+")
    (tmp_path / "g.toml").write_text("[run]\ngroup_sparsity = 3\ngroups = 'g.npy'\n"
                                     "future_list = ['a', 'b']\nstandardize = true\n"
                                     "shuffle = false\n")
    tokens = config_arguments(run, tmp_path / "g.toml", "run")
    assert tokens == ["--group-sparsity", "3", "--groups", "g.npy", "--future-list",
                      "a", "b", "--standardize"]
    args = run.parse_args(tokens)
    assert args.group_sparsity == 3 and args.groups == "g.npy"
    assert args.future_list == ["a", "b"] and args.standardize and not args.shuffle


def test_inspect_and_load_result_read_schema_1(tmp_path, capsys):
    legacy = {"schema_version": 1, "selected": [4, 9], "weights": [0.5, -1.25],
              "objective_per_epoch": [0.3, 0.1], "objective": 0.1, "eta": 0.5, "m": 1.0,
              "n_steps": 40, "timings": {"seconds": 0.01, "us_per_step": 250.0},
              "trace": {"steps": [20, 40], "seconds": [0.005, 0.01],
                        "objective": [0.3, 0.1]},
              "data": {"source": "X.npy", "n_samples": 30, "n_features": 20},
              "config": {"s": 2, "loss": "squared", "epochs": 2}}
    (tmp_path / "old.json").write_text(json.dumps(legacy))
    result = load_result(tmp_path / "old.json")
    assert result.context["schema_version"] == 1 and result.selected.tolist() == [4, 9]
    assert result.objective_per_epoch == [0.3, 0.1]
    assert main(["inspect", str(tmp_path / "old.json")]) == 0
    out = capsys.readouterr().out
    assert "-1.25" in out and "schema 1" in out
    (tmp_path / "new.json").write_text(json.dumps({**legacy, "schema_version": 9}))
    assert main(["inspect", str(tmp_path / "new.json")]) == 2
    assert "unknown results schema_version 9" in capsys.readouterr().err


def test_more_bad_input_gets_one_line_and_status_2(tmp_path):
    (tmp_path / "bad.json").write_text('{"schema_version": 2, "selected": "x", '
                                       '"weights": 5}')
    (tmp_path / "c.csv").write_text("# only a comment\n")
    (tmp_path / "ck.npz").write_bytes(b"truncated")
    cases = [
        (["worker", "--connect", "garbage", "--shard", "0/1"], "not a ZeroMQ endpoint"),
        (["inspect", tmp_path / "bad.json"], "malformed results file"),
        (["run", "--data", tmp_path / "c.csv", "-s", "1", "--quiet"], "no data rows"),
        (["run", "-p", "100000000000", "--quiet"], "not enough memory"),
        (["server", "--workers", "1", "-s", "5", "--checkpoint", tmp_path / "ck.npz",
          "--resume"], "not a whole asyos checkpoint"),
        (["server", "--workers", "1", "-s", "5", "--bind", "bogus"],
         "--bind 'bogus' is not a ZeroMQ endpoint"),
        (["server", "--workers", "1", "-s", "5", "--checkpoint-every", "-1"],
         "checkpoint-every must be ≥ 0.001"),
    ]
    for args, message in cases:
        proc = _asyos(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
