"""Exceptions that are part of the interface.

``InputError`` is what a user can fix (a wrong shape, a NaN, an impossible s); the CLI
turns it into a one-line message and exit status 2.  It is always raised *before* any
state is changed.
"""


class AsyosError(Exception):
    """Base class of every error asyos raises on purpose."""


class InputError(AsyosError, ValueError):
    """Bad user input: data, labels or parameters. CLI exit status 2."""


class PartialRun(AsyosError):
    """An Asy-OS run that ended without some of its shards (lost and not replaced).
    Its results are written, marked ``partial``, but it is not a success: the CLI
    exits with status 3 unless the user accepted partial results."""
