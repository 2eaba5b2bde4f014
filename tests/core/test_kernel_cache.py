"""Compiled kernels match the code: an edited helper module is compiled afresh, not
loaded stale from numba's cache (which checks only the defining file's time stamp)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import asyos
from asyos import _kernel_cache

# FGM's objective kernel (fgm/apg.py) calls loss_value (core/losses.py): a kernel whose
# helper lives in another module, cheap to compile.
SCRIPT = """
import numpy as np
from asyos.fgm.apg import subproblem_objective
rows = np.array([[1.0, 2.0, 3.0, 4.0]])
print(repr(subproblem_objective(rows, np.array([0, 1]), np.ones(4), 0, 1.0,
                                np.array([0.5]), 0.0)))
"""


def copy_package(tmp_path: Path) -> Path:
    shutil.copytree(Path(asyos.__file__).parent, tmp_path / "asyos",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "asyos"


def run_copy(tmp_path: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(tmp_path),
               ASYOS_KERNEL_CACHE=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


def folders(tmp_path: Path) -> list[str]:
    root = tmp_path / "cache" / "asyos-kernels"
    return sorted(entry.name for entry in root.iterdir())


def test_an_edited_helper_module_is_compiled_afresh(tmp_path):
    package = copy_package(tmp_path)
    before = run_copy(tmp_path)
    assert run_copy(tmp_path) == before   # loaded from the cache: same folder
    assert len(folders(tmp_path)) == 1
    losses = package / "core" / "losses.py"
    text = losses.read_text()
    assert text.count("    return total / n\n") == 1
    losses.write_text(text.replace("    return total / n\n",
                                   "    return 3.0 * total / n\n"))
    after = run_copy(tmp_path)
    # F = C·n·L + ½‖w‖²: only the loss term triples
    penalty = 0.5 * 0.5 ** 2
    assert after - penalty == 3.0 * (before - penalty) != 0.0
    assert len(folders(tmp_path)) == 2


def test_editing_a_front_keeps_the_compiled_kernels(tmp_path):
    package = copy_package(tmp_path)
    run_copy(tmp_path)
    report = package / "cli" / "report.py"
    report.write_text(report.read_text() + "\n# an edit\n")
    run_copy(tmp_path)
    assert len(folders(tmp_path)) == 1


def test_no_kernel_lives_in_a_front():
    """The digest leaves the fronts out: sound only while none holds a kernel."""
    decorator = re.compile(r"@(numba\.)?(njit|jit|vectorize|guvectorize|cfunc)\b")
    for front in _kernel_cache.FRONTS:
        for path in (_kernel_cache.PACKAGE / front).rglob("*.py"):
            assert not decorator.search(path.read_text()), path


def test_old_versions_are_pruned(tmp_path):
    root = tmp_path / "kernels"
    for age, name in enumerate(["a", "b", "c", "d", "e"]):
        (root / name).mkdir(parents=True)
        os.utime(root / name, (1000 + age, 1000 + age))
    current = root / "current"
    current.mkdir()
    _kernel_cache._prune(root, current)
    assert sorted(entry.name for entry in root.iterdir()) == ["c", "current", "d", "e"]
