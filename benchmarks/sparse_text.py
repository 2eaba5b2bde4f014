"""Online Substitution against the Lasso-path peers on sparse text: seconds, recall of
the planted/informative words and peak RSS, each method run as its users would, side
by side in one run.

Problems (``asyos.datasets``; X scipy CSC, y a regression target, s the budget):
  planted-1e5, planted-1e6
            ``make_rare_words(p, n=20000)``: 18 uniform words per row plus 10 planted
            rare words (±2); p = 10⁵ or 10⁶, s = 20 (recall: planted words kept / 10);
  zipf-1e5, zipf-1e6
            ``make_bag_of_words(p, n=30000)``: Zipf documents of ~400 draws, y from 20
            mid-frequency words; p = 10⁵ or 10⁶, s = 20;
  zipf-1e6-s100
            the Zipf 30k × 10⁶ at s = 100, the asyos rows one pass only (epochs=1);
            the peers as everywhere else.
Methods, each in its own process, started by a fresh small parent (so its peak RSS,
ru_maxrss, is its own; ``scale.py``'s ``measured``) and killed with its process group
after ``--timeout`` seconds:
  data only        make the problem from its seed; peak MB: resident after making it
                   (interpreter, numpy, scipy and the problem, which the in-memory rows
                   below hold too; the making's own peak is printed as it runs);
  convert          ``python -m asyos convert X.svm X.csc --labels-out y.npy`` on the
                   problem written as a one-based svmlight file (writing it is untimed);
  asyos CLI        ``python -m asyos run --data X.csc --labels y.npy -s S --out r.json``
                   (seconds: the whole process, interpreter and imports included;
                   ``selected`` from r.json; no problem in memory);
  asyos fit (intercept), asyos fit (no intercept)
                   ``OnlineSubstitutionRegressor(n_features_to_select=S).fit(X, y)``,
                   fit_intercept True (the default) / False; recall from ``support_``;
  asyos fit_stream ``OnlineSubstitutionRegressor(S).fit_stream("X.csc", "y.npy")``
                   on the converted file (no problem in memory);
  scikit-learn, celer, skglm
                   a Lasso path from α_max = ‖Xᵀ(y − ȳ)‖_∞/n down a geometric grid of
                   ``--n-alphas`` values to ``--ratio``·α_max, each library's ``Lasso``
                   (fit_intercept=True, warm_start=True, default tol), stopped at the
                   first α with at least S nonzeros: its S largest |w| are the
                   selection, and only the path up to that α is timed.  (scikit-learn's
                   ``lasso_path`` has no intercept for sparse X, so its ``Lasso``
                   estimator, which calls the same path solver with the offsets, walks
                   the grid here);
  abess            ``abess.LinearRegression(support_size=[S]).fit(X, y,
                   sparse_matrix=True)`` (fit_intercept=True, its default).
The in-process rows time the fit call only, after an untimed fit on a tiny problem
(imports, numba compilation/cache loading); the CLI and convert rows time the whole
process.  Recall is the mean over ``--seeds`` (worst seed beside it), seconds the mean,
peak RSS the largest.  ``peak MB``: the process's peak RSS (ru_maxrss); for the
worker rows (fit, fit_stream, the peers) the peak from just before the timed call on
(freed heap trimmed, then VmHWM reset through /proc/self/clear_refs), so the
temporaries of making the problem are left out but the problem, the imports and the
method are in.  ``fit +MB``: that peak above the resident memory at the reset: about
what the method itself adds (a lower bound: it can reuse memory the process holds).
``÷ peer``: an asyos row's seconds over the fastest peer's (scikit-learn, celer,
skglm, abess) on that problem.

    python benchmarks/sparse_text.py [--problems planted-1e5 zipf-1e5 ...]
        [--methods cli fit fit-nointercept fit-stream sklearn celer skglm abess]
        [--seeds 0 1 ...] [--timeout 300] [--scale 1] [--folder DIR]

``--scale 10`` divides p and n by 10 (a smoke run of a minute or two).  celer, skglm
and abess are optional (``pip install asyos[bench] abess``); a missing one gets a row
saying so.
"""

