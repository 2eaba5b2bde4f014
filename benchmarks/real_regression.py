"""Online Substitution against the Lasso paths on a real sparse regression: the size of
a Debian package from the words that describe it, each method run as its users would,
side by side in one run.

The data (nothing is downloaded): the package index this machine's apt keeps,
``/var/lib/apt/lists/*_Packages`` (plain, ``.lz4``, ``.gz`` or ``.xz``; ``apt-get
update`` writes it), or where there is none the installed packages' own records in
``/var/lib/dpkg/status``.  One document per package (the first record of a name): its
one-line description, its section, its debtags and the names of the packages it
depends on (``dep_`` prefixed).  The target: log(1 + Installed-Size in KiB), a real
number that the words say much of (``-data``, ``-doc``, ``fonts``, ``game``, a
dependency on Qt or on libc alone...).  Features: ``CountVectorizer(binary=True,
ngram_range=(1, 2), min_df=2)`` over a seeded sample of ``--rows`` packages, scipy
CSC; a 25 % test split per seed.

Methods, each in its own fresh process (``real_text.py``'s parent: CPU seconds and
peak RSS; killed after ``--timeout`` s), k the number of features asked for:
  os           ``OnlineSubstitutionRegressor(n_features_to_select=k)``, its defaults
               (squared loss, the intercept);
  skglm        ``skglm.Lasso(alpha, warm_start=True)`` down a geometric grid of
               ``--n-alphas`` α from α_max = ‖Xᵀ(y − ȳ)‖_∞/n to ``--ratio``·α_max,
               stopped at the first α with ≥ k nonzeros (that model is scored);
  celer        ``celer.Lasso(alpha, warm_start=True)`` along the same α;
  sklearn      ``sklearn.linear_model.Lasso(alpha, warm_start=True)`` along them;
  f_regression ``SelectKBest(f_regression, k)`` then ``LinearRegression()``.
Timed as in ``real_text.py`` (the fit after an untimed fit on a tiny problem); test
R² and RMSE, mean over seeds with the worst beside it.

    python benchmarks/real_regression.py [--quick] [--k 10 30 100 300]
        [--seeds 0 1 2 3 4] [--rows 20000] [--methods os skglm ...]

``--quick``: seed 0, k ∈ {10, 100}.  Needs a Debian system (dpkg; apt's lists for the
larger index); celer and skglm: ``pip install asyos[bench]`` (a missing one gets a row
saying so).
"""

import argparse
import gzip
import importlib.util
import json
import lzma
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from real_text import (  # benchmarks/ is the script's directory
    alpha_grid, print_table, run_child, summary, walk)

LISTS, STATUS = Path("/var/lib/apt/lists"), Path("/var/lib/dpkg/status")
METHODS = {"os": "asyos (defaults)", "skglm": "skglm Lasso path",
           "celer": "celer Lasso path", "sklearn": "scikit-learn Lasso path",
           "f_regression": "f_regression + LinearRegression"}
