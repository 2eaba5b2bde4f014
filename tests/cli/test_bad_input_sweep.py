"""The bad-input sweep: 163 invalid invocations of every subcommand, each refused
before any work with exit status 2 and one line naming the problem (argparse's own
refusals: its usage, then one error line), never a traceback and never a silent
result.  Run in-process (the global pytest timeout is the hang guard); the files they
name are made in the test's folder."""

import shlex

import numpy as np
import pytest

from asyos.cli.main import main

SWEEP = """
RUN -s 0 || s must be at least 1, got 0
RUN -s -3 || s must be at least 1, got -3
RUN -s 31 || s must be at most the number of features p = 30,
RUN -s abc || argument -s/--sparsity: expected a whole number
RUN -s 2.5 || argument -s/--sparsity: expected a whole number
RUN || -s/--sparsity is required with --data
run --data X.npy -s 2 || X.npy: no labels; give --labels
run -p 0 || p must be >= 1, got 0
run -p -5 || p must be >= 1, got -5
run -p 10 -s 20 || s must be <= p (the number of features), got s=2
run --samples 0 || n must be >= 1, got 0
run --samples 1 || one sample is too few for a fit: need n >= 2 sam
run -p abc || argument --features/-p: invalid int value: 'abc'
run --data X.npy --labels y_short.npy -s 2 || labels have n = 39 samples but the feature
run --data X.npy --labels y_nan.npy -s 2 || label 39 is NaN or inf
run --data X.npy --labels y_2d.npy -s 2 || y_2d.npy: labels must be one column, got shap
run --data X.npy --labels y3.npy -s 2 --loss logistic || a classification loss needs lab
run --data X.npy --labels y_str.npy -s 2 || y_str.npy: labels are not numeric (dtype <U1
RUN -s 2 --loss squared_hinge || a classification loss needs labels of exactly 2
run --data X.npy --labels missing.npy -s 2 || missing.npy: no such file
run --data X.npy --labels empty.csv -s 2 || empty.csv: file is empty
run --data X.npy --labels adir -s 2 || adir is a directory, not a file
run --data missing.npy --labels y.npy -s 2 || missing.npy: no such file
run --data X_inf.npy --labels y.npy -s 2 || feature 3 contains NaN or inf
run --data X_1d.npy --labels y.npy -s 2 || X_1d.npy: the array must be 2-D (n_samples, n
run --data X_3d.npy --labels y.npy -s 2 || X_3d.npy: the array must be 2-D (n_samples, n
run --data X_complex.npy --labels y.npy -s 2 || X_complex.npy: dtype complex128 is not f
run --data X_empty.npy --labels y.npy -s 2 || X_empty.npy: the array must have at least
run --data X_obj.npy --labels y.npy -s 2 || X_obj.npy: dtype object is not float32 or fl
run --data empty.csv --labels y.npy -s 2 || empty.csv: file is empty
run --data hdr.csv --labels y.npy -s 2 || hdr.csv: cannot read as a numeric table (could
run --data ragged.csv --labels y.npy -s 2 || ragged.csv: cannot read as a numeric table
run --data text.csv --labels y.npy -s 2 || text.csv: cannot read as a numeric table (cou
run --data bad.svm -s 1 || bad.svm: cannot read as svmlight (need more than
run --data neg.svm -s 1 || neg.svm: cannot read as svmlight (Invalid index
run --data adir --labels y.npy -s 2 || adir is a directory, not a file
run --data X.xyz --labels y.npy -s 2 || X.xyz: no such file
run --synthetic regression --data X.npy -s 2 || give either --data or --synthetic, not b
run --synthetic bogus || argument --synthetic: invalid choice: 'bogus' (c
RUN -s 2 --label-column 0 || X.npy: a label column is for csv/tsv/txt files
RUN -s 2 --degree 0 || argument --degree: invalid choice: 0 (choose fro
RUN -s 2 --degree abc || argument --degree: invalid int value: 'abc'
run --degree 2 || --degree expands the columns of --data; give --d
RUN -s 2 --dtype float16 || argument --dtype: invalid choice: 'float16' (cho
RUN -s 2 --loss huber || unknown loss 'huber'; expected one of: squared,
RUN -s 2 --eta 0 || eta must be a positive finite number, got 0.0
RUN -s 2 --eta -1 || eta must be a positive finite number, got -1.0
RUN -s 2 --eta nan || eta must be a positive finite number, got nan
RUN -s 2 --eta inf || eta must be a positive finite number, got inf
RUN -s 2 --m 0 || m must be ≥ 1, got 0.0
RUN -s 2 --m -2 || m must be ≥ 1, got -2.0
RUN -s 2 --epochs 0 || epochs must be ≥ 1, got 0
RUN -s 2 --epochs -1 || epochs must be ≥ 1, got -1
RUN -s 2 --epochs x || argument --epochs: expected a whole number or 'a
RUN -s 2 --rule bogus || argument --rule: invalid choice: 'bogus' (choose
RUN -s 2 --ridge -1 || ridge must be a finite number > 0, got -1.0
RUN -s 2 --ridge nan || ridge must be a finite number > 0, got nan
RUN -s 2 --blas-threads 0 || blas-threads must be ≥ 1, got 0
RUN -s 2 --groups groups.txt --group-sparsity 1 || groups must give one label per featur
RUN -s 2 --groups groups_short.npy --group-sparsity 1 || groups must give one label per
RUN -s 2 --group-sparsity 1 || groups and s2 (the group budget) go together: gi
RUN -s 2 --groups missing.txt --group-sparsity 1 || missing.txt: no such file
RUN -s auto --eta 0.1 || -s auto runs OS along a path with its default st
RUN -s auto --max-features 0 || --max-features must be between 1 and the number
RUN -s auto --max-features 99 || --max-features must be between 1 and the number
RUN -s 2 --criterion sic || --criterion goes with -s auto (a path over model
RUN -s 2 --max-features 3 || --max-features goes with -s auto (a path over mo
RUN -s auto --criterion aic || argument --criterion: invalid choice: 'aic' (cho
RUN -s 2 --out /proc/r.json || --out /proc/r.json: directory /proc is not writa
RUN -s 2 --out missing/r.json || --out missing/r.json: directory missing does not
RUN -s 2 --out adir || --out adir is a directory; give a file name such
RUN -s 2 --out done.json || --out done.json exists; give another name, or --force
RUN -s 2 --workers 0 || workers must be ≥ 1, got 0
RUN -s 2 --workers -1 || workers must be ≥ 1, got -1
RUN -s 2 --workers 31 || 31 workers cannot share a budget of s = 2 featur
RUN -s 2 --simulate 0 || simulate must be ≥ 1, got 0
RUN -s 2 --workers 2 --simulate 2 || --workers Q starts its own worker processes: giv
RUN -s 2 --workers 2 --staleness -1 || staleness must be ≥ 0, got -1
RUN -s 2 --staleness 3 || --staleness sets Asy-OS's pipeline: give it with
RUN -s 2 --workers 2 --window 0 || window must be ≥ 1, got 0
RUN -s 2 --workers 2 --batch 0 || batch must be ≥ 1, got 0
RUN -s 2 --workers 2 --budget bogus || argument --budget: invalid choice: 'bogus' (choo
RUN -s 2 --simulate 2 --delay -1 || delay must be ≥ 0, got -1
RUN -s 2 --delay 3 || --delay and --random-delay go with --simulate Q
RUN -s 1 --workers 2 || 2 workers cannot share a budget of s = 1 feature
RUN -s auto --workers 2 || -s auto runs sequential OS along a path; give a
RUN -s 2 --ranks-per-node 2 || --ranks-per-node groups MPI ranks: run under mpi
RUN -s 2 --leaders || --leaders groups MPI ranks: run under mpiexec
RUN -s 2 --heartbeat-timeout 5 || --heartbeat-timeout is MPI's liveness: run under mpiexec
RUN -s 2 --orders 0 || orders must be ≥ 1, got 0
RUN -s 2 --orders many || argument --orders: expected a whole number or 'auto', g
RUN -s 2 --orders 3 --workers 2 || --orders 3 is for a sequential run, not Asy-OS
RUN -s 2 --orders 3 --simulate 2 || --orders 3 is for a sequential run, not Asy-OS
RUN -s auto --orders 3 || --orders 3 takes a number for -s
RUN -s 2 --orders 3 --groups groups3.npy --group-sparsity 1 || --orders 3 counts feat
run --config bad.toml || --config bad.toml: not valid TOML (Invalid value
run --config wrongkey.toml || --config wrongkey.toml: unknown key 'nope' for `
run --config wrongtype.toml || argument -s/--sparsity: expected a whole number
run --config missing.toml || --config missing.toml: cannot read it (No such f
run --bogus-flag || unrecognized arguments: --bogus-flag
server --workers 0 -s 5 || the number of workers must be at least 1, got 0
server --workers 2 -s 0 || s must be >= 1, got 0
server -s 5 || the following arguments are required: --workers
server --workers 2 -s 5 --bind bogus || --bind 'bogus' is not a ZeroMQ endpoint: give tc
server --workers 2 -s 5 --bind tcp://0.0.0.0:5555 || binding to tcp://0.0.0.0:5555 expos
server --workers 2 -s 5 --checkpoint-every -1 || checkpoint-every must be ≥ 0.001, got -
server --workers 2 -s 5 --resume || --resume needs --checkpoint FILE, the checkpoint
server --workers 2 -s 5 --checkpoint ck.npz --resume || cannot resume from ck.npz: not a
server --workers 2 -s 5 --heartbeat-timeout 0 || heartbeat-timeout must be ≥ 0.001, got
server --workers 2 -s 5 --labels missing.npy || missing.npy: no such file
server --workers 2 --labels y.npy || -s/--sparsity is required with --labels
server --workers 2 -s 5 --labels y_nan.npy || label 39 is NaN or inf
server --workers 2 -s auto || -s auto runs sequential OS along a path; give a
server --workers 2 -s 5 --keys missing_keys || missing_keys/clients: no directory of acc
server --workers 2 -s 5 --out /proc/r.json || --out /proc/r.json: directory /proc is not
server --workers 2 -s 5 --labels y.npy --out done.json || --out done.json exists; give anot
server --workers 2 -s 5 --loss huber || unknown loss 'huber'; expected one of: squared,
worker --connect garbage --shard 0/1 || --connect 'garbage' is not a ZeroMQ endpoint (In
worker --connect tcp://127.0.0.1:5555 --shard 2/2 || --shard 2/2: need 0 <= T < Q
worker --connect tcp://127.0.0.1:5555 --shard x || --shard must be T/Q, e.g. 0/4, got 'x
worker --connect tcp://127.0.0.1:5555 --shard 0/0 || --shard 0/0: need 0 <= T < Q
worker --connect tcp://127.0.0.1:5555 || the following arguments are required: --shard
worker --connect tcp://127.0.0.1:5555 --shard 0/2 --data missing.npy || missing.npy: no
worker --connect tcp://127.0.0.1:5555 --shard 0/31 --data X.npy || 31 shards but only 30
worker --connect tcp://10.1.2.3:5555 --shard 0/2 || --connect tcp://10.1.2.3:5555 is bey
convert missing.csv out || missing.csv: no such file
convert empty.csv out || empty.csv: file is empty
convert ragged.csv out || ragged.csv: cannot read row 1.. as numbers (the
convert text.csv out || text.csv: cannot read row 1.. as numbers (could
convert X.npy /proc/out || converting X.npy to /proc/out failed: [Errno 2]
convert bad.svm out.csc || bad.svm: line 1 is not svmlight (need more than
make --kind bogus || unrecognized arguments: --kind
make -p 0 || the following arguments are required: data
make --out /proc/x || unrecognized arguments: --out
keys /proc/keys || /proc/keys is a file; give a directory for the k
keys kd --workers 0 || --workers must be ≥ 1, got 0
inspect missing.json || missing.json: not a readable results file ([Errn
inspect bad.json || bad.json: not a readable results file (Expecting
inspect notres.json || notres.json: unknown results schema_version None
inspect adir || adir: not a readable results file ([Errno 21] Is
plot missing.json || missing.json: not a readable results file ([Errn
plot bad.json || bad.json: not a readable results file (Expecting
plot notres.json || notres.json: unknown results schema_version None
bogus-command || argument command: invalid choice: 'bogus-command
make X2.npy || .npy data hold no labels: give a labels file too
make X2.npy y2.npy -p 0 || p must be >= 1, got 0
make X2.npy y2.npy -s 0 || s must be >= 1, got 0
make X2.npy y2.npy -p 10 -s 20 || s must be <= p (the number of features), got s=2
make X.npy y.npy || X.npy exists; give --force to replace it
make out.xyz || out.xyz: give a .npy, .csc, .csv or .svm name
make /proc/X.npy /proc/y.npy || /proc/X.npy: cannot write in /proc
make X2.npy y2.npy --samples 0 || n must be >= 1, got 0
convert X.npy X.npy || X.npy: the output must not overwrite the input
convert X.npy out.xyz || out.xyz: the output must be a .npy file or a .cs
convert X.npy out --block-mb 0 || --block-mb must be ≥ 1, got 0
convert X.npy out --label-column 5 || --label-column is for csv/tsv/txt inputs
convert y_2d.npy out --layout sparse --dtype float16 || argument --dtype: invalid choice
keys || the following arguments are required: directory
server --workers 2 -s 5 --replace-timeout -1 || replace-timeout must be ≥ 0.001, got -1.
server --workers x -s 5 || argument --workers: invalid int value: 'x'
worker --connect tcp://127.0.0.1:5555 --shard 0/2 --server-timeout 0 || server-timeout m
worker --connect tcp://127.0.0.1:5555 --shard 0/2 --heartbeat-every -1 || heartbeat-ever
experiments bogus || argument NAME: invalid choice: 'bogus' (choose f
experiments vs-p --reps 0 || argument --reps: must be >= 1, got 0
RUN -s 2 --standardize --workers 2 || --standardize is not supported with --workers Q
"""
# argv || what its one line says.  RUN: `run` on the good X and y; every `run` is
# quiet (its progress bar and report are not what is tested).


