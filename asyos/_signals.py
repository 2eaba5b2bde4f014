"""^C and SIGTERM at a command's entry and around a fork (docs/reliability.md, "^C and
SIGTERM on one machine").

``asyos/__init__.py`` imports this module first (it imports nothing slow) and calls
``at_entry`` when the process is one of asyos's commands (``python -m asyos…``, the
``asyos`` console script), before numpy and numba load:

- a job started as ``cmd &`` by a non-interactive shell inherits SIGINT *ignored*,
  and Python then installs no handler for it; ``at_entry`` installs ours, so ^C
  always interrupts;
- ours raises KeyboardInterrupt, as Python's does, and until the command has taken
  the interrupt (``taken``: it printed "asyos: interrupted" and is ending) raises it
  again every ``REDELIVER`` seconds (SIGALRM): an exception raised in a finalizer or
  a callback from C (a generator closed by the garbage collector, llvmlite's object
  cache and numba's type cache while numba compiles, an at-fork callback) is printed
  as "Exception ignored" and lost, and the run went on (that report is left out:
  ``sys.unraisablehook``);
- an interrupt that lands where no ``try`` of the command encloses it (the imports,
  the parsing of the flags) ends the command as one inside it does: one line
  "asyos: interrupted" on stderr and exit status 130 (``sys.excepthook``), not a
  traceback and status 1 or −2;
- an interrupted command ends by ``leave`` (its exit handlers, then ``os._exit``):
  a KeyboardInterrupt raised inside ``exec`` of a string (dataclasses and scipy do
  that while they import) leaves CPython's "unhandled interrupt" flag set even once
  it is caught, and the interpreter then ended by SIGINT (status −2) after the
  command had said "asyos: interrupted".

``held`` keeps SIGINT, SIGTERM and the re-delivery off a region (a fork, the ending
of the workers), and delivers them at its end, where the caller can act on them.
"""

import atexit
import os
import signal
import sys
import threading

INTERRUPTED = 130   # the exit status of an interrupted command (128 + SIGINT)
TERMINATED = 143    # ... and of one ended by SIGTERM (128 + SIGTERM)
HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)
REDELIVER = 0.5     # seconds between deliveries of an interrupt not yet taken
_requested = _taken = False   # an interrupt came; the command has taken it


def is_command(argv=None) -> bool:
    """Whether this process runs one of asyos's commands: ``python -m asyos[.X]``
    (also as ``python -m mpi4py -m asyos.X``) or the ``asyos`` console script.
    ``argv``: the interpreter's own command line (``sys.orig_argv``)."""
    argv = list(getattr(sys, "orig_argv", sys.argv) if argv is None else argv)
    modules = []
    for at, token in enumerate(argv[1:], 1):
        if token == "-m" and at + 1 < len(argv):
            modules.append(argv[at + 1])
        elif token.startswith("-m") and len(token) > 2:
            modules.append(token[2:])
    if modules[:1] == ["mpi4py"]:
        modules = modules[1:]
    if modules:
        return modules[0] == "asyos" or modules[0].startswith("asyos.")
    script = sys.argv[0] if sys.argv else ""
    return os.path.basename(script) == "asyos"