THIRD_PARTY = {"celer": "celer", "skglm": "skglm"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")


def _read(path: Path) -> str:
    """A package index, decompressed as its suffix says."""
    if path.suffix == ".lz4":
        return subprocess.run(["lz4", "-dc", str(path)], check=True,
                              capture_output=True).stdout.decode("utf-8", "replace")
    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def index_files() -> list[Path]:
    """apt's package lists (one per suffix kind and source), or dpkg's status."""
    lists = sorted(p for p in LISTS.glob("*_Packages*")
                   if p.suffix in ("", ".lz4", ".gz", ".xz")
                   and (p.suffix != ".lz4" or shutil.which("lz4")))
    return lists or ([STATUS] if STATUS.is_file() else [])


def records(text: str):
    """(name, installed KiB, document) of each stanza with a size."""
    for stanza in text.split("\n\n"):
        fields, last = {}, None
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") and last:
                fields[last] += " " + line.strip()
            elif ":" in line:
                last, _, value = line.partition(":")
                fields[last] = value.strip()
        if "Package" not in fields or not fields.get("Installed-Size", "").isdigit():
            continue
        depends = " ".join("dep_" + m.group(0).replace("-", "_").replace(".", "_")
                           for part in fields.get("Depends", "").split(",")
                           for m in [_NAME.match(part.strip())] if m)
        tags = fields.get("Tag", "").replace("::", "_").replace(",", " ")
        document = " ".join([fields.get("Description", "").split(" .")[0],
                             "section_" + fields.get("Section", "none"), tags,
                             depends])
        yield fields["Package"], int(fields["Installed-Size"]), document


def packages(files) -> tuple[list[str], np.ndarray]:
    """The documents and log(1 + KiB) of every package name's first record."""
    seen, docs, sizes = set(), [], []
    for path in files:
        for name, kib, document in records(_read(path)):
            if name not in seen:
                seen.add(name)
                docs.append(document)
                sizes.append(kib)
    return docs, np.log1p(np.array(sizes, dtype=np.float64))


# ---------------------------------------------------------------------------- child

def child(job: dict) -> dict:
    """One method on one split, in this (fresh) process: test R² and RMSE, CPU and
    wall seconds of the fit, nonzeros, a note."""
    import warnings
    import scipy.sparse as sp
    from sklearn.metrics import mean_squared_error, r2_score
    warnings.simplefilter("ignore")
    X = sp.load_npz(job["X"]).tocsr()
    y = np.load(job["y"])
    train, test = np.load(job["train"]), np.load(job["test"])
    Xtr, Xte, ytr, yte = X[train].tocsc(), X[test].tocsc(), y[train], y[test]
    fit = FITS[job["method"]]
    Xw = sp.random(60, 200, density=0.05, format="csc", random_state=1)
    fit(Xw, np.random.default_rng(0).standard_normal(60), 5, job)
    cpu, wall = time.process_time(), time.perf_counter()
    predict, nnz, note = fit(Xtr, ytr, job["k"], job)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    guess = predict(Xte)
    return {"r2": float(r2_score(yte, guess)),
            "rmse": float(np.sqrt(mean_squared_error(yte, guess))),
            "cpu": cpu, "wall": wall, "nnz": int(nnz), "note": note}


def fit_os(X, y, k, job):
    from asyos import OnlineSubstitutionRegressor
    est = OnlineSubstitutionRegressor(n_features_to_select=k).fit(X, y)
    return est.predict, np.count_nonzero(est.coef_), ""


def lasso_path(make):
    def fit(X, y, k, job):
        return walk(make, lambda est, a: est.set_params(alpha=a), X, y, k,
                    alpha_grid(X, y, job), score="predict")
    return fit


def _skglm(a):
    from skglm import Lasso
    return Lasso(alpha=a, warm_start=True)


def _celer(a):
    from celer import Lasso
    return Lasso(alpha=a, warm_start=True)


def _sklearn(a):
    from sklearn.linear_model import Lasso
    return Lasso(alpha=a, warm_start=True)


def fit_f_regression(X, y, k, job):
    from sklearn.feature_selection import SelectKBest, f_regression
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    pipe = make_pipeline(SelectKBest(f_regression, k=min(k, X.shape[1])),
                         LinearRegression()).fit(X, y)
    return pipe.predict, min(k, X.shape[1]), ""


FITS = {"os": fit_os, "skglm": lasso_path(_skglm), "celer": lasso_path(_celer),
        "sklearn": lasso_path(_sklearn), "f_regression": fit_f_regression}


# ---------------------------------------------------------------------------- parent

# The scores of the table: (column heading, key, which split is the worst).
SCORES = (("test R²", "r2", min), ("RMSE", "rmse", max))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="seed 0, k ∈ {10, 100}")
    parser.add_argument("--k", nargs="+", type=int, default=[10, 30, 100, 300])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--rows", type=int, default=20_000,
                        help="packages sampled (seed 0) from the index")
    parser.add_argument("--methods", nargs="+", default=list(METHODS),
                        choices=list(METHODS))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--n-alphas", type=int, default=100)
    parser.add_argument("--ratio", type=float, default=1e-3)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    files = index_files()
    if not files:
        raise SystemExit("real_regression.py: no package index (a Debian system has "
                         f"{STATUS}; apt-get update writes {LISTS}/*_Packages)")
    if args.quick:
        args.seeds, args.k = [0], [10, 100]
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.model_selection import train_test_split
    start = time.perf_counter()
    docs, y = packages(files)
    pick = np.sort(np.random.default_rng(0).permutation(len(docs))[:args.rows])
    X = CountVectorizer(binary=True, ngram_range=(1, 2), min_df=2,
                        dtype=np.float64).fit_transform([docs[i] for i in pick]).tocsc()
    y = y[pick]
    info = {"n": X.shape[0], "p": X.shape[1], "nnz": int(X.nnz),
            "source": ", ".join(p.name for p in files)}
    print(f"{len(docs)} packages read, {info['n']} sampled: {info['p']} n-grams, "
          f"nnz {info['nnz']} in {time.perf_counter() - start:.1f} s", file=sys.stderr,
          flush=True)
    folder = Path(tempfile.mkdtemp(prefix="asyos-real-regression-"))
    methods = [m for m in METHODS if m in args.methods]
    try:
        sp.save_npz(folder / "X.npz", X)
        np.save(folder / "y.npy", y)
        for seed in args.seeds:
            train, test = train_test_split(np.arange(len(y)), test_size=0.25,
                                           random_state=seed)
            np.save(folder / f"{seed}.train.npy", np.sort(train))
            np.save(folder / f"{seed}.test.npy", np.sort(test))
        table = {}
        for k in args.k:
            table[k] = {}
            for m in methods:
                if m in THIRD_PARTY and importlib.util.find_spec(THIRD_PARTY[m]) is None:
                    table[k][m] = {"failed": f"not installed (pip install {m})"}
                    continue
                rs = []
                for seed in args.seeds:
                    job = {"method": m, "k": k, "X": str(folder / "X.npz"),
                           "y": str(folder / "y.npy"),
                           "train": str(folder / f"{seed}.train.npy"),
                           "test": str(folder / f"{seed}.test.npy"),
                           "n_alphas": args.n_alphas, "ratio": args.ratio}
                    r = run_child(job, args.timeout, script=__file__)
                    rs.append(r)
                    said = r.get("failed") or (f"R² {r['r2']:.3f}, {r['cpu']:.2f} CPU s "
                                               f"{r.get('note', '')}")
                    print(f"  k={k} {m} seed {seed}: {said}", file=sys.stderr,
                          flush=True)
                table[k][m] = summary(rs, SCORES)
        print_table(f"Package size from its description: n = {info['n']}, "
                    f"p = {info['p']}, nnz = {info['nnz']} ({info['source']})", table,
                    methods, METHODS, args.k, len(args.seeds), SCORES)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
