"""Online Substitution against the L1 paths and chi² on real text: the manual pages
this machine has installed, as binary n-gram features, each method run as its users
would, side by side in one run.

The documents (nothing is downloaded): every gzip'd roff page in /usr/share/man/man{1,2,
3,8} that is a file (not a symlink, not a ``.so`` redirect); its text is its NAME and
DESCRIPTION sections with the roff requests and escapes stripped by a regex
(``page_text``; man(7) and mdoc(7) headers alike).  The Google Cloud SDK's
``gcloud_*.1`` pages (about 16,600 generated pages, most of section 1 here) are left
out unless ``--with-gcloud``: they would make task 1 "gcloud against C".
  capi     task 1: the C API (sections 2, 3) against commands (sections 1, 8);
  admin    task 2: system administration (section 8) against user commands
           (section 1): both are commands, and much harder to tell apart.
Features: ``CountVectorizer(binary=True, ngram_range=(1, 3), min_df=2)`` fitted on the
whole corpus of the task (unsupervised), as scipy CSC; a stratified 25 % test split
per seed (``train_test_split(..., stratify=y, random_state=seed)``).  The corpus and
the splits are cached in a temporary directory for the run and removed at the end.

Methods, each in its own fresh process (started by a small parent that reports its
CPU seconds and peak RSS, ru_maxrss; killed after ``--timeout`` seconds), k the number
of features asked for:
  os           ``OnlineSubstitutionClassifier(n_features_to_select=k)``, its defaults
               (squared hinge loss, 8 orders and a vote);
  os-logistic  the same with ``loss="logistic"``;
  os-1order    ``loss="logistic", n_orders=1``;
  cli          ``python -m asyos run --data train.csc --labels y.npy -s k --loss
               logistic --out r.json`` on the training split written by
               ``asyos.streams.save_csc`` (untimed); the test split scored here from
               r.json's selected, weights and intercept; its seconds are the whole
               process (interpreter, imports, reading);
  skglm        ``skglm.SparseLogisticRegression(alpha, warm_start=True)`` down a
               geometric grid of ``--n-alphas`` α from α_max = ‖Xᵀ(y − ȳ)‖_∞/n to
               ``--ratio``·α_max, stopped at the first α with ≥ k nonzeros: that
               model (its nonzeros may exceed k) is the one scored;
  celer        ``celer.LogisticRegression(C = 1/(n·α), warm_start=True)`` along the
               same α (its default fit_intercept=False);
  liblinear    ``LogisticRegression(penalty="l1", solver="liblinear", C)`` along
               C = l1_min_c·(1/ratio)^t over the same number of steps, each a cold
               fit (liblinear has no warm start);
  chi2         ``SelectKBest(chi2, k=k)`` then ``LogisticRegression()``, a pipeline.
In process rows time the fit (the whole path for the paths) after an untimed fit on a
tiny problem (imports, numba compilation or cache loading): ``CPU s`` is
time.process_time, ``wall s`` perf_counter; ``peak MB`` is the child's ru_maxrss
(data loading included, the same for every method).  ``÷ skglm``: the row's CPU
seconds over skglm's on that task and k.  AUC and accuracy on the test split: mean
over seeds, worst beside it.

    python benchmarks/real_text.py [--quick] [--tasks capi admin] [--k 10 30 100 300]
        [--seeds 0 1 2 3 4] [--methods os os-logistic ...] [--timeout 600]
        [--n-alphas 100] [--ratio 1e-3] [--with-gcloud] [--versus CHECKOUT]

``--versus CHECKOUT``: the asyos estimator rows (os, os-logistic, os-1order) also run
from another checkout of asyos (a ``git worktree`` of the head before, say), each split
right beside this one's in alternating order, as rows of their own.

``--quick``: seed 0, k ∈ {10, 100}.  Needs the Debian manual pages (section 1 and 8
pages come with the packages installed; sections 2 and 3 with manpages-dev): ``apt-get
install manpages manpages-dev`` (on a Docker image, whose dpkg config drops
/usr/share/man, remove /etc/dpkg/dpkg.cfg.d/excludes and reinstall first); celer and
skglm: ``pip install asyos[bench]`` (a missing one gets a row saying so).
"""

