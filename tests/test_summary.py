"""The summary analyzer against independent sums and statistics."""

from __future__ import annotations

import statistics
from collections import defaultdict
from decimal import Decimal

import pytest
import tracekit
from helpers import shared_path
from independent import load


@pytest.mark.parametrize("rel", ["hta/alexnet_a100_trace.json.gz",
                                 "tracelens/mi300_bert-small.json.gz"])
def test_kernel_and_memcpy_tables_match_independent_stats(rel, registry):
    path = shared_path("torch-trace", *rel.split("/"))
    _, events = load(path)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    by_name = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            by_name[e["name"]].append(int(Decimal(e["dur"]) * 1000))
    rows = {r["name"]: r for r in report.tables["kernels"].to_pylist()}
    assert set(rows) == set(by_name)
    for name, durs in by_name.items():
        r = rows[name]
        assert (r["count"], r["total"], r["min"], r["max"]) == (
            len(durs), sum(durs), min(durs), max(durs))
        assert r["median"] == statistics.median(durs)
        sd = statistics.stdev(durs) if len(durs) > 1 else 0.0
        assert r["stddev"] == pytest.approx(sd, rel=1e-9, abs=1e-9)
    assert sum(r["time_pct"] for r in rows.values()) == pytest.approx(100, abs=0.1 * len(rows))


def test_memops_grouped_by_copy_kind(registry):
    path = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    _, events = load(path)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    sizes = {r["name"]: r for r in report.tables["memops_size"].to_pylist()}
    want = defaultdict(int)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy":
            want["memcpy " + e["name"].split()[1]] += e["args"]["bytes"]
        elif e.get("ph") == "X" and e.get("cat") == "gpu_memset":
            want["memset"] += e["args"]["bytes"]
    assert {k: v["total"] for k, v in sizes.items()} == dict(want)


def test_grouped_stats_merges_duplicate_dictionary_entries():
    import pyarrow as pa
    from tracekit.stats import grouped_stats

    keys = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 0]), ["a", "b", "a"])
    s = grouped_stats(keys, pa.array([1, 10, 3, None]))
    assert s["key"] == ["b", "a"]
    assert s["count"].tolist() == [1, 2] and s["total"].tolist() == [10, 4]
    assert s["median"].tolist() == [10.0, 2.0]


def test_grouped_stats_weighs_aggregate_rows_by_their_occurrences():
    import pyarrow as pa
    from tracekit.stats import grouped_stats

    # "a": one call of 5 and an aggregate of 3 calls totalling 30; "b": calls of 2 and 4.
    s = grouped_stats(pa.array(["a", "a", "b", "b"]), pa.array([5, 30, 2, 4]),
                      pa.array([None, 3, 1, None], pa.int64()))
    assert s["key"] == ["a", "b"]
    assert s["count"].tolist() == [4, 2] and s["total"].tolist() == [35, 6]
    assert s["mean"].tolist() == [8.75, 3.0]
    assert [s[c][0] for c in ("median", "min", "max", "stddev")] == [None] * 4
    assert (s["median"][1], s["min"][1], s["max"][1]) == (3.0, 2, 4)


def _stats_csv(path):
    import csv

    with open(path, newline="") as f:
        return {row["Name"]: row for row in csv.DictReader(f)}


