"""Runs of many ranks made from one real Kineto trace, and what analyzing them costs.

``make_run`` writes a run of N ranks: copies of a real trace, each shifted by a small seeded
offset (up to ``JITTER_US``, as ranks that start a collective a little apart), with its own
``distributedInfo`` (rank i of N) and file name ``rank-i.pt.trace.json.gz``. One rank, the
planted straggler, has its compute kernels slowed by a known factor: its timeline is warped by
``t -> t + (factor - 1) * C(t)``, where ``C(t)`` is the compute time (union of its compute
kernels) before ``t``. Each compute kernel then lasts ``factor`` times as long, everything after
it starts later, order and nesting are kept, and the rank reaches each collective late by
``(factor - 1)`` times the compute before it. The other ranks are left as they are, but for
their collective kernels, which end when the last rank's does: a collective ends on every rank
once the last has arrived (the ``ranks`` analyzer pairs collectives only where their ends
agree).

``python bench/scale_ranks.py`` measures, for 8 and 64 ranks, the wall time and the peak
memory (the sum of the resident memory of the process and all its children, sampled every
20 ms) of analyzing the run: sequentially in one process, in local processes, on a Dask
``LocalCluster``, and the whole run read into one process (what a plain ``tracekit analyze``
of a few inputs does). It checks that the straggler and its factor are found at 8, 64 and 256
ranks and that every engine gives the same report. Runs are written under ``/tmp`` and kept
for the next call.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

HERE = Path(__file__).resolve().parent
DEFAULT_BASE = HERE.parent.parent / "shared/fixtures/torch-trace/hta/nccl_data_rank0_a100.json.gz"
DEFAULT_OUT = Path(tempfile.gettempdir()) / "tracekit-ranks"
JITTER_US = 50.0
FACTOR = 1.3


def straggler_of(ranks: int) -> int:
    """The planted straggler's rank: neither the first nor the last."""
    return ranks * 5 // 8


def compute_union(events: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """The union of the trace's compute kernels (kernels that the diagnosis counts neither as
    communication nor as memory work), as sorted disjoint [start, end) in µs."""
    from tracekit.plugins.diagnosis.activity import COMM_KERNEL, MEMORY_KERNEL

    comm, memory = re.compile(COMM_KERNEL), re.compile(MEMORY_KERNEL)
    spans = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events
                   if e.get("cat") == "kernel" and e.get("ph") == "X"
                   and not comm.search(e.get("name", "")) and not memory.search(e.get("name", "")))
    starts: list[float] = []
    ends: list[float] = []
    for s, e in spans:
        if starts and s <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            starts.append(s)
            ends.append(e)
    return np.array(starts), np.array(ends)


def _collective_kernels(events: list[dict[str, Any]]) -> np.ndarray:
    """Per event: a communication kernel (as the diagnosis tells them)."""
    from tracekit.plugins.diagnosis.activity import COMM_KERNEL

    comm = re.compile(COMM_KERNEL)
    return np.array([e.get("cat") == "kernel" and e.get("ph") == "X"
                     and bool(comm.search(e.get("name", ""))) for e in events], dtype=bool)


def warp(t: np.ndarray, union: tuple[np.ndarray, np.ndarray], factor: float) -> np.ndarray:
    """``t + (factor - 1) * C(t)``: C(t) the compute time before ``t``."""
    starts, ends = union
    if not len(starts):
        return t
    before = np.concatenate([[0.0], np.cumsum(ends - starts)])
    i = np.searchsorted(starts, t, side="right") - 1
    inside = np.clip(t - starts[np.maximum(i, 0)], 0, (ends - starts)[np.maximum(i, 0)])
    done = np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0.0)
    return t + (factor - 1) * done


def make_run(base: Path, ranks: int, out: Path = DEFAULT_OUT, factor: float = FACTOR,
             seed: int = 0) -> Path:
    """Write (once) a run of ``ranks`` ranks made from ``base``; return its folder."""
    stem = base.name.split(".")[0]
    folder = out / f"{stem}-{ranks}r-x{factor:g}-s{straggler_of(ranks)}-seed{seed}-v2"
    done = folder.with_suffix(".done")
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    doc = orjson.loads(gzip.decompress(base.read_bytes()))
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    ts = np.array([e["ts"] for e in timed], dtype=np.float64)
    has_dur = np.array([isinstance(e.get("dur"), (int, float)) for e in timed])
    end = ts + np.array([e["dur"] if h else 0 for e, h in zip(timed, has_dur, strict=True)])
    union = compute_union(events)
    jitter = np.random.default_rng(seed).uniform(0, JITTER_US, ranks)
    info = doc.get("distributedInfo") or {}
    collective = _collective_kernels(timed)
    # Each collective ends on every rank when it ends on the last to get there.
    last_end = np.max([warp(end[collective], union,
                            factor if rank == straggler_of(ranks) else 1.0) + jitter[rank]
                       for rank in range(ranks)], axis=0)
    for rank in range(ranks):
        slow = factor if rank == straggler_of(ranks) else 1.0
        new_ts = warp(ts, union, slow) + jitter[rank]
        new_end = warp(end, union, slow) + jitter[rank]
        new_end[collective] = np.maximum(new_end[collective], last_end)
        for e, t, stop, h in zip(timed, new_ts.round(3).tolist(), new_end.round(3).tolist(),
                                 has_dur.tolist(), strict=True):
            e["ts"] = t
            if h:
                e["dur"] = round(stop - t, 3)
        doc["distributedInfo"] = {**info, "rank": rank, "world_size": ranks}
        (folder / f"rank-{rank}.pt.trace.json.gz").write_bytes(
            gzip.compress(orjson.dumps(doc), compresslevel=1))
    done.write_text(json.dumps({"base": str(base), "ranks": ranks, "factor": factor,
                                "straggler": straggler_of(ranks)}))
    return folder


