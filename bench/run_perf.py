"""tracekit benchmark for perf script text: a real recording repeated (times shifted) to
about 1 GB, read, analyzed and converted, next to a bare line-by-line read of the same text.

    python bench/run_perf.py                  # haandfeng aarch64 recording from ../shared
    python bench/run_perf.py --mib 200 --source fixtures/perf-recorded/burn.perf
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "fixtures" / "perf-script" / \
    "haandfeng_aarch64" / "out.perf"
TIMESTAMP = re.compile(r"(\s)(\d+)\.(\d{6}):")

STEPS = {
    "python line loop (baseline)":
        "import sys\nfor line in open(sys.argv[1], errors='replace'): pass",
    "tracekit read":
        "import sys,tracekit; tracekit.read(sys.argv[1])",
    "tracekit analyze -a hotspots":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), 'hotspots')",
    "tracekit convert -> .folded":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2])",
    "tracekit convert -> .pftrace":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[3])",
}


def scale(source: Path, target: Path, mib: int) -> int:
    """Write ``source``'s samples again and again, each copy shifted past the last, until
    ``target`` holds ``mib`` MiB; return the number of samples written."""
    text = source.read_text(errors="replace")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n\n"
    stamps = [int(s) * 10**6 + int(f) for _, s, f in TIMESTAMP.findall(body)]
    span = max(stamps) - min(stamps) + 1_000
    per_copy = len(stamps)
    written, copies = 0, 0
    with open(target, "w") as out:
        while written < mib * 2**20:
            shift = copies * span

            def shifted(m: re.Match[str], shift: int = shift) -> str:
                us = int(m.group(2)) * 10**6 + int(m.group(3)) + shift
                return f"{m.group(1)}{us // 10**6}.{us % 10**6:06d}:"

            chunk = TIMESTAMP.sub(shifted, body)
            out.write(chunk)
            written += len(chunk)
            copies += 1
    return per_copy * copies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--mib", type=int, default=1024)
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from run import measure, print_results

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "scaled.perf"
        n = scale(a.source, text, a.mib)
        print(f"input: {n:,} samples ({text.stat().st_size / 2**20:,.0f} MiB of text), "
              f"scaled from {a.source.name}")
        results = {label: measure(code, str(text), str(Path(tmp) / "out.folded"),
                                  str(Path(tmp) / "out.pftrace"))
                   for label, code in STEPS.items()}
        print_results(results, "python line loop (baseline)", n, "samples/s")


if __name__ == "__main__":
    main()
