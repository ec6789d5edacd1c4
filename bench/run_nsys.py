"""tracekit benchmark for Nsight Systems exports: read a real export scaled to at least 5M
kernel + API rows, next to a raw ``SELECT *`` scan of the same tables in the same run.

    python bench/run_nsys.py                 # cloverleaf export from ../shared, 5M rows
    python bench/run_nsys.py --rows 1000000 --repeat 3 --steps "read|pftrace" --old HEAD~1
    python bench/run_nsys.py --rows 3000000 --steps parquet   # streamed against whole trace

Each step runs in a fresh process; its wall and CPU seconds (user + system) and peak RSS are
reported, with ``--repeat N`` the medians of N rounds run in turn. ``--old REV`` also converts
with the Perfetto writer of git revision REV (see ``run.py``), on the same file in the same
run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "fixtures" / "nsys-sqlite" / \
    "pipit_cloverleaf_nsys2024.5.1_a100.sqlite"

BASELINE = "sqlite3 SELECT * (baseline)"
STEPS = {
    BASELINE:
        "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
        "[c.execute(f'SELECT * FROM {t}').fetchall() for t in "
        "('CUPTI_ACTIVITY_KIND_KERNEL','CUPTI_ACTIVITY_KIND_RUNTIME')]",
    "ADBC SELECT * to Arrow":
        "import sys,adbc_driver_sqlite.dbapi as a; c=a.connect(sys.argv[1]); "
        "[(k:=c.cursor(), k.execute(f'SELECT * FROM {t}'), k.fetch_arrow_table()) for t in "
        "('CUPTI_ACTIVITY_KIND_KERNEL','CUPTI_ACTIVITY_KIND_RUNTIME')]",
    "tracekit read":
        "import sys,tracekit; tracekit.read(sys.argv[1])",
    "tracekit analyze -a summary":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), 'summary')",
    "tracekit convert -> .pftrace":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2], force=True)",
    # What a user runs: the command (it streams the CPU samples, keeps the rest to the end).
    "command: tracekit convert -> .pftrace":
        "import sys; from tracekit.cli import main; "
        "assert main(['convert', sys.argv[1], '-o', sys.argv[2], '--force', '-q']) == 0",
    # Parquet takes batches: the library call reads the whole trace first, the command
    # writes each fetched batch as it comes (pipeline.convert(stream=True)).
    "tracekit convert -> .parquet, whole trace":
        "import sys,tracekit; tracekit.convert(sys.argv[1], sys.argv[2] + '.parquet', "
        "force=True)",
    "command: tracekit convert -> .parquet, streamed":
        "import sys; from tracekit.cli import main; assert main(['convert', sys.argv[1], "
        "'-o', sys.argv[2] + '.parquet', '--force', '-q']) == 0",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--steps", default="", help="a regex: run only the steps it matches "
                    "(the baseline always runs)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of all steps, run in turn; the median of each is kept")
    ap.add_argument("--old", metavar="REV", help="also convert with the Perfetto writer of "
                    "this git revision")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from run import Figures, byte_compile, old_writer, run_step
    byte_compile()
    from scale_nsys import scale

    steps = {k: v for k, v in STEPS.items() if k == BASELINE or re.search(a.steps, k)}
    with tempfile.TemporaryDirectory() as tmp:
        if a.old:
            steps[f"convert -> .pftrace, writer of {a.old}"] = old_writer(a.old, Path(tmp))
        db = Path(tmp) / "scaled.sqlite"
        n = scale(a.source, db, a.rows)
        print(f"input: {n:,} kernel + runtime rows ({db.stat().st_size / 2**20:,.0f} MiB), "
              f"scaled from {a.source.name}")
        rounds: dict[str, list[Figures]] = {label: [] for label in steps}
        for _ in range(a.repeat):
            for label, code in steps.items():
                rounds[label].append(run_step(code, str(db), str(Path(tmp) / "out.pftrace")))
        results = {label: Figures(*(statistics.median(f[i] for f in runs) for i in range(3)))
                   for label, runs in rounds.items()}
        print_cpu(results, BASELINE, n, "rows")


def print_cpu(results: dict[str, Any], baseline: str, n: int, what: str) -> None:
    """Wall and CPU seconds and peak RSS per step, CPU seconds also as a ratio to the
    baseline step's."""
    base = results[baseline]
    print(f"{'step':<44} {'wall s':>7} {'CPU s':>7} {'x base':>6} {what + '/CPU s':>13} "
          f"{'peak MiB':>9}")
    for label, f in results.items():
        print(f"{label:<44} {f.seconds:7.2f} {f.cpu:7.2f} {f.cpu / base.cpu:6.2f} "
              f"{n / f.cpu:13,.0f} {f.rss:9,.0f}")


if __name__ == "__main__":
    main()
