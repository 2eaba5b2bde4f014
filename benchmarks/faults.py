"""The fault suite, full versions: Asy-OS over ZeroMQ on real processes, disturbed.

Each scenario runs ``asyos server`` and two ``asyos worker`` processes (a synthetic
regression problem with a known support) with the pipeline users get by default,
disturbs them, and compares the outcome with an undisturbed run: exit statuses,
whether every step of every shard was done exactly once, the u-check, the selected
features and the final objective against the undisturbed run's, the recall of the
true support, the server's peak memory, and any file the run left behind in /tmp,
/dev/shm, the run directory (``~/.asyos/runs``) or beside its results.  A scenario
either gives the undisturbed result or is refused with one line and a non-zero exit,
as it says.  The short versions of these runs are tests
(tests/transport/test_zeromq.py); docs/reliability.md gives the table.

    python benchmarks/faults.py [--epochs 4] [--pipeline default|plain]
                                [--only partition kill-worker-mid ...]

The hostile scenarios start an attacker process (this script with ``--attack``): a
forged worker that says HELLO as shard 0 with a wrong secret in it and pushes, a fuzz
of 10,000 random and mutated messages (both past the handshake, as a process of the
run's user), the same after a resume with the run's real id, and raw floods from a
peer without the secret.  ``partition`` puts worker 0 in another network namespace
behind a veth pair (tests/netns.py; needs root) and unplugs it past the heartbeat
timeout.  Run it on a quiet machine: new files in /tmp from other programs would be
counted as the run's.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the veth pair and floods the tests use
from floods import FLOODS, flood  # noqa: E402

from asyos.core.sweep import sweep_rounds, sweep_size  # noqa: E402
from netns import SERVER_ADDRESS, Unavailable, veth_pair  # noqa: E402

PROBLEM = ["-p", "3000", "-s", "20", "--seed", "8", "--samples", "528"]
GUARD = 600
PIPELINES = {"default": [], "plain": ["--window", "1", "--batch", "1"]}
# passes per pipeline: the default pipeline runs 4 passes in about a second here, too
# short to restart a server in the middle of it
EPOCHS = {"default": 12, "plain": 4}
RESULTS = {"r.json", "ck.npz", "keys", "runs"}   # what a run may leave in its folder


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:   # gone
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Stalled(RuntimeError):
    """The run ended before the disturbance could be made."""


class Run:
    """A server and its two workers, started as a user would.  With a ``network``
    (tests/netns.py) the server and worker 1 run in one namespace and worker 0 in
    the other, with CURVE keys, as across machines."""

    def __init__(self, tmp: Path, epochs: int, pipeline: list, *server_args,
                 env=None, worker_args=(), network=None):
        self.tmp, self.env = tmp, {**os.environ, **(env or {})}
        self.network, self.worker_args = network, list(worker_args)
        self.env["ASYOS_RUN_DIR"] = str(tmp / "runs")
        self.out = tmp / "r.json"
        host = SERVER_ADDRESS if network else "127.0.0.1"
        self.host, self.port = host, _port()
        self.endpoint = f"tcp://{host}:{self.port}"
        self.keys = []
        if network:
            subprocess.run([sys.executable, "-m", "asyos", "keys", str(tmp / "keys")],
                           env=self.env, check=True, capture_output=True)
            self.keys = ["--keys", str(tmp / "keys")]
        self.server_args = ["--bind", self.endpoint, "--workers", "2", *PROBLEM,
                            "--epochs", str(epochs), "--out", str(self.out), "--force",
                            *pipeline, *self.keys, "-v", *server_args]
        self.log: list[str] = []
        self.peak_rss, self.started_at = 0.0, None
        self.server = self.start_server()
        self.workers = [self.worker(t) for t in range(2)]
        self._watch = threading.Thread(target=self._watch_memory, daemon=True)
        self._watch.start()

    def start(self, command, *args, prefix=()):
        return subprocess.Popen([*prefix, sys.executable, "-m", "asyos", command,
                                 *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def start_server(self, *extra):
        return self.start("server", *self.server_args, *extra,
                          prefix=self.network.server if self.network else ())

    def worker(self, t: int):
        prefix = () if not self.network else \
            self.network.worker if t == 0 else self.network.server
        return self.start("worker", "--connect", self.endpoint, "--shard", f"{t}/2",
                          *PROBLEM, *self.keys, *self.worker_args, prefix=prefix)

    def _watch_memory(self) -> None:
        """The server's peak resident memory, through restarts."""
        while self.server.poll() is None or self._restarting:
            self.peak_rss = max(self.peak_rss, _rss_mb(self.server.pid))
            time.sleep(0.05)

    _restarting = False

    def kill_server(self) -> None:
        self._restarting = True
        self.server.kill()
        self.server.wait()

    def restart_server(self, *extra) -> None:
        """Start the killed server again with ``extra`` flags."""
        self.server = self.start_server(*extra)
        self._restarting = False

    def wait_for(self, text: str) -> None:
        """Read the server's log until a line holds ``text``."""
        for line in self.server.stderr:
            self.log.append(line)
            if text in line:
                return
        raise Stalled(f"the server ended before it logged {text!r}")

    def wait_started(self) -> None:
        self.wait_for("all 2 shards here")
        self.started_at = time.perf_counter()

    def finish(self, *extra) -> dict:
        codes, errors = [], []
        for proc in (self.server, *self.workers, *extra):
            try:
                _, err = proc.communicate(timeout=GUARD)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            codes.append(proc.returncode)
            errors.append(err or "")
        self._watch.join()
        result = json.loads(self.out.read_text()) if self.out.exists() else None
        return {"codes": codes, "result": result, "server_error": errors[0],
                "peak_rss": self.peak_rss}


