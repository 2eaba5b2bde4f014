"""OS at scale: features per second and peak memory, from disk and from generated spaces.

Each configuration runs in its own process (so its peak resident memory, VmHWM, is its
own) and the table is printed at the end, side by side in one run:

* ``disk``: a feature-major ``.npy`` of n × p (written once per dtype, in blocks, into
  ``--dir``), sequential OS with s = ``-s`` for ``--epochs`` passes, float64 and float32,
  with and without read-ahead (prefetch);
* ``interactions``: the degree-2 products of d Gaussian base features (d + d(d+1)/2
  features), generated on the fly, float32;
* ``sparse``: a text-like CSC matrix (``--text-n`` documents × ``--p`` words, word
  frequencies falling like a power law, a few hundred words per document), the sparse
  kernel (cost ∝ nonzeros touched), and beside it the dense kernel on its first
  ``--dense-p`` columns (the ratio of their steps/s is the point);
* beside them, abess and scikit-learn's ``Lasso`` on the first p columns of the same
  file held in memory, for growing p until one fails or passes ``--batch-timeout``
  (dense float64 for the disk file; CSC for the text-like matrix);
* ``csc``: a text-like svmlight file (``--csc-n`` documents over ``--p`` words, word
  frequencies falling like a power law), converted by ``asyos convert`` into the
  ``.csc`` layout, then sequential OS on that directory from disk (``asyos run``),
  each in its own process: seconds and peak RSS (the ru_maxrss ``/usr/bin/time -v``
  reports), beside the floor (``asyos run`` on a 50-row ``.csc``: the interpreter and
  the compiled kernels).

    python benchmarks/scale.py --only csc [--p 1000000] [--csc-n 30000] [-s 100]

    python benchmarks/scale.py [--p 1000000] [--n 1000] [-s 100] [--d 2000] [--epochs 1]

Columns: feature-steps per second (p·epochs / seconds of the OS run, reading
included), peak RSS of the process (MB), and the size of the data it went through.
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

PROBE = r"""
import json, sys, time
import numpy as np
from asyos.solvers.sequential import fit_os
from asyos.streams import GaussianStream, InteractionStream, NpyStream

kind, arg, dtype, prefetch, s, epochs, n = sys.argv[1:8]
s, epochs, n = int(s), int(epochs), int(n)

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

if kind == "disk":
    stream = NpyStream(arg, dtype=dtype, block_size=512)
    y = np.load(arg + ".y.npy")
elif kind.startswith("sparse"):
    import scipy.sparse as sp
    from asyos.streams import FeatureStream, SparseStream
    path, p = arg.split(":")
    X = sp.load_npz(path)[:, :int(p)]
    y = np.load(path + ".y.npy")
    stream = SparseStream(X, dtype=dtype, block_size=512)
    if kind == "sparse-dense":   # the same columns through the dense kernel
        stream.sparse = False
        stream.kept_set = lambda capacity: FeatureStream.kept_set(stream, capacity)
        stream.step_blocks = stream.blocks
    n = X.shape[0]
    fit_os(SparseStream(sp.random(n, 50, density=0.1, format="csc")), y, 5)
else:
    d = int(arg)
    base = GaussianStream(n, d, design_seed=7)
    stream = InteractionStream(base, 2, dtype=dtype, block_size=512)
    B = base.columns(np.arange(d))
    y = B[3] * B[17] - B[5]
stream.prefetch = prefetch == "on"
fit_os(GaussianStream(n, 50), y, 5)   # compile and warm up outside the timing
start = time.perf_counter()
result = fit_os(stream, y, s, epochs=epochs)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "steps": result.n_steps, "peak_mb": hwm(),
                  "kept_mb": result.kept_bytes / 2**20,
                  "selected": result.selected[:5].tolist()}))
"""


BATCH = r"""
import json, sys, time
import numpy as np

tool, path, p, s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

if path.endswith(".npz"):
    import scipy.sparse as sp
    X = sp.load_npz(path)[:, :p].tocsc()
else:
    X = np.array(np.load(path, mmap_mode="r")[:, :p], dtype=np.float64, order="F")
y = np.load(path + ".y.npy")
if tool == "sklearn-lasso":
    from sklearn.linear_model import Lasso
    # the text-like y has another scale: a twentieth of λ_max gives ~s nonzeros there
    alpha = 0.05 if not path.endswith(".npz") else np.abs(X.T @ y).max() / len(y) / 20
    model = Lasso(alpha=alpha, fit_intercept=False)
else:
    from abess import LinearRegression
    model = LinearRegression(support_size=[s], fit_intercept=False)
