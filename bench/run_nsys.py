"""tracekit benchmark for Nsight Systems exports: read a real export scaled to at least 5M
kernel + API rows, next to a raw ``SELECT *`` scan of the same tables in the same run.

    python bench/run_nsys.py                 # cloverleaf export from ../shared, 5M rows
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "fixtures" / "nsys-sqlite" / \
    "pipit_cloverleaf_nsys2024.5.1_a100.sqlite"

STEPS = {
    "sqlite3 SELECT * (baseline)":
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
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2])",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--rows", type=int, default=5_000_000)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from run import measure, print_results
    from scale_nsys import scale

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "scaled.sqlite"
        n = scale(a.source, db, a.rows)
        print(f"input: {n:,} kernel + runtime rows ({db.stat().st_size / 2**20:,.0f} MiB), "
              f"scaled from {a.source.name}")
        results = {label: measure(code, str(db), str(Path(tmp) / "out.pftrace"))
                   for label, code in STEPS.items()}
        print_results(results, "sqlite3 SELECT * (baseline)", n, "rows/s")


if __name__ == "__main__":
    main()
