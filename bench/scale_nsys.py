"""Scale a real Nsight Systems export: repeat its kernel and runtime rows with shifted times and
correlation ids until the two tables hold at least N rows together."""

from __future__ import annotations

import argparse
import shutil
import sqlite3
from pathlib import Path

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"


def scale(src: Path, dst: Path, target: int) -> int:
    """Copy ``src`` to ``dst`` and grow it; return the kernel + runtime row count."""
    shutil.copyfile(src, dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    span = con.execute(f"SELECT max(end) - min(start) + 1000 FROM (SELECT start, end FROM "
                       f"{KERNEL} UNION ALL SELECT start, end FROM {RUNTIME})").fetchone()[0]
    corr = con.execute(f"SELECT max(correlationId) + 1 FROM {RUNTIME}").fetchone()[0]

    def rows() -> int:
        return sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                   for t in (KERNEL, RUNTIME))

    copies = 1
    while rows() < target:
        # Double: every row again, shifted past everything so far.
        n = min(copies, -(-(target - rows()) // max(rows() // copies, 1)))
        for table in (KERNEL, RUNTIME):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
            shifted = [f"{c} + {span * copies}" if c in ("start", "end") else
                       f"{c} + {corr * copies}" if c == "correlationId" else c for c in cols]
            base = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] // copies
            con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(shifted)} "
                        f"FROM {table} LIMIT {base * n}")
        copies += n
        con.commit()
    total = rows()
    con.close()
    return total


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--rows", type=int, default=5_000_000)
    a = ap.parse_args()
    print(scale(a.src, a.dst, a.rows))
