"""The docs run as written: every shell and Python block of README.md and
docs/usage.md, in order, in a fresh folder, as a user following the page would.

The folder gets what a checkout has beside the docs (``.venv``, ``launch.sh``,
``deploy/``); the data files come from the docs' own ``asyos make`` lines.  Set-up
lines (``python3 -m venv``, ``pip install``) are what CI itself runs first
(``.ci/run``), so they are left out here.  Where a line needs what a test machine has
not (a Slurm cluster) or takes minutes, ``STAND_INS`` says what runs instead and why;
any other line runs verbatim, and a block fails on its first failing command.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/usage.md")
TIMEOUT = 600   # a hang guard for one block
SETUP = ("python3 -m venv", "pip install")
STAND_INS = {
    # a Slurm cluster: the batch script runs as its job would, on this machine
    "sbatch --ntasks=12 deploy/slurm.sbatch": "SLURM_NTASKS=3 bash deploy/slurm.sbatch",
    # the paper's experiments take minutes to hours: the same commands, smallest
    "vs-p --quick": "vs-p --quick --reps 1 --task regression --max-workers 1",
    "vs-workers --reps 30 --jobs 2": "vs-workers --quick --reps 1 --task regression",
    # a server bound beyond this machine: tests talk to loopback only
    "tcp://0.0.0.0:": "tcp://127.0.0.1:",
}
FENCE = re.compile(r"^```(bash|python)\n(.*?)^```", re.M | re.S)


def _blocks(doc: str) -> list[tuple[str, int, str]]:
    """(language, line, text) of the page's bash and python blocks, set-up lines
    left out."""
    text = (ROOT / doc).read_text()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        body = "\n".join(row for row in match.group(2).splitlines()
                         if not any(step in row for step in SETUP))
        for original, stand_in in STAND_INS.items():
            body = body.replace(original, stand_in)
        if body.strip():
            found.append((match.group(1), line, body))
    return found


def _checkout_beside(folder: Path) -> dict:
    """What the docs expect beside them; returns the environment to run in."""
    (folder / ".venv").symlink_to(Path(sys.prefix))
    for name in ("launch.sh", "deploy"):
        (folder / name).symlink_to(ROOT / name)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PMI_", "PMIX_", "OMPI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["ASYOS_RUN_DIR"] = str(folder / "runs")
    env["MPLBACKEND"] = "Agg"
    return env


@pytest.mark.skipif(shutil.which("mpiexec", path=str(Path(sys.executable).parent))
                    is None, reason="the docs' MPI lines need the venv's mpiexec")
@pytest.mark.parametrize("doc", DOCS)
def test_every_block_runs_as_written(doc, tmp_path):
    env = _checkout_beside(tmp_path)
    python_blocks = []
    for language, line, body in _blocks(doc):
        if language == "python":   # one namespace per page, as in a notebook
            python_blocks.append(f"# {doc}:{line}\n{body}")
            command = [sys.executable, "-c", "\n".join(python_blocks)]
        else:
            command = ["bash", "-euo", "pipefail", "-c", body]
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, (f"{doc}, the block at line {line} failed:\n"
                                      f"{body}\n{proc.stdout[-3000:]}"
                                      f"{proc.stderr[-3000:]}")


def test_the_public_functions_have_numpydoc_sections_naming_every_argument():
    """asyos's exported functions (the path over s, the data generators) are
    documented as its estimators are: a Parameters section naming every argument,
    and Returns."""
    import inspect
    import re

    import asyos
    from asyos import datasets
    from asyos.solvers.path import fit_path
    from asyos.solvers.simulator import fit_simulated
    from asyos.solvers.voting import fit_os_voted
    from asyos.streams import as_stream

    for function in (asyos.fit_os, asyos.bilevel_projection, asyos.load_result,
                     asyos.lasso_path, fit_path, fit_os_voted, fit_simulated,
                     as_stream, datasets.make_regression,
                     datasets.make_classification, datasets.make_rare_words,
                     datasets.make_bag_of_words):
        doc = function.__doc__
        for section in ("Parameters", "Returns"):
            assert f"\n    {section}\n    {'-' * len(section)}\n" in doc, \
                (function.__name__, section)
        parameters = doc.split("    Parameters\n")[1].split("    Returns\n")[0]
        named = {name.strip() for line in re.findall(r"^    \*{0,2}(\w[\w, ]*) :",
                                                     parameters, re.M)
                 for name in line.split(",")}
        assert named == set(inspect.signature(function).parameters), function.__name__
