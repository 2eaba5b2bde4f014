"""Whether a folder takes new files, found by making one: ``os.access`` answers yes to
root on read-only mounts and pseudo-filesystems (/proc, /sys), and a run would then
fail only when it writes, after all its work."""

import tempfile
from pathlib import Path


def writable(folder: Path, make: bool = False) -> bool:
    """True if a file can be created in ``folder`` (made first when ``make``)."""
    try:
        if make:
            Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".asyos-probe-"):
            return True
    except OSError:
        return False