import argparse
import gzip
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


MAN = Path("/usr/share/man")
NEEDS = ("needs the Debian manual pages in /usr/share/man (sections 1, 2, 3, 8): "
         "apt-get install manpages manpages-dev")

METHODS = {
    "os": "asyos (defaults)",
    "os-logistic": "asyos logistic",
    "os-1order": "asyos logistic, n_orders=1",
    "cli": "asyos CLI, logistic",
    "skglm": "skglm L1 path",
    "celer": "celer L1 path",
    "liblinear": "liblinear L1 path",
    "chi2": "chi2 + LogisticRegression",
}
THIRD_PARTY = {"celer": "celer", "skglm": "skglm"}
# ``--versus``: the rows that can run from another checkout, and their key's suffix
VERSUS = ("os", "os-logistic", "os-1order")
BEFORE = "@versus"
TASKS = {"capi": "C API (2, 3) vs commands (1, 8)",
         "admin": "admin (8) vs user commands (1)"}

# ---------------------------------------------------------------------------- corpus

_HEADER = re.compile(r'^\.s[h]\s+(.*)$', re.M | re.I)
_ESCAPE = re.compile(r'\\(?:f(?:\[[^\]]*\]|\(..|.)|s[-+]?\d+|\((..)|\[([^\]]*)\]'
                     r'|\*(?:\(..|\[[^\]]*\]|.)|[&|^%:cdu{}]|"[^\n]*|(.))')
_CHARS = {"(em": " ", "(en": " ", "(aq": "'", "(dq": '"', "(bu": " ", "(co": " "}
_SKIP = (".\\\"", "'\\\"", ".IX", ".ig", ".de", ".ds", ".nr", ".so", ".\\}",
         ".ie", ".el", ".if", "'ie", "'el", "'if", ".in", ".ti", ".ta", ".sp", ".ll",
         ".RS", ".RE")


def _unescape(m) -> str:
    if m.group(3) is not None:                       # \-, \e, \ , \&c.
        return {"e": "\\", " ": " ", "~": " "}.get(m.group(3), m.group(3))
    if m.group(1) is not None:                       # \(xx
        return _CHARS.get("(" + m.group(1), " ")
    return " "


def page_text(roff: str, sections=("NAME", "DESCRIPTION")) -> str:
    """The text of the given sections of a man(7) or mdoc(7) page, in that order:
    requests dropped but their arguments kept (``.B ls`` → ``ls``), comments and
    index entries dropped, escapes (fonts, sizes, special characters) stripped."""
    parts = _HEADER.split(roff)
    found = {}
    for title, body in zip(parts[1::2], parts[2::2]):
        title = title.strip().strip('"').upper()
        if title not in sections or title in found:
            continue
        words = []
        for line in body.splitlines():
            if line.startswith(_SKIP):
                continue
            if line.startswith((".", "'")):
                request = line[1:].split(None, 1)
                line = request[1] if len(request) > 1 else ""
                line = line.replace('"', " ")
            words.append(_ESCAPE.sub(_unescape, line))
        found[title] = " ".join(" ".join(words).split())
    return " ".join(found[s] for s in sections if s in found)


def man_pages(root: Path = MAN, sections="1238", with_gcloud=False, limit=None):
    """(section, file name, text) for the page files of these sections, sorted by
    name within a section; symlinks and ``.so`` redirects skipped, and pages with no
    NAME/DESCRIPTION text; at most ``limit`` per section when given."""
    docs = []
    for sec in sections:
        folder = Path(root) / f"man{sec}"
        if not folder.is_dir():
            continue
        count = 0
        for f in sorted(folder.iterdir()):
            if limit is not None and count >= limit:
                break
            if f.is_symlink() or not f.name.endswith(".gz") or (
                    not with_gcloud and f.name.startswith("gcloud")):
                continue
            try:
                raw = gzip.open(f).read().decode("utf-8", "replace")
            except (OSError, EOFError):
                continue
            if raw.lstrip().startswith(".so "):
                continue
            text = page_text(raw)
            if text:
                docs.append((sec, f.name, text))
                count += 1
    return docs


