"""TOML configuration files whose keys are a command's flags (``--config FILE``).

The keys are derived from the command's argparse parser, so every flag, including
flags added later, is a key at once: ``sparsity = 64`` for ``-s/--sparsity``,
``random-delay = true`` (or ``random_delay``) for ``--random-delay``.  A table named
for the command (``[run]``, ``[server]``, ``[worker]``, ...) applies to that command
only, so one file can hold a server's and its workers' settings; top-level keys apply
to every command that reads the file and must be flags of it.  The settings become
flags placed before the command line's own, so the command line overrides the file,
and argparse checks the types and choices of both in one way.
"""

import argparse
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:   # pragma: no cover - Python 3.10
    import tomli as tomllib

from ..errors import InputError


def load_toml(path) -> dict:
    """The TOML document at ``path``, or InputError naming the file and the problem."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise InputError(f"--config {path}: cannot read it ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"--config {path}: not valid TOML ({exc})") from None


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Config key → the optional argument it sets (long name with - or _, or dest)."""
    keys = {}
    for action in parser._actions:   # argparse exposes no public list of its actions
        if not action.option_strings or action.dest in ("help", "config"):
            continue
        for option in action.option_strings:
            if option.startswith("--"):
                keys[option[2:]] = keys[option[2:].replace("-", "_")] = action
        keys.setdefault(action.dest, action)
    return keys


def _tokens(key: str, value, action: argparse.Action, where: str) -> list[str]:
    """The command-line tokens that say ``key = value``."""
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:   # a switch: true turns it on, false leaves the default
        if not isinstance(value, bool):
            raise InputError(f"{where}: {key} is a switch; give true or false, got "
                             f"{value!r}")
        return [flag] if value == (action.const is not False) else []
    if isinstance(value, dict):
        raise InputError(f"{where}: {key} takes a value, not a table")
    if isinstance(value, list):
        if action.nargs in (None, "?"):
            raise InputError(f"{where}: {key} takes one value, got a list")
        return [flag, *(str(v) for v in value)]
    return [flag, str(value).lower() if isinstance(value, bool) else str(value)]


def config_arguments(parser: argparse.ArgumentParser, path, command: str) -> list[str]:
    """The flags that the TOML file ``path`` sets for ``command`` (parsed by
    ``parser``), in command-line form; unknown keys raise InputError."""
    document = load_toml(path)
    settings = {k: v for k, v in document.items() if not isinstance(v, dict)}
    section = document.get(command, {})
    settings.update(section if isinstance(section, dict) else {})
    flags = _flags(parser)
    tokens = []
    for key, value in settings.items():
        where = f"--config {path}" + (f" [{command}]" if key in section else "")
        if key not in flags:
            known = sorted(k for k in flags if "_" not in k)
            raise InputError(f"{where}: unknown key {key!r} for `asyos {command}` "
                             f"(known: {', '.join(known)})")
        tokens += _tokens(key, value, flags[key], where)
    return tokens
