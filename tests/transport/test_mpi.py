"""Real MPI jobs, launched by the ordinary test run (hang guard on every mpiexec)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asyos.core.sweep import sweep_rounds, sweep_size

ROOT = Path(__file__).resolve().parents[2]
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or \
    shutil.which("mpiexec")
TIMEOUT = 300  # hang guard only


def _mpiexec(n, *args, cwd=ROOT, **extra_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_"))}
    env.update(extra_env)
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, *args],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd,
                          env=env)


pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_mpi_suite(n):
    proc = _mpiexec(n, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q",
                    "-p", "no:cacheprovider", "tests/mpi")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert " passed" in proc.stdout


def test_cli_under_mpirun_writes_the_same_results(tmp_path):
    out = tmp_path / "r.json"
    proc = _mpiexec(3, "-m", "asyos.run", "-p", "600", "-s", "30", "--staleness", "2",
                    "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("recall of the true support") == 1  # rank 0 only
    result = json.loads(out.read_text())
    asy = result["asy"]
    assert asy["n_workers"] == 2 and asy["budgets"] == [15, 15]
    assert asy["staleness"]["max"] <= 2 and asy["staleness"]["bound"] == 2
    assert asy["u_check_max_abs_diff"] < 1e-9
    # both workers share the server's node: their vectors go through its window,
    # and no message carries one (a push's Δu and its view's u_C alone would be
    # 2 · 8n = 4800 bytes; the kept set a push reports is at most 3 · 8 · 15)
    assert asy["shared_window_workers"] == [0, 1]
    traffic = asy["server_bytes"]
    assert traffic["pushes"] > 10
    assert traffic["sent"] + traffic["received"] < 1000 * traffic["pushes"]
    assert len(result["selected"]) <= 30 and result["truth"]["recall"] > 0.6
    cores = len(os.sched_getaffinity(0))
    for worker in asy["workers"]:
        # the fitted rule: 3 passes for Asy-OS, then a closing sweep of 8 arrivals
        # in each of its rounds
        assert worker["steps"] == 3 * 300 + sweep_rounds(len(asy["workers"])) * \
            sweep_size("auto", 30, "fitted", 3)
        assert worker["compute_seconds"] > 0 and worker["communicate_seconds"] > 0
        # three ranks share the node's cores for BLAS (NodeShare)
        assert worker["blas_threads"] == max(1, cores // 3)


def test_the_readme_s_mpiexec_line_runs_the_embedded_default(tmp_path):
    """``mpiexec -n 3 python -m asyos.run``, as the README's tour gives it; the same
    problem as ``--workers 2`` and sequential OS, with the same quality."""
    out = tmp_path / "r.json"
    proc = _mpiexec(3, "-m", "asyos.run", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["asy"]["transport"] == "mpi" and result["asy"]["n_workers"] == 2
    assert result["truth"]["recall"] >= 0.95
    assert result["asy"]["staleness"]["max"] <= result["asy"]["staleness"]["bound"]


def test_cli_adaptive_budgets_under_mpirun(tmp_path):
    out = tmp_path / "r.json"
    proc = _mpiexec(4, "-m", "asyos.run", "-p", "600", "-s", "12", "--budget",
                    "adaptive", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "budgets adaptive (kept at the end" in proc.stdout
    result = json.loads(out.read_text())
    assert result["asy"]["budget"] == "adaptive" == result["config"]["budget"]
    assert len(result["selected"]) <= 12 and result["asy"]["u_check_max_abs_diff"] < 1e-9


def test_blas_threads_flag_reaches_every_worker_and_is_checked(tmp_path):
    out = tmp_path / "r.json"
    proc = _mpiexec(3, "-m", "asyos.run", "-p", "300", "-s", "10", "--blas-threads",
                    "3", "--quiet", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert [w["blas_threads"] for w in json.loads(out.read_text())["asy"]["workers"]] \
        == [3, 3]
    proc = _mpiexec(2, "-m", "asyos.run", "-p", "300", "-s", "10", "--blas-threads",
                    "0", "--quiet")
    assert proc.returncode == 2 and proc.stderr.count("asyos: error:") == 1
    assert "blas-threads" in proc.stderr


def test_oversubscribed_twelve_ranks_finish_and_the_server_sleeps(tmp_path):
    out = tmp_path / "r.json"
    warm = _mpiexec(2, "-m", "asyos.run", "-p", "1100", "-s", "33", "--quiet")
    assert warm.returncode == 0, warm.stderr   # the kernels are in the cache now
    proc = _mpiexec(12, "-m", "asyos.run", "-p", "1100", "-s", "33", "--quiet",
                    "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    # twelve ranks on two cores start slowly, but none compiles: no notice
    assert "compil" not in proc.stderr, proc.stderr
    result = json.loads(out.read_text())
    assert result["asy"]["n_workers"] == 11
    # rank 0 polls with backoff: its CPU time stays well below the wall time
    assert result["asy"]["server_cpu_seconds"] < 0.5 * result["timings"]["seconds"]


def test_on_a_first_run_each_set_of_kernels_is_compiled_by_one_process(tmp_path):
    # an empty numba cache is a first run: of the node's three workers one compiles
    # the local block's kernels while another compiles the budget cut's; each then
    # loads the other's, and the third waits and loads both: two announcements,
    # not one per worker
    proc = _mpiexec(4, "-m", "asyos.run", "-p", "300", "-s", "12", "--quiet",
                    NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("compiling kernels for this machine") == 2, proc.stderr
    assert proc.stderr.count("kernels compiled in") == 2
    assert "Asy-OS: 3 workers" in proc.stdout


def test_the_server_reads_only_the_shape_and_labels_of_a_table(tmp_path):
    # rank 0 counts the csv's rows and keeps its label column; the workers read the
    # columns and generate their products; the server names the products it kept
    rng = np.random.default_rng(2)
    X = rng.standard_normal((80, 6))
    y = X[:, 1] * X[:, 4] + 2.0 * X[:, 0] + 0.01 * rng.standard_normal(80)
    np.savetxt(tmp_path / "t.csv", np.c_[y, X], delimiter=",")
    out = tmp_path / "r.json"
    proc = _mpiexec(3, "-m", "asyos.run", "--data", str(tmp_path / "t.csv"),
                    "--label-column", "0", "--degree", "2", "-s", "4", "--quiet",
                    "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["data"]["n_features"] == 6 + 21 and result["data"]["n_samples"] == 80
    assert {"x0", "x1*x4"} <= set(result["feature_names"])


def _mpich_files() -> set:
    """MPICH's shared-memory files in /dev/shm (one per node and job while it runs)."""
    return set(Path("/dev/shm").glob("mpich_shm_*"))