def _argv(text: str) -> list[str]:
    argv = shlex.split(text.replace("RUN", "run --data X.npy --labels y.npy"))
    return ["run", "--quiet", *argv[1:]] if argv[0] == "run" else argv


CASES = [(_argv(argv), said)
         for argv, said in (line.split(" || ") for line in SWEEP.strip().splitlines())]


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """The files the invocations name, in the current folder: good X and y, labels
    short, NaN, 2-D, of three classes or text; features with inf, 1-D, 3-D, complex,
    empty or objects; broken csv, svmlight, TOML, JSON and checkpoint files."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASYOS_RUN_DIR", str(tmp_path / "runs"))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 30))
    y = X[:, 0] + 0.1 * rng.standard_normal(40)
    arrays = {
        "X": X,
        "Xf": np.asfortranarray(X),
        "y": y,
        "y_short": y[:39],
        "y_nan": np.r_[y[:-1], np.nan],
        "y_2d": np.c_[y, y],
        "y3": np.arange(40) % 3,
        "y_str": np.array(["a"] * 40),
        "X_inf": np.where(np.arange(30) == 3, np.inf, X),
        "X_1d": X[:, 0],
        "X_3d": X.reshape(40, 30, 1),
        "X_int": (X * 10).astype(np.int64),
        "X_complex": X.astype(complex),
        "X_empty": np.zeros((0, 30)),
        "groups_short": np.zeros(29, np.int64),
        "groups3": np.arange(30) // 10,
    }
    for name, array in arrays.items():
        np.save(f"{name}.npy", array)
    np.save("X_obj.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    texts = {
        "empty.csv": "",
        "hdr.csv": "a,b,c\n",
        "ragged.csv": "1,2,3\n4,5\n",
        "text.csv": "1,2,x\n4,5,6\n",
        "bad.svm": "1 3:1.0 nonsense\n",
        "neg.svm": "1 -3:1.0\n",
        "groups.txt": "\n".join(["0"] * 29),
        "bad.toml": "sparsity = [\n",
        "wrongkey.toml": "nope = 3\n",
        "wrongtype.toml": 'sparsity = "many"\n',
        "bad.json": "{",
        "notres.json": '{"a": 1}',
        "ck.npz": "truncated",
        "done.json": '{"an earlier run": "its results"}',
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "adir").mkdir()
    return tmp_path


def _status(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's refusals
        return exc.code


def test_the_sweep_holds_at_least_a_hundred_invocations_of_every_subcommand():
    assert len(CASES) >= 100
    assert {argv[0] for argv, _ in CASES} == {
        "run",
        "server",
        "worker",
        "keys",
        "convert",
        "make",
        "experiments",
        "plot",
        "inspect",
        "bogus-command",
    }


@pytest.mark.parametrize("argv, said", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_bad_input_gets_one_line_and_status_2(inputs, capsys, argv, said):
    assert _status(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    assert said in lines[-1], err
    assert len(lines) == 1 or err.startswith("usage:"), err
    assert lines[-1].startswith("asyos"), err
