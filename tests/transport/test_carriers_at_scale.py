"""Every carrier end to end at a realistic size, p = 20,000: ``--workers 2``,
``mpiexec -n 3`` and ``--simulate 2`` select what sequential OS selects on the
embedded problem (ZeroMQ's recipe: ``test_zeromq_scale.py``).  A limit fixed before
the pipeline is sized for p bites only at such sizes (the ZeroMQ server's did, from
p ≈ 16,500)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_mpi import MPIEXEC

ROOT = Path(__file__).resolve().parents[2]
GUARD = 300   # a hang guard, not a speed assertion
PROBLEM = ["-p", "20000", "-s", "64", "--quiet"]
SEEDS = [0, 3]


def _run(prefix, carrier, out: Path, seed: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_"))}
    proc = subprocess.run([*prefix, sys.executable, "-m", "asyos.run", *PROBLEM,
                           "--seed", str(seed), *carrier, "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=GUARD)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module", params=SEEDS)
def sequential(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"seq{request.param}")
    return request.param, _run([], [], folder / "r.json", request.param)


CARRIERS = {
    "workers": ([], ["--workers", "2"]),
    "simulate": ([], ["--simulate", "2"]),
    "mpiexec": ([MPIEXEC, "-n", "3"], []),
}


@pytest.mark.parametrize("carrier", CARRIERS)
def test_every_carrier_at_p_20000_selects_what_sequential_os_does(sequential, carrier,
                                                                  tmp_path):
    seed, reference = sequential
    prefix, flags = CARRIERS[carrier]
    if carrier == "mpiexec" and MPIEXEC is None:
        pytest.skip("no mpiexec beside this Python")
    result = _run(prefix, flags, tmp_path / "r.json", seed)
    assert reference["truth"]["recall"] == 1.0   # the planted support, found
    assert sorted(result["selected"]) == sorted(reference["selected"])
    assert result["asy"]["u_check_max_abs_diff"] < 1e-9
    assert abs(result["objective"] / reference["objective"] - 1) < 1e-6
