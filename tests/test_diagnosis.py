"""The diagnosis analyzers (bottleneck, breakdown, gaps, sync, launch, overlap) against
planted causes and independent computations on the real traces."""

from __future__ import annotations

import itertools
import json
import sqlite3
import statistics
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
import tracekit
from helpers import FIXTURES, SHARED, shared_path, sweep, torch_traces
from independent import (
    hta_temporal_breakdown,
    length,
    load,
    merge,
    ns,
    overlap_length,
)
from tracekit.cli import main
from tracekit.report import render_text, reports_to_json
from tracekit.schemas import report_schema

SCENARIOS = FIXTURES / "scenarios"
DIAGNOSIS = ["bottleneck", "breakdown", "gaps", "sync", "launch", "overlap"]


def _scenarios():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_scenarios",
                                                  SCENARIOS / "make_scenarios.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_scenarios = _scenarios()


def report_of(path, analyzer, registry, options=()):
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), analyzer,
                                options=options, registry=registry)
    return report


def rows(report, table):
    return report.tables[table].to_pylist()


# --- planted causes -----------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n == "tiny_kernels" else n
    for n in sorted(make_scenarios.SCENARIOS)])
def test_committed_scenario_traces_are_what_the_generator_writes(name):
    assert make_scenarios.path(name).read_bytes() == make_scenarios.render(name)


@pytest.mark.parametrize("name", sorted(make_scenarios.SCENARIOS))
def test_bottleneck_names_the_planted_cause(name, registry):
    planted = make_scenarios.SCENARIOS[name][1]
    report = report_of(make_scenarios.path(name), "bottleneck", registry)
    verdict = report.findings[0]
    assert verdict.evidence["verdict"] == planted
    assert verdict.title.startswith(f"verdict: {planted},")
    causes = rows(report, "causes")
    # Input-bound ranks first though compute is the largest cause (dataload.INPUT_BOUND_PCT).
    assert causes[0]["cause"] == ("compute" if planted == "input" else planted)
    # The causes split each device's span exactly.
    assert sum(c["time"] for c in causes) == verdict.evidence["span_ns"]
    # The class of program follows the verdict; then the causes, ordered by what they cost.
    assert report.findings[1].title.startswith("program: PyTorch ")
    costs = [f.cost_ns for f in report.findings[2:] if f.cost_ns is not None]
    assert costs == sorted(costs, reverse=True) and costs[0] == causes[0]["time"]


def test_input_bound_wait_equals_the_idle_time_inside_dataloader_ranges(registry):
    """dataloader_stall: idle gaps of the GPU union intersected with the loader's ranges,
    computed from the JSON by hand."""
    path = make_scenarios.path("dataloader_stall")
    doc, events = load(path)
    spans = [(ns(doc, e["ts"]), ns(doc, e["ts"] + e["dur"]), e)
             for e in events if e.get("ph") == "X"]
    busy = merge([(s, t) for s, t, e in spans if e["cat"] == "kernel"])
    idle = [(a[1], b[0]) for a, b in itertools.pairwise(busy)]
    loading = [(s, t) for s, t, e in spans if "DataLoader" in e["name"]]
    expected = overlap_length(idle, loading)
    span = busy[-1][1] - busy[0][0]
    verdict = report_of(path, "bottleneck", registry).findings[0]
    assert verdict.title.startswith("verdict: input, ")
    assert "waiting for data loading (compute takes " in verdict.title
    assert verdict.evidence["span_ns"] == span
    assert verdict.evidence["input_wait_pct"] == round(100 * expected / span, 1) == 27.1
    assert "DataLoader(num_workers>0" in verdict.suggestion


