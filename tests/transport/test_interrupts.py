"""^C ends a ``python -m asyos.run --workers Q`` run wherever it lands: at start-up
(the imports), while a worker is being forked, or while the workers step; and also
when the run inherited SIGINT ignored (a job started with ``cmd &`` by a
non-interactive script).  Every try must end within 5 s of the signal with exit
status 130 and the one line "asyos: interrupted", and leave no process and nothing in
/dev/shm (tests/interrupts.py makes the tries; benchmarks/interrupts.py makes 50 of
each; docs/reliability.md)."""

import random
import signal

import pytest
from interrupts import interrupt

from asyos import _signals


def _failures(outcomes) -> str:
    return "\n".join(f"{o.context} at {o.moment:.2f} s ({o.phase}): status {o.status} "
                     f"after {o.seconds:.1f} s, left {o.left}, /dev/shm {o.shm}, "
                     f"stderr {o.stderr[-600:]!r}" for o in outcomes if not o.holds)


def test_a_run_started_with_sigint_ignored_is_interrupted():
    """``bash -c 'python -m asyos.run --workers 3 … & wait $!'``: the job inherits
    SIGINT ignored and Python installs no handler; the run installs one first."""
    outcome = interrupt("script &", 2.0)
    assert outcome.holds, _failures([outcome])


@pytest.mark.parametrize("context", ["normal", "ignored"])
def test_sigint_at_any_moment_of_the_first_five_seconds_ends_the_run(context):
    """Eight moments spread over the first 5 s (one in each eighth, seeded: the
    first land in the imports, later ones in the warm-up and among the stepping
    workers) and two as soon as the first worker exists (the second is being
    forked)."""
    rng = random.Random(20160813)
    delays = [(k + rng.random()) * 5.0 / 8 for k in range(8)]
    outcomes = [interrupt(context, delay) for delay in delays]
    outcomes += [interrupt(context, 0.0, at_fork=True) for _ in range(2)]
    assert all(o.holds for o in outcomes), _failures(outcomes)


@pytest.mark.parametrize("argv, script, command", [
    (["python", "-m", "asyos.run", "--workers", "2"], "-m", True),
    (["python", "-X", "importtime", "-masyos"], "-m", True),
    (["python", "-m", "mpi4py", "-m", "asyos.run"], "-m", True),
    (["python", "/venv/bin/asyos", "run"], "/venv/bin/asyos", True),   # the script
    (["python", "-m", "pytest", "-m", "asyos.run"], "-m", False),
    (["python", "-m", "mpi4py", "-m", "pytest", "tests/mpi"], "-m", False),
    (["python", "-c", "import asyos"], "-c", False),
    (["python", "fit.py"], "fit.py", False),
])
def test_only_asyos_commands_take_over_sigint(argv, script, command, monkeypatch):
    """A library user's process keeps its own SIGINT disposition."""
    monkeypatch.setattr("sys.argv", [script, *argv[2:]])
    assert _signals.is_command(argv) is command


def test_a_signal_inside_held_is_delivered_at_its_end():
    """``held``: SIGINT raised inside is neither raised there nor lost, but raised
    as the region ends (as after a fork: the new worker registered first).  Python's
    handler is installed first: a suite started as ``cmd &`` inherits SIGINT
    ignored, and an ignored signal raises nothing anywhere."""
    done = []
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _signals.held():
                signal.raise_signal(signal.SIGINT)
                done.append("the region ran to its end")
        assert done == ["the region ran to its end"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & set(_signals.HELD)
    finally:
        signal.signal(signal.SIGINT, inherited)
