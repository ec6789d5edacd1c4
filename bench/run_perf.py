"""tracekit benchmark for perf script text: a real recording repeated (times shifted) to
about 1 GB, read, analyzed and converted, next to a bare line-by-line read of the same text.

    python bench/run_perf.py                  # haandfeng aarch64 recording from ../shared
    python bench/run_perf.py --mib 200 --source fixtures/perf-recorded/burn.perf
    python bench/run_perf.py --steps read --old 1630a86 --repeat 3

``--old REV`` also measures the perf reader of git revision REV (its plugins/perf files,
imported from a temporary folder), on the same file in the same run; ``--old-writer REV``
converts to .pftrace with the Perfetto writer of REV as well (see ``run.py``). Each step runs
in a fresh process: wall and CPU seconds (user + system) and peak RSS, the medians of
``--repeat`` rounds.

    python bench/run_perf.py --mib 200 --steps "read|pftrace" --old-writer HEAD~1 --repeat 3
    python bench/run_perf.py --mib 3072 --steps parquet   # streamed against whole-trace memory
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent / "shared" / "fixtures" / "perf-script" / \
    "haandfeng_aarch64" / "out.perf"
TIMESTAMP = re.compile(r"(\s)(\d+)\.(\d{6}):")
BASELINE = "python line loop (baseline)"

STEPS = {
    BASELINE:
        "import sys\nfor line in open(sys.argv[1], errors='replace'): pass",
    "tracekit read":
        "import sys,tracekit; tracekit.read(sys.argv[1])",
    "tracekit analyze -a hotspots":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), 'hotspots')",
    "tracekit convert -> .folded":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2], force=True)",
    "tracekit convert -> .pftrace":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[3], force=True)",
    # What a user runs: the command, whose start-up differs from the library's (no pandas).
    "command: tracekit convert -> .pftrace":
        "import sys; from tracekit.cli import main; "
        "assert main(['convert', sys.argv[1], '-o', sys.argv[3], '--force', '-q']) == 0",
    "command: tracekit convert -> .folded":
        "import sys; from tracekit.cli import main; "
        "assert main(['convert', sys.argv[1], '-o', sys.argv[2], '--force', '-q']) == 0",
    # Parquet takes batches: the library call reads the whole trace first, the command
    # writes each batch as it is read (pipeline.convert(stream=True)).
    "tracekit convert -> .parquet, whole trace":
        "import sys,tracekit; tracekit.convert(sys.argv[1], sys.argv[4] + '/out.parquet', "
        "force=True)",
    "command: tracekit convert -> .parquet, streamed":
        "import sys; from tracekit.cli import main; assert main(['convert', sys.argv[1], "
        "'-o', sys.argv[4] + '/out.parquet', '--force', '-q']) == 0",
}
OLD_STEP = ("import sys; sys.path.insert(0, sys.argv[4]); import tracekit, oldperf; "
            "from tracekit.pipeline import read_one; "
            "read_one(sys.argv[1], format=oldperf.PerfScriptReader)")


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


def old_reader(rev: str, folder: Path) -> None:
    """Write the perf reader of git revision ``rev`` to ``folder/oldperf``."""
    package = folder / "oldperf"
    package.mkdir()
    repo = HERE.parent
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:plugins/perf"], cwd=repo,
                           check=True, capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            code = subprocess.run(["git", "show", f"{rev}:plugins/perf/{name}"], cwd=repo,
                                  check=True, capture_output=True, text=True).stdout
            (package / name).write_text(code.replace("tracekit.plugins.perf.", "oldperf."))
    from run import byte_compile
    byte_compile(package)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--steps", default="", help="a regex: run only the steps it matches "
                    "(the baseline always runs)")
    ap.add_argument("--old", metavar="REV", help="also measure the perf reader of this git "
                    "revision")
    ap.add_argument("--old-writer", metavar="REV", help="also convert to .pftrace with the "
                    "Perfetto writer of this git revision")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of all steps, run in turn; the median of each is kept")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from run import Figures, byte_compile, old_writer, run_step
    byte_compile()
    from run_nsys import print_cpu

    steps = {k: v for k, v in STEPS.items() if k == BASELINE or re.search(a.steps, k)}
    with tempfile.TemporaryDirectory() as tmp:
        if a.old:
            old_reader(a.old, Path(tmp))
            steps[f"read, perf reader of {a.old}"] = OLD_STEP
        if a.old_writer:  # the .pftrace output is the third argument here
            steps[f"convert -> .pftrace, writer of {a.old_writer}"] = old_writer(
                a.old_writer, Path(tmp)).replace("sys.argv[2]", "sys.argv[3]")
        text = Path(tmp) / "scaled.perf"
        n = scale(a.source, text, a.mib)
        print(f"input: {n:,} samples ({text.stat().st_size / 2**20:,.0f} MiB of text), "
              f"scaled from {a.source.name}")
        args = (str(text), str(Path(tmp) / "out.folded"), str(Path(tmp) / "out.pftrace"),
                tmp)
        rounds: dict[str, list[Figures]] = {label: [] for label in steps}
        for _ in range(a.repeat):
            for label, code in steps.items():
                rounds[label].append(run_step(code, *args))
        results = {label: Figures(*(statistics.median(f[i] for f in runs) for i in range(3)))
                   for label, runs in rounds.items()}
        print_cpu(results, BASELINE, n, "samples")


if __name__ == "__main__":
    main()