def test_setup_errors_exit_2_with_one_message(tmp_path):
    before = _mpich_files()
    proc = _mpiexec(5, "-m", "asyos.run", "-p", "100", "-s", "3", "--quiet")
    assert proc.returncode == 2
    assert proc.stderr.count("asyos: error:") == 1
    assert "4 workers cannot share a budget of s = 3" in proc.stderr
    np.save(tmp_path / "X.npy", np.zeros((10, 20)))
    np.save(tmp_path / "y.npy", np.zeros(9))
    proc = _mpiexec(3, "-m", "asyos.run", "--data", str(tmp_path / "X.npy"),
                    "--labels", str(tmp_path / "y.npy"), "-s", "4", "--quiet")
    assert proc.returncode == 2 and "n = 9" in proc.stderr
    for bad, problem in ((["--staleness", "-1"], "staleness must be ≥ 0, got -1"),
                         (["--window", "0"], "window must be ≥ 1, got 0"),
                         (["--ranks-per-node", "0"], "ranks-per-node must be ≥ 1")):
        proc = _mpiexec(3, "-m", "asyos.run", "-p", "100", "-s", "4", *bad, "--quiet")
        assert proc.returncode == 2 and proc.stderr.count("asyos: error:") == 1
        assert problem in proc.stderr
    # MPI_Abort skips MPI_Finalize, which removes MPICH's file: the ranks remove it
    assert _mpich_files() <= before


def test_a_failing_worker_aborts_the_job_with_its_message(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 700))
    X[4, 650] = np.inf                        # in a later block: found while running
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", rng.standard_normal(30))
    before = _mpich_files()
    for node in ([], ["--ranks-per-node", "2"]):   # the failing rank on rank 0's node,
        proc = _mpiexec(3, "-m", "asyos.run", "--data", str(tmp_path / "X.npy"),
                        "--labels", str(tmp_path / "y.npy"), "-s", "4", "--quiet",
                        *node)                     # or on a "node" of its own
        assert proc.returncode == 2, proc.stderr
        assert "feature 650 contains NaN or inf" in proc.stderr
    assert _mpich_files() <= before