import argparse
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import PEAK  # noqa: E402  (a fresh small parent reports the peak RSS)

# name → (generator, p, n, s, asyos epochs)
PROBLEMS = {
    "planted-1e5": ("make_rare_words", 100_000, 20_000, 20, "auto"),
    "planted-1e6": ("make_rare_words", 1_000_000, 20_000, 20, "auto"),
    "zipf-1e5": ("make_bag_of_words", 100_000, 30_000, 20, "auto"),
    "zipf-1e6": ("make_bag_of_words", 1_000_000, 30_000, 20, "auto"),
    "zipf-1e6-s100": ("make_bag_of_words", 1_000_000, 30_000, 100, 1),
}

# key → (row label, kind); kind: "cli", "os" (in process), "peer"
METHODS = {
    "cli": ("asyos CLI", "cli"),
    "fit": ("asyos fit (intercept)", "os"),
    "fit-nointercept": ("asyos fit (no intercept)", "os"),
    "fit-stream": ("asyos fit_stream", "os"),
    "sklearn": ("scikit-learn Lasso path", "peer"),
    "celer": ("celer Lasso path", "peer"),
    "skglm": ("skglm Lasso path", "peer"),
    "abess": ("abess", "peer"),
}
THIRD_PARTY = {"celer": "celer", "skglm": "skglm", "abess": "abess"}

# One method on one problem, in its own process.  argv[1]: a JSON object of the
# settings.  Prints one JSON line: seconds of the fit, the selected columns, and extras.
WORKER = r"""
import ctypes, gc, json, sys, time, warnings
import numpy as np

a = json.loads(sys.argv[1])
method, s = a["method"], a["s"]
warnings.simplefilter("ignore")

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

def mark():
    # resident MB now (freed heap handed back first), and the peak (VmHWM) reset to
    # it when the kernel allows
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    held = status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return held, True
    except OSError:
        return held, False

def done(start, marked, selected, extra=""):
    seconds = time.perf_counter() - start
    held, reset = marked
    peak = status("VmHWM")   # since the reset: from just before the timed call
    print(json.dumps({"seconds": seconds, "selected": [int(i) for i in selected],
                      "extra": extra, "held_mb": held, "peak_mb": peak,
                      "fit_mb": peak - held if reset else None}))
    sys.exit()

def top(coef, s):
    coef = np.ravel(coef)
    return np.sort(np.argsort(-np.abs(coef), kind="stable")[:s])

def problem():
    from asyos import datasets
    return getattr(datasets, a["generator"])(a["p"], n=a["n"], seed=a["seed"])

def tiny():
    from asyos.datasets import make_rare_words
    return make_rare_words(500, n=200, seed=1)

if method == "data":
    start = time.perf_counter()
    pb = problem()
    seconds = time.perf_counter() - start
    making = status("VmHWM")
    out = {"seconds": seconds, "peak_mb": mark()[0], "making_mb": making,
           "shape": list(pb.X.shape), "nnz": int(pb.X.nnz)}
    np.save(a["support"], pb.support)
    if a.get("svm"):
        from sklearn.datasets import dump_svmlight_file
        start = time.perf_counter()
        dump_svmlight_file(pb.X, pb.y, a["svm"], zero_based=False)
        out["svm_seconds"] = time.perf_counter() - start
    print(json.dumps(out))
    sys.exit()

if method in ("fit", "fit-nointercept", "fit-stream"):
    from asyos import OnlineSubstitutionRegressor
    def model():
        return OnlineSubstitutionRegressor(n_features_to_select=s, epochs=a["epochs"],
                                           fit_intercept=method != "fit-nointercept")
    warm = tiny()
    if method == "fit-stream":
        model().fit_stream(warm.X, warm.y)
        marked = mark()
        start = time.perf_counter()
        est = model().fit_stream(a["csc"], a["labels"])
    else:
        model().fit(warm.X, warm.y)
        pb = problem()
        marked = mark()
        start = time.perf_counter()
        est = model().fit(pb.X, pb.y)
    done(start, marked, np.flatnonzero(est.support_), f"{est.n_iter_} epoch(s)")

if method == "abess":
    import abess
    pb = problem()
    model = abess.LinearRegression(support_size=[s])
    marked = mark()
    start = time.perf_counter()
    model.fit(pb.X, pb.y, sparse_matrix=True)
    done(start, marked, np.flatnonzero(model.coef_))

if method == "sklearn":
    from sklearn.linear_model import Lasso
elif method == "celer":
    from celer import Lasso
else:
    from skglm import Lasso

def path(X, y, n_alphas, ratio):
    # α_max with an intercept: the columns centred, which X^T(y - ȳ) already is
    alpha_max = np.abs(X.T @ (y - y.mean())).max() / len(y)
    alphas = alpha_max * np.geomspace(1, ratio, n_alphas)
    est = Lasso(alpha=alphas[0], fit_intercept=True, warm_start=True)
    for k, alpha in enumerate(alphas):
        est.set_params(alpha=alpha)
        est.fit(X, y)
        nnz = np.count_nonzero(est.coef_)
        if nnz >= s:
            break
    return top(est.coef_, s), k, nnz, alpha / alphas[0]

warm = tiny()
path(warm.X, warm.y, 5, 0.1)
pb = problem()
marked = mark()
start = time.perf_counter()
selected, k, nnz, at = path(pb.X, pb.y, a["n_alphas"], a["ratio"])
done(start, marked, selected, f"{k + 1} α, {nnz} nonzeros at {at:.3g}·α_max"
     + ("" if nnz >= s else " (path ended short of s)"))
"""



