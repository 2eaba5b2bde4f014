import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_ignore_collect(collection_path, config):
    """tests/mpi runs only inside mpiexec (tests/test_mpi.py launches it)."""
    if collection_path.name == "mpi" and not config.getoption("--with-mpi", False):
        return True
    return None