def test_item_sync_gaps_follow_each_sync(registry):
    """Each step's stream synchronize drains the GPU; the 3 ms of Python after it is idle."""
    path = make_scenarios.path("item_sync")
    report = report_of(path, "gaps", registry)
    causes = {r["cause"]: r for r in rows(report, "causes")}
    doc, events = load(path)
    busy = merge([(ns(doc, e["ts"]), ns(doc, e["ts"]) + int(Decimal(e["dur"]) * 1000))
                  for e in events if e.get("cat") in ("kernel", "gpu_memcpy")])
    sync_ends = [ns(doc, e["ts"]) + int(Decimal(e["dur"]) * 1000)
                 for e in events if e.get("name") == "cudaStreamSynchronize"]
    after_sync = [b[0] - a[1] for a, b in itertools.pairwise(busy)
                  if any(a[1] < t <= b[0] for t in sync_ends)]
    # Five syncs; the one in the last step is followed by the trace's end, not by a gap.
    assert len(sync_ends) == 5 and len(after_sync) == 4
    assert (causes["sync"]["count"], causes["sync"]["total"]) == (4, sum(after_sync))
    largest = rows(report, "largest")[0]
    assert largest["cause"] == "sync" and "log_metrics" in largest["host_during_gap"]


def test_cpu_data_prep_gap_shows_the_host_work(registry):
    report = report_of(make_scenarios.path("cpu_data_prep"), "gaps", registry)
    largest = rows(report, "largest")
    assert {r["cause"] for r in largest[:4]} == {"cpu"}
    assert all("aten::randn" in r["host_during_gap"] or "aten::cat" in r["host_during_gap"]
               for r in largest[:4])
    assert all(r["next_gpu_work"] == "Memcpy HtoD (Pinned -> Device)" for r in largest[:4])


@pytest.mark.slow
def test_tiny_kernels_launch_figures(registry):
    path = make_scenarios.path("tiny_kernels")
    report = report_of(path, "launch", registry)
    [rates] = rows(report, "rates")
    assert rates["tiny_pct"] == 100.0 and rates["short_pct"] == 100.0
    # 3,000 kernels of 2 µs: 500,000 runs/s; one launch per 12 µs op.
    assert rates["gpu_can_run_per_s"] == 500_000.0
    _, events = load(path)
    launches = sorted(ns({}, e["ts"]) for e in events if e.get("name") == "cudaLaunchKernel")
    window = launches[-1] - launches[0]
    assert rates["launches_per_s"] == round((len(launches) - 1) * 1e9 / window, 1)
    [finding] = report.findings
    assert finding.title == ("GPU 0: 100.0% of kernels run under 10µs, launched slower than "
                             "the GPU runs them")


def test_pageable_copies_are_found(registry):
    report = report_of(make_scenarios.path("pageable_h2d"), "sync", registry)
    [row] = rows(report, "pageable")
    assert (row["copy_kind"], row["count"], row["async_calls"], row["bytes"]) == (
        "HtoD", 5, 5, 5 * (64 << 20))
    assert any("pageable" in f.title for f in report.findings)


def test_unoverlapped_allreduce_has_no_overlap(registry):
    report = report_of(make_scenarios.path("unoverlapped_allreduce"), "overlap", registry)
    comm = next(r for r in rows(report, "overlap") if r["kind"] == "communication")
    assert comm["hidden_by_compute_pct"] == 0.0
    assert comm["time"] == comm["exposed"] == 5 * 5_000_000


# --- the real traces against independent computations -----------------------------------

@pytest.mark.parametrize(
    "rel", sweep(torch_traces(), "torch-trace/tracelens/mi300_bert-small.json.gz"))
def test_breakdown_matches_hta_temporal_breakdown(rel, registry):
    """Idle, compute and non-compute shares per device equal HTA's definitions, computed here
    from the JSON with plain Python (see docs/analyzers/diagnosis.md for the choices)."""
    path = shared_path(*rel.split("/"))
    doc, events = load(path)
    want = hta_temporal_breakdown(events, doc)
    got = {r["device"]: r for r in rows(report_of(path, "breakdown", registry), "devices")}
    assert len(got) == len(want)
    for device, w in want.items():
        g = got[f"GPU {device}"]
        assert (g["span"], g["idle"], g["compute"]) == (w["span"], w["idle"], w["compute"])
        assert g["comm"] + g["mem"] == w["non_compute"]
        for ours, theirs in (("idle_pct", "idle"), ("compute_pct", "compute")):
            assert abs(g[ours] - 100 * w[theirs] / w["span"]) <= 0.05
    # HTA's own filter (every event with a stream, device waits included) stays within
    # 0.5 percentage points of ours.
    for device, w in hta_temporal_breakdown(events, doc, literal=True).items():
        g = got.get(f"GPU {device}")
        if g is None:  # a device with only waits or annotations: no GPU work for us
            continue
        for ours, theirs in (("idle_pct", "idle"), ("compute_pct", "compute")):
            assert abs(g[ours] - 100 * w[theirs] / w["span"]) <= 0.5


