"""tracekit benchmark: convert a scaled real trace to Perfetto and analyze it.

Each measurement runs in a fresh process, so peak RSS (the process's VmHWM) is that step's
alone. The baseline is a bare ``orjson.loads`` of the same file in the same run: tracekit's
figures are reported as ratios to it, which stay comparable across machines. Each step gets
its wall seconds and its CPU seconds (user + system of the child process, from
``resource.getrusage``, start-up included): on a machine shared with other jobs the CPU
seconds are the steadier figure. With ``--repeat N`` the steps run in turn N times and the
median of each is kept, so that a busy machine slows every step alike. ``--old REV`` also
measures the Perfetto writer of git revision REV (its plugins/perfetto files, imported from a
temporary folder) on the same trace in the same run.

    python bench/run.py                       # ~1M events from the nccl trace in ../shared
    python bench/run.py --events 973000 --repeat 3 --steps "orjson|msgspec|read|pftrace"
    python bench/run.py --events 973000 --repeat 3 --steps "orjson|read$|pftrace" --old 0b2299d
    python bench/run.py --events 200000 --source fixtures/torch-cpu/mlp_cpu.pt.trace.json.gz
    python bench/run.py --events 1000000,3000000,10000000 --steps "read$|pftrace|bottleneck"

Several sizes (comma-separated ``--events``) are measured one after the other, and a last
table gives each step's peak memory per size: how memory grows with the trace. Above
``--baseline-max`` events the ``orjson.loads`` baseline is not run (it needs about 7 times
the file's size: 16 GiB for 10M events); the ratios of a size without it are to the
smallest size's baseline, scaled by the event count, and say so.
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import importlib.util
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "fixtures" / "torch-trace" / "hta" / \
    "nccl_data_rank0_a100.json.gz"

# The typed decode that issue 14 measured: a Struct per event, args kept as raw JSON.
_MSGSPEC = """
import msgspec, sys
class E(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | None = None
    dur: int | float | None = None
    id: int | None = None
    args: msgspec.Raw = msgspec.Raw()
class D(msgspec.Struct, gc=False):
    traceEvents: list[E]
msgspec.json.decode(open(sys.argv[1], 'rb').read(), type=D)
"""
_HTA = """
import os, sys, tempfile
from hta.trace_analysis import TraceAnalysis
with tempfile.TemporaryDirectory() as d:
    os.symlink(sys.argv[1], os.path.join(d, 'rank0.json'))
    TraceAnalysis(trace_dir=d)
"""

STEPS = {
    "orjson.loads (baseline)":
        "import orjson,sys; orjson.loads(open(sys.argv[1],'rb').read())",
    "orjson.loads, GC paused":
        "import gc,orjson,sys; gc.disable(); orjson.loads(open(sys.argv[1],'rb').read())",
    "msgspec typed decode": _MSGSPEC,
    "HTA TraceAnalysis parse": _HTA,
    "tracekit read":
        "import sys,tracekit; tracekit.read(sys.argv[1])",
    "tracekit read, forgiving path":
        "import sys,tracekit; import tracekit.plugins.kineto.reader as r; "
        "r._decode_file = lambda *a: None; tracekit.read(sys.argv[1])",
    "tracekit convert -> .pftrace":
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2], force=True)",
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
        "import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), sys.argv[4], force=True)",
    # What a user runs: the command, whose start-up differs from the library's (no pandas).
    "command: tracekit convert -> .pftrace":
        "import sys; from tracekit.cli import main; "
        "assert main(['convert', sys.argv[1], '-o', sys.argv[2], '--force', '-q']) == 0",
    "command: tracekit analyze":
        "import sys; from tracekit.cli import main; "
        "assert main(['analyze', sys.argv[1], '-q']) == 0",
    # Floors of the conversion: what it costs without the events' own args in the output,
    # and the start-up alone (interpreter, the command and the modules a conversion loads).
    "command: tracekit convert -> .pftrace -O args=false":
        "import sys; from tracekit.cli import main; "
        "assert main(['convert', sys.argv[1], '-o', sys.argv[2], '--force', '-q', "
        "'-O', 'args=false']) == 0",
    "start-up of a conversion (imports only)":
        "import tracekit.cli, tracekit.pipeline, tracekit.plugins.kineto.reader, "
        "tracekit.plugins.perfetto.writer; tracekit.pipeline.default_registry(spare_pandas=True)",
}


class Figures(NamedTuple):
    """One step's wall seconds, CPU seconds (user + system) and peak RSS in MiB."""

    seconds: float
    cpu: float
    rss: float


def byte_compile(*folders: Path) -> None:
    """Compile tracekit's sources (and ``folders``) to bytecode before any step is timed, as
    an installed package has them: where Python is told not to write bytecode
    (``PYTHONDONTWRITEBYTECODE``, set on some machines), every step would otherwise compile
    each tracekit module it imports, about 0.35 CPU s that the baseline never pays."""
    for folder in (ROOT / "core", ROOT / "plugins", *folders):
        compileall.compile_dir(folder, quiet=2)


def run_step(code: str, *args: str) -> Figures:
    """Run ``code`` in a fresh interpreter and measure it.

    The peak is the process's own VmHWM: ``ru_maxrss`` would report at least the RSS of
    this (forking) process, which Linux carries across the exec.
    """
    probe = ("import re,sys,time; code=sys.argv.pop(1); t=time.perf_counter(); exec(code); "
             "print(time.perf_counter()-t, re.search(r'VmHWM:\\s*(\\d+)', "
             "open('/proc/self/status').read()).group(1))")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", probe, code, *args], check=True,
                         capture_output=True, text=True).stdout.split()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Figures(float(out[-2]), cpu, float(out[-1]) / 1024)


