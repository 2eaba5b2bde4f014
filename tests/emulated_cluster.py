"""An emulated cluster of H hosts on this one machine: one Linux network namespace per
host, each with an ``eth0`` cabled (a veth pair) to a router namespace, so that MPI
ranks placed on different hosts talk over a real TCP/IP network whose links a test
can shape (a token bucket, ``rate``), slow (a one-way ``delay``) and cut.  Used to see
what the MPI transport does when ranks are not on one node, without a cluster.

Hydra places the ranks: ``Cluster.mpiexec`` starts it in host 0 and gives it a
launcher script that starts each host's proxy in that host's namespace, so
``Split_type(COMM_TYPE_SHARED)`` groups ranks by emulated host as on a real cluster.
UCX would see through the namespaces (one machine) and carry inter-host data in
shared memory; ``UCX_TLS=tcp`` makes it cross the emulated links (``traffic``).

The kernel here has no ``netem``, so ``delay`` is a user-space relay in the router
(this file run with ``--relay``): policy routing sends every packet forwarded between
hosts into one TUN device, the relay holds it for ``delay`` and writes it into a
second one, from which the router forwards it by its main table.

Needs root and the ``ip`` and ``tc`` commands; the addresses (10.232.i.0/24, host i
at .2, the router at .1) exist only inside the namespaces."""

import ctypes
import fcntl
import itertools
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MTU = 65000            # few, large packets: the Python relay handles them one by one
TABLE = "100"          # the router's table that sends forwarded packets to the relay
MPIEXEC = str(Path(sys.executable).with_name("mpiexec"))
NETWORK_ENV = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "eth0"}
_counter = itertools.count()


def rank_pid(pids, rank: int) -> int:
    """The pid, among ``pids``, of MPI rank ``rank`` (hydra gives each its PMI_RANK)."""
    for pid in pids:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"PMI_RANK={rank}".encode() in environ:
            return pid
    raise AssertionError(f"no rank {rank} among {sorted(pids)}")


class Unavailable(RuntimeError):
    """Namespaces cannot be made here (no root, no ``ip``, no veth, tbf or TUN)."""