@pytest.mark.parametrize(("rel", "states_spread"), [
    ("rocprof-v1/kokkos_2021_gfx906/results.hip_stats.csv", False),
    ("rocprof-v3/rocprofiler-sdk-docs/hip_api_stats.csv", True),
])
def test_stats_file_rows_count_their_calls(rel, states_spread, registry):
    """A stats file's row totals its Calls: the summary counts them, says the mean of the
    file, and fills min, max and stddev only where the file states them."""
    path = shared_path(*rel.split("/"))
    want = _stats_csv(path)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    rows = {r["name"]: r for r in report.tables["api"].to_pylist()}
    assert set(rows) == set(want)
    for name, row in rows.items():
        calls, total = int(want[name]["Calls"]), int(want[name]["TotalDurationNs"])
        assert (row["count"], row["total"]) == (calls, total)
        assert row["mean"] == pytest.approx(float(want[name]["AverageNs"]), abs=1.0)
        if calls == 1:
            assert (row["median"], row["min"], row["max"], row["stddev"]) == (
                total, total, total, 0.0)
            continue
        assert row["median"] is None
        if states_spread:
            assert (row["min"], row["max"]) == (int(want[name]["MinNs"]),
                                                int(want[name]["MaxNs"]))
            assert row["stddev"] == pytest.approx(float(want[name]["StdDev"]))
        else:
            assert (row["min"], row["max"], row["stddev"]) == (None, None, None)
    several = sum(1 for r in want.values() if int(r["Calls"]) > 1)
    assert report.notes == [
        f"{several} rows are totals of several calls (a stats file): their count, total and "
        "mean are exact; the median is not known, nor min, max and stddev where the file does "
        "not state them (-)"]


def test_per_dispatch_counter_rows_are_said_to_be_outside_the_tables(registry):
    """rocprofv3's counter_collection.csv: a row per dispatch with counter values and no
    duration: no table counts them, and a note says how many there are (one per row)."""
    path = shared_path("rocprof-v3", "rocprofiler-sdk-docs", "counter_collection.csv")
    rows = len(_stats_csv_rows(path))
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    assert all(t.num_rows == 0 for t in report.tables.values())
    assert report.notes == [f"{rows} untimed aggregate rows are not in these tables"]


def _stats_csv_rows(path):
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_memory_operations_without_a_size_are_said_to_be_counted_by_time_only(registry):
    """Kokkos (rocprof v1): 4 hipMemset calls, 6 fill ops (two calls done as two fills);
    each call's size is on its first op, so the size table counts 4 and the time table 6, and
    a note says why."""
    import json

    path = shared_path("rocprof-v1", "kokkos_2021_gfx906")
    events = json.loads((path / "results.json").read_text())["traceEvents"]
    calls = [e for e in events if e.get("ph") == "X" and e.get("name") == "hipMemset"]
    fills = [e for e in events if e.get("ph") == "X" and str(e.get("name")).startswith("Fill")]
    assert (len(calls), len(fills)) == (4, 6)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    by_time = {r["name"]: r["count"] for r in report.tables["memops_time"].to_pylist()}
    by_size = {r["name"]: r["count"] for r in report.tables["memops_size"].to_pylist()}
    assert (by_time["memset"], by_size["memset"]) == (6, 4)
    assert "2 memory operations with no size recorded (the later parts of a call done in " \
        "several, or a tool that gave none) count in the table by time, not by size" in \
        report.notes


def test_cpu_samples_are_pointed_to_the_cpu_report(registry):
    """A perf script profile has samples, no slices: the summary's tables are empty, and a
    note says how many samples there are and which report ranks them."""
    path = shared_path("perf-script", "flamegraph", "perf-funcab-cmd-01.txt")
    text = path.read_text()
    samples = sum(1 for line in text.splitlines()
                  if line and not line[0].isspace() and not line.startswith("#"))
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    assert all(t.num_rows == 0 for t in report.tables.values())
    assert report.notes == [f"{samples} CPU sample rows are not in these tables: 'tracekit "
                            "analyze -a cpu' (or -a hotspots) ranks them"]
    assert samples == 169


def test_a_vtune_report_is_called_report_rows(registry):
    """VTune's per-package report: its four rows are the profiler's totals, not samples."""
    path = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hotspots-pkg.csv")
    rows = len(_stats_csv_rows(path))
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    assert report.notes == [f"{rows} report rows of CPU time or event counts (a profiler's "
                            "totals) are not in these tables: 'tracekit analyze -a cpu' (or "
                            "-a hotspots) ranks them"]
    assert rows == 4
