"""``asyos plot`` and ``asyos inspect`` on results files built here (no run, no MPI):
the staleness histogram reads (log count axis, bins that cover the data, the bound τ
drawn), a sequential run's figure has only panels with data, and inspect names the
carrier of every kind of run."""

import numpy as np
import pytest

from asyos.cli.main import main
from asyos.cli.results import INTEGER_BINS, carrier, plot_figure, staleness_bins
from asyos.io.results import write_result
from asyos.solvers.result import FitResult

pytest.importorskip("matplotlib")


@pytest.fixture
def plt():
    from asyos.experiments.plot import pyplot

    plt = pyplot()
    yield plt
    plt.close("all")


def _trace(n: int = 50) -> dict:
    steps = np.linspace(10, 1000, n)
    return {"steps": steps.tolist(), "seconds": (steps / 1e4).tolist(),
            "objective": np.geomspace(10.0, 0.01, n).tolist()}


def _result(histogram=None, bound=16, transport="mpi", n_workers=2) -> FitResult:
    """A result as a run writes it: sequential when ``histogram`` is None."""
    context = {"data": {"source": "synthetic regression", "n_samples": 100,
                        "n_features": 50},
               "config": {"s": 4, "loss": "squared", "epochs": 2}}
    asy = None
    if histogram is not None:
        values = np.repeat(np.arange(len(histogram)), histogram)
        staleness = {"max": int(values.max()), "mean": float(values.mean()),
                     "histogram": list(histogram), "bound": bound}
        asy = {"n_workers": n_workers, "budgets": [2] * n_workers,
               "budget": "adaptive", "staleness": staleness,
               "u_check_max_abs_diff": 1e-14,
               "workers": [{"steps": 500, "kept": 2} for _ in range(n_workers)]}
        if transport is not None:
            asy["transport"] = transport
    return FitResult(selected=np.arange(4), weights=np.array([1.0, -0.5, 0.25, 2.0]),
                     objective_per_epoch=[1.0, 0.01], objective=0.01, eta=0.5,
                     n_steps=1000, seconds=0.1, trace=_trace(), asy=asy,
                     context=context)


def _bars(ax):
    """(left, right, height) of every bar of ``ax``."""
    return [(p.get_x(), p.get_x() + p.get_width(), p.get_height())
            for p in ax.patches]


def _stale_ax(fig):
    (ax,) = [ax for ax in fig.axes if ax.get_title().startswith("staleness")]
    return ax


# the MPI pipeline's pattern: staleness at multiples of the batch, up to τ
PIPELINED = [350, 0, 0, 0, 0, 0, 8, 0, 974, 0, 0, 0, 0, 0, 0, 0, 168]


def test_a_short_histogram_has_one_bar_per_value_on_a_log_count_axis(plt):
    fig = plot_figure(plt, _result(PIPELINED, bound=16))
    ax = _stale_ax(fig)
    assert ax.get_yscale() == "log"
    bars = _bars(ax)
    assert len(bars) == len(PIPELINED)               # integer bins, 0..max
    centres = [(left + right) / 2 for left, right, _ in bars]
    np.testing.assert_allclose(centres, np.arange(len(PIPELINED)))
    assert [h for *_, h in bars] == PIPELINED
    low, high = ax.get_xlim()
    assert low < 0 and high > 16                     # every bar inside the axes
    low, high = ax.get_ylim()
    assert low < 1 and high > max(PIPELINED)         # a count of 1 shows, the top too
    (line,) = ax.get_lines()                         # the bound τ, past its bar
    assert line.get_xdata()[0] == pytest.approx(16.5)
    assert "τ = 16" in ax.get_legend().get_texts()[0].get_text()


def test_a_long_tail_gets_log_spaced_bins_that_cover_it(plt):
    rng = np.random.default_rng(0)
    values = np.concatenate([np.zeros(300_000, int), 8 * rng.geometric(0.02, 90_000),
                             [5416]])
    values = values[values <= 5416]
    histogram = np.bincount(values)
    fig = plot_figure(plt, _result(histogram.tolist(), bound=None))
    ax = _stale_ax(fig)
    assert ax.get_yscale() == "log" and ax.get_xscale() == "symlog"
    bars = _bars(ax)
    assert 20 < len(bars) < 100                      # readable, not 5,417 slivers
    lefts, rights, heights = map(np.array, zip(*bars))
    assert lefts[0] == 0 and rights[-1] == 5417      # from 0 to past the maximum
    np.testing.assert_allclose(lefts[1:], rights[:-1])   # contiguous
    assert heights.sum() == histogram.sum()          # every step counted once
    assert heights[-1] >= 1                          # the lone tail value shows
    assert ax.get_xlim()[1] >= 5417
    assert ax.get_lines() == [] and "no bound" in ax.get_title()


def test_staleness_bins_cover_the_data_range():
    edges, counts, log_x = staleness_bins([3, 0, 2, 0, 0])
    assert not log_x and edges.tolist() == [0, 1, 2, 3] and counts.tolist() == [3, 0, 2]
    long = np.ones(INTEGER_BINS + 1, dtype=int)
    edges, counts, log_x = staleness_bins(long)
    assert log_x and edges[0] == 0 and edges[-1] == long.size
    assert np.all(np.diff(edges) >= 1) and counts.sum() == long.sum()


def test_a_bound_far_beyond_the_data_is_named_not_drawn(plt):
    ax = _stale_ax(plot_figure(plt, _result([5, 3, 1], bound=400)))
    assert ax.get_lines() == [] and "bound τ = 400" in ax.get_title()
    assert ax.get_xlim()[1] < 10


def test_a_sequential_run_draws_only_panels_with_data(plt):
    fig = plot_figure(plt, _result())
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert ax.axison and ax.get_lines() and not ax.texts   # no placeholder
    four = plot_figure(plt, _result(PIPELINED))
    assert len(four.axes) == 4
    assert fig.get_size_inches()[1] < four.get_size_inches()[1]


def test_plot_writes_the_png(tmp_path, capsys):
    write_result(tmp_path / "r.json", _result(PIPELINED))
    assert main(["plot", str(tmp_path / "r.json")]) == 0
    assert (tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("transport, named", [
    ("mpi", "2 workers (mpi)"), ("zeromq", "2 workers (zeromq)"),
    ("simulator", "2 workers (simulated)"), (None, "2 workers (mpi (inferred))"),
])
def test_inspect_names_the_carrier(tmp_path, capsys, transport, named):
    write_result(tmp_path / "r.json", _result(PIPELINED, transport=transport))
    assert main(["inspect", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert named in out and "?" not in out
    if transport != "simulator":
        assert "bound τ = 16" in out


def test_inspect_names_a_sequential_run(tmp_path, capsys):
    write_result(tmp_path / "r.json", _result())
    assert main(["inspect", str(tmp_path / "r.json")]) == 0
    assert "carrier              sequential (one process)" in capsys.readouterr().out
    assert carrier(_result()) == "sequential"