def attack(endpoint: str, count: int, checkpoint: str | None = None,
           seed: int = 0) -> None:
    """Send ``count`` hostile messages to the server at ``endpoint``: forged HELLOs
    (shard 0, a wrong secret in the HELLO), forged pulls and pushes, random frames,
    and those messages with a byte flipped or a frame cut, dropped or repeated.  The
    pulls and pushes carry a guessed run id, or with ``checkpoint`` the run's real one
    (read from the checkpoint file, as a stranger after a resume could) and every
    early configuration tag.  A peer without the run secret is cut off at ZeroMQ's
    handshake before any message is read, so to reach the decoder and the session
    the attacker is a process of the run's own user, which can read the secret file
    (the trust boundary of docs/reliability.md)."""
    import zmq

    from asyos.solvers import messages as msg
    from asyos.transport.wire import encode
    from asyos.transport.zeromq.common import plain_client, read_secret, secret_path

    n = 528
    rng = np.random.default_rng(seed)
    if checkpoint:
        with np.load(checkpoint) as saved:
            run_id = int(saved["run_id"])
    else:
        run_id = int(rng.integers(1, 2**62))
    push = msg.Push(1, 0, np.array([0]), np.full(n, 1e3), np.array([0]),
                    np.array([1e3]), np.array([1e3]), position=1)
    forged = [encode(msg.Hello(2, 1500, n, 1.0, n_features=3000, token="forged"), 0)]
    for tag in range(4):
        forged += [encode(msg.Pull(), 0, run_id=run_id, tag=tag),
                   encode(push, 0, run_id=run_id, tag=tag)]
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.linger = 5000   # deliver every message before the process exits
    sock.sndtimeo = 5000   # refused at the handshake: give up, never hang
    token = read_secret(secret_path(endpoint))
    if token:
        plain_client(sock, token)
    sock.connect(endpoint)
    for k in range(count):
        frames = [bytearray(f) for f in forged[k % len(forged)]]
        kind = k % 5
        if kind == 0:
            frames = [rng.bytes(int(rng.integers(0, 80)))
                      for _ in range(int(rng.integers(1, 6)))]
        elif kind == 1:
            f = frames[int(rng.integers(len(frames)))]
            if f:
                f[int(rng.integers(len(f)))] ^= 1 << int(rng.integers(8))
        elif kind == 2:
            f = int(rng.integers(len(frames)))
            frames[f] = frames[f][:int(rng.integers(len(frames[f]) + 1))]
        elif kind == 3 and len(frames) > 1:
            frames.pop(int(rng.integers(1, len(frames))))
        elif kind == 4:
            frames.append(frames[-1])
        try:
            sock.send_multipart([bytes(f) for f in frames])
        except zmq.Again:
            break
        if k % 100 == 0:
            time.sleep(0.01)   # spread over the run
    sock.close()


class Scenario(NamedTuple):
    """``disturb(run)`` returns extra processes to wait for; ``refused``: the
    scenario must end with the server's exit 2 and one line naming the problem
    instead of a result."""
    disturb: object
    flags: tuple = ()
    env: dict | None = None
    worker_args: tuple = ()
    network: bool = False
    refused: bool = False


