"""The progress bar appears at the first step, not while kernels compile."""

import pytest

from asyos.cli.options import ProgressBar


def test_the_bar_starts_at_its_first_update_and_closes_complete(capsys):
    with ProgressBar(False, total=100, unit="feature", desc="OS") as bar:
        assert bar._bar is None and capsys.readouterr().err == ""   # nothing drawn yet
        bar.update(30)
        bar.update(10)
        assert bar._bar.n == 40
    assert bar._bar.total == 40   # a run that stopped before its cap ends at 100 %
    err = capsys.readouterr().err
    assert "OS" in err and "done before the cap of 100" in err


def test_a_run_that_reaches_its_cap_ends_without_a_note(capsys):
    with ProgressBar(False, total=50, unit="feature", desc="OS") as bar:
        bar.update(50)
    assert bar._bar.total == 50 and "cap" not in capsys.readouterr().err


@pytest.mark.parametrize("error, said", [(KeyboardInterrupt, "interrupted"),
                                         (ValueError, "stopped by an error")])
def test_an_interrupted_run_stays_where_it_stopped(capsys, error, said):
    with pytest.raises(error):
        with ProgressBar(False, total=100, unit="feature", desc="OS") as bar:
            bar.update(40)
            raise error()
    assert (bar._bar.n, bar._bar.total) == (40, 100)   # not shown as 100 %
    err = capsys.readouterr().err
    assert said in err and "100%" not in err


def test_a_quiet_bar_draws_nothing(capsys):
    with ProgressBar(True, total=10) as bar:
        bar.update(5)
    assert bar._bar is None and capsys.readouterr().err == ""