def measure(code: str, *args: str) -> tuple[float, float]:
    """Run ``code`` in a fresh interpreter; return (seconds, peak RSS in MiB)."""
    figures = run_step(code, *args)
    return figures.seconds, figures.rss


def print_results(results: dict[str, tuple[float, float]], baseline: str, n: int,
                  rate: str) -> None:
    """Print seconds, rate and peak RSS per step, with ratios to the baseline step."""
    base_s, base_rss = results[baseline]
    print(f"{'step':<32} {'seconds':>8} {rate:>12} {'x baseline':>10} "
          f"{'peak RSS MiB':>12} {'x baseline':>10}")
    for label, (sec, rss) in results.items():
        print(f"{label:<32} {sec:8.2f} {n / sec:12,.0f} {sec / base_s:10.1f} "
              f"{rss:12,.0f} {rss / base_rss:10.1f}")


def print_figures(results: dict[str, Figures], baseline: str, n: int, size_mb: float) -> None:
    """Print wall and CPU seconds and peak RSS per step, with ratios to the baseline step
    (blank without one)."""
    base = results.get(baseline)

    def ratio(value: float, to: float | None) -> str:
        return f"{value / to:6.2f}" if to else f"{'—':>6}"

    print(f"{'step':<40} {'wall s':>7} {'x base':>6} {'CPU s':>7} {'x base':>6} "
          f"{'events/CPU s':>12} {'peak MiB':>9} {'x input':>7}")
    for label, f in results.items():
        print(f"{label:<40} {f.seconds:7.2f} {ratio(f.seconds, base and base.seconds)} "
              f"{f.cpu:7.2f} {ratio(f.cpu, base and base.cpu)} {n / f.cpu:12,.0f} "
              f"{f.rss:9,.0f} {f.rss / size_mb:7.2f}")


