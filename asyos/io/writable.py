"""Files and their folders, checked by trying: whether a folder takes new files
(``os.access`` answers yes to root on read-only mounts and pseudo-filesystems such as
/proc and /sys, and a run would then fail only when it writes, after all its work),
and whether the process that named a file after itself is still alive (what a
SIGKILLed run left can then be reclaimed).

What every writer of asyos shares about a full disk lives one layer down, in
``asyos/_files.py``, because the transports (checkpoints, keys, run secrets) and the
streams (``.csc`` directories) write files too; it is re-exported here for the
fronts.
"""

import os
import tempfile
from pathlib import Path

from .._files import (  # noqa: F401  (re-exported: the writers above io use them)
    NO_SPACE,
    no_space_error,
    out_of_space,
    remove,
    replace_file,
    reserve,
    save_figure,
    save_npy,
    space_checked,
)


def writable(folder: Path, make: bool = False) -> bool:
    """True if a file can be created in ``folder`` (made first when ``make``)."""
    try:
        if make:
            Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".asyos-probe-"):
            return True
    except OSError:
        return False


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