def check_pages(root: Path = MAN) -> str | None:
    """None when sections 1, 2 or 3, and 8 have pages; else why not."""
    def has(sec):
        folder = Path(root) / f"man{sec}"
        return folder.is_dir() and any(folder.glob("*.gz"))
    missing = [s for s in "1238" if not has(s)]
    if missing and not (missing == ["2"] and has("3")):
        return f"no pages in section(s) {', '.join(missing)}"
    return None


def task_labels(docs, task):
    """Indices of the documents in the task and their 0/1 labels."""
    secs = np.array([d[0] for d in docs])
    if task == "capi":
        keep = np.flatnonzero(np.isin(secs, list("1238")))
        return keep, np.isin(secs[keep], ["2", "3"]).astype(np.int64)
    keep = np.flatnonzero(np.isin(secs, ["1", "8"]))
    return keep, (secs[keep] == "8").astype(np.int64)


def features(texts):
    from sklearn.feature_extraction.text import CountVectorizer
    vec = CountVectorizer(binary=True, ngram_range=(1, 3), min_df=2, dtype=np.float64)
    return vec.fit_transform(texts).tocsc()


# ---------------------------------------------------------------------------- child

# The parent of each method: fork, exec the method, report its exit status, CPU
# seconds (user + system) and peak RSS (KiB) as the last line.
PARENT = r"""
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, u = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), u.ru_utime + u.ru_stime, u.ru_maxrss)
"""


def child(job: dict) -> dict:
    """One method on one split, in this (fresh) process: test AUC and accuracy, CPU
    and wall seconds of the fit, nonzeros, a note."""
    import warnings
    import scipy.sparse as sp
    from sklearn.metrics import accuracy_score, roc_auc_score
    warnings.simplefilter("ignore")
    method, k = job["method"], job["k"]
    if job.get("root"):   # --versus: asyos from that checkout
        sys.path.insert(0, job["root"])
    X = sp.load_npz(job["X"]).tocsc()
    y = np.load(job["y"])
    train, test = np.load(job["train"]), np.load(job["test"])
    rows = X.tocsr()
    Xtr, Xte, ytr, yte = rows[train].tocsc(), rows[test].tocsc(), y[train], y[test]
    fit = FITS[method]
    Xw = sp.random(60, 200, density=0.05, format="csc", random_state=1)
    Xw.data[:] = 1.0
    fit(Xw, (np.arange(60) % 2).astype(np.int64), 5, job, warm=True)
    cpu, wall = time.process_time(), time.perf_counter()
    score, nnz, note = fit(Xtr, ytr, k, job)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    s = score(Xte)
    used = sys.modules.get("asyos")
    used = os.path.realpath(Path(used.__file__).parent) if used else ""
    if job.get("root") and not used.startswith(os.path.realpath(job["root"])):
        raise SystemExit(f"--versus: asyos came from {used}, not {job['root']}")
    return {"auc": float(roc_auc_score(yte, s)), "asyos": used,
            "acc": float(accuracy_score(yte, (s > 0).astype(np.int64))),
            "cpu": cpu, "wall": wall, "nnz": int(nnz), "note": note}


def fit_os(options):
    def fit(X, y, k, job, warm=False):
        from asyos import OnlineSubstitutionClassifier
        est = OnlineSubstitutionClassifier(n_features_to_select=k, **options).fit(X, y)
        return est.decision_function, np.count_nonzero(est.coef_), ""
    return fit


