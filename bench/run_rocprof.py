"""tracekit benchmark for rocprofv3 CSV: read a real output directory scaled to at least
2M kernel rows, next to two baselines on the same files in the same run: Python's csv
module (a row-by-row reader's floor) and a bare pyarrow.csv read (the column-wise floor).

    python bench/run_rocprof.py              # llama.cpp ROCm 7 run from ../shared, 2M rows
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "fixtures" / "rocprof-v3" / \
    "jimw_llamacpp_rocm7"

STEPS = {
    "csv module rows (baseline)":
        "import csv,glob,sys; [sum(1 for _ in csv.reader(open(p, newline=''))) "
        "for p in glob.glob(sys.argv[1] + '/*.csv')]",
    "pyarrow.csv read":
        "import glob,sys,pyarrow.csv as c; [c.read_csv(p) for p in glob.glob(sys.argv[1] + "
        "'/*.csv')]",
    "tracekit read":
        "import sys,tracekit; tracekit.read(sys.argv[1])",
    "tracekit analyze -a summary":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), 'summary')",
    "tracekit analyze (bottleneck)":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), 'bottleneck')",
    "tracekit convert -> .pftrace":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2])",
}
# Columns shifted per copy: times by the run's span, ids by their largest value.
TIMES = ("Start_Timestamp", "End_Timestamp")
IDS = ("Correlation_Id", "Dispatch_Id")


def scale(source: Path, out: Path, kernel_rows: int) -> int:
    """Copy every CSV of ``source`` into ``out``, repeated until the kernel trace has at
    least ``kernel_rows`` rows; each copy starts after the previous one ends, with fresh
    correlation and dispatch ids. Returns the rows written (all files)."""
    out.mkdir()
    tables = {}
    for path in sorted(source.glob("*.csv")):
        with open(path, newline="") as fh:
            rows = list(csv.reader(fh))
        tables[path.name] = (rows[0], rows[1:])
    kernels = next(rows for name, (_, rows) in tables.items() if "kernel_trace" in name)
    copies = -(-kernel_rows // len(kernels))
    starts = [int(r[c]) for h, rows in tables.values() for r in rows for c in
              [h.index(t) for t in TIMES if t in h]]
    span = max(starts) - min(starts) + 1
    largest = max(int(r[h.index(i)]) for h, rows in tables.values() for r in rows
                  for i in IDS if i in h) + 1
    written = 0
    for name, (header, rows) in tables.items():
        times = [header.index(t) for t in TIMES if t in header]
        ids = [header.index(i) for i in IDS if i in header]
        with open(out / name, "w", newline="") as fh:
            w = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
            w.writerow(header)
            for k in range(copies):
                for r in rows:
                    r = list(r)
                    for c in times:
                        r[c] = str(int(r[c]) + k * span)
                    for c in ids:
                        r[c] = str(int(r[c]) + k * largest)
                    w.writerow(r)
                written += len(rows)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--rows", type=int, default=2_000_000)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from run import byte_compile, measure, print_results
    byte_compile()

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "scaled"
        n = scale(a.source, run, a.rows)
        size = sum(p.stat().st_size for p in run.iterdir()) / 2**20
        print(f"input: {n:,} CSV rows ({size:,.0f} MiB) in {len(list(run.iterdir()))} files, "
              f"scaled from {a.source.name}")
        results = {label: measure(code, str(run), str(Path(tmp) / "out.pftrace"))
                   for label, code in STEPS.items()}
        print_results(results, "csv module rows (baseline)", n, "rows/s")


if __name__ == "__main__":
    main()