def scenarios(seconds: float) -> dict:
    """name → Scenario; ``seconds`` is the undisturbed run's length."""
    def kill_worker(at):
        def disturb(run):
            run.wait_started()
            time.sleep(at * seconds)
            run.workers[0].kill()
            run.workers[0].wait()
            return [run.worker(0)]
        return disturb

    def kill_server(at, damage=False):
        def disturb(run):
            run.wait_started()
            time.sleep(at * seconds)
            run.kill_server()
            if damage:   # a kill during a copy, a full disk: half a checkpoint
                checkpoint = run.tmp / "ck.npz"
                checkpoint.write_bytes(checkpoint.read_bytes()[:checkpoint.stat()
                                                               .st_size // 2])
            run.restart_server("--resume")
            return []
        return disturb

    def resume_then_kill_worker(run):
        """The liveness of a resumed server: a worker killed after the resume is
        declared lost and its replacement takes the shard over."""
        kill_server(0.3)(run)
        run.wait_for("shard 0/2 joins")
        run.workers[0].kill()
        run.workers[0].wait()
        run.wait_for("lost")
        return [run.worker(0)]

    def stranger_after_resume(run):
        kill_server(0.3)(run)
        run.wait_for("resumed run")
        return [attacker(run, 500, "--checkpoint", str(run.tmp / "ck.npz"))]

    def pause(run):
        run.wait_started()
        time.sleep(0.3 * seconds)
        run.workers[0].send_signal(signal.SIGSTOP)
        time.sleep(4.0)   # beyond --heartbeat-timeout 2: declared lost
        run.workers[0].send_signal(signal.SIGCONT)
        return []

    def replace_paused(run):
        run.wait_started()
        time.sleep(0.3 * seconds)
        run.workers[0].send_signal(signal.SIGSTOP)
        extra = [run.worker(0)]
        time.sleep(1.0)
        run.workers[0].send_signal(signal.SIGCONT)
        return extra

    def partition(run):
        run.wait_started()
        time.sleep(0.2 * seconds)
        run.network.link(up=False)
        try:
            run.wait_for("lost")   # past --heartbeat-timeout 2
            time.sleep(1.0)
        finally:
            run.network.link(up=True)
        return []

    def attacker(run, count, *args):
        return subprocess.Popen([sys.executable, __file__, "--attack", run.endpoint,
                                 str(count), *args], env=run.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def hostile(count):
        def disturb(run):
            run.wait_started()
            time.sleep(0.2 * seconds)
            return [attacker(run, count)]
        return disturb

    def flooded(kind, insider=False):
        def disturb(run):
            run.wait_started()
            time.sleep(0.1 * seconds)
            secret = Path(run.env["ASYOS_RUN_DIR"]) / f"{run.host}-{run.port}.secret"
            password = secret.read_text().strip() if insider else None
            for _ in range(3):   # three connections, 3 s each
                flood(run.host, run.port, FLOODS[kind], 3.0, password)
            return []
        return disturb

    checkpoint = ("--checkpoint", "CK", "--checkpoint-every", "0.2")
    give_up = ("--server-timeout", "10")   # the workers of a refused server
    table = {
        "repeat": Scenario(lambda run: []),   # how far two undisturbed runs differ
        "drop30": Scenario(lambda run: [], ("--resend-after", "0.05"),
                           {"ASYOS_DROP_PERCENT": "30"}, ("--resend-after", "0.05")),
        "pause-beyond-timeout": Scenario(pause, ("--heartbeat-timeout", "2")),
        "replace-paused": Scenario(replace_paused),
        "partition": Scenario(partition, ("--heartbeat-timeout", "2"), network=True),
        "forged-worker": Scenario(hostile(50)),
        "fuzz-10000": Scenario(hostile(10_000)),
        "flood-endless-message": Scenario(flooded("endless-message")),
        "flood-empty-frames": Scenario(flooded("empty-frames")),
        "insider-endless-message": Scenario(flooded("endless-message", True)),
        "insider-empty-frames": Scenario(flooded("empty-frames", True)),
        "resume-then-kill-worker": Scenario(resume_then_kill_worker,
                                            (*checkpoint, "--heartbeat-timeout", "3")),
        "stranger-after-resume": Scenario(stranger_after_resume, checkpoint),
        "damaged-checkpoint": Scenario(kill_server(0.3, damage=True), checkpoint,
                                       worker_args=give_up, refused=True),
        "unwritable-out": Scenario(lambda run: [], ("--out", "/proc/r.json"),
                                   worker_args=give_up, refused=True),
    }
    for name, at in (("early", 0.1), ("mid", 0.5), ("late", 0.9)):
        table[f"kill-worker-{name}"] = Scenario(kill_worker(at))
        table[f"kill-server-{name}"] = Scenario(kill_server(at), checkpoint)
    return table


def _entries() -> set[str]:
    """What lies in the shared places a run could leave debris."""
    places = [Path(tempfile.gettempdir()), Path("/dev/shm"),
              Path.home() / ".asyos" / "runs"]
    return {str(entry) for place in places if place.is_dir()
            for entry in place.iterdir()}


def run_scenario(name: str, scenario: Scenario, epochs: int, pipeline: list) -> dict:
    before = _entries()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        flags = [str(tmp / "ck.npz") if f == "CK" else f for f in scenario.flags]
        try:
            network = veth_pair() if scenario.network else nullcontext()
            with network as net:
                run = Run(tmp, epochs, pipeline, *flags, env=scenario.env,
                          worker_args=scenario.worker_args, network=net)
                try:
                    extra = scenario.disturb(run)
                except Stalled as exc:
                    run.finish()
                    return {"name": name, "skipped": str(exc)}
                outcome = run.finish(*extra)
        except Unavailable as exc:
            return {"name": name, "skipped": str(exc)}
        if run.started_at:   # the run's own length, from all workers here to the end
            outcome["seconds"] = time.perf_counter() - run.started_at
        kept = RESULTS | {(outcome["result"] or {}).get("arrays")}
        left = [entry.name for entry in tmp.iterdir() if entry.name not in kept]
        left += [str(entry) for entry in (tmp / "runs").glob("*")]
    outcome["debris"] = left + sorted(_entries() - before - {str(tmp)})
    outcome["name"] = name
    return outcome


OBJECTIVE_TOLERANCE = 1e-4   # relative, against the undisturbed run: the same features
#                              give the same objective (the server's joint refit)


def _verdict(outcome: dict, reference: dict, epochs: int) -> tuple[str, bool]:
    """One row of the table and whether the scenario holds."""
    result, codes = outcome["result"], outcome["codes"]
    memory = f"{outcome['peak_rss']:>5.0f}"
    debris = len(outcome["debris"])
    if result is None:
        lines = [line for line in outcome["server_error"].strip().splitlines()
                 if line.startswith("asyos: error")]
        said = "refused: " + lines[0][len("asyos: error: "):][:48] if lines else \
            "no result"
        return f"{str(codes):<16} {said:<59} {memory} {debris:>6}", \
            bool(lines) and codes[0] == 2 and not debris
    asy, ref = result["asy"], reference["result"]
    steps = sum(w["steps"] for w in asy["workers"])
    ratio = result["objective"] / ref["objective"]
    moved = len(set(result["selected"]) ^ set(ref["selected"])) // 2
    recall = result["truth"]["recall"]
    # every pass over p = 3000, then each worker's closing sweep in its rounds
    swept = 2 * sweep_rounds(2) * sweep_size("auto", 20, "fitted", epochs)
    holds = (steps == epochs * 3000 + swept and asy["u_check_max_abs_diff"] < 1e-9
             and moved == 0 and abs(ratio - 1) <= OBJECTIVE_TOLERANCE and codes[0] == 0
             and outcome["peak_rss"] < reference["peak_rss"] + 64 and not debris)
    return (f"{str(codes):<16} {steps:>6} {asy['u_check_max_abs_diff']:>9.1e} "
            f"{ratio - 1:>+10.1e} {moved:>6} {recall:>7.2f} {asy['refused_messages']:>8} "
            f"{memory} {debris:>6}"), holds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int,
                        help="passes (default 12, or 4 with --pipeline plain)")
    parser.add_argument("--pipeline", choices=PIPELINES, default="default",
                        help="the server's default pipeline, or one round trip per "
                        "step (--window 1 --batch 1)")
    parser.add_argument("--only", nargs="+", help="scenarios to run (default: all)")
    parser.add_argument("--attack", nargs=2, metavar=("ENDPOINT", "COUNT"),
                        help=argparse.SUPPRESS)   # the attacker process
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attack:
        return attack(args.attack[0], int(args.attack[1]), args.checkpoint)
    pipeline = PIPELINES[args.pipeline]
    args.epochs = args.epochs or EPOCHS[args.pipeline]
    base = run_scenario("undisturbed", Scenario(lambda run: run.wait_started() or []),
                        args.epochs, pipeline)
    table = scenarios(base["seconds"])
    unknown = set(args.only or ()) - set(table)
    if unknown:
        parser.error(f"no scenario {', '.join(sorted(unknown))}; "
                     f"there are {', '.join(table)}")
    names = args.only or list(table)
    print(f"{'scenario':<24} {'exit codes':<16} {'steps':>6} {'u-check':>9} "
          f"{'Δobjective':>10} {'moved':>6} {'recall':>7} {'refused':>8} {'MB':>5} "
          f"{'debris':>6} {'holds':>5}", flush=True)
    for name in ["undisturbed", *names]:
        outcome = base if name == "undisturbed" else run_scenario(
            name, table[name], args.epochs, pipeline)
        if "skipped" in outcome:
            print(f"{name:<24} skipped: {outcome['skipped']}", flush=True)
            continue
        row, holds = _verdict(outcome, base, args.epochs)
        print(f"{name:<24} {row} {'yes' if holds else 'NO':>5}", flush=True)
        for entry in outcome["debris"]:
            print(f"{'':<24} left behind: {entry}", flush=True)


if __name__ == "__main__":
    main()
