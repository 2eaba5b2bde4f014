"""The files an MPICH job leaves when it does not end normally, and their removal.

MPICH keeps each node's shared memory in ``/dev/shm/mpich_shm_*`` (3 MB, mapped by
every rank of the node) and removes it at ``MPI_Finalize``; its launcher hydra writes
the node's hwloc topology to ``/tmp/hydra_hwloc_xmlfile_*`` (held open by
``hydra_pmi_proxy``, the ranks' parent, for the ranks to read at ``MPI_Init``) and
removes it when the proxy ends normally.  An ``MPI_Abort``, a signal or a SIGKILL
skips both.  ``release_job_files`` unlinks them as soon as every rank of the node has
used them (``transport.mpi.run`` calls it after the node's first collective), so
nothing a kill does later leaves a file; ``reclaim_job_files`` removes what jobs
killed earlier left (docs/reliability.md).  Linux only (``/proc``); elsewhere both do
nothing.  No mpi4py here: these only read ``/proc`` and unlink files.
"""

import os
import stat
import time
from pathlib import Path

SHM_PREFIX = "/dev/shm/mpich_shm_"                  # MPICH's node memory, one per node
TOPOLOGY_PREFIX = "/tmp/hydra_hwloc_xmlfile_"       # hydra's hwloc topology, per proxy
RECLAIM_GRACE = 10.0   # s: a file younger than this may be a starting job's, not debris


def release_job_files() -> None:
    """Unlink the files of this job that MPICH and its launcher remove only at their
    normal end, which an abort, a signal or a killed process never reaches: MPICH's
    node memory (``/dev/shm/mpich_shm_*``, 3 MB, mapped by this process) and hydra's
    hwloc topology (``/tmp/hydra_hwloc_xmlfile_*``, written by the rank's launcher,
    ``hydra_pmi_proxy``, which holds it open until it exits).

    ``run`` calls it as soon as every rank of the node has passed ``MPI_Init`` (a
    collective of the node): by then each has mapped the memory and read the
    topology, and neither is opened by name again.  Mappings and open files stay valid
    until their processes end, so nothing a kill does afterwards, SIGKILL of a rank or
    of mpiexec included, leaves a file; MPICH treats its own shared windows' files
    (``mpich_shar_tmp*``) the same way.  Idempotent; every rank may call it."""
    for path in _mapped(Path("/proc/self/maps")):
        if path.startswith(SHM_PREFIX):
            _unlink(path)
    for pid in _ancestors():   # hydra_pmi_proxy, mpiexec: whoever made the topology
        for path in _open_files(pid):
            if path.startswith(TOPOLOGY_PREFIX):
                _unlink(path)


def reclaim_job_files(grace: float = RECLAIM_GRACE) -> list[str]:
    """Remove what jobs killed before ``release_job_files`` ran left (a kill while the
    ranks start): this user's ``mpich_shm_*`` and ``hydra_hwloc_xmlfile_*`` files that
    no live process maps or holds open and that are older than ``grace`` seconds (a
    starting job creates and opens its files within microseconds of each other; the
    grace covers that): a file is debris once nothing that could use it is alive, as
    a gone ZeroMQ server's run secret is (``transport.zeromq.common.
    reclaim_secrets``).  Another user's processes cannot be read, nor can they open
    this user's files (MPICH and hydra make them 0600).  Returns the paths removed."""
    now, uid = time.time(), os.getuid()
    candidates = []
    for folder, prefix in (("/dev/shm", SHM_PREFIX), ("/tmp", TOPOLOGY_PREFIX)):
        for path in Path(folder).glob(Path(prefix).name + "*"):
            try:
                info = path.lstat()
            except OSError:
                continue
            if info.st_uid == uid and stat.S_ISREG(info.st_mode) and \
                    now - info.st_mtime > grace:
                candidates.append(str(path))
    if not candidates:
        return []
    held = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            held.update(_mapped(entry / "maps"))
            held.update(_open_files(int(entry.name)))
    removed = [path for path in candidates if path not in held and _unlink(path)]
    return removed


def _mapped(maps: Path) -> list[str]:
    """The files a process maps, from its ``/proc/PID/maps`` (none if unreadable)."""
    try:
        text = maps.read_text()
    except OSError:   # gone, another user's, not Linux
        return []
    return [fields[5] for line in text.splitlines()
            if len(fields := line.split(maxsplit=5)) == 6]


def _open_files(pid: int) -> list[str]:
    """The paths a process holds open, from ``/proc/PID/fd`` (none if unreadable)."""
    paths = []
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return paths
    for fd in fds:
        try:
            paths.append(os.readlink(fd))
        except OSError:
            pass
    return paths


def _ancestors() -> list[int]:
    """This process's parent, its parent's parent, ... up to (not including) init."""
    pids, pid = [], os.getppid()
    while pid > 1 and pid not in pids:
        pids.append(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _unlink(path: str) -> bool:
    if path.endswith(" (deleted)"):   # unlinked already (by another rank)
        return False
    try:
        os.unlink(path)
        return True
    except OSError:   # another rank of the node was first
        return False
