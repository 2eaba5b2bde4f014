"""float32 storage and compute: half the memory, float64 sums, same answers."""

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from asyos.core.kept_set import KeptSet
from asyos.core.losses import Loss
from asyos.datasets import make_classification, make_regression
from asyos.errors import InputError
from asyos.solvers.sequential import fit_os
from asyos.solvers.simulator import fit_simulated
from asyos.streams import (
    ArrayStream,
    GaussianStream,
    NpyStream,
    SparseStream,
    Standardized,
)


@pytest.mark.parametrize("loss", list(Loss))
def test_the_float32_kernel_equals_float64_on_the_same_values(loss):
    """Columns exactly representable in float32: only summation order may differ."""
    make = make_regression if loss == Loss.SQUARED else make_classification
    problem = make(p=300, s=12, n=80, seed=int(loss))
    X32 = problem.X.astype(np.float32)
    runs = {}
    for dtype in (np.float64, np.float32):
        kept = KeptSet(80, 12, dtype)
        u = np.zeros(80)
        for j in range(300):
            kept.step(j, X32[:, j].astype(dtype), u, problem.y, loss, 0.3, 1.5)
            u[:] = kept.contribution
            assert kept.size <= 12
        runs[dtype] = kept.selected(), kept.contribution.copy()
    (sel64, w64), u64 = runs[np.float64]
    (sel32, w32), u32 = runs[np.float32]
    np.testing.assert_array_equal(sel32, sel64)
    np.testing.assert_allclose(w32, w64, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(u32, u64, rtol=1e-9, atol=1e-12)
    # u = X_S w_S in float64 from the float32 columns
    np.testing.assert_allclose(u32, X32[:, sel32].astype(np.float64) @ w32, atol=1e-10)


def test_float32_halves_the_kept_set_and_selects_the_same():
    problem = make_regression(p=1500, s=40, seed=3)
    r64 = fit_os(ArrayStream(problem.X), problem.y, 40)
    r32 = fit_os(ArrayStream(problem.X, dtype="float32"), problem.y, 40)
    np.testing.assert_array_equal(r32.selected, r64.selected)
    np.testing.assert_allclose(r32.weights, r64.weights, rtol=1e-4)
    assert r32.kept_bytes < 0.6 * r64.kept_bytes


def test_every_stream_yields_its_dtype(tmp_path):
    X = np.random.default_rng(0).standard_normal((20, 30))
    np.save(tmp_path / "X64.npy", np.asfortranarray(X))
    np.save(tmp_path / "X32.npy", np.asfortranarray(X.astype(np.float32)))
    streams = [ArrayStream(X, dtype="float32"), SparseStream(sp.csc_matrix(X),
               dtype="float32"), NpyStream(tmp_path / "X64.npy", dtype="float32"),
               NpyStream(tmp_path / "X32.npy", dtype="float32"),
               GaussianStream(20, 30, dtype="float32"),
               Standardized(ArrayStream(X, dtype="float32"))]
    for stream in streams:
        for source in (stream, stream.shard(3, 1)):
            for _, block in source.blocks(0):
                assert block.dtype == np.float32 and block.flags.c_contiguous
            assert source.columns([source.feature_indices()[0]]).dtype == np.float32
    assert next(NpyStream(tmp_path / "X32.npy").blocks(0))[1].dtype == np.float64
    with pytest.raises(InputError, match="float64 or float32"):
        ArrayStream(X, dtype="int16")


def test_asy_os_runs_in_float32():
    problem = make_regression(p=400, s=16, n=100, seed=5)
    out = fit_simulated(ArrayStream(problem.X, dtype="float32"), problem.y, 16, 4)
    assert out.asy["u_check_max_abs_diff"] < 1e-9


def test_cli_dtype_float32(tmp_path):
    X = np.random.default_rng(1).standard_normal((60, 200))
    y = X[:, [5, 60]] @ np.array([1.0, -2.0])
    np.save(tmp_path / "X.npy", np.asfortranarray(X.astype(np.float32)))
    np.save(tmp_path / "y.npy", y)
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--data",
                           str(tmp_path / "X.npy"), "--labels", str(tmp_path / "y.npy"),
                           "-s", "4", "--dtype", "float32", "--quiet", "--out",
                           str(tmp_path / "r.json")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["config"]["dtype"] == "float32" and {5, 60} <= set(result["selected"])
    proc = subprocess.run([sys.executable, "-m", "asyos.run", "--dtype", "float16"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--dtype" in proc.stderr
