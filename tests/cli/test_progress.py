"""The progress bar appears at the first step, not while kernels compile."""

from asyos.cli.options import ProgressBar


def test_the_bar_starts_at_its_first_update_and_closes_complete(capsys):
    bar = ProgressBar(False, total=100, unit="feature", desc="OS")
    assert bar._bar is None and capsys.readouterr().err == ""   # nothing drawn yet
    bar.update(30)
    bar.update(10)
    assert bar._bar.n == 40
    bar.close()
    assert bar._bar.total == 40   # a run that stopped before its cap ends at 100 %
    assert "OS" in capsys.readouterr().err


def test_a_quiet_bar_draws_nothing(capsys):
    bar = ProgressBar(True, total=10)
    bar.update(5)
    bar.close()
    assert bar._bar is None and capsys.readouterr().err == ""
