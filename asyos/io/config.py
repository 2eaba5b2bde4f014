"""TOML configuration files whose keys are a command's flags (``--config FILE``).

The keys are derived from the command's argparse parser, so every flag, including
flags added later, is a key at once: ``sparsity = 64`` for ``-s/--sparsity``,
``random-delay = true`` (or ``random_delay``) for ``--random-delay``.  A table named
for the command (``[run]``, ``[server]``, ``[worker]``, ...) applies to that command
only, so one file can hold a server's and its workers' settings; top-level keys apply
to every command that reads the file and must be flags of it.  Any other table (a
typo such as ``[rnu]``, or a table inside a command's), a command's name used as a
key, or an unknown key of the command's own table is an InputError naming the file
and the known tables or keys; a command checks the keys of its own table, not those
of the others' (each checks its own when it reads the file).  The settings become
flags placed before the command line's own, so the command line overrides the file,
and argparse checks the types and choices of both in one way.
"""

import argparse
import difflib
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:   # pragma: no cover - Python 3.10
    import tomli as tomllib

from ..errors import InputError

# the subcommands of ``asyos``: the tables a configuration file may hold
TABLES = ("run", "server", "worker", "keys", "convert", "make", "experiments", "plot",
          "inspect")


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
    except UnicodeDecodeError as exc:   # TOML is UTF-8 text; tomllib says nothing else
        raise InputError(f"--config {path}: not a TOML file: byte {exc.start} is not "
                         "UTF-8 text (a binary file?)") from None


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


def _guess(name: str, known, form: str = "{!r}") -> str:
    """"; did you mean 'x'?" for a near miss of one of ``known``, else ""."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {form.format(close[0])}?" if close else ""


def _check_tables(document: dict, where: str) -> None:
    """Every table of ``document`` is a command's, and no command is a plain key."""
    known = ", ".join(f"[{t}]" for t in TABLES)
    for name, value in document.items():
        if isinstance(value, dict):
            if name not in TABLES:
                raise InputError(f"{where}: unknown table [{name}] (known tables: "
                                 f"{known}){_guess(name, TABLES, '[{}]')}")
            inner = [k for k, v in value.items() if isinstance(v, dict)]
            if inner:   # no flag takes a table: a typo of any command's table
                raise InputError(f"{where}: unknown table [{name}.{inner[0]}] "
                                 f"([{name}] holds `asyos {name}`'s flags, no tables)")
        elif name in TABLES:
            kind = "an array of tables" if isinstance(value, list) and value and \
                all(isinstance(v, dict) for v in value) else f"the key {name} = {value!r}"
            raise InputError(f"{where}: [{name}] is a table of `asyos {name}`'s "
                             f"settings, got {kind}; write [{name}] on its own line "
                             "with its keys below it")


def config_arguments(parser: argparse.ArgumentParser, path, command: str) -> list[str]:
    """The flags that the TOML file ``path`` sets for ``command`` (parsed by
    ``parser``), in command-line form; unknown tables and keys raise InputError."""
    document = load_toml(path)
    _check_tables(document, f"--config {path}")
    settings = {k: v for k, v in document.items() if not isinstance(v, dict)}
    section = document.get(command, {})
    settings.update(section)
    flags = _flags(parser)
    tokens = []
    for key, value in settings.items():
        where = f"--config {path}" + (f" [{command}]" if key in section else "")
        if key not in flags:
            known = sorted(k for k in flags if "_" not in k)
            raise InputError(f"{where}: unknown key {key!r} for `asyos {command}` "
                             f"(known keys: {', '.join(known)}){_guess(key, known)}")
        tokens += _tokens(key, value, flags[key], where)
    return tokens
