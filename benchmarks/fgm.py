"""FGM vs the L1-SVM (LIBLINEAR) baseline: time and peak memory at growing p.

Two families, every configuration in its own process (so that its peak resident
memory, VmHWM, is its own), side by side in one run:

* ``poly``: the degree-2 space of d Gaussian base features (p = d + d(d+1)/2), labels
  y = sign(x3·x17 − x5 + 0.5·x8²  − 0.5).  FGM searches the products implicitly
  (``polynomial_degree=2``: O(n·d) data plus one block of Xᵀdiag(r)X); the L1-SVM
  needs the expanded n × p matrix, built in memory (skipped once it would pass
  ``--max-gb``).
* ``linear``: a dense Gaussian n × p design, 30 true features, y = sign(Xw*); both
  methods hold X.

FGM: B = 5, C = 10, run until k = 20 features are active.  L1-SVM:
``LinearSVC(penalty="l1", loss="squared_hinge", dual=False)`` along C = C₀·1.5^j,
C₀ = 1/(2‖Xᵀy‖∞), until it has at least k nonzeros (the path a user walks to get k
features; the last fit's time is reported too).  Test accuracy on 2,000 fresh points.

    python benchmarks/fgm.py [--n 1000] [--d 50 100 200 400 800] [--p 2000 8000 32000]

``--scaling``: instead, FGM's dependence on feature scaling in the degree-2 space
(``fgm-poly``'s digits 4 vs 9: B = 2, C = 10, FGM-SHIFT, half/half stratified splits):
base features scaled to [0, 1] or standardized on the training half, with the raw
scores c_j² (the default) or ``normalize_scores`` (unit-norm candidates); test accuracy
at k selected features, mean and worst over ``--splits`` splits.

    python benchmarks/fgm.py --scaling [--splits 10] [--ks 2 4 6]
"""

import argparse
import json
import subprocess
import sys

PROBE = r"""
import json, sys, time
import numpy as np
from asyos.streams import InteractionStream

family, size, method, n, k, max_gb = sys.argv[1:7]
size, n, k, max_gb = int(size), int(n), int(k), float(max_gb)

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

rng = np.random.default_rng(0)
def draw(m):
    return rng.standard_normal((m, size))
if family == "poly":
    X, Xt = draw(n), draw(2000)
    label = lambda A: np.sign(A[:, 3] * A[:, 17] - A[:, 5] + 0.5 * A[:, 8] ** 2 - 0.5)
    p = size + size * (size + 1) // 2
else:
    w = np.zeros(size)
    w[rng.choice(size, 30, replace=False)] = rng.uniform(-1, 1, 30)
    X, Xt = draw(n), draw(2000)
    label = lambda A: np.sign(A @ w)
    p = size
y, yt = label(X), label(Xt)
out = {"p": p}
if method == "fgm":
    from asyos import FGMClassifier
    FGMClassifier(5, polynomial_degree=2 if family == "poly" else 1).fit(
        X[:50, :20], y[:50])                                  # compile outside timing
    start = time.perf_counter()
    est = FGMClassifier(k, B=5, C=10.0, fit_intercept=False, tol=0.0,
                        polynomial_degree=2 if family == "poly" else 1).fit(X, y)
    out.update(seconds=time.perf_counter() - start, nnz=int(est.selected_.size),
               accuracy=float(np.mean(est.predict(Xt) == yt)),
               activations=int(est.n_iter_))
else:
    from sklearn.svm import LinearSVC
    if family == "poly":
        need = n * p * 8 / 2**30
        if need > max_gb:
            print(json.dumps({"p": p, "skipped": f"expanded X needs {need:.1f} GB"}))
            sys.exit(0)
        start = time.perf_counter()
        stream = InteractionStream(X, 2)
        Xe = np.asfortranarray(stream.columns(stream.feature_indices()).T)
        expand = time.perf_counter() - start
        test = InteractionStream(Xt, 2)
    else:
        Xe, expand = X, 0.0
    C = 1.0 / (2.0 * np.max(np.abs(Xe.T @ y)))
    start = time.perf_counter()
    fits = 0
    while True:
        C *= 1.5
        fits += 1
        t0 = time.perf_counter()
        model = LinearSVC(penalty="l1", loss="squared_hinge", dual=False, C=C,
                          fit_intercept=False, tol=1e-4, max_iter=5000).fit(Xe, y)
        last = time.perf_counter() - t0
        nnz = int(np.count_nonzero(model.coef_))
        if nnz >= k or fits >= 40:
            break
    coef = model.coef_.ravel()
    sel = np.flatnonzero(coef)
    cols = test.columns(sel).T if family == "poly" else Xt[:, sel]
    out.update(seconds=time.perf_counter() - start + expand, last_fit=last,
               expand=expand, fits=fits, nnz=nnz,
               accuracy=float(np.mean(np.where(cols @ coef[sel] > 0, 1.0, -1.0) == yt)))
out["peak_mb"] = hwm()
print(json.dumps(out))
"""


