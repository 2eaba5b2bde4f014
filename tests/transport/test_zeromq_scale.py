"""The README's ZeroMQ recipe at a realistic size, run as written: a server that sizes
its pipeline for p only once every shard said HELLO must check the workers' pushes
against the re-sized limits (at p = 20,000 a push carries 32 steps where the server's
first limits allowed 16: every push was dropped and the run never ended)."""

import json
import re
import subprocess
import sys
from pathlib import Path

from asyos.solvers.asy import AsyConfig
from asyos.transport.wire import Limits

ROOT = Path(__file__).resolve().parents[2]
GUARD = 300   # a hang guard for the whole recipe, not a speed assertion


def _readme_zeromq_recipe() -> str:
    text = (ROOT / "README.md").read_text()
    [block] = [body for body in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
               if "asyos server --config zmq.toml" in body]
    return block


def test_the_limits_follow_the_pipeline_resized_for_p():
    """One source states the limits, and a configuration re-sized for p states its
    own; the widest limits (a socket's, fixed before any HELLO) admit every push of
    any re-sizing."""
    config = AsyConfig.build(64, 2)
    sized = config.for_features(20_000).for_step(1e-6)
    assert sized.batch > config.batch
    assert Limits.of(sized, 100).batch == sized.batch
    assert Limits.of(config, 100, widest=True).batch >= sized.batch
    given = AsyConfig.build(64, 2, batch=16)
    assert Limits.of(given.for_features(20_000), 100, widest=True).batch == 16


def test_the_readmes_zeromq_recipe_at_p_20000_selects_what_sequential_os_does(
        tmp_path):
    env_bin = Path(sys.executable).parent
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    make = subprocess.run([env_bin / "asyos", "make", "X.npy", "y.npy", "-p", "20000",
                           "-s", "64"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=GUARD)
    assert make.returncode == 0, make.stderr
    recipe = subprocess.run(["bash", "-euo", "pipefail", "-c", _readme_zeromq_recipe()],
                            cwd=tmp_path, capture_output=True, text=True,
                            timeout=GUARD, env={"PATH": f"{env_bin}:/usr/bin:/bin",
                                                "HOME": str(tmp_path)})
    assert recipe.returncode == 0, recipe.stderr[-3000:]
    sequential = subprocess.run([sys.executable, "-m", "asyos.run", "--data", "X.npy",
                                 "--labels", "y.npy", "-s", "64", "--out", "seq.json"],
                                cwd=tmp_path, capture_output=True, text=True,
                                timeout=GUARD)
    assert sequential.returncode == 0, sequential.stderr
    asy = json.loads((tmp_path / "zmq-results.json").read_text())
    seq = json.loads((tmp_path / "seq.json").read_text())
    assert asy["asy"]["lost_shards"] == [] and not asy["asy"]["partial"]
    assert asy["asy"]["batch"] > 16   # re-sized for p, as in the bug
    assert sorted(asy["selected"]) == sorted(seq["selected"])