def measured(command: list, timeout: float) -> dict:
    """Run ``command`` as the child of a fresh small process (a child inherits its
    parent's peak through fork, so not of this one), in its own process group, killed
    whole after ``timeout`` seconds: seconds, peak RSS in MB (ru_maxrss), its stdout;
    or {"failed": why}."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", PEAK, *map(str, command)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"failed": f"over {timeout:.0f} s"}
    seconds = time.perf_counter() - start
    try:
        status, peak_kib = (int(v) for v in stdout.split()[-2:])
    except ValueError:
        status, peak_kib = proc.returncode or 1, 0
    if status != 0:
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        why = lines[-1][:70] if lines else f"exit status {status}" + \
            (" (killed: out of memory?)" if status < 0 else "")
        return {"failed": why}
    return {"seconds": seconds, "peak_mb": peak_kib / 1024, "stdout": stdout}


def worker(settings: dict, timeout: float) -> dict:
    """WORKER with these settings under ``measured``; its JSON line merged in."""
    result = measured([sys.executable, "-c", WORKER, json.dumps(settings)], timeout)
    if "failed" not in result:
        lines = result.pop("stdout").strip().splitlines()
        result["wall"] = result.pop("seconds")
        result.update(json.loads(lines[-2]))   # last line: PEAK's status and peak
    return result


def recall(selected, support) -> float:
    return np.intersect1d(np.asarray(selected, dtype=np.int64), support).size / \
        support.size


def run_problem(name: str, seed: int, methods: list, args, folder: Path) -> dict:
    """Every method on one problem and seed: key → result dict (seconds, recall,
    peak_mb, extra) or {"failed": why}; plus "data" and "convert"."""
    generator, p, n, s, epochs = PROBLEMS[name]
    p = max(p // args.scale, 2001 if generator == "make_bag_of_words" else 1)
    n = max(n // args.scale, 100)
    stem = folder / f"{name}-scale{args.scale}-seed{seed}"
    svm, csc, labels = (Path(f"{stem}.svm"), Path(f"{stem}.csc"),
                        Path(f"{stem}.y.npy"))
    support_file = Path(f"{stem}.support.npy")
    files = any(m in methods for m in ("cli", "fit-stream"))
    base = {"generator": generator, "p": p, "n": n, "s": s, "seed": seed,
            "epochs": epochs, "n_alphas": args.n_alphas, "ratio": args.ratio,
            "support": str(support_file), "csc": str(csc), "labels": str(labels)}
    out = {}
    data = worker({**base, "method": "data",
                   "svm": str(svm) if files and not svm.exists() else None},
                  args.timeout)
    out["data"] = data
    if "failed" in data:
        return out
    print(f"{name} seed {seed}: n = {data['shape'][0]}, p = {data['shape'][1]}, "
          f"nnz = {data['nnz']}, s = {s}; made in {data['seconds']:.1f} s, "
          f"{data['making_mb']:.0f} MB peak, {data['peak_mb']:.0f} MB resident after"
          + (f", svmlight written in {data['svm_seconds']:.1f} s"
             if "svm_seconds" in data else ""), file=sys.stderr, flush=True)
    support = np.load(support_file)
    asyos = [sys.executable, "-m", "asyos"]
    if files:
        shutil.rmtree(csc, ignore_errors=True)
        out["convert"] = measured([*asyos, "convert", svm, csc, "--labels-out", labels,
                                   "--quiet"], args.timeout)
        report("convert", out["convert"])
        if "failed" in out["convert"]:
            for m in ("cli", "fit-stream"):
                if m in methods:
                    out[m] = {"failed": "no .csc"}
    for m in methods:
        if m in out:
            continue
        if m in THIRD_PARTY and importlib.util.find_spec(THIRD_PARTY[m]) is None:
            out[m] = {"failed": f"not installed (pip install {THIRD_PARTY[m]})"}
        elif args.skip.get((name, m)):
            out[m] = {"failed": args.skip[(name, m)]}
        elif m == "cli":
            result_file = Path(f"{stem}.r.json")
            command = [*asyos, "run", "--data", csc, "--labels", labels, "-s", s,
                       "--out", result_file, "--force", "--quiet"]
            if epochs != "auto":
                command += ["--epochs", epochs]
            r = measured(command, args.timeout)
            if "failed" not in r:
                result = json.loads(result_file.read_text())
                r["recall"] = recall(result["selected"], support)
                r["extra"] = f"{result['timings']['seconds']:.2f} s fitting"
                r.pop("stdout")
            out[m] = r
        else:
            r = worker({**base, "method": m}, args.timeout)
            if "failed" not in r:
                r["recall"] = recall(r.pop("selected"), support)
            out[m] = r
        report(m, out[m])
        if out[m].get("failed", "").startswith("over"):
            args.skip[(name, m)] = out[m]["failed"]   # later seeds would time out too
    return out


def report(key: str, r: dict) -> None:
    if "failed" in r:
        print(f"  {key}: {r['failed']}", file=sys.stderr, flush=True)
    else:
        print(f"  {key}: {r['seconds']:.2f} s"
              + (f", recall {r['recall']:.2f}" if "recall" in r else "")
              + f", peak {r['peak_mb']:.0f} MB"
              + (f" (+{r['fit_mb']:.0f} in the fit)" if r.get("fit_mb") is not None
                 else "")
              + f"  {r.get('extra', '')}", file=sys.stderr, flush=True)


def summary(results: list) -> dict:
    """Over seeds: mean seconds, mean and worst recall, largest peak; or the first
    failure."""
    for r in results:
        if "failed" in r:
            return r
    recalls = [r["recall"] for r in results if "recall" in r]
    return {"seconds": np.mean([r["seconds"] for r in results]),
            "recall": np.mean(recalls) if recalls else None,
            "worst": np.min(recalls) if recalls else None,
            "peak_mb": max(r["peak_mb"] for r in results),
            "fit_mb": None if any(r.get("fit_mb") is None for r in results)
            else max(r["fit_mb"] for r in results),
            "extra": results[0].get("extra", ""),
            **{k: results[0][k] for k in ("shape", "nnz") if k in results[0]}}


def print_table(table: dict, problems: list, rows: list, labels: dict,
                n_seeds: int) -> None:
    head = ["method"]
    for name in problems:
        head += [f"{name} s", "÷ peer", "recall", "peak MB", "fit +MB"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    fastest = {}
    for name in problems:
        times = [table[name][m]["seconds"] for m in METHODS
                 if METHODS[m][1] == "peer" and m in table[name]
                 and "failed" not in table[name][m]]
        fastest[name] = min(times) if times else None
    for key in rows:
        cells = [labels[key]]
        for name in problems:
            r = table[name].get(key)
            if r is None:
                cells += [""] * 5
            elif "failed" in r:
                cells += [r["failed"]] + [""] * 4
            else:
                ratio = (f"{r['seconds'] / fastest[name]:.2f}"
                         if key in METHODS and METHODS[key][1] in ("cli", "os")
                         and fastest[name] else "")
                if r.get("recall") is None:
                    rec = ""
                elif n_seeds > 1:
                    rec = f"{r['recall']:.2f} (worst {r['worst']:.2f})"
                else:
                    rec = f"{r['recall']:.2f}"
                fit = "" if r.get("fit_mb") is None else f"{r['fit_mb']:.0f}"
                cells += [f"{r['seconds']:.2f}", ratio, rec, f"{r['peak_mb']:.0f}", fit]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS),
                        choices=list(PROBLEMS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS),
                        choices=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds a process may run before it is killed (each)")
    parser.add_argument("--scale", type=int, default=1,
                        help="divide p and n by this (a smoke run)")
    parser.add_argument("--n-alphas", type=int, default=100,
                        help="α values on the peers' grid")
    parser.add_argument("--ratio", type=float, default=1e-3,
                        help="smallest α of the grid over α_max")
    parser.add_argument("--folder", help="where the svmlight and .csc files go "
                        "(kept, and a svmlight file there reused); default a temporary "
                        "directory, removed at the end")
    args = parser.parse_args()
    if args.scale < 1:
        parser.error("--scale must be ≥ 1")
    args.skip = {}
    methods = [m for m in METHODS if m in args.methods]
    if args.folder:
        folder = Path(args.folder)
        folder.mkdir(parents=True, exist_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="asyos-sparse-text-"))
    versions = []
    for module in ("asyos", "sklearn", "celer", "skglm", "abess"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except Exception:  # noqa: BLE001 - missing or without __version__
            versions.append(f"{module} (not installed)")
    try:
        table = {}
        for name in args.problems:
            per_seed = {}
            for seed in args.seeds:
                for key, r in run_problem(name, seed, methods, args, folder).items():
                    per_seed.setdefault(key, []).append(r)
            table[name] = {key: summary(rs) for key, rs in per_seed.items()}
    finally:
        if not args.folder:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}; {', '.join(versions)}")
    print(f"seeds {' '.join(map(str, args.seeds))}, timeout {args.timeout:.0f} s"
          + (f", p and n divided by {args.scale}" if args.scale > 1 else ""))
    for name in args.problems:
        generator, p, n, s, epochs = PROBLEMS[name]
        d = table[name].get("data", {})
        shape = (f"n = {d['shape'][0]}, p = {d['shape'][1]}, nnz = {d['nnz']}"
                 if "shape" in d else "not made")
        print(f"- {name}: {generator}, {shape}, s = {s}"
              + ("" if epochs == "auto" else f", asyos epochs = {epochs}"))
    print()
    rows = [key for key in ["data", "convert"] + methods
            if any(key in table[name] for name in args.problems)]
    for name in args.problems:
        if "data" in table[name]:
            table[name]["data"] = {**table[name]["data"], "recall": None}
        if "convert" in table[name]:
            table[name]["convert"] = {**table[name]["convert"], "recall": None}
    labels = {"data": "data only (resident)", "convert": "asyos convert",
              **{key: label for key, (label, _) in METHODS.items()}}
    print_table(table, args.problems, rows, labels, len(args.seeds))
    notes = []
    for name in args.problems:
        for key in methods:
            r = table[name].get(key, {})
            if r.get("extra"):
                notes.append(f"{name}, {METHODS[key][0]}: {r['extra']}")
    if notes:
        print("\n" + "\n".join(f"- {note}" for note in notes))


if __name__ == "__main__":
    main()
