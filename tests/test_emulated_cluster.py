"""``mpiexec`` across three emulated hosts (network namespaces, tests/emulated_cluster.py)
with node leaders: the run crosses real, shaped and delayed links and gives sequential
OS's answer; nothing is left behind."""

import json
import os
import subprocess
import sys

import pytest
from emulated_cluster import Unavailable, emulated_cluster

GUARD = 300
PROBLEM = ["-p", "2000", "-s", "16", "-n", "600", "--quiet", "--force"]


def _shm():
    return {name for name in os.listdir("/dev/shm")}


@pytest.mark.parametrize("seed", [3, 11])
def test_node_leaders_across_three_emulated_hosts_give_sequential_os(tmp_path, seed):
    before = _shm()
    try:
        cluster_context = emulated_cluster(3, rate=1e9, delay=1e-4)
        cluster = cluster_context.__enter__()
    except Unavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    try:
        sent = cluster.traffic()
        argv = cluster.mpiexec([1, 3, 3], [sys.executable, "-m", "asyos.run",
                                           *PROBLEM, "--seed", str(seed), "--leaders",
                                           "--out", str(tmp_path / "asy.json")])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=GUARD)
        sent = [b - a for a, b in zip(sent, cluster.traffic())]
        namespaces = [*cluster.namespaces, cluster.router]
    finally:
        cluster_context.__exit__(None, None, None)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    alone = subprocess.run([sys.executable, "-m", "asyos.run", *PROBLEM, "--seed",
                            str(seed), "--out", str(tmp_path / "os.json")],
                           capture_output=True, text=True, timeout=GUARD)
    assert alone.returncode == 0, alone.stderr[-3000:]
    asy, os_ = (json.loads((tmp_path / f"{name}.json").read_text())
                for name in ("asy", "os"))
    assert sorted(asy["selected"]) == sorted(os_["selected"])
    assert asy["objective"] == pytest.approx(os_["objective"], abs=1e-4)
    leaders = asy["asy"]["leaders"]
    assert [leader["rank"] for leader in leaders] == [1, 4]
    assert all(1 <= leader["bundles"] <= leader["pushes"] for leader in leaders)
    assert asy["asy"]["n_workers"] == 4
    # every host's pushes or views crossed its emulated cable
    assert all(count > 100_000 for count in sent), sent
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    assert not any(ns in listed.stdout for ns in namespaces)
    assert _shm() <= before