def address(i: int) -> str:
    return f"10.232.{i}.2"


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _must(*command: str) -> str:
    """Run a set-up command; its failure is ``Unavailable`` with what it said."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise Unavailable(f"no `{command[0]}` command") from None
    if proc.returncode != 0:
        raise Unavailable(f"cannot set up the emulated cluster ({' '.join(command)}): "
                          f"{proc.stderr.strip()}")
    return proc.stdout


@dataclass
class Cluster:
    """``namespaces[i]`` is host i (address ``addresses[i]``, device ``eth0``);
    ``router`` the namespace joining them (its end of host i's cable is ``h{i}``);
    ``relay`` the delay relay's process (None without delay)."""
    tag: str
    namespaces: list[str]
    addresses: list[str]
    router: str
    launcher: str
    relay: subprocess.Popen | None = None
    rate: float | None = None
    delay: float = 0.0
    _routes: list[str] = field(default_factory=list, repr=False)

    def prefix(self, i: int) -> list[str]:
        """The command prefix that runs a process on host i."""
        return ["ip", "netns", "exec", self.namespaces[i]]

    def mpiexec(self, counts, command, env=None) -> list[str]:
        """The argv that runs ``command`` with ``counts[i]`` ranks on host i (ranks
        numbered host by host).  Hydra passes ``-genv`` to every rank whatever the
        caller's environment, so the argv alone makes inter-host data use TCP."""
        if len(counts) > len(self.namespaces) or not all(c >= 0 for c in counts):
            raise ValueError(f"counts {counts} for {len(self.namespaces)} hosts")
        hosts = ",".join(f"{self.addresses[i]}:{c}" for i, c in enumerate(counts) if c)
        options = [item for name, value in {**NETWORK_ENV, **(env or {})}.items()
                   for item in ("-genv", name, str(value))]
        return [*self.prefix(0), MPIEXEC, "-launcher", "ssh", "-launcher-exec",
                self.launcher, "-iface", "eth0", "-hosts", hosts, "-n",
                str(sum(counts)), *options, *command]

    def link(self, i: int, up: bool) -> None:
        """Plug or unplug host i's cable: its ``eth0`` goes down, so nothing crosses
        either way and TCP peers see silence, not a reset or an ICMP error (the
        router keeps its route and a permanent neighbour entry for the host, and
        drops what it forwards to a cable without carrier).  Plugging back restores
        the host's default route, which the kernel removed with the device."""
        ns = self.namespaces[i]
        proc = _ip("-n", ns, "link", "set", "eth0", "up" if up else "down")
        if proc.returncode == 0 and up:
            proc = _ip("-n", ns, "route", "replace", "default", "via", self._routes[i])
        if proc.returncode != 0:
            raise RuntimeError(f"cannot set host {i}'s link {'up' if up else 'down'}: "
                               f"{proc.stderr.strip()}")

    def processes(self) -> list[list[int]]:
        """The pids of the processes on each host (in its namespace)."""
        pids = []
        for ns in self.namespaces:
            proc = _ip("netns", "pids", ns)
            pids.append([int(pid) for pid in proc.stdout.split()]
                        if proc.returncode == 0 else [])
        return pids

    def traffic(self) -> list[int]:
        """Bytes each host's ``eth0`` has sent (all of it crossed the router)."""
        counts = []
        for ns in self.namespaces:
            proc = _ip("-n", ns, "-s", "-j", "link", "show", "eth0")
            if proc.returncode != 0:
                raise RuntimeError(f"cannot read {ns}'s counters: {proc.stderr}")
            counts.append(int(json.loads(proc.stdout)[0]["stats64"]["tx"]["bytes"]))
        return counts


def _launcher(directory: str, namespaces: list[str], cpus=None) -> str:
    """Hydra's ssh launcher calls ``SCRIPT -x HOST "/path/hydra_pmi_proxy" ARGS``
    (the quotes are literal): the script starts the rest, through ``sh -c``, in the
    host's namespace, on the host's ``cpus[i]`` (a ``taskset`` list) where given."""
    cpus = cpus or [None] * len(namespaces)
    cases = "".join(f"  {address(i)}) ns={ns}; cpus={cpu or 'all'} ;;\n"
                    for i, (ns, cpu) in enumerate(zip(namespaces, cpus, strict=True)))
    path = os.path.join(directory, "launch")
    with open(path, "w") as out:
        out.write(f'#!/bin/sh\n[ "$1" = "-x" ] && shift\nhost=$1; shift\n'
                  f'case "$host" in\n{cases}'
                  f'  *) echo "no emulated host $host" >&2; exit 255 ;;\nesac\n'
                  f'[ "$cpus" = all ] && exec ip netns exec "$ns" sh -c "$*"\n'
                  f'exec ip netns exec "$ns" taskset -c "$cpus" sh -c "$*"\n')
    os.chmod(path, 0o755)
    return path


def _shape(ns: str, device: str, rate: float) -> None:
    """A token bucket on ``device``'s egress: ``rate`` bits/s, a burst of at least
    two full packets (tbf drops a packet larger than its bucket) or 0.5 ms at rate,
    and a queue of 10 ms at rate."""
    burst = max(2 * (MTU + 64), int(rate / 8 * 5e-4))
    _must("tc", "-n", ns, "qdisc", "add", "dev", device, "root", "tbf", "rate",
          f"{int(rate)}bit", "burst", str(burst), "latency", "10ms")


def _start_relay(router: str, delay: float) -> subprocess.Popen:
    relay = subprocess.Popen(["ip", "netns", "exec", router, sys.executable,
                              os.path.abspath(__file__), "--relay", "tunA", "tunB",
                              repr(delay)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([relay.stdout], [], [], 20)
    line = relay.stdout.readline() if ready else ""
    if line.strip() != "ready":
        _stop(relay)
        raise Unavailable(f"the delay relay did not start: {line}"
                          f"{relay.stderr.read().strip()}")
    return relay


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


def _kill_inside(namespaces: list[str]) -> None:
    """Processes a test left in the cluster (a hung rank, a server): a deleted
    namespace lives on while a process is in it."""
    for ns in namespaces:
        proc = _ip("netns", "pids", ns)
        for pid in proc.stdout.split() if proc.returncode == 0 else ():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


@contextmanager
def emulated_cluster(hosts: int = 3, rate: float | None = None, delay: float = 0.0,
                     cpus=None):
    """``hosts`` namespaces behind a router, links shaped to ``rate`` bits/s each way
    (None: as fast as veth goes) and packets between hosts held ``delay`` seconds
    one way; everything (relay, namespaces, launcher script) removed on the way out,
    also on an exception or KeyboardInterrupt.  ``cpus``: each host's CPUs (a
    ``taskset`` list such as "1" or "0-3", None for all), so that hosts do not share
    cores as a real cluster's do not (a host's ranks size their BLAS threads and
    polling to the cores they may use)."""
    if not 1 <= hosts <= 250:
        raise ValueError(f"hosts must be 1..250, not {hosts}")
    tag = f"{os.getpid()}-{next(_counter)}"
    router = f"asyos-c{tag}-r"
    namespaces = [f"asyos-c{tag}-h{i}" for i in range(hosts)]
    made: list[str] = []
    directory = tempfile.mkdtemp(prefix="asyos-cluster-")
    relay = None
    try:
        for ns in (router, *namespaces):
            try:
                proc = _ip("netns", "add", ns)
            except FileNotFoundError:
                raise Unavailable("no `ip` command: cannot make network namespaces"
                                  ) from None
            if proc.returncode != 0:
                raise Unavailable(f"network namespaces not permitted here: "
                                  f"{proc.stderr.strip()}")
            made.append(ns)
            _must("ip", "-n", ns, "link", "set", "lo", "up")
        _must("ip", "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1",
              "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
        routes = []
        for i, ns in enumerate(namespaces):
            gateway, device = f"10.232.{i}.1", f"h{i}"
            _must("ip", "link", "add", device, "netns", router, "mtu", str(MTU),
                  "type", "veth", "peer", "name", "eth0", "netns", ns, "mtu", str(MTU))
            _must("ip", "-n", router, "addr", "add", f"{gateway}/24", "dev", device)
            _must("ip", "-n", ns, "addr", "add", f"{address(i)}/24", "dev", "eth0")
            _must("ip", "-n", router, "link", "set", device, "up")
            _must("ip", "-n", ns, "link", "set", "eth0", "up")
            _must("ip", "-n", ns, "route", "add", "default", "via", gateway)
            mac = json.loads(_must("ip", "-n", ns, "-j", "link", "show", "eth0")
                             )[0]["address"]
            _must("ip", "-n", router, "neigh", "replace", address(i), "lladdr", mac,
                  "dev", device, "nud", "permanent")
            routes.append(gateway)
            if rate:
                _shape(ns, "eth0", rate)
                _shape(router, device, rate)
        if delay > 0:
            for name in ("tunA", "tunB"):
                _must("ip", "-n", router, "tuntap", "add", "dev", name, "mode", "tun")
                _must("ip", "-n", router, "link", "set", name, "mtu", str(MTU), "up")
            _must("ip", "netns", "exec", router, "sysctl", "-qw",
                  "net.ipv4.conf.tunA.rp_filter=0", "net.ipv4.conf.tunB.rp_filter=0")
            relay = _start_relay(router, delay)
            _must("ip", "-n", router, "route", "add", "default", "dev", "tunA",
                  "table", TABLE)
            for i in range(hosts):
                _must("ip", "-n", router, "rule", "add", "iif", f"h{i}", "lookup",
                      TABLE)
        cluster = Cluster(tag, namespaces, [address(i) for i in range(hosts)], router,
                          _launcher(directory, namespaces, cpus), relay, rate, delay)
        cluster._routes = routes
        yield cluster
    finally:
        if relay is not None:
            _stop(relay)
        _kill_inside(made)
        for ns in made:
            _ip("netns", "del", ns)
        shutil.rmtree(directory, ignore_errors=True)


# --- the delay relay: run in the router's namespace as a script -------------------

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
PR_SET_PDEATHSIG, PR_SET_TIMERSLACK = 1, 29


def _attach(name: str) -> int:
    """Open the TUN device ``name`` (made with ``ip tuntap``, no packet info)."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def relay(source: str, sink: str, delay: float) -> None:
    """Every packet read from ``source`` is written into ``sink`` ``delay`` seconds
    after it was read, in order.  Sleeps in ``select`` until the next packet or the
    next one due, without spinning.  A 1 ns timer slack (the default 50 µs would be
    added to every packet) and an estimate of how late the timed wake-ups come (tens
    of µs in a VM), by which each is set early, make the delay as precise as the
    kernel allows."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)   # pytest killed: go too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    inbound, outbound = _attach(source), _attach(sink)
    os.set_blocking(inbound, False)
    print("ready", flush=True)
    held: deque = deque()
    late = 0.0              # how late a timed wake-up comes, a moving average
    clock, read, write = time.monotonic, os.read, os.write
    while True:
        wake = held[0][0] - late if held else None
        timeout = max(0.0, wake - clock()) if held else None
        readable, _, _ = select.select([inbound], [], [], timeout)
        now = clock()
        if readable:
            due = now + delay
            try:
                while True:
                    held.append((due, read(inbound, 65536)))
            except BlockingIOError:
                pass
        elif timeout:       # a timed wake-up: learn its lateness (capped)
            late += 0.1 * (min(now - wake, delay / 2) - late)
        while held and held[0][0] - late <= now:
            try:
                write(outbound, held.popleft()[1])
            except OSError:     # a packet the kernel refuses is lost, as on a wire
                pass


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--relay":
        relay(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit(f"usage: {sys.argv[0]} --relay SOURCE_TUN SINK_TUN DELAY_SECONDS")