@pytest.mark.parametrize("zero_all", [True, False], ids=["X all zeros", "a zero shard"])
def test_a_worker_whose_kept_set_ends_empty_ends_the_job_with_exit_0(tmp_path, zero_all):
    """``mpiexec -n 3 python -m asyos.run`` on data where worker 1's shard (the odd
    features at p < 128 q) holds only zeros: its kept set ends empty, which is a
    valid state (docs/reliability.md).  X all zeros has nothing to select: exit 2,
    one line, no results file."""
    rng = np.random.default_rng(0)
    X = np.zeros((100, 40)) if zero_all else rng.standard_normal((100, 40))
    X[:, 1::2] = 0.0
    y = rng.standard_normal(100) if zero_all else X[:, [0, 2]] @ np.array([1.0, 2.0])
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "r.json"
    before = _mpich_files()
    proc = _mpiexec(3, "-m", "asyos.run", "--data", str(tmp_path / "X.npy"),
                    "--labels", str(tmp_path / "y.npy"), "-s", "4", "--quiet",
                    "--out", str(out))
    assert "Traceback" not in proc.stderr
    if zero_all:
        assert proc.returncode == 2, proc.stderr
        assert "there is nothing to select" in proc.stderr and not out.exists()
    else:
        assert proc.returncode == 0, proc.stderr
        selected = json.loads(out.read_text())["selected"]
        assert {0, 2} <= set(selected) and all(j % 2 == 0 for j in selected)
    assert _mpich_files() <= before


def test_launch_script_runs_sequential_and_mpi():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_"))}
    env["ASYOS_PYTHON"] = sys.executable
    for args, marker in [((), "OS on synthetic"), (("-n", "3"), "Asy-OS: 2 workers")]:
        proc = subprocess.run(["bash", str(ROOT / "launch.sh"), *args, "-p", "200",
                               "-s", "6", "--quiet"], capture_output=True, text=True,
                              timeout=TIMEOUT, env=env)
        assert proc.returncode == 0, proc.stderr
        assert marker in proc.stdout


def test_rare_words_from_a_csc_file_under_mpirun(tmp_path):
    """Workers read their shards of a .csc file under the fitted rule's sparse kernel:
    every planted word found among empty and one-nonzero columns, u_C exact."""
    from asyos.datasets import make_rare_words
    from asyos.streams import save_csc

    problem = make_rare_words(p=50_000, n=2_000, seed=2)
    save_csc(tmp_path / "X.csc", problem.X)
    np.save(tmp_path / "y.npy", problem.y)
    out = tmp_path / "r.json"
    proc = _mpiexec(3, "-m", "asyos.run", "--data", str(tmp_path / "X.csc"),
                    "--labels", str(tmp_path / "y.npy"), "-s", "20", "--quiet",
                    "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert set(problem.support) <= set(result["selected"])
    assert result["asy"]["u_check_max_abs_diff"] < 1e-9
    assert result["asy"]["staleness"]["max"] <= result["asy"]["staleness"]["bound"]


def test_a_selected_constant_column_is_warned_about_once_under_mpiexec(tmp_path):
    """Rank 0 finds a selected constant column with a nonzero weight in the
    columns its workers send with their FINAL, and warns in sequential OS's words,
    once."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 24))
    X[:, 3] = 1.0
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", 2 * X[:, 3] + X[:, 5] + 0.01 * rng.standard_normal(60))
    proc = _mpiexec(3, "-m", "asyos.run", "--data", str(tmp_path / "X.npy"),
                    "--labels", str(tmp_path / "y.npy"), "-s", "3", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("asyos: warning: selected constant column(s) [3] with a "
                             "nonzero weight") == 1, proc.stderr


def test_no_mpi_call_pickles_an_object():
    """mpi4py's lower-case calls pickle Python objects; every MPI message and
    collective of asyos moves buffers (upper-case calls).  Read from the sources of
    every module that imports mpi4py."""
    import re

    package = Path(__file__).resolve().parents[2] / "asyos"
    lower = re.compile(r"\b(comm|node|group|world|\w*comm\w*)\.(send|recv|isend|irecv|"
                       r"bsend|ssend|sendrecv|bcast|gather|scatter|allgather|alltoall|"
                       r"reduce|allreduce|scan|exscan|probe)\(")
    found = [f"{path.name}: {line.strip()}" for path in package.rglob("*.py")
             if "mpi4py" in (text := path.read_text())
             for line in text.splitlines() if lower.search(line)]
    assert found == []
