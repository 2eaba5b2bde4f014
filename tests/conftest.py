import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_ignore_collect(collection_path, config):
    """tests/mpi runs only inside mpiexec (tests/transport/test_mpi.py launches it)."""
    if collection_path.name == "mpi" and not config.getoption("--with-mpi", False):
        return True
    return None


@pytest.fixture
def sklearn_checks_env(monkeypatch):
    """scikit-learn skips its array-API check (NumPy inputs with array-API dispatch on)
    unless SCIPY_ARRAY_API is set; the check reads it when it runs, so no check of
    ``parametrize_with_checks`` is skipped."""
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
