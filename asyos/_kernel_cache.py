"""Where numba keeps asyos's compiled kernels: one folder per version of their sources.

numba checks a cached kernel only against the time stamp of the file that defines it.
A kernel in ``core/drivers.py`` that calls a helper in ``core/os_step.py`` would load
its old machine code after the helper changed (an edit, a ``git pull``, an upgrade),
and compute the old thing without a word.  So the cache lives in a folder named by a
digest of every module a kernel may compile in (with the versions of asyos, numba
and Python): any such change starts an empty folder, and the kernels compile afresh.

The fronts that hold no kernel (``FRONTS``) stay out of the digest, so that editing
the CLI does not recompile anything; a test checks that no kernel lives there.

This module must run before any kernel module is imported (``asyos/__init__.py``
imports it first): numba fixes a kernel's cache folder when it decorates it.
"""

import hashlib
import os
import shutil
import sys
from pathlib import Path

import numba

from ._version import __version__
from .io.writable import writable

PACKAGE = Path(__file__).resolve().parent
FRONTS = ("cli", "estimators", "experiments", "transport")
KEEP = 3   # cache folders kept for other versions (a branch switched back and forth)


def kernel_sources() -> list[Path]:
    """The package's modules a kernel may compile in: all but the fronts'."""
    return sorted(path for path in PACKAGE.rglob("*.py")
                  if path.relative_to(PACKAGE).parts[0] not in FRONTS)


def source_digest() -> str:
    """16 hex digits that change with any kernel source or the versions it uses."""
    digest = hashlib.blake2b(digest_size=8)
    for part in (__version__, numba.__version__, sys.version):
        digest.update(part.encode() + b"\0")
    for path in kernel_sources():
        digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_root() -> Path:
    """Where the per-version folders go: ``ASYOS_KERNEL_CACHE``, else numba's own
    ``NUMBA_CACHE_DIR``, else beside the package (a checkout's ``__pycache__``), else
    the user's cache folder when the package is installed read-only."""
    for name in ("ASYOS_KERNEL_CACHE", "NUMBA_CACHE_DIR"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser() / "asyos-kernels"
    beside = PACKAGE / "__pycache__" / "kernels"
    if writable(beside, make=True):
        return beside
    home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(home) / "asyos" / "kernels"


def _prune(root: Path, current: Path) -> None:
    """Remove all but the ``KEEP`` most recently used folders of other versions."""
    others = sorted((entry for entry in root.iterdir()
                     if entry.is_dir() and entry != current),
                    key=lambda entry: entry.stat().st_mtime, reverse=True)
    for stale in others[KEEP:]:
        shutil.rmtree(stale, ignore_errors=True)


def configure() -> Path:
    """Point numba's cache at this version's folder (made, marked as used, its old
    siblings pruned) and return it."""
    root = cache_root()
    folder = root / source_digest()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.utime(folder)
        _prune(root, folder)
    except OSError:
        pass   # numba warns and runs uncached if the folder cannot be written
    numba.config.CACHE_DIR = str(folder)
    return folder


FOLDER = configure()
