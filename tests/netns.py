"""Two Linux network namespaces joined by a veth pair: a real network between a
server and a worker on one machine, whose link a test can cut and restore.  Used by
the ZeroMQ tests and by the fault suite (benchmarks/faults.py).  Needs root and the
``ip`` command; the addresses (10.231.0.0/24) exist only inside the two namespaces."""

import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass

SERVER_ADDRESS = "10.231.0.1"
WORKER_ADDRESS = "10.231.0.2"


class Unavailable(RuntimeError):
    """Namespaces cannot be made here (no root, no ``ip``, no veth support)."""


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@dataclass
class Network:
    """``server`` and ``worker``: command prefixes that run a process in the server's
    namespace or the worker's; ``link(up)`` plugs or unplugs the cable between them
    (the worker's end of the veth pair goes down, so nothing crosses either way, and
    TCP connections see silence, not a reset, as on a cut network)."""
    server: list[str]
    worker: list[str]
    worker_namespace: str
    worker_device: str

    def link(self, up: bool) -> None:
        proc = _ip("-n", self.worker_namespace, "link", "set", self.worker_device,
                   "up" if up else "down")
        if proc.returncode != 0:
            raise RuntimeError(f"cannot set the link {'up' if up else 'down'}: "
                               f"{proc.stderr.strip()}")


@contextmanager
def veth_pair():
    """The two namespaces, removed (with their veth pair) on the way out."""
    tag = f"{os.getpid() % 100000}"
    names = [f"asyos-s{tag}", f"asyos-w{tag}"]
    devices = [f"va{tag}", f"vb{tag}"]
    try:
        probe = _ip("netns", "add", names[0])
    except FileNotFoundError:
        raise Unavailable("no `ip` command: cannot make network namespaces") from None
    if probe.returncode != 0:
        raise Unavailable(f"network namespaces not permitted here: "
                          f"{probe.stderr.strip()}")
    try:
        for step in (["netns", "add", names[1]],
                     ["link", "add", devices[0], "type", "veth", "peer", "name",
                      devices[1]],
                     ["link", "set", devices[0], "netns", names[0]],
                     ["link", "set", devices[1], "netns", names[1]],
                     ["-n", names[0], "addr", "add", f"{SERVER_ADDRESS}/24", "dev",
                      devices[0]],
                     ["-n", names[1], "addr", "add", f"{WORKER_ADDRESS}/24", "dev",
                      devices[1]],
                     ["-n", names[0], "link", "set", devices[0], "up"],
                     ["-n", names[1], "link", "set", devices[1], "up"],
                     ["-n", names[0], "link", "set", "lo", "up"],
                     ["-n", names[1], "link", "set", "lo", "up"]):
            proc = _ip(*step)
            if proc.returncode != 0:
                raise Unavailable(f"cannot set up namespaces (ip {' '.join(step)}): "
                                  f"{proc.stderr.strip()}")
        yield Network(["ip", "netns", "exec", names[0]],
                      ["ip", "netns", "exec", names[1]], names[1], devices[1])
    finally:
        for name in names:
            _ip("netns", "del", name)