# Each way of analyzing a run, as code run in a fresh interpreter; it writes what the report
# says of the ranks to sys.argv[2] (JSON) for the checks.
_RANKS_JSON = """
def dump(reports, path):
    import json
    [r] = [r for r in reports if r.analyzer == 'ranks']
    s = [f for f in r.findings if f.title.startswith('straggler')]
    json.dump({'ranks': r.tables['ranks'].to_pydict(), 'skew': r.tables['skew'].to_pydict(),
               'straggler': s[0].evidence if s else None, 'notes': r.notes}, open(path, 'w'))
"""
WAYS = {
    "sequential (one process)": "from tracekit.engine import analyze_run\n"
    "dump(analyze_run([sys.argv[1]], ['ranks'], engine='local', jobs=1), sys.argv[2])",
    "local processes (-j 2)": "from tracekit.engine import analyze_run\n"
    "dump(analyze_run([sys.argv[1]], ['ranks'], engine='local', jobs=2), sys.argv[2])",
    "Dask LocalCluster (2 workers)": "from tracekit.engine import analyze_run\n"
    "dump(analyze_run([sys.argv[1]], ['ranks'], engine='dask', jobs=2), sys.argv[2])",
    "whole run in one process (verdict + ranks)": "import tracekit\n"
    "dump(tracekit.analyze(tracekit.read(sys.argv[1])), sys.argv[2])",
}


def measure(code: str, *args: str) -> tuple[float, float, float]:
    """Run ``code`` in a fresh interpreter; return (seconds, CPU seconds, peak MiB of the
    process tree).

    CPU seconds are those of the process and every process under it (user and system), which
    other work on the machine disturbs far less than the wall time. The peak is the largest
    sum of the resident memory of the process and all its children (local workers, a Dask
    cluster's nannies and workers) seen in samples 20 ms apart.
    """
    import resource

    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", "import sys\n" + _RANKS_JSON + code, *args])
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                total = 0
                for p in tree:
                    with contextlib.suppress(psutil.Error):  # a worker that just ended
                        total += p.memory_info().rss
                peak = max(peak, total)
            except psutil.Error:
                pass
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code_rc = proc.wait()
    stop.set()
    sampler.join()
    wall = time.perf_counter() - started
    if code_rc:
        raise SystemExit(f"{code!r} failed with exit code {code_rc}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, peak / 2**20


def check(result: dict[str, Any], ranks: int, factor: float) -> str:
    """Whether the report names the planted straggler and its compute factor."""
    planted = straggler_of(ranks)
    found = result["straggler"]
    if found is None:
        return f"NOT FOUND (planted rank {planted})"
    compute = np.array(result["ranks"]["compute_pct"]) * np.array(result["ranks"]["span"])
    mine = compute[result["ranks"]["rank"].index(found["rank"])]
    others = np.median(np.delete(compute, result["ranks"]["rank"].index(found["rank"])))
    ratio = found.get("compute_vs_others", mine / others)
    ok = found["rank"] == planted and abs(ratio - factor) <= 0.01 * factor
    return (f"{'ok' if ok else 'WRONG'}: rank {found['rank']} (planted {planted}), compute "
            f"{ratio:.3f}x the others' median (planted {factor:g}x), last at "
            f"{found['last_at']} of {found['collectives']} collectives")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, default=DEFAULT_BASE, help="the Kineto trace to copy")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the runs are written")
    ap.add_argument("--factor", type=float, default=FACTOR)
    ap.add_argument("--measure", type=int, nargs="*", default=[8, 64],
                    help="run sizes whose engines are timed")
    ap.add_argument("--check", type=int, nargs="*", default=[256],
                    help="further run sizes only checked (local processes)")
    ap.add_argument("--ways", default="", help="a regex: time only the ways it matches")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of each way, run in turn; the least time of each is kept")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE.parent))
    print(f"base: {a.base.name}; straggler slowed {a.factor:g}x; runs under {a.out}")
    for ranks in [*a.measure, *a.check]:
        t = time.perf_counter()
        folder = make_run(a.base, ranks, a.out, a.factor)
        size = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
        print(f"\n{ranks} ranks: {folder} ({size:,.0f} MiB gzipped, "
              f"ready in {time.perf_counter() - t:.1f}s)")
        ways = {k: v for k, v in WAYS.items() if re.search(a.ways, k)} \
            if ranks in a.measure else {"local processes (-j 2)": WAYS["local processes (-j 2)"]}
        results: dict[str, Any] = {}
        figures: dict[str, list[tuple[float, float, float]]] = {k: [] for k in ways}
        for _ in range(a.repeat if ranks in a.measure else 1):
            for label, code in ways.items():
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    figures[label].append(measure(code, str(folder), f.name))
                    results[label] = json.loads(Path(f.name).read_text())
        print(f"{'way':<44} {'seconds':>8} {'CPU s':>7} {'CPU s/rank':>10} {'peak MiB':>9}")
        for label, runs in figures.items():
            sec, cpu, mib = (min(r[i] for r in runs) for i in range(3))
            print(f"{label:<44} {sec:8.1f} {cpu:7.1f} {cpu / ranks:10.3f} {mib:9,.0f}")
        first, *rest = results.values()
        differ = [label for label, other in zip(list(results)[1:], rest, strict=True)
                  if any(other[k] != first[k] for k in ("ranks", "skew", "straggler"))]
        if len(results) > 1:
            print("  the same ranks, skew and straggler from every way" if not differ else
                  f"  DIFFERENT from the first way's report: {', '.join(differ)}")
        print("  straggler: " + check(first, ranks, a.factor))


if __name__ == "__main__":
    main()
