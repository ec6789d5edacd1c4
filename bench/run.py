"""tracekit benchmark: convert a scaled real trace to Perfetto and analyze it.

Each measurement runs in a fresh process, so peak RSS (ru_maxrss) is that step's alone. The
baseline is a bare ``orjson.loads`` of the same file in the same run: tracekit's figures are
reported as ratios to it, which stay comparable across machines.

    python bench/run.py                       # 1M events from the nccl trace in ../shared
    python bench/run.py --events 200000 --source fixtures/torch-cpu/mlp_cpu.pt.trace.json.gz
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "fixtures" / "torch-trace" / "hta" / \
    "nccl_data_rank0_a100.json.gz"

STEPS = {
    "orjson.loads (baseline)":
        "import orjson,sys; orjson.loads(open(sys.argv[1],'rb').read())",
    "tracekit read":
        "import sys,tracekit; tracekit.read(sys.argv[1])",
    "tracekit convert -> .pftrace":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2])",
    "tracekit analyze -a summary":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), 'summary')",
    "tracekit analyze (bottleneck)":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), 'bottleneck')",
    "tracekit analyze, 6 diagnosis":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[1]), ['bottleneck', "
        "'breakdown', 'gaps', 'sync', 'launch', 'overlap'])",
    "tracekit analyze, from .parquet":
        "import sys,tracekit; tracekit.analyze(tracekit.read(sys.argv[3]), 'summary')",
    "tracekit convert -> .json.gz":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[4])",
}


def measure(code: str, *args: str) -> tuple[float, float]:
    """Run ``code`` in a fresh interpreter; return (seconds, peak RSS in MiB)."""
    probe = ("import resource,sys,time; code=sys.argv.pop(1); t=time.perf_counter(); exec(code); "
             "print(time.perf_counter()-t, "
             "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, code, *args], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]) / 1024


def print_results(results: dict[str, tuple[float, float]], baseline: str, n: int,
                  rate: str) -> None:
    """Print seconds, rate and peak RSS per step, with ratios to the baseline step."""
    base_s, base_rss = results[baseline]
    print(f"{'step':<32} {'seconds':>8} {rate:>12} {'x baseline':>10} "
          f"{'peak RSS MiB':>12} {'x baseline':>10}")
    for label, (sec, rss) in results.items():
        print(f"{label:<32} {sec:8.2f} {n / sec:12,.0f} {sec / base_s:10.1f} "
              f"{rss:12,.0f} {rss / base_rss:10.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1, help="runs per step; the best is kept")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from scale_torch import scale

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "scaled.json"
        n = scale(a.source, trace, a.events)
        size_mb = trace.stat().st_size / 2**20
        print(f"input: {n:,} events ({size_mb:,.0f} MiB JSON), scaled from {a.source.name}")
        dataset = Path(tmp) / "scaled.parquet"  # made once, untimed, for the Parquet step
        measure("import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2])",
                str(trace), str(dataset))
        results = {}
        for label, code in STEPS.items():
            best = min((measure(code, str(trace), str(Path(tmp) / "out.pftrace"), str(dataset),
                                str(Path(tmp) / "out.json.gz"))
                        for _ in range(a.repeat)), key=lambda r: r[0])
            results[label] = best
        print_results(results, "orjson.loads (baseline)", n, "events/s")
        if a.json:
            a.json.write_text(json.dumps({"events": n, "input_mib": size_mb, "results": {
                k: {"seconds": s, "peak_rss_mib": r} for k, (s, r) in results.items()}},
                indent=2))


if __name__ == "__main__":
    main()