def fit_cli(X, y, k, job, warm=False):
    """The whole ``asyos run`` process on the training split written to disk here
    (untimed): its CPU seconds (RUSAGE_CHILDREN) and wall seconds replace the
    child's."""
    import resource
    from asyos import load_result
    from asyos.streams import save_csc
    folder = Path(job["folder"]) / ("warm" if warm else "fit")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    save_csc(folder / "X.csc", X)
    np.save(folder / "y.npy", y)
    out = folder / "r.json"
    before, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "asyos", "run", "--data", folder / "X.csc",
                    "--labels", folder / "y.npy", "-s", str(k), "--loss", "logistic",
                    "--out", out, "--quiet"], check=True, capture_output=True)
    after, job["cli_wall"] = (resource.getrusage(resource.RUSAGE_CHILDREN),
                              time.perf_counter() - wall)
    r = load_result(out)
    job["cli_cpu"] = (after.ru_utime + after.ru_stime
                      - before.ru_utime - before.ru_stime)
    sel, w, b = np.asarray(r.selected), np.asarray(r.weights), r.intercept or 0.0
    return (lambda Z: Z[:, sel] @ w + b), len(sel), f"{r.seconds:.2f} s fitting"


def alpha_grid(X, y, job):
    alpha_max = np.abs(X.T @ (y - y.mean())).max() / X.shape[0]
    return alpha_max * np.geomspace(1, job["ratio"], job["n_alphas"])


def walk(make, set_alpha, X, y, k, grid, score="decision_function"):
    """Fit ``make(α)`` warm-started down ``grid`` to the first α with ≥ k nonzeros:
    (its ``score`` method, nonzeros, a note)."""
    est = make(grid[0])
    for t, alpha in enumerate(grid):
        set_alpha(est, alpha)
        est.fit(X, y)
        nnz = np.count_nonzero(est.coef_)
        if nnz >= k:
            break
    note = f"{t + 1} steps, {nnz} nonzeros at {grid[t] / grid[0]:.3g}·max" + (
        "" if nnz >= k else " (path ended short of k)")
    return getattr(est, score), nnz, note


def fit_skglm(X, y, k, job, warm=False):
    from skglm import SparseLogisticRegression
    return walk(lambda a: SparseLogisticRegression(alpha=a, warm_start=True),
                lambda est, a: setattr(est, "alpha", a), X, y, k,
                alpha_grid(X, y, job))


def fit_celer(X, y, k, job, warm=False):
    from celer import LogisticRegression
    n = X.shape[0]
    return walk(lambda a: LogisticRegression(C=1 / (n * a), warm_start=True),
                lambda est, a: est.set_params(C=1 / (n * a)), X, y, k,
                alpha_grid(X, y, job))


def fit_liblinear(X, y, k, job, warm=False):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import l1_min_c
    c_min = l1_min_c(X, y, loss="log")
    grid = 1 / (c_min * np.geomspace(1, 1 / job["ratio"], job["n_alphas"]))
    return walk(lambda a: LogisticRegression(penalty="l1", solver="liblinear", C=1 / a),
                lambda est, a: est.set_params(C=1 / a), X, y, k, grid)


def fit_chi2(X, y, k, job, warm=False):
    from sklearn.feature_selection import SelectKBest, chi2
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    pipe = make_pipeline(SelectKBest(chi2, k=min(k, X.shape[1])),
                         LogisticRegression()).fit(X, y)
    return pipe.decision_function, min(k, X.shape[1]), ""


FITS = {"os": fit_os({}), "os-logistic": fit_os({"loss": "logistic"}),
        "os-1order": fit_os({"loss": "logistic", "n_orders": 1}), "cli": fit_cli,
        "skglm": fit_skglm, "celer": fit_celer, "liblinear": fit_liblinear,
        "chi2": fit_chi2}


def run_child(job: dict, timeout: float, script: str = __file__) -> dict:
    """``script --child job`` (its ``child(job)``) in a fresh process under PARENT,
    killed with its group after ``timeout`` s; its JSON merged with the process's CPU
    seconds and peak MB."""
    command = [sys.executable, "-c", PARENT, sys.executable, script, "--child",
               json.dumps(job)]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        return {"failed": f"over {timeout:.0f} s"}
    lines = stdout.strip().splitlines()
    try:
        status, cpu, peak = lines[-1].split()
        status = int(status)
    except (ValueError, IndexError):
        status = proc.returncode or 1
    if status != 0:
        why = [line for line in stderr.strip().splitlines() if line.strip()]
        return {"failed": why[-1][:70] if why else f"exit status {status}"}
    result = json.loads(lines[-2])
    result.update(process_cpu=float(cpu), peak_mb=int(peak) / 1024,
                  process_wall=time.perf_counter() - start)
    return result


