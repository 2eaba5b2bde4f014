"""What every writer of asyos shares about a full disk (ENOSPC, or a quota: EDQUOT).

``space_checked`` turns it into one ``InputError`` naming the file (one line and exit
status 2 on the command line) after removing what the failed write left;
``replace_file`` writes a whole file under a temporary name and renames it into
place, so a reader sees the old file or the new one, never half of one; ``reserve``
allocates a file's blocks before it is written through a memory map (a store into a
map of a sparse file on a full disk is a SIGBUS, not an error: the process dies with
no message and leaves a file whose header is valid over holes that read as zeros).

It sits below every layer that writes (the fronts and ``io``, the transports'
checkpoints, keys and run secrets, the streams' ``.csc`` directories) and imports
nothing of asyos but ``errors``.
"""

import errno
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from .errors import InputError

NO_SPACE = {errno.ENOSPC: "no space left on device",
            errno.EDQUOT: "no space left on device (disk quota exceeded)"}


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


def no_space_error(path, exc: OSError, kept: str | None = None) -> InputError:
    """The one-line error of a write to ``path`` that found the disk full."""
    kept = kept or "nothing written (a file there before is kept whole)"
    return InputError(f"cannot write {path}: {NO_SPACE[exc.errno]}; {kept}")


def remove(path) -> None:
    """Remove the file or directory ``path`` if it is there."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def space_checked(path, *debris, kept: str | None = None):
    """Inside: a full disk (ENOSPC, EDQUOT) becomes the ``InputError`` naming
    ``path``, once the files or directories ``debris`` are removed; any other
    error passes unchanged."""
    try:
        yield
    except OSError as exc:
        if not out_of_space(exc):
            raise
        for leftover in debris:
            remove(leftover)
        raise no_space_error(path, exc, kept) from None


def temporary_name(path) -> Path:
    """The temporary name ``path`` is written under: ``.NAME.PID.tmp`` beside it
    (the pid says whether its writer is still alive: ``alive``)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def fsync_directory(folder) -> None:
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def replace_file(path, content, *, mode: int = 0o666, exclusive: bool = False,
                 named=None, kept: str | None = None) -> None:
    """Write ``content`` (bytes, or a function that writes into the binary file it
    is given) through a temporary file, fsync it, rename it over ``path`` and fsync
    the directory, so readers see the old file or the whole new one.  The temporary
    file never outlives a failure; a full disk is the ``InputError`` naming
    ``named`` (default ``path``).  ``mode``: of a new file, before the umask;
    ``exclusive``: the temporary file must not exist (a secret never goes into a
    file someone else made)."""
    path = Path(path)
    tmp = temporary_name(path)
    with space_checked(named or path, kept=kept):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT |
                     (os.O_EXCL if exclusive else os.O_TRUNC), mode)
        try:
            with os.fdopen(fd, "wb") as f:
                if callable(content):
                    content(f)
                else:
                    f.write(content)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)   # ours: gone once renamed, or failed
        fsync_directory(path.parent)


def save_npy(path, array, **options) -> None:
    """``np.save`` as ``replace_file`` writes (whole or not at all)."""
    import numpy as np

    replace_file(path, lambda f: np.save(f, array, allow_pickle=False), **options)


def reserve(f, size: int) -> None:
    """Allocate the first ``size`` bytes of the open file ``f`` now, so that a full
    disk is an ``OSError`` (ENOSPC) here rather than a SIGBUS later, when a memory
    map of it is written.  A filesystem that cannot allocate ahead (EOPNOTSUPP) is
    left as it is."""
    if size <= 0:
        return
    try:
        os.posix_fallocate(f.fileno(), 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise


def save_figure(fig, path, **options) -> None:
    """``fig.savefig`` as ``replace_file`` writes (whole or not at all), in the
    format the name's suffix says (PNG without one)."""
    path = Path(path)
    form = path.suffix.lstrip(".").lower() or "png"
    replace_file(path, lambda f: fig.savefig(f, format=form, **options))