def run(family, size, method, args) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", PROBE, family, str(size), method,
                               str(args.n), str(args.k), str(args.max_gb)],
                              capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"over {args.timeout:.0f} s"}
    if proc.returncode != 0:
        return {"skipped": f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def scaling(splits: int, ks: list) -> None:
    import numpy as np
    from sklearn.model_selection import train_test_split

    from asyos.experiments.fgm import FGM_C, _dataset, _sign
    from asyos.fgm.cutting_plane import check_fgm, fgm
    from asyos.streams import InteractionStream

    X, y = _dataset("digits 4v9")
    acc = {}
    for split in range(splits):
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, stratify=y,
                                              random_state=split)
        low, high = Xtr.min(axis=0), Xtr.max(axis=0)
        mean, std = Xtr.mean(axis=0), Xtr.std(axis=0)
        for name, shift, span in (("[0, 1]", low, np.where(high > low, high - low, 1)),
                                  ("standardized", mean, np.where(std > 0, std, 1))):
            train, test = (Xtr - shift) / span, (Xte - shift) / span
            stream = InteractionStream(test, 2)
            for normalize in (False, True):
                space, yy, _ = check_fgm(train, ytr, "squared_hinge", None, degree=2,
                                         normalize=normalize)
                for k in ks:
                    res = fgm(space, yy, loss="squared_hinge", B=2, C=FGM_C,
                              n_select=k, tol=0.0, fit_intercept=True,
                              convergence_warning=None)
                    pred = _sign(stream.columns(res.selected).T @ res.weights
                                 + res.intercept)
                    acc.setdefault((name, normalize, k), []).append(
                        float(np.mean(pred == yte)))
    print(f"digits 4v9, degree 2, {splits} splits: test accuracy mean / worst")
    print(f"{'scaling':>13} {'scores':>10} | "
          + " | ".join(f"k = {k:<11}" for k in ks))
    for name in ("[0, 1]", "standardized"):
        for normalize in (False, True):
            cells = [acc[name, normalize, k] for k in ks]
            print(f"{name:>13} {'normalized' if normalize else 'raw':>10} | "
                  + " | ".join(f"{np.mean(c):.3f} / {min(c):.3f}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("-k", type=int, default=20, help="features to select")
    parser.add_argument("--d", type=int, nargs="*", default=[50, 100, 200, 400, 800])
    parser.add_argument("--p", type=int, nargs="*", default=[2000, 8000, 32000])
    parser.add_argument("--max-gb", type=float, default=1.5,
                        help="largest expanded matrix the L1-SVM may build")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--scaling", action="store_true",
                        help="the feature-scaling study instead (see above)")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--ks", type=int, nargs="*", default=[2, 4, 6])
    args = parser.parse_args()
    if args.scaling:
        scaling(args.splits, args.ks)
        return
    print(f"n = {args.n}, k = {args.k}; seconds / peak RSS MB / test accuracy")
    header = (f"{'family':>7} {'p':>9} | {'FGM s':>7} {'MB':>6} {'acc':>5} | "
              f"{'L1-SVM s':>9} {'last fit':>8} {'MB':>6} {'acc':>5} | "
              f"{'time ratio':>10} {'memory ratio':>12}")
    print(header)
    print("-" * len(header))
    for family, sizes in (("poly", args.d), ("linear", args.p)):
        for size in sizes:
            f = run(family, size, "fgm", args)
            b = run(family, size, "l1svm", args)
            left = (f"{family:>7} {f.get('p', b.get('p', 0)):>9} | "
                    f"{f['seconds']:7.2f} {f['peak_mb']:6.0f} {f['accuracy']:5.3f} | "
                    if "seconds" in f else f"{family:>7} {'?':>9} | {f['skipped']} | ")
            if "seconds" in b and "seconds" in f:
                right = (f"{b['seconds']:9.2f} {b['last_fit']:8.2f} {b['peak_mb']:6.0f} "
                         f"{b['accuracy']:5.3f} | {b['seconds'] / f['seconds']:10.1f} "
                         f"{b['peak_mb'] / f['peak_mb']:12.1f}")
            else:
                right = b.get("skipped", "failed")
            print(left + right, flush=True)


if __name__ == "__main__":
    main()