# ---------------------------------------------------------------------------- parent

def prepare(task, docs, folder: Path, seeds):
    """The task's CSC matrix, labels and splits on disk: paths, shape, nnz, classes."""
    import scipy.sparse as sp
    from sklearn.model_selection import train_test_split
    keep, y = task_labels(docs, task)
    start = time.perf_counter()
    X = features([docs[i][2] for i in keep])
    seconds = time.perf_counter() - start
    files = {"X": str(folder / f"{task}.X.npz"), "y": str(folder / f"{task}.y.npy")}
    sp.save_npz(files["X"], X)
    np.save(files["y"], y)
    for seed in seeds:
        train, test = train_test_split(np.arange(len(y)), test_size=0.25,
                                       stratify=y, random_state=seed)
        np.save(folder / f"{task}.{seed}.train.npy", np.sort(train))
        np.save(folder / f"{task}.{seed}.test.npy", np.sort(test))
    return files, {"n": X.shape[0], "p": X.shape[1], "nnz": int(X.nnz),
                   "positives": int(y.sum()), "seconds": seconds}


# The scores of a table: (column heading, key, which split is the worst).
SCORES = (("AUC", "auc", min), ("accuracy", "acc", min))


def summary(rs, scores=SCORES):
    """The mean over splits of each score and of the costs, each score's worst split;
    the first failure instead, if any."""
    for r in rs:
        if "failed" in r:
            return r
    out = {key: float(np.mean([r[key] for r in rs]))
           for key in [key for _, key, _ in scores] + ["cpu", "wall", "nnz"]}
    out.update({f"{key}_worst": worst(r[key] for r in rs) for _, key, worst in scores})
    out.update(peak_mb=max(r["peak_mb"] for r in rs), note=rs[0]["note"])
    return out


