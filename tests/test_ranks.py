"""The ``ranks`` analyzer against an independent reading of the merged 4-rank trace."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import numpy as np
import pytest
import tracekit
from helpers import shared_path

MERGED = ("torch-trace", "hpcte-tracelens-fused", "merged_4rank_rocm_cifar100.json.gz")

@pytest.fixture(scope="module")
def report(registry):
    trace = tracekit.read(shared_path(*MERGED), registry=registry)
    return tracekit.analyze(trace, "ranks", registry=registry)[0]


def _nccl_starts_by_device() -> dict[int, np.ndarray]:
    """Communication kernel starts (ns) per device, straight from the JSON."""
    doc = json.loads(gzip.decompress(shared_path(*MERGED).read_bytes()))
    starts: dict[int, list[int]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in e["name"].lower():
            starts[e["args"]["device"]].append(round(float(e["ts"]) * 1000))
    return {d: np.sort(np.array(v)) for d, v in starts.items()}


@pytest.mark.slow  # reads a 119k-event trace
def test_lateness_per_rank_matches_the_json(report):
    starts = _nccl_starts_by_device()
    assert sorted(starts) == [2, 3, 4, 5]  # RANK 0..3 - GPU
    matrix = np.stack([starts[d] for d in sorted(starts)])
    late = (matrix - matrix.min(axis=0)).sum(axis=1)
    skew = report.tables["skew"].to_pydict()
    assert skew["rank"] == [0, 1, 2, 3]
    np.testing.assert_allclose(skew["lateness"], late, atol=1000 * matrix.shape[1])
    assert skew["last_at"] == [0, 0, 0, 21]


@pytest.mark.slow
def test_rank_3_is_the_straggler(report):
    finding = report.findings[0]
    assert finding.title.startswith("straggler: rank 3 arrives last at 21 of 21 collectives")
    assert finding.evidence["rank"] == 3
    assert finding.evidence["idle_pct"] == 64.5
    assert "its host is slower" in finding.suggestion
    assert "rank numbers from the device name" in report.notes


def test_one_rank_has_nothing_to_compare(registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    trace = tracekit.read(path, registry=registry)
    [report] = tracekit.analyze(trace, "ranks", registry=registry)
    assert report.tables["ranks"].to_pydict()["rank"] == [0]
    assert "rank numbers from the trace's distributed info" in report.notes
    assert "one rank: nothing to compare" in report.notes
    assert not report.findings


@pytest.mark.slow
def test_two_inputs_are_two_ranks_and_two_ranks_name_no_straggler(registry):
    paths = [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]
    trace = tracekit.read(paths, registry=registry)
    [report] = tracekit.analyze(trace, "ranks", registry=registry)
    assert report.tables["ranks"].to_pydict()["rank"] == [0, 1]
    assert report.tables["skew"].to_pydict()["last_at"] == [2, 8]
    assert not [f for f in report.findings if f.title.startswith("straggler")]
    assert ("the run has 128 ranks (distributedInfo.world_size); 2 are in these inputs, so "
            "what is said of stragglers and arrival is of these only") in report.notes


@pytest.mark.slow
def test_a_plain_analyze_of_several_ranks_adds_the_ranks_report(registry):
    trace = tracekit.read(shared_path(*MERGED), registry=registry)
    reports = tracekit.analyze(trace, registry=registry)
    assert [r.analyzer for r in reports] == ["bottleneck", "ranks"]
