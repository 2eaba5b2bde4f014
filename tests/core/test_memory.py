"""Memory grows with n·s, not n·p: OS over a memory-mapped p = 200,000 source."""

import json
import subprocess
import sys

import numpy as np
from numpy.lib.format import open_memmap

N, P, S = 64, 200_000, 20

PROBE = r"""
import json, sys, tracemalloc
import numpy as np
import asyos
from asyos.streams import NpyStream
path, s = sys.argv[1], int(sys.argv[2])
y = np.load(sys.argv[3])
asyos.fit_os(np.random.default_rng(0).standard_normal((y.size, 50)), y, 5)  # warm-up
def hwm():  # peak resident set of this process (ru_maxrss survives exec: not that)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
rss0 = hwm()
tracemalloc.start()
result = asyos.fit_os(NpyStream(path), y, s, epochs=1, sweep=16)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
rss1 = hwm()
print(json.dumps({"traced_peak": traced, "rss_growth": rss1 - rss0,
                  "kept_bytes": result.kept_bytes, "steps": result.n_steps}))
"""


def test_memory_is_bounded_by_the_kept_set_not_the_data(tmp_path):
    path = tmp_path / "X.npy"
    X = open_memmap(path, mode="w+", dtype=np.float64, shape=(N, P), fortran_order=True)
    rng = np.random.default_rng(0)
    for start in range(0, P, 20_000):
        X[:, start:start + 20_000] = rng.standard_normal((N, 20_000))
    y = X[:, 7] - X[:, 150_000]
    del X
    np.save(tmp_path / "y.npy", y)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(path), str(S),
                           str(tmp_path / "y.npy")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    data_bytes = N * P * 8                     # 102 MB: what holding X would cost
    kept_bytes = N * S * 8
    assert report["steps"] == P + 16   # the pass, then the closing sweep
    assert report["kept_bytes"] < 2 * N * (S + 5) * 8
    # numpy allocations during the run: the kept set, the feature order (8 bytes a
    # feature), and the blocks in flight: the one in use, the one read ahead (prefetch)
    # and the one being read, each reading thread's mask for the NaN/inf check (kept to
    # be used again, ``streams.pool``)
    block_bytes = 256 * N * 8
    masks = 2 * 256 * N
    assert report["traced_peak"] < P * 8 + 3 * block_bytes + masks + 200_000, report
    assert report["traced_peak"] < data_bytes / 25
    # resident memory: the mapped file's pages are released block by block
    assert report["rss_growth"] < 25_000_000, report
    assert kept_bytes < report["traced_peak"]  # sanity: the measure sees the kept set