def old_writer(rev: str, folder: Path) -> str:
    """Write the Perfetto plugin of git revision ``rev`` to ``folder/oldperfetto``; return the
    step that converts with its writer."""
    package = folder / "oldperfetto"
    package.mkdir()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:plugins/perfetto"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            code = subprocess.run(["git", "show", f"{rev}:plugins/perfetto/{name}"], cwd=ROOT,
                                  check=True, capture_output=True, text=True).stdout
            (package / name).write_text(code.replace("tracekit.plugins.perfetto.",
                                                     "oldperfetto."))
    byte_compile(package)
    return (f"import sys; sys.path.insert(0, {str(folder)!r}); import tracekit, oldperfetto; "
            "tracekit.write(tracekit.read(sys.argv[1]), sys.argv[2], force=True, "
            "format=oldperfetto.PerfettoWriter)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--events", default="1000000",
                    help="events of the scaled trace; several sizes comma-separated")
    ap.add_argument("--baseline-max", type=int, default=5_000_000,
                    help="run the orjson.loads baseline only up to this many events")
    ap.add_argument("--layout", choices=("kineto", "compact"), default="kineto",
                    help="the scaled file's text layout (see scale_torch.py)")
    ap.add_argument("--gzip", action="store_true", help="measure a gzipped copy of the input")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of all steps, run in turn; the median of each is kept")
    ap.add_argument("--steps", default="", help="a regex: run only the steps it matches "
                    "(the baseline always runs)")
    ap.add_argument("--old", metavar="REV", help="also convert with the Perfetto writer of "
                    "this git revision")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    byte_compile()

    baseline = "orjson.loads (baseline)"
    steps = {k: v for k, v in STEPS.items() if k == baseline or re.search(a.steps, k)}
    if importlib.util.find_spec("hta") is None:
        steps.pop("HTA TraceAnalysis parse", None)  # pip install -e '.[bench]'
    sizes = [int(x) for x in a.events.split(",")]
    peaks: dict[int, tuple[float, dict[str, Figures]]] = {}
    base_per_event: Figures | None = None
    with tempfile.TemporaryDirectory() as tmp:
        if a.old:
            steps[f"convert -> .pftrace, writer of {a.old}"] = old_writer(a.old, Path(tmp))
        for size in sizes:
            run = {k: v for k, v in steps.items() if k != baseline or size <= a.baseline_max}
            n, size_mb, results = measure_size(a, run, size, Path(tmp))
            if baseline in results:
                base_per_event = Figures(*(x / n for x in results[baseline]))
            elif base_per_event is not None:
                print("(no baseline at this size: ratios to the last baseline's per-event "
                      "figures times the events)")
                results = {baseline: Figures(*(x * n for x in base_per_event)), **results}
            print_figures(results, baseline, n, size_mb)
            peaks[n] = (size_mb, results)
            if a.json:
                path = a.json if len(sizes) == 1 else a.json.with_suffix(f".{n}.json")
                path.write_text(json.dumps({"events": n, "input_mib": size_mb, "results": {
                    k: f._asdict() for k, f in results.items()}}, indent=2))
    if len(peaks) > 1:
        print_growth(peaks)


def measure_size(a: argparse.Namespace, steps: dict[str, str], size: int, tmp: Path
                 ) -> tuple[int, float, dict[str, Figures]]:
    """Scale the source to ``size`` events and run ``steps`` on it ``a.repeat`` times; the
    event count, the file's MiB and each step's medians."""
    from scale_torch import scale

    trace = tmp / "scaled.json"
    n = scale(a.source, trace, size, a.layout)
    size_mb = trace.stat().st_size / 2**20
    print(f"input: {n:,} events ({size_mb:,.0f} MiB JSON, {a.layout} layout), scaled "
          f"from {a.source.name}")
    if a.gzip:
        gz = tmp / "scaled.json.gz"
        with open(trace, "rb") as raw, gzip.open(gz, "wb", compresslevel=6) as packed:
            while block := raw.read(1 << 24):
                packed.write(block)
        trace.unlink()
        print(f"measured on the gzipped copy ({gz.stat().st_size / 2**20:,.0f} MiB)")
        trace = gz
    dataset = tmp / "scaled.parquet"  # made once, untimed, for the Parquet step
    if any("parquet" in k for k in steps):
        measure("import sys,tracekit; tracekit.write(tracekit.read(sys.argv[1]), "
                "sys.argv[2], force=True)", str(trace), str(dataset))
    runs: dict[str, list[Figures]] = {k: [] for k in steps}
    for _ in range(a.repeat):
        for label, code in steps.items():
            runs[label].append(run_step(code, str(trace), str(tmp / "out.pftrace"),
                                        str(dataset), str(tmp / "out.json.gz")))
    print(f"medians of {a.repeat} round(s); load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    trace.unlink()
    return n, size_mb, {k: Figures(*(statistics.median(f[i] for f in r) for i in range(3)))
                        for k, r in runs.items()}


def print_growth(peaks: dict[int, tuple[float, dict[str, Figures]]]) -> None:
    """Each step's peak RSS at each size, in MiB and as a multiple of the input's size."""
    sizes = sorted(peaks)
    labels = [k for k in peaks[sizes[-1]][1] if not k.startswith("orjson")]
    print("peak RSS MiB (x input) by events: " + ", ".join(
        f"{n:,} ({peaks[n][0]:,.0f} MiB)" for n in sizes))
    for label in labels:
        cells = [f"{peaks[n][1][label].rss:8,.0f} ({peaks[n][1][label].rss / peaks[n][0]:4.2f})"
                 if label in peaks[n][1] else f"{'—':>15}" for n in sizes]
        print(f"{label:<40} " + " ".join(cells))


if __name__ == "__main__":
    main()