@pytest.mark.slow
def test_breakdown_per_step(registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    doc, events = load(path)
    report = report_of(path, "breakdown", registry)
    steps = {r["step"]: r for r in rows(report, "steps")}
    busy = [(ns(doc, e["ts"]), ns(doc, e["ts"]) + int(Decimal(e["dur"]) * 1000))
            for e in events if e.get("ph") == "X"
            and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ranges = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
              and e.get("ph") == "X"]
    assert sorted(steps) == sorted(int(e["name"].split("#")[1]) for e in ranges)
    for e in ranges:
        lo = ns(doc, e["ts"])
        hi = lo + int(Decimal(e["dur"]) * 1000)
        inside = [(max(s, lo), min(t, hi)) for s, t in busy if t > lo and s < hi]
        idle = (hi - lo) - length(inside)
        row = steps[int(e["name"].split("#")[1])]
        assert row["duration"] == hi - lo
        assert row["idle_pct"] == round(100 * idle / (hi - lo), 1)


@pytest.mark.slow
def test_gaps_total_equals_independent_union(registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    doc, events = load(path)
    busy = merge([(ns(doc, e["ts"]), ns(doc, e["ts"]) + int(Decimal(e["dur"]) * 1000))
                  for e in events if e.get("ph") == "X"
                  and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")])
    holes = [b[0] - a[1] for a, b in itertools.pairwise(busy)]
    report = report_of(path, "gaps", registry)
    causes = rows(report, "causes")
    assert sum(r["count"] for r in causes) == len(holes)
    assert sum(r["total"] for r in causes) == sum(holes)
    dist = rows(report, "distribution")
    assert [r["count"] for r in dist] == [
        sum(lo <= h < hi for h in holes)
        for lo, hi in ((0, 10**4), (10**4, 10**5), (10**5, 10**6), (10**6, 10**7),
                       (10**7, 2**62))]
    assert rows(report, "largest")[0]["duration"] == max(holes)


@pytest.mark.slow
def test_launch_delay_matches_correlated_events(registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    doc, events = load(path)
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
             and "correlation" in (e.get("args") or {})}
    delays = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            call = calls[e["args"]["correlation"]]
            delays.append(ns(doc, e["ts"]) - ns(doc, call["ts"])
                          - int(Decimal(call["dur"]) * 1000))
    [delay] = rows(report_of(path, "launch", registry), "delay")
    assert (delay["kernels"], delay["linked"]) == (len(delays), len(delays))
    assert delay["median"] == statistics.median(delays)
    assert delay["max"] == max(delays)
    assert delay["outliers"] == sum(d > 100_000 for d in delays)


@pytest.mark.slow
def test_sync_calls_and_pageable_copies_match_the_json(registry):
    path = shared_path("torch-trace", "kineto-tb_plugin", "resnet50_v100_2021.pt.trace.json.gz")
    _, events = load(path)
    report = report_of(path, "sync", registry)
    sync_names = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                  "cudaMemcpy"}
    want = Counter(e["name"] for e in events if e.get("ph") == "X"
                   and e.get("cat", "").lower() in ("runtime", "cuda_runtime")
                   and e["name"] in sync_names)
    got = {r["name"]: r["count"] for r in rows(report, "calls")}
    assert got == dict(want)
    pageable = [e for e in events if e.get("ph") == "X"
                and e.get("cat", "").lower() in ("memcpy", "gpu_memcpy")
                and "Pageable" in e["name"]]
    got_pageable = rows(report, "pageable")
    assert sum(r["count"] for r in got_pageable) == len(pageable) > 0
    assert sum(r["bytes"] for r in got_pageable) == sum(e["args"]["bytes"] for e in pageable)


def test_memsets_on_device_memory_are_no_waits(registry):
    """cudaMemset returns before the GPU runs it unless its target is host or managed
    memory: the twelve of this export all set device memory."""
    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    assert con.execute("SELECT DISTINCT memKind FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall() \
        == [(2,)]  # device memory
    calls = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                        "ON s.id = r.nameId WHERE s.value LIKE 'cudaMemset%'").fetchone()[0]
    assert calls == 12
    names = {r["name"] for r in rows(report_of(path, "sync", registry), "calls")}
    assert names == {"cudaEventSynchronize", "cudaMemcpy", "cudaDeviceSynchronize"}


@pytest.mark.slow
def test_steps_of_a_2021_trace_written_as_operators_are_steps(registry):
    """resnet50 (2021) writes ProfilerStep#N with cat Operator: still the steps to split by."""
    path = shared_path("torch-trace", "kineto-tb_plugin", "resnet50_v100_2021.pt.trace.json.gz")
    _, events = load(path)
    steps = {int(e["name"].split("#")[1]): int(Decimal(e["dur"]) * 1000) for e in events
             if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
    assert {e["cat"] for e in events if e["name"].startswith("ProfilerStep#")} == {"Operator"}
    report = report_of(path, "breakdown", registry)
    assert {r["step"]: r["host_range"] for r in rows(report, "steps")} == steps
    assert sorted(steps) == [5, 6, 7, 8, 9, 10]
    cut = report_of(path, "breakdown", registry, options=["steps=5:6"])
    assert [r["step"] for r in rows(cut, "steps")] == [5, 6]


@pytest.mark.slow
def test_steps_of_merged_ranks_split_each_device_by_its_own_ranks_steps(registry):
    """Four ranks merged into one file: each GPU's rows are the steps of the process that
    launched its kernels, one row per step, not every rank's step windows."""
    path = shared_path("torch-trace", "hpcte-tracelens-fused",
                       "merged_4rank_rocm_cifar100.json.gz")
    _, events = load(path)
    gpu_pid = {}  # kernel correlation -> launching pid, and the GPU it ran on
    launches = {e["args"]["correlation"]: e["pid"] for e in events
                if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
                and "correlation" in e.get("args", {})}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            gpu_pid.setdefault(e["args"]["device"], launches.get(e["args"]["correlation"]))
    steps = {(e["pid"], int(e["name"].split("#")[1])): int(Decimal(e["dur"]) * 1000)
             for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
    got = rows(report_of(path, "breakdown", registry), "steps")
    want = sorted((step, f"GPU {device}", dur) for device, pid in gpu_pid.items()
                  for (p, step), dur in steps.items() if p == pid)
    assert sorted((r["step"], r["device"], r["duration"]) for r in got) == want
    assert len(want) == 4 * 3


def test_sync_share_of_two_processes_is_of_both_walls(registry):
    """Two processes each wait about 428 ms of a 969 ms run: 44 % of their time, not 88 %."""
    path = shared_path("nsys-sqlite", "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite")
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    tables = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS")
    start, end = con.execute("SELECT min(start), max(end) FROM (" + " UNION ALL ".join(
        f"SELECT start, end FROM {t}" for t in tables) + ")").fetchone()
    processes, waited = con.execute(
        "SELECT count(DISTINCT globalTid >> 24), sum(end - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME "
        "r JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaStreamSynchronize%'"
    ).fetchone()
    assert processes == 2
    [finding] = [f for f in report_of(path, "sync", registry).findings
                 if f.title.startswith("the host waits")]
    assert finding.evidence["wall_ns"] == 2 * (end - start)
    assert finding.evidence["processes"] == 2 and "of its 2 processes" in finding.title
    assert finding.evidence["sync_ns"] == waited
    assert finding.title.startswith(
        f"the host waits for the GPU {round(100 * waited / (2 * (end - start)), 1)}% ")


@pytest.mark.slow
def test_sync_calls_inside_another_match_the_json(registry):
    """``aten::item`` wraps ``aten::_local_scalar_dense``, which wraps the runtime's copy: the
    table says how many calls of each name start inside another listed call on their thread."""
    path = shared_path("torch-trace", "hpcte-tracelens-fused",
                       "merged_4rank_rocm_cifar100.json.gz")
    doc, events = load(path)
    report = report_of(path, "sync", registry)
    table = rows(report, "calls")
    names = {r["name"] for r in table}
    calls = sorted((ns(doc, e["ts"]), -ns(doc, e["ts"]) - int(Decimal(e["dur"]) * 1000),
                    e["name"], e["pid"], e["tid"]) for e in events
                   if e.get("ph") == "X" and e["name"] in names
                   and e.get("cat") in ("cpu_op", "cuda_runtime", "runtime"))
    reach: dict[tuple, int] = {}
    inside: Counter[str] = Counter()
    for start, neg_end, name, pid, tid in calls:
        inside[name] += start < reach.get((pid, tid), start)
        reach[(pid, tid)] = max(reach.get((pid, tid), start), -neg_end)
    assert {r["name"]: r["inside_another"] for r in table} == {n: inside[n] for n in names}
    assert sum(inside.values()) == 3_900
    assert any("3,900 of these calls run inside another" in n for n in report.notes)


@pytest.mark.slow
def test_overlap_matches_independent_intersection(registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    doc, events = load(path)
    comm, compute = [], []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            span = (ns(doc, e["ts"]), ns(doc, e["ts"]) + int(Decimal(e["dur"]) * 1000))
            (comm if "nccl" in e["name"].lower() else compute).append(span)
    report = report_of(path, "overlap", registry)
    row = next(r for r in rows(report, "overlap") if r["kind"] == "communication")
    hidden = overlap_length(comm, compute)
    assert row["time"] == length(comm)
    assert row["exposed"] == length(comm) - hidden
    assert row["hidden_by_compute_pct"] == round(100 * hidden / length(comm), 1)


def _nsys_gaps_sql(path: Path) -> dict[int, tuple[int, int]]:
    """Per device: idle gaps (count, total ns) of kernels + copies + memsets, in SQL."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    ops = " UNION ALL ".join(f"SELECT deviceId, start, end FROM {t}" for t in (
        "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
        if t in tables)
    query = f"""
        WITH ops AS ({ops}),
        run AS (SELECT deviceId, start, MAX(end) OVER (PARTITION BY deviceId ORDER BY start, end
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM ops)
        SELECT deviceId, COUNT(*), SUM(start - reach) FROM run WHERE start > reach
        GROUP BY deviceId"""
    try:
        return {d: (n, t) for d, n, t in con.execute(query)}
    finally:
        con.close()


@pytest.mark.parametrize("name", ["pipit_cloverleaf_nsys2024.5.1_a100.sqlite",
                                  "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite",
                                  "mordred_nsys2021_quadro-rtx6000_report1.sqlite"])
def test_nsys_gaps_equal_sql(name, registry):
    path = shared_path("nsys-sqlite", name)
    want = _nsys_gaps_sql(path)
    report = report_of(path, "gaps", registry)
    got: dict[int, list[int]] = {}
    for r in rows(report, "causes"):
        acc = got.setdefault(int(r["device"].split()[-1]), [0, 0])
        acc[0] += r["count"]
        acc[1] += r["total"]
    assert {d: tuple(v) for d, v in got.items()} == {d: v for d, v in want.items() if v[0]}
    # Cloverleaf's copies and kernels all have their launching API calls.
    if name.startswith("pipit_cloverleaf"):
        assert not any(r["cause"] == "unknown" for r in rows(report, "causes"))


# --- output -----------------------------------------------------------------------------

def test_analyze_defaults_to_the_verdict_in_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["analyze", str(make_scenarios.path("cpu_data_prep")), "-q"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "Bottleneck: CPU-bound (host work between launches starves the GPU)"
    assert lines[2].startswith("[critical] verdict: cpu,")
    assert max(len(line) for line in lines) <= 80


@pytest.mark.parametrize("path", [
    str(SCENARIOS / "tiny_kernels.pt.trace.json.gz"),
    pytest.param(str(SHARED / "torch-trace" / "hta" / "nccl_data_rank0_a100.json.gz"),
                 marks=pytest.mark.slow),
    str(SHARED / "nsys-sqlite" / "pipit_cloverleaf_nsys2024.5.1_a100.sqlite"),
    str(FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz")])
def test_every_diagnosis_report_validates_and_renders(path, registry):
    if path.startswith(str(SHARED)):
        shared_path(*Path(path).relative_to(SHARED).parts)
    trace = tracekit.read(path, registry=registry)
    reports = tracekit.analyze(trace, DIAGNOSIS, registry=registry)
    import jsonschema  # imported here: it costs a second of collection

    jsonschema.validate(json.loads(reports_to_json(reports, [path])), report_schema())
    text = render_text(reports, width=80)
    assert text.startswith("Bottleneck: ")
    assert max(len(line) for line in text.splitlines()) <= 80


def test_host_only_trace_says_there_is_nothing_to_diagnose(registry):
    report = report_of(FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz", "bottleneck",
                       registry)
    [finding] = report.findings
    assert finding.evidence["verdict"] == "none"
    assert "no GPU activity" in finding.title


# --- diff -------------------------------------------------------------------------------

def _kernel_totals(path):
    _, events = load(path)
    totals: dict[str, list[int]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            acc = totals.setdefault(e["name"], [0, 0])
            acc[0] += 1
            acc[1] += int(Decimal(e["dur"]) * 1000)
    return totals


@pytest.mark.slow
def test_diff_per_kernel_counts_and_times(registry):
    a = shared_path("torch-trace", "hta", "sampled_rank-0.json.gz")
    b = shared_path("torch-trace", "hta", "sampled_rank-1.json.gz")
    [report] = tracekit.analyze(tracekit.read([a, b], registry=registry), "diff",
                                options=["top=0"], registry=registry)
    want_a, want_b = _kernel_totals(a), _kernel_totals(b)
    got = {r["name"]: r for r in rows(report, "kernels")}
    assert set(got) == set(want_a) | set(want_b)
    for name, r in got.items():
        ca, ta = want_a.get(name, (0, 0))
        cb, tb = want_b.get(name, (0, 0))
        assert (r["count_a"], r["time_a"], r["count_b"], r["time_b"], r["change"]) == (
            ca, ta, cb, tb, tb - ta)
        assert r["status"] == ("new" if not ca else "gone" if not cb else
                               "same" if (ca, ta) == (cb, tb) else "changed")
    changes = [abs(r["change"]) for r in rows(report, "kernels")]
    assert changes == sorted(changes, reverse=True)
    totals = {r["metric"]: r for r in rows(report, "totals")}
    assert totals["kernel time"]["baseline"] == sum(t for _, t in want_a.values())
    assert totals["kernel time"]["candidate"] == sum(t for _, t in want_b.values())


def test_diff_across_vendors_matches_ops_by_name(registry):
    a = shared_path("torch-trace", "tracelens", "h100_bert-small.json.gz")
    b = shared_path("torch-trace", "tracelens", "mi300_bert-small.json.gz")
    [report] = tracekit.analyze(tracekit.read([a, b], registry=registry), "diff",
                                registry=registry)
    ops = {r["name"]: r for r in rows(report, "ops")}
    assert ops["aten::layer_norm"]["count_a"] == ops["aten::layer_norm"]["count_b"] == 10
    kernel_finding = next(f for f in report.findings if f.title.startswith("GPU kernels:"))
    assert kernel_finding.evidence["new"] == len(set(_kernel_totals(b)) - set(_kernel_totals(a)))
    # Kernels are each vendor's: said so, with the GPUs each trace names.
    [vendors] = [f for f in report.findings if f.title.startswith("The inputs ran on GPUs")]
    assert vendors.evidence == {"baseline_gpu": "NVIDIA H100 80GB HBM3",
                                "candidate_gpu": "AMD Instinct MI300X VF"}
    # One model: most op names are in both, so this is no diff of different programs.
    assert not [f for f in report.findings if f.title.startswith("The inputs run different")]


@pytest.mark.slow
def test_a_diff_of_different_programs_says_so_first(registry):
    """nccl_data (a DDP ResNet) against trace_diff_control (a recommendation model): the
    kernel and op names in both are counted here from the JSONs."""
    a = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    b = shared_path("torch-trace", "hta", "trace_diff_control_rank3_a100.json.gz")
    kernels_a, kernels_b = set(_kernel_totals(a)), set(_kernel_totals(b))
    [report] = tracekit.analyze(tracekit.read([a, b], registry=registry), "diff",
                                registry=registry)
    first = report.findings[0]
    assert first.title.startswith(
        f"The inputs run different programs: {len(kernels_a & kernels_b)} of "
        f"{len(kernels_a | kernels_b)} kernel names are in both")
    assert (first.evidence["kernels_in_both"], first.evidence["kernel_names"]) == (12, 228)
    # The kernel time change is told, but not as a regression to chase.
    [kernel_time] = [f for f in report.findings if f.title.startswith("GPU kernel time")]
    assert kernel_time.suggestion == ""


def test_diff_needs_two_inputs(capsys):
    assert main(["analyze", str(make_scenarios.path("item_sync")), "-a", "diff", "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: diff compares two inputs, got 1: tracekit analyze BASELINE "
                   "CANDIDATE -a diff"]


# --- convert --annotate -------------------------------------------------------------------

def test_convert_annotate_adds_gap_and_utilization_tracks(tmp_path, capsys):
    from perfetto_check import decode_and_check

    path = make_scenarios.path("cpu_data_prep")
    out = tmp_path / "annotated.pftrace"
    assert main(["convert", str(path), "-o", str(out), "--annotate", "-q"]) == 0
    decoded = decode_and_check(out)
    assert decoded.violations == []
    gaps = [s for s in decoded.slices if s.category == "analysis.gap"]
    # The same gaps the gaps analyzer lists, on one track under the GPU's track.
    registry_report = tracekit.analyze(tracekit.read(path), "gaps")[0]
    want = sorted((r["cause"], r["duration"]) for r in rows(registry_report, "largest"))
    assert sorted((s.name.removeprefix("GPU idle: "), s.end - s.start) for s in gaps) == want
    [track] = {s.track for s in gaps}
    names = [t.name for t in decoded.track_path(track)]
    assert names[0] == "GPU idle gaps (tracekit)" and names[1].startswith("GPU 0")
    assert {s.args.get("cause") for s in gaps} == {"cpu"}
    # GPU busy %: one value per bin and a closing 0, each in 0..100; its time-weighted mean
    # over the span is the busy share that breakdown reports.
    busy = sorted((ts, v) for _, ts, v in decoded.counters)
    assert len(busy) == 501 and busy[-1][1] == 0.0
    assert all(0.0 <= v <= 100.0 for _, v in busy)
    [device] = rows(tracekit.analyze(tracekit.read(path), "breakdown")[0], "devices")
    widths = [b[0] - a[0] for a, b in itertools.pairwise(busy)]
    mean = sum(w * v for w, (_, v) in zip(widths, busy, strict=False)) / sum(widths)
    assert mean == pytest.approx(100 - device["idle_pct"], abs=0.1)


def test_convert_without_annotate_adds_nothing(tmp_path, registry):
    path = make_scenarios.path("cpu_data_prep")
    trace = tracekit.read(path, registry=registry)
    assert tracekit.pipeline.annotate(trace, registry).events.num_rows > trace.events.num_rows
    out = tmp_path / "plain.pftrace"
    assert main(["convert", str(path), "-o", str(out), "-q"]) == 0
    from perfetto_check import decode_and_check

    assert not [s for s in decode_and_check(out).slices if s.category == "analysis.gap"]