def print_table(heading, table, methods, names, ks, n_seeds, scores=SCORES):
    """A markdown table of ``table[k][method]`` (``summary``'s), each row's CPU
    seconds over skglm's, and the methods' notes."""
    print(f"\n### {heading}\n")
    worst = n_seeds > 1
    print("| k | method | " + " | ".join(name + (" (worst)" if worst else "")
                                      for name, _, _ in scores)
          + " | nonzeros | CPU s | wall s | ÷ skglm | peak MB |")
    print("|---|---|" + "---|" * (len(scores) + 5))
    for k in ks:
        ref = table[k].get("skglm", {})
        for m in methods:
            r = table[k][m]
            if "failed" in r:
                print(f"| {k} | {names[m]} | {r['failed']} |" + " |" * (len(scores) + 4))
                continue
            values = " | ".join(f"{r[key]:.3f}" + (f" ({r[key + '_worst']:.3f})"
                                                   if worst else "")
                                for _, key, _ in scores)
            ratio = (f"{r['cpu'] / ref['cpu']:.2f}" if "cpu" in ref and ref["cpu"] > 0
                     and m != "skglm" else "")
            print(f"| {k} | {names[m]} | {values} | {r['nnz']:.0f} | "
                  f"{r['cpu']:.2f} | {r['wall']:.2f} | {ratio} | {r['peak_mb']:.0f} |")
    notes = [f"k = {k}, {names[m]}: {table[k][m]['note']}" for k in ks
             for m in methods if table[k][m].get("note")]
    if notes:
        print("\n" + "\n".join(f"- {n}" for n in notes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="seed 0, k ∈ {10, 100}")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--k", nargs="+", type=int, default=[10, 30, 100, 300])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+", default=list(METHODS),
                        choices=list(METHODS))
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds a method's process may run (each)")
    parser.add_argument("--n-alphas", type=int, default=100)
    parser.add_argument("--ratio", type=float, default=1e-3)
    parser.add_argument("--with-gcloud", action="store_true",
                        help="keep the gcloud_*.1 pages")
    parser.add_argument("--versus", metavar="CHECKOUT",
                        help="also run the estimator rows from this checkout of "
                        "asyos (e.g. a git worktree of the head before), each split "
                        "beside this one's")
    args = parser.parse_args()
    if args.child:
        job = json.loads(args.child)
        result = child(job)
        if "cli_cpu" in job:
            result["cpu"], result["wall"] = job["cli_cpu"], job["cli_wall"]
        print(json.dumps(result))
        return
    why = check_pages()
    if why:
        raise SystemExit(f"real_text.py: {why}; {NEEDS}")
    if args.quick:
        args.seeds, args.k = [0], [10, 100]
    methods = [m for m in METHODS if m in args.methods]
    rows, names = [], dict(METHODS)   # the table's rows: with --versus, each beside
    for m in methods:                 # its row from the other checkout
        rows.append(m)
        if args.versus and m in VERSUS:
            rows.append(m + BEFORE)
            names[m + BEFORE] = f"{METHODS[m]}, {Path(args.versus).name}"
    versions = []
    for module in ("asyos", "sklearn", "skglm", "celer"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except Exception:  # noqa: BLE001 - missing or without __version__
            versions.append(f"{module} (not installed)")
    folder = Path(tempfile.mkdtemp(prefix="asyos-real-text-"))
    try:
        start = time.perf_counter()
        docs = man_pages(with_gcloud=args.with_gcloud)
        counts = {s: sum(d[0] == s for d in docs) for s in "1238"}
        print(f"{len(docs)} pages read in {time.perf_counter() - start:.1f} s: "
              + ", ".join(f"section {s}: {c}" for s, c in counts.items()),
              file=sys.stderr, flush=True)
        tables = {}
        for task in args.tasks:
            files, info = prepare(task, docs, folder, args.seeds)
            print(f"{task}: {info['n']} x {info['p']}, nnz {info['nnz']} "
                  f"(vectorized in {info['seconds']:.1f} s)", file=sys.stderr,
                  flush=True)
            table = {}
            for k in args.k:
                table[k] = {}
                for m in methods:
                    if m in THIRD_PARTY and importlib.util.find_spec(
                            THIRD_PARTY[m]) is None:
                        table[k][m] = {"failed": f"not installed (pip install {m})"}
                        continue
                    # with --versus, each split's fit from the other checkout
                    # runs beside this one's, in alternating order
                    roots = {m: None}
                    if args.versus and m in VERSUS:
                        roots[m + BEFORE] = args.versus
                    rs = {name: [] for name in roots}
                    for seed in args.seeds:
                        for name in sorted(roots, reverse=seed % 2 == 1):
                            job = {"method": m, "k": k, **files,
                                   "train": str(folder / f"{task}.{seed}.train.npy"),
                                   "test": str(folder / f"{task}.{seed}.test.npy"),
                                   "folder": str(folder / f"{task}-{m}-{k}-{seed}"),
                                   "n_alphas": args.n_alphas, "ratio": args.ratio,
                                   "root": roots[name]}
                            r = run_child(job, args.timeout)
                            rs[name].append(r)
                            print(f"  {task} k={k} {name} seed {seed}: "
                                  + (r["failed"] if "failed" in r else
                                     f"AUC {r['auc']:.3f}, acc {r['acc']:.3f}, "
                                     f"{r['cpu']:.2f} CPU s, {r['peak_mb']:.0f} MB "
                                     f"{r['note']}"), file=sys.stderr, flush=True)
                        if any("failed" in r[-1] for r in rs.values()):
                            break
                    for name, results in rs.items():
                        table[k][name] = summary(results)
            tables[task] = (info, table)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}; {', '.join(versions)}")
    print(f"seeds {' '.join(map(str, args.seeds))}, k {' '.join(map(str, args.k))}, "
          f"{args.n_alphas} path steps down to {args.ratio:g}·max, timeout "
          f"{args.timeout:.0f} s" + (", gcloud pages kept" if args.with_gcloud else ""))
    for task in args.tasks:
        info, table = tables[task]
        print_table(f"{TASKS[task]}: n = {info['n']} ({info['positives']} positive), "
                    f"p = {info['p']}, nnz = {info['nnz']}", table, rows, names,
                    args.k, len(args.seeds))


if __name__ == "__main__":
    main()
