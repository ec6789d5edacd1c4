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
