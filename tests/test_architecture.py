"""The layering of docs/architecture.md, enforced with import-linter."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_imports_point_down_and_the_core_stays_free_of_transports():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is part of the test extra"
    proc = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" not in proc.stdout.lower() or "0 broken" in proc.stdout.lower()


def test_a_missing_extra_is_named_with_its_install_command():
    """``asyos.Lasso`` without scikit-learn says which extra to install."""
    code = ("import sys; sys.modules['sklearn'] = None; import asyos\n"
            "try:\n    asyos.Lasso\nexcept ImportError as exc:\n    print(exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "asyos.Lasso needs sklearn: pip install 'asyos[sklearn]'" in out.stdout, out