def at_entry() -> None:
    """SIGINT interrupts (our handler, installed where Python's was or where SIGINT
    was inherited ignored), and an interrupt no ``try`` caught ends the process with
    one line and status 130.  Idempotent; main thread only (as ``signal.signal``)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.default_int_handler):
        signal.signal(signal.SIGINT, _interrupt)
    global _next_hook, _next_unraisable
    if sys.excepthook is not _excepthook:
        _next_hook, sys.excepthook = sys.excepthook, _excepthook
    if sys.unraisablehook is not _unraisable:
        _next_unraisable, sys.unraisablehook = sys.unraisablehook, _unraisable


def _interrupt(signum, frame):
    """SIGINT: KeyboardInterrupt now, and again every ``REDELIVER`` s until taken."""
    global _requested
    _requested = True
    if not _taken and signal.getsignal(signal.SIGALRM) is not _again:
        signal.signal(signal.SIGALRM, _again)
        signal.setitimer(signal.ITIMER_REAL, REDELIVER, REDELIVER)
    raise KeyboardInterrupt


def _again(signum, frame):
    if _taken:
        signal.setitimer(signal.ITIMER_REAL, 0)
        return
    raise KeyboardInterrupt


def interrupting() -> bool:
    """Whether an interrupt came that the command has not taken yet: an error that
    reaches the command meanwhile is its doing (numba, whose compile an interrupt
    lost in llvmlite's callback left half done, then fails with "no compiled object
    yet"), and the command ends as interrupted."""
    return _requested and not _taken


def taken() -> None:
    """The command has the interrupt (it is saying so and ending): no more of it."""
    global _taken
    _taken = True
    if signal.getsignal(signal.SIGALRM) is _again:
        signal.setitimer(signal.ITIMER_REAL, 0)


def say_interrupted() -> None:
    """The one line of an interrupted command."""
    try:
        print("asyos: interrupted", file=sys.stderr, flush=True)
    except (OSError, ValueError):   # stderr closed or gone
        pass


def leave(status: int = INTERRUPTED) -> int:
    """End an interrupted command with ``status``: its exit handlers (logging's,
    multiprocessing's), its streams flushed, then ``os._exit`` (see the module's
    docstring for why not ``sys.exit``).  In a process that is not a command (a
    test calling ``main``) it only returns ``status``."""
    if not is_command():
        return status
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:   # a second ^C, a closed pipe: ending is all that is left
        pass
    os._exit(status)


_next_hook, _next_unraisable = sys.excepthook, sys.unraisablehook


def _unraisable(unraisable) -> None:
    """An interrupt lost in a finalizer or a callback is delivered again
    (``_interrupt``): its "Exception ignored" report would only be noise on a
    command's one line.  Anything else as before."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    _next_unraisable(unraisable)


def _excepthook(kind, value, trace) -> None:
    """An interrupt that reached the top (or an error raised while one is being
    delivered): one line and status 130; anything else as before."""
    if not (issubclass(kind, KeyboardInterrupt) or interrupting()):
        return _next_hook(kind, value, trace)
    taken()
    say_interrupted()
    leave(INTERRUPTED)
    os._exit(INTERRUPTED)   # (leave returns only where this is no command)


class held:
    """SIGINT and SIGTERM (and the re-delivery of an interrupt) held off a region,
    then delivered at its end.

    Inside, they are blocked on this thread (``pthread_sigmask``), so the kernel
    keeps them pending; and should one reach another thread of the process (a BLAS
    thread that does not block it), the Python handler that runs only notes it.
    A fork inside is therefore never interrupted in its at-fork callbacks (where an
    exception is printed as "Exception ignored" and lost, logging's among them), and
    the child starts with both blocked: it sets its own dispositions, then unblocks
    them (``release_in_child``).  On leaving, the handlers are restored, the mask
    too, and what came meanwhile is delivered here, by those handlers (SIGINT's
    raises KeyboardInterrupt).  Off the main thread only the mask applies."""

    def __enter__(self) -> "held":
        self.noted: list[int] = []
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
        self.handlers = {}
        if threading.current_thread() is threading.main_thread():
            self.handlers = {signum: signal.signal(signum, self._note)
                             for signum in HELD}
        return self

    def _note(self, signum, frame) -> None:
        self.noted.append(signum)

    def __exit__(self, *exc) -> None:
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)   # pending: delivered
        for signum in dict.fromkeys(self.noted):
            signal.raise_signal(signum)


def release_in_child(interrupt=signal.SIG_IGN, terminate=signal.SIG_DFL) -> None:
    """In a child forked inside ``held``: its own dispositions first, then SIGINT and
    SIGTERM unblocked (a signal that came since is handled by those).  The parent's
    re-delivery of an interrupt is not the child's (a fork does not inherit timers)."""
    global _taken
    _taken = True
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
