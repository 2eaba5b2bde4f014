"""The README's ZeroMQ recipe at growing p, against sequential OS on the same files.

For each p: ``asyos make X.npy y.npy -p P -s 64``, then the README's block (the TOML
file, ``asyos server`` and two ``asyos worker``) verbatim, then ``asyos run --data
X.npy --labels y.npy -s 64``.  Prints each whole command's wall time, the pipeline
the server sized for p, and whether the two runs selected the same support.  The
server once kept the limits it built before the workers' HELLO and dropped every push
of the pipeline it re-sized for p: from p ≈ 16,500 the run never ended.

    python benchmarks/zeromq_sizes.py --sizes 20000 50000 100000
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUARD = 1200   # seconds a command may take before it counts as hung


def _recipe() -> str:
    text = (ROOT / "README.md").read_text()
    [block] = [body for body in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
               if "asyos server --config zmq.toml" in body]
    return block


def _timed(command, folder, **kwargs) -> float:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=folder, capture_output=True, text=True,
                          timeout=GUARD, **kwargs)
    if proc.returncode != 0:
        raise SystemExit(f"{command[:3]} failed ({proc.returncode}):\n"
                         f"{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 50_000,
                                                                  100_000])
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    print(f"{'p':>8} {'n':>6} {'make s':>7} {'zeromq s':>9} {'sequential s':>13} "
          f"{'batch':>6} {'same support':>13}")
    for p in args.sizes:
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            (folder / ".venv").symlink_to(Path(sys.prefix))
            make = _timed([bin_dir / "asyos", "make", "X.npy", "y.npy", "-p", str(p),
                           "-s", "64"], folder)
            asy = _timed(["bash", "-euo", "pipefail", "-c", _recipe()], folder,
                         env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(folder)})
            seq = _timed([sys.executable, "-m", "asyos.run", "--data", "X.npy",
                          "--labels", "y.npy", "-s", "64", "--out", "seq.json",
                          "--quiet"], folder)
            zmq = json.loads((folder / "zmq-results.json").read_text())
            ref = json.loads((folder / "seq.json").read_text())
            same = sorted(zmq["selected"]) == sorted(ref["selected"])
            print(f"{p:>8} {zmq['data']['n_samples'] if 'data' in zmq else '':>6} "
                  f"{make:>7.1f} {asy:>9.1f} {seq:>13.1f} {zmq['asy']['batch']:>6} "
                  f"{'yes' if same else 'NO':>13}", flush=True)


if __name__ == "__main__":
    main()
