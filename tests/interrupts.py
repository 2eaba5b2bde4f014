"""One interrupted ``python -m asyos.run --workers 3`` run, as the tests
(tests/transport/test_interrupts.py) and benchmarks/interrupts.py make it.

A run is started in one of three contexts, SIGINT is sent at a chosen moment, and the
outcome says whether the run ended within ``limit`` seconds of the signal with exit
status 130 and the one line "asyos: interrupted" on stderr, leaving no process of its
own (found by a marker in their environment, which forked workers inherit) and
nothing new in /dev/shm.  Contexts:

- ``normal``: started as from a terminal, in its own process group; SIGINT goes to
  the whole group, as ^C does (the forked workers get it too);
- ``ignored``: the same, but with SIGINT inherited ignored (SIG_IGN), as a job
  started with ``cmd &`` by a non-interactive script inherits it;
- ``script &``: literally ``bash -c 'python -m asyos.run … & wait $!'``; SIGINT goes to
  the Python process (``kill -INT $pid``), and bash's exit status is its status.

A signal sent before the interpreter has a handler for SIGINT would meet Python's
own start-up, not asyos: the moment is never earlier than when the process catches
SIGINT (``SigCgt`` in /proc; in the ``ignored`` contexts that is asyos's entry), plus
``SETTLE`` seconds in the ``normal`` context, where Python catches it before it has
read asyos's first line.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
MARKER = "ASYOS_INTERRUPT_TRY"
WORKERS = 3
# long enough that no run ends before its signal, however warm the kernel cache
COMMAND = ["-m", "asyos.run", "--workers", str(WORKERS), "-p", "40000", "-s", "200",
           "--epochs", "60", "--quiet"]
CONTEXTS = ("normal", "ignored", "script &")
SETTLE = 0.15
UNCAUGHT = 2.0   # a run that does not catch SIGINT by then is sent it anyway
NOTICES = ("compiling kernels", "kernels compiled")   # a first run's, on its own lines


class Outcome(NamedTuple):
    context: str
    moment: float          # seconds after the start the signal was sent
    phase: str             # "start-up", "forking" or "running" at that moment
    status: int | None     # None: still running after the limit (then SIGKILLed)
    seconds: float         # from the signal to the end (or the limit)
    stderr: str
    left: list             # pids of the run still alive after it ended
    shm: list              # new names in /dev/shm

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines()
                if line.strip() and not any(notice in line for notice in NOTICES)]

    @property
    def holds(self) -> bool:
        return self.status == 130 and self.lines == ["asyos: interrupted"] and \
            not self.left and not self.shm


def _shm() -> set:
    """Names in /dev/shm, less MPICH's: other jobs on the machine (the MPI tests) make
    those, and a ``--workers`` run uses no MPI."""
    names = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    return {name for name in names if not name.startswith("mpich_shm_")}


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in
                Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _catches_sigint(pid: int) -> bool:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except OSError:
        pass
    return False


def marked(marker: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``MARKER=marker``."""
    needle = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in "ZX":
            found.append(int(entry.name))
    return found


def interrupt(context: str, delay: float, *, at_fork: bool = False, limit: float = 5.0,
              root=ROOT, python: str = sys.executable, command=COMMAND) -> Outcome:
    """Start a run in ``context``, send SIGINT ``delay`` seconds after the start (or,
    ``at_fork``, as soon as its first worker exists), and wait at most ``limit``
    seconds for it to end."""
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    before = _shm()
    line = [python, *command]
    if context == "script &":
        script = " ".join(f"'{word}'" for word in line) + " & wait $!"
        proc = subprocess.Popen(["bash", "-c", script], cwd=root, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    else:
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) \
            if context == "ignored" else None
        proc = subprocess.Popen(line, cwd=root, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, preexec_fn=ignore,
                                start_new_session=True)
    try:
        start = time.monotonic()
        run = None if context == "script &" else proc.pid   # the Python process
        executable = os.path.realpath(python)
        caught = None
        while proc.poll() is None:
            now = time.monotonic() - start
            if run is None:   # bash's child, once it is Python (not bash before exec)
                for child in _children(proc.pid):
                    try:
                        if os.path.realpath(f"/proc/{child}/exe") == executable:
                            run = child
                    except OSError:
                        pass
            if caught is None and run is not None and _catches_sigint(run):
                caught = now + (SETTLE if context == "normal" else 0.0)
            workers = len(_children(run)) if run is not None else 0
            due = workers > 0 if at_fork else now >= delay
            if due and (caught is not None and now >= caught or now >= delay + UNCAUGHT):
                break   # (a run that never catches SIGINT gets it all the same)
            time.sleep(0.001)
        moment = time.monotonic() - start
        phase = "start-up" if workers == 0 else \
            "forking" if workers < WORKERS - 1 else "running"
        if proc.poll() is None:
            if context == "script &" and run is not None:
                os.kill(run, signal.SIGINT)
            else:
                os.killpg(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        try:
            _, stderr = proc.communicate(timeout=limit)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            status = None
        seconds = time.monotonic() - sent
        left = marked(marker)
        for _ in range(20):   # a worker ended as its parent exited: reaped meanwhile
            if not left:
                break
            time.sleep(0.05)
            left = marked(marker)
        if status is None:
            for pid in marked(marker):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            _, stderr = proc.communicate()
    finally:   # whatever happened, nothing of the run outlives the try
        for pid in marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Outcome(context, moment, phase, status, seconds, stderr, left,
                   sorted(_shm() - before))