start = time.perf_counter()
if tool == "abess" and path.endswith(".npz"):
    model.fit(X, y, sparse_matrix=True)
else:
    model.fit(X, y)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_mb": hwm(),
                  "nnz": int(np.count_nonzero(model.coef_))}))
"""


def run_batch(tool: str, path: Path, p: int, args) -> dict:
    """A batch method on the first p columns, held in memory as float64."""
    try:
        proc = subprocess.run([sys.executable, "-c", BATCH, tool, str(path), str(p),
                               str(args.s)], capture_output=True, text=True,
                              timeout=args.batch_timeout)
    except subprocess.TimeoutExpired:
        return {"failed": f"over {args.batch_timeout:.0f} s"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"failed": lines[-1][:60] if lines else
                f"exit status {proc.returncode} (killed: out of memory?)"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_design(path: Path, n: int, p: int, dtype) -> None:
    """A feature-major Gaussian (n, p) file with y = x_0 − 2·x_{p//2} + noise."""
    if path.exists() and np.load(path, mmap_mode="r").shape == (n, p):
        return
    X = open_memmap(path, mode="w+", dtype=dtype, shape=(n, p), fortran_order=True)
    rng = np.random.default_rng(0)
    step = max(1, (64 << 20) // (n * 8))
    for first in range(0, p, step):
        last = min(first + step, p)
        X[:, first:last] = rng.standard_normal((n, last - first))
    X.flush()
    y = X[:, 0].astype(np.float64) - 2 * X[:, p // 2] + 0.1 * rng.standard_normal(n)
    del X
    np.save(str(path) + ".y.npy", y)


def write_text_like(path: Path, n: int, p: int) -> None:
    """A CSC (n documents, p words) matrix like a tf-idf bag of words: word j occurs
    in about n·0.2/sqrt(j+1) documents (a power law), positive weights; y is a sparse
    combination of 20 mid-frequency words plus noise."""
    import scipy.sparse as sp

    if path.exists():
        return
    rng = np.random.default_rng(0)
    counts = np.clip(n * 0.2 / np.sqrt(np.arange(p) + 1.0), 1, n).astype(np.int64)
    counts = counts[rng.permutation(p)]
    indptr = np.zeros(p + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    rows = rng.integers(0, n, size=indptr[-1]).astype(np.int32)
    X = sp.csc_matrix((rng.exponential(1.0, indptr[-1]), rows, indptr), shape=(n, p))
    X.sum_duplicates()
    sp.save_npz(path, X, compressed=False)
    middle = np.argsort(counts)[p // 2: p // 2 + 20]
    y = X[:, middle] @ rng.choice([-2.0, 2.0], 20) + 0.1 * rng.standard_normal(n)
    np.save(str(path) + ".y.npy", y)


def write_text_svmlight(path: Path, n: int, p: int, words: float) -> int:
    """A bag-of-words svmlight file: n documents of about ``words`` draws from p words
    (Zipf: word of rank r drawn with probability ∝ 1/(r + 10)), the value of a word
    log(1 + count) times a random idf-like factor, 3 decimals; y is a combination of
    20 words of ranks 100 to 2000 (in 0.2 %–6 % of the documents) plus noise.
    Written a few thousand documents at a time, the text built by numpy.  Returns
    the number of nonzeros."""
    rng = np.random.default_rng(0)
    cdf = np.cumsum(1.0 / (np.arange(p) + 10.0))
    cdf /= cdf[-1]
    word_of_rank = rng.permutation(p)            # frequent words anywhere in 0..p-1
    coef = np.zeros(p)
    ranks = np.unique(np.geomspace(100, 2000, 20).astype(np.int64))
    coef[word_of_rank[ranks]] = rng.choice([-2.0, 2.0], len(ranks))
    digits = 10 ** np.arange(6, -1, -1)          # one-based indices up to 10⁷ - 1
    nnz = 0
    with open(path, "wb") as out:
        for first in range(0, n, 2000):
            m = min(2000, n - first)
            doc = np.repeat(np.arange(m), rng.poisson(words, m))
            word = word_of_rank[np.searchsorted(cdf, rng.random(doc.size))]
            key, count = np.unique(doc * p + word, return_counts=True)   # sorted
            doc, word = key // p, key % p
            value = np.round(np.log1p(count) * (1 + rng.random(count.size)), 3)
            y = np.bincount(doc, coef[word] * value, minlength=m) + \
                0.1 * rng.standard_normal(m)
            nnz += key.size
            # one token " IIIIIII:VV.FFF" per entry, leading zeros then dropped
            index, whole = word + 1, value.astype(np.int64)
            tenths = np.round((value - whole) * 1000).astype(np.int64)
            cells = np.empty((key.size, 15), np.uint8)
            cells[:, 0], cells[:, 8], cells[:, 11] = ord(" "), ord(":"), ord(".")
            cells[:, 1:8] = ord("0") + (index[:, None] // digits) % 10
            cells[:, 9], cells[:, 10] = ord("0") + whole // 10, ord("0") + whole % 10
            cells[:, 12:15] = ord("0") + (tenths[:, None] // digits[-3:]) % 10
            keep = np.ones(cells.shape, bool)
            keep[:, 1:8] = np.arange(7) >= 7 - (np.floor(np.log10(index)) + 1)[:, None]
            keep[:, 9] = whole >= 10
            body = cells[keep].tobytes()
            ends = np.r_[0, np.cumsum(keep.sum(axis=1))][np.searchsorted(
                doc, np.arange(m + 1))]
            out.write(b"".join(b"%.6f" % y[k] + body[ends[k]:ends[k + 1]] + b"\n"
                               for k in range(m)))
    return nnz


PEAK = r"""
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def measured(command: list, timeout: float) -> dict:
    """Run ``command`` as the child of a fresh small process (a child inherits its
    parent's peak through fork, so not of this one): exit status, seconds, peak RSS
    in MB (its ru_maxrss, what ``/usr/bin/time -v`` reports)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK, *map(str, command)],
                          capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - start
    status, peak_kib = (int(v) for v in proc.stdout.split()[-2:])
    if status != 0:
        raise SystemExit(f"{' '.join(map(str, command))}: exit status {status}\n"
                         f"{proc.stderr}")
    return {"seconds": seconds, "peak_mb": peak_kib / 1024, "stdout": proc.stdout}


def disk_mb(path: Path) -> float:
    files = path.rglob("*") if path.is_dir() else [path]
    return sum(f.stat().st_size for f in files if f.is_file()) / 1e6


def run_csc(args, folder: Path) -> list[tuple[str, dict]]:
    """Text svmlight → .csc by ``asyos convert``, then ``asyos run`` on it from disk;
    and the floor, ``asyos run`` on a tiny .csc."""
    asyos = [sys.executable, "-m", "asyos"]
    text = folder / f"text_{args.csc_n}x{args.p}.svm"
    if not text.exists():
        start = time.perf_counter()
        nnz = write_text_svmlight(text, args.csc_n, args.p, args.csc_words)
        print(f"{text}: {nnz} nonzeros, {disk_mb(text):.0f} MB "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    csc = folder / f"text_{args.csc_n}x{args.p}.csc"
    shutil.rmtree(csc, ignore_errors=True)
    rows = [("asyos convert (svmlight → .csc)",
             measured([*asyos, "convert", text, csc, "--quiet"], args.timeout))]
    rows[-1][1]["data"] = f"{disk_mb(text):.0f} MB text → {disk_mb(csc):.0f} MB"
    meta = json.loads((csc / "meta.json").read_text())
    print(f"{csc}: n = {meta['n_samples']}, p = {meta['n_features']}, nnz = "
          f"{meta['nnz']}", file=sys.stderr)
    rows.append((f"asyos run -s {args.s} on the .csc",
                 measured([*asyos, "run", "--data", csc, "-s", args.s, "--epochs",
                           args.epochs, "--quiet", "--force", "--out",
                           folder / "csc_run.json"],
                          args.timeout)))
    result = json.loads((folder / "csc_run.json").read_text())
    rows[-1][1]["data"] = f"{meta['n_features'] * args.epochs} feature steps, " \
        f"{result['timings']['seconds']:.0f} s fitting"
    tiny = folder / "tiny.svm"
    tiny.write_text("".join(f"{k % 3 - 1} {k + 1}:1.5 {k + 7}:2\n" for k in range(50)))
    measured([*asyos, "convert", tiny, folder / "tiny", "--quiet"], args.timeout)
    rows.append(("floor: asyos run on a 50-row .csc",
                 measured([*asyos, "run", "--data", folder / "tiny.csc", "-s", "5",
                           "--epochs", "1", "--quiet"], args.timeout)))
    rows[-1][1]["data"] = "interpreter + kernels"
    return rows


def run(kind, arg, dtype, prefetch, args) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, kind, str(arg), dtype, prefetch,
                           str(args.s), str(args.epochs), str(args.n)],
                          capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} {dtype}: failed\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


TOOLS = ["abess", "sklearn-lasso"]
PARTS = ["disk", "text", "interactions", "batch-dense", "batch-text", "csc"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--p", type=int, default=1_000_000)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("-s", type=int, default=100)
    parser.add_argument("--d", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--dir", default="/tmp/asyos-scale")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--batch-ps", type=int, nargs="*",
                        default=[10_000, 100_000, 300_000, 1_000_000],
                        help="p values at which abess and scikit-learn's Lasso run, "
                        "on the first p columns held in memory")
    parser.add_argument("--batch-timeout", type=float, default=600)
    parser.add_argument("--text-n", type=int, default=10000,
                        help="documents of the text-like sparse matrix")
    parser.add_argument("--dense-p", type=int, default=5000,
                        help="columns of the text-like matrix for the dense kernel")
    parser.add_argument("--text-batch-ps", type=int, nargs="*",
                        default=[100_000, 1_000_000])
    parser.add_argument("--csc-n", type=int, default=30_000,
                        help="documents of the text-like svmlight file (csc part)")
    parser.add_argument("--csc-words", type=float, default=400,
                        help="word draws per document (csc part; repeats merge)")
    parser.add_argument("--tools", nargs="+", default=TOOLS, choices=TOOLS)
    parser.add_argument("--only", nargs="+", default=PARTS, choices=PARTS,
                        help="run only these parts (default: all)")
    args = parser.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for dtype in ("float32", "float64") if "disk" in args.only else ():
        path = folder / f"X_{args.n}x{args.p}_{dtype}.npy"
        start = time.perf_counter()
        write_design(path, args.n, args.p, dtype)
        print(f"{path}: ready ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
        for prefetch in ("on", "off"):
            rows.append((f"disk {dtype}", f"prefetch {prefetch}",
                         args.n * args.p * np.dtype(dtype).itemsize / 1e9,
                         run("disk", path, dtype, prefetch, args)))
    text = folder / f"text_{args.text_n}x{args.p}.npz"
    if "text" in args.only:
        write_text_like(text, args.text_n, args.p)
        for kind, p in (("sparse", args.p), ("sparse-dense", args.dense_p)):
            rows.append((f"text-like {kind} p={p}", "in memory",
                         text.stat().st_size * p / args.p / 1e9,
                         run(kind, f"{text}:{p}", "float64", "on", args)))
    csc = run_csc(args, folder) if "csc" in args.only else []
    d = args.d
    if "interactions" in args.only:
        rows.append((f"interactions d={d} float32", "prefetch on",
                     args.n * (d + d * (d + 1) // 2) * 4 / 1e9,
                     run("interactions", d, "float32", "on", args)))
    batch = []
    float64 = folder / f"X_{args.n}x{args.p}_float64.npy"
    parts = [(float64, args.batch_ps, "batch-dense"), (text, args.text_batch_ps,
                                                       "batch-text")]
    for tool in args.tools:
        for data, ps, part in parts:
            if part not in args.only or not data.exists():
                continue
            for p in sorted(q for q in ps if q <= args.p):
                batch.append((f"{tool} {'CSC' if data == text else 'dense'}", p,
                              run_batch(tool, data, p, args)))
                if "failed" in batch[-1][2]:
                    break           # a larger p will not do better
    if csc:
        print(f"text-like svmlight, n = {args.csc_n}, p = {args.p}; targets: convert "
              "≤ 500 MB, run ≤ 200 MB peak RSS")
        print(f"{'process':>36} {'seconds':>8} {'peak RSS MB':>12}  data")
        for name, r in csc:
            print(f"{name:>36} {r['seconds']:8.1f} {r['peak_mb']:12.0f}  {r['data']}")
    if not rows and not batch:
        return
    print(f"n = {args.n}, s = {args.s}, {args.epochs} epoch(s); p = {args.p} on disk")
    print(f"{'source':>28} {'read':>13} {'data GB':>8} {'steps':>9} {'steps/s':>9} "
          f"{'peak RSS MB':>12} {'kept MB':>8}")
    for source, mode, gb, r in rows:
        print(f"{source:>28} {mode:>13} {gb:8.2f} {r['steps']:9d} "
              f"{r['steps'] / r['seconds']:9.0f} {r['peak_mb']:12.0f} {r['kept_mb']:8.2f}")
    print("batch methods, X in memory (float64): abess LinearRegression(support_size="
          f"[{args.s}]), scikit-learn Lasso(alpha=0.05; "
          "λ_max/20 on the text-like matrix)")
    print(f"{'method':>20} {'p':>9} {'seconds':>9} {'peak RSS MB':>12} {'nnz':>6}")
    for tool, p, r in batch:
        if "failed" in r:
            print(f"{tool:>20} {p:9d}   failed: {r['failed']}")
        else:
            print(f"{tool:>20} {p:9d} {r['seconds']:9.1f} {r['peak_mb']:12.0f} "
                  f"{r['nnz']:6d}")


if __name__ == "__main__":
    main()
