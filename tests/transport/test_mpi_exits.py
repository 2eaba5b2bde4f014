"""Every way an MPI job ends, with real ``mpiexec -n 3 python -m asyos.run`` processes:
its exit status, and no file of MPICH (``/dev/shm/mpich_shm_*``) or of its launcher
hydra (``/tmp/hydra_hwloc_xmlfile_*``) left once its processes are gone
(docs/reliability.md, "Faults of processes and messages").

Other jobs may run on the machine meanwhile, so a job's files are the ones its own
processes (its session: mpiexec, hydra_pmi_proxy and the ranks) map or hold open,
noted while it runs; the check is that none of them is still there at the end.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from emulated_cluster import rank_pid

ROOT = Path(__file__).resolve().parents[2]
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or \
    shutil.which("mpiexec")
PREFIXES = ("/dev/shm/mpich_shm_", "/tmp/hydra_hwloc_xmlfile_")
TIMEOUT = 120   # hang guard only
LONG = ("-p", "50000", "-s", "100", "--rule", "magnitude", "--epochs", "30")

pytestmark = pytest.mark.skipif(MPIEXEC is None or not Path("/proc/self/maps").exists(),
                                reason="needs mpiexec and Linux's /proc")


def _held(pid: int) -> set:
    """The files of MPICH and hydra that process ``pid`` maps or holds open."""
    paths = set()
    try:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6:
                paths.add(fields[5])
    except OSError:
        pass
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                paths.add(os.readlink(fd))
            except OSError:
                pass
    except OSError:
        pass
    return {path.removesuffix(" (deleted)") for path in paths
            if path.startswith(PREFIXES)}


def _processes() -> dict[int, tuple[int, str]]:
    """Every process: pid → (parent's pid, state)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            table[int(entry)] = (int(fields[1]), fields[0])
    return table


def _family(root: int, known: set) -> set:
    """The live (not zombie) processes among ``root``, its descendants and ``known``
    (hydra starts each of its processes in a session of its own, and the proxy
    outlives a SIGKILLed mpiexec, so the job's processes are found by descent)."""
    table = _processes()
    children = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    family, todo = set(), [root, *known]
    while todo:
        pid = todo.pop()
        if pid in table and pid not in family:
            family.add(pid)
            todo.extend(children.get(pid, ()))
    return {pid for pid in family if table[pid][1] != "Z"}


class Job:
    """``mpiexec -n 3 python -m asyos.run ARGS``, with a thread that notes every
    MPICH and hydra file its processes map or hold open until none is left."""

    def __init__(self, *args, n=3, **extra_env):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PMI_", "PMIX_"))}
        env.update(extra_env)
        self.proc = subprocess.Popen(
            [MPIEXEC, "-n", str(n), sys.executable, "-m", "asyos.run", *args],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self.files, self.pids = set(), set()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()
        self.err = ""

    def _watch(self):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            pids = _family(self.proc.pid, self.pids)
            if not pids:
                return
            self.pids |= pids
            for pid in pids:
                self.files |= _held(pid)
            time.sleep(0.02)

    def at_work(self):
        """Wait until a rank has opened the job (``-v``): every rank is past MPI_Init
        and the job is running; then a little longer."""
        while "p = 50000" not in self.err and self.proc.poll() is None:
            self.err += self.proc.stderr.readline()
        time.sleep(1.0)
        assert self.proc.poll() is None, self.err

    def rank(self, rank: int) -> int:
        return rank_pid(_family(self.proc.pid, self.pids), rank)

    def end(self) -> int:
        """Wait for mpiexec and for every process of its session; the exit status."""
        _, err = self.proc.communicate(timeout=TIMEOUT)
        self.err += err
        self._watcher.join(TIMEOUT)
        assert not self._watcher.is_alive(), \
            f"processes left: {_family(self.proc.pid, self.pids)}"
        return self.proc.returncode

    def left(self) -> list[str]:
        """The job's files still there, after ``end``."""
        assert any(path.startswith(PREFIXES[0]) for path in self.files), \
            f"never saw MPICH's node memory: {self.files}"
        return sorted(path for path in self.files if os.path.exists(path))


@pytest.fixture(scope="module")
def warm():
    """LONG's kernels in numba's cache, so that a job is stepping, not compiling,
    when a test signals or kills it (``test_a_signal_while_the_kernels_compile_...``
    is the other case)."""
    job = Job(*LONG[:-1], "1", "-p", "2000", "--quiet")
    assert job.end() == 0, job.err


def test_a_finished_mpi_job_leaves_no_file():
    job = Job("-p", "200", "-s", "6", "--quiet")
    assert job.end() == 0, job.err
    assert job.left() == []


def test_bad_input_under_mpiexec_exits_2_and_leaves_no_file():
    """Rank 0 aborts the job; hydra's topology file, which its proxy removes at a
    normal end only, was left by every abort."""
    job = Job("-p", "100", "-s", "3", "--quiet", n=5)
    assert job.end() == 2, job.err
    assert job.err.count("asyos: error:") == 1
    assert job.left() == []


def test_a_failing_rank_exits_2_and_leaves_no_file(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 700))
    X[4, 650] = np.inf                        # in a later block: found while running
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", rng.standard_normal(30))
    job = Job("--data", str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
              "-s", "4", "--quiet")
    assert job.end() == 2, job.err
    assert "feature 650 contains NaN or inf" in job.err
    assert job.left() == []


@pytest.mark.parametrize("signum, status, line", [
    (signal.SIGINT, 130, "asyos: interrupted"),
    (signal.SIGTERM, 143, "asyos: terminated")])
def test_a_signalled_mpiexec_exits_128_plus_the_signal_and_leaves_no_file(
        warm, signum, status, line):
    """^C signals the terminal's process group; hydra starts every rank in a session
    of its own, so that is mpiexec alone, which forwards the signal to every rank, as
    it does SIGTERM.  One MPI_Abort ends the job after rank 0's one line."""
    job = Job(*LONG, "-v", "--quiet")
    job.at_work()
    job.proc.send_signal(signum)
    assert job.end() == status, job.err
    assert job.err.count(line) == 1 and "Traceback" not in job.err, job.err
    assert job.left() == []


def test_a_signal_while_the_kernels_compile_ends_the_job_as_well(tmp_path):
    """On an empty kernel cache the ranks are compiling when ^C comes: llvmlite's
    callbacks, where the signal often lands, print a KeyboardInterrupt and ignore
    it, so the ranks abort from the signal handler itself instead of raising."""
    job = Job(*LONG, "-v", "--quiet", ASYOS_KERNEL_CACHE=str(tmp_path))
    job.at_work()
    job.proc.send_signal(signal.SIGINT)
    assert job.end() == 130, job.err
    assert job.err.count("asyos: interrupted") == 1 and "Traceback" not in job.err, \
        job.err
    assert job.left() == []


@pytest.mark.parametrize("rank", [0, 2])
def test_a_killed_rank_leaves_no_file(warm, rank):
    """SIGKILL runs no handler: the files must be gone before (hydra then kills the
    other ranks with SIGKILL too, and the job's status is its: 9)."""
    job = Job(*LONG, "-v", "--quiet")
    job.at_work()
    os.kill(job.rank(rank), signal.SIGKILL)
    assert job.end() != 0
    assert job.left() == []


def test_a_killed_mpiexec_leaves_no_file(warm):
    """mpiexec SIGKILLed: its proxy notices, SIGKILLs the ranks and exits without
    removing its topology file.  Nothing of the job may be left once all are gone."""
    job = Job(*LONG, "-v", "--quiet")
    job.at_work()
    job.proc.kill()
    job.end()   # the killer's status; end() also waits for the proxy and the ranks
    assert job.left() == []


def test_files_of_jobs_killed_while_starting_are_reclaimed_by_the_next():
    """A job killed before its ranks released their files (while MPI starts) leaves
    them; the next job removes those no live process maps or holds open, older than
    a starting job's, and keeps a file a live process holds."""
    tag = f"asyostest{os.getpid()}"
    stale = [Path(f"/dev/shm/mpich_shm_{tag}_0"), Path(f"/tmp/hydra_hwloc_xmlfile_{tag}")]
    held = Path(f"/dev/shm/mpich_shm_{tag}_1")
    young = Path(f"/tmp/hydra_hwloc_xmlfile_{tag}y")
    try:
        for path in (*stale, held, young):
            path.write_bytes(b"\0" * 64)
        for path in (*stale, held):
            os.utime(path, (time.time() - 60, time.time() - 60))
        with open(held, "rb"):   # a live process (this one) holds it
            job = Job("-p", "100", "-s", "3", "--quiet", n=5)
            assert job.end() == 2, job.err
            assert held.exists()
        assert not any(path.exists() for path in stale)
        assert young.exists()   # could be a starting job's
    finally:
        for path in (*stale, held, young):
            path.unlink(missing_ok=True)
