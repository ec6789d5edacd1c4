"""The ``ranks`` analyzer against an independent reading of the merged 4-rank trace."""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, shared_path
from perfetto_check import decode_and_check
from tracekit import Trace, TraceBuilder
from tracekit.model import concat_traces
from tracekit.ranks import DISTRIBUTED, FILE_NAME, INPUT_ORDER
from tracekit.toolkit import (
    align_collectives,
    format_ns,
    input_ranks,
    match_by_order,
    rank_trace,
    rank_traces,
)

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
    # Its compute against the others' median, from the per-rank table (shares rounded to 0.1%).
    computes = {r["rank"]: r["compute_pct"] * r["span"] / 100
                for r in report.tables["ranks"].to_pylist()}
    assert abs(finding.evidence["compute_ns"] - computes[3]) <= computes[3] * 0.002
    assert finding.evidence["compute_vs_others"] == pytest.approx(
        computes[3] / float(np.median([computes[r] for r in (0, 1, 2)])), abs=0.005)
    assert "its host is slower" in finding.suggestion
    # Its GPU does less work than the others': no input to balance.
    assert "balance its input" not in finding.suggestion
    # The wait is the other three ranks' in all, and each one's share: at each collective,
    # rank 3's start minus theirs, but never more than their own kernel ran (they wait in it).
    doc = json.loads(gzip.decompress(shared_path(*MERGED).read_bytes()))
    kernels: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in e["name"].lower():
            kernels[e["args"]["device"]].append((round(float(e["ts"]) * 1000),
                                                 round(float(e["dur"]) * 1000)))
    runs = [sorted(kernels[d]) for d in sorted(kernels)]  # ranks 0..3 by device
    want = sum(min(max(late[0] - mine[0], 0), mine[1])
               for other in runs[:3] for mine, late in zip(other, runs[3], strict=True))
    wait = finding.evidence["wait_caused_ns"]
    assert wait == pytest.approx(want, abs=1000 * 21 * 3)
    assert finding.title.endswith(f"the other 3 ranks wait {format_ns(wait)} for it in all "
                                  f"({format_ns(wait // 3)} each)")
    assert "rank numbers from the device name" in report.notes


@pytest.mark.slow
def test_steps_and_overlap_per_rank(report):
    """Per rank: its process's ProfilerStep ranges (count) and their median length on the
    GPU, from the JSON: each step from its host range's start (or the end of the step
    before) to the end of its host range or of the GPU work its runtime calls launched,
    whichever is later; and the share of its communication kernel time hidden under other
    work."""
    from decimal import Decimal

    doc = json.loads(gzip.decompress(shared_path(*MERGED).read_bytes()), parse_float=Decimal)
    ns = lambda t: int(Decimal(t) * 1000)  # noqa: E731
    rank_of_pid, calls, work_end = {}, {}, defaultdict(list)
    ranges: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        if e.get("cat") == "cuda_runtime":
            rank_of_pid[e["pid"]] = args["rank"]
            calls[(args["rank"], args["correlation"])] = ns(e["ts"])
    for e in doc["traceEvents"]:
        args = e.get("args") or {}
        if e.get("cat") in ("kernel", "gpu_memcpy") and "correlation" in args:
            work_end[args["rank"]].append((args["correlation"], ns(e["ts"]) + ns(e["dur"])))
        elif e.get("ph") == "X" and e.get("cat") == "user_annotation" \
                and str(e.get("name", "")).startswith("ProfilerStep#"):  # host steps
            ranges[rank_of_pid[e["pid"]]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    medians = []
    for rank, steps in ranges.items():
        steps.sort()
        last = [-(2**62)] * len(steps)
        for corr, end in work_end[rank]:
            launched = calls.get((rank, corr))
            for i, (lo, hi) in enumerate(steps):
                if launched is not None and lo <= launched < hi:
                    last[i] = max(last[i], end)
        lengths, before = [], -(2**62)
        for (lo, hi), gpu in zip(steps, last, strict=True):
            start = max(lo, before)
            before = max(hi, gpu, start)
            lengths.append(before - start)
        medians.append((len(lengths), int(np.median(lengths))))
    table = report.tables["ranks"].to_pylist()
    assert sorted((r["steps"], r["median_step"]) for r in table) == sorted(medians)
    for r in table:
        exposed = r["communication_pct"] * r["span"] / 100
        assert r["comm_overlap_pct"] == pytest.approx(
            100 * (r["comm_kernel_time"] - exposed) / r["comm_kernel_time"], abs=0.15)


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
    assert report.tables["skew"].to_pydict()["last_at"] == [0, 4]
    assert not [f for f in report.findings if f.title.startswith("straggler")]
    assert ("the run has 128 ranks (distributedInfo.world_size); 2 are in these inputs, so "
            "what is said of stragglers and arrival is of these only") in report.notes


@pytest.mark.slow
def test_the_sampled_ranks_table_and_skew_equal_a_computation_over_the_json(registry):
    """Issue 16's check: per rank, the span and idle time of the GPU (HTA's definition, over
    the kernel/memcpy/memset events) and the collective lateness, from the JSON by hand."""
    from independent import hta_temporal_breakdown, load, ns

    paths = [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]
    [report] = tracekit.analyze(tracekit.read(paths, registry=registry), "ranks",
                                registry=registry)
    starts, spans, idles = [], [], []
    for path in paths:
        doc, events = load(path)
        [device] = hta_temporal_breakdown(events, doc).values()
        spans.append(device["span"])
        idles.append(device["idle"])
        starts.append(sorted((ns(doc, e["ts"]), ns(doc, e["ts"]) + ns(doc, e["dur"]))
                             for e in events if e.get("ph") == "X"
                             and e.get("cat") == "kernel" and "nccl" in e["name"].lower()))
    n = min(len(s) for s in starts)
    # Paired by order; kept where the two ends agree within 5 ms once rank 1's clock is
    # moved by the median end difference (a collective ends on both ranks at once).
    ends = np.array([[e for _, e in s[:n]] for s in starts])
    offset = np.rint(np.median(ends[0] - ends[1]))
    agree = np.abs(ends[0] - (ends[1] + offset)) <= 5_000_000
    matrix = np.array([[b for b, _ in s[:n]] for s in starts])[:, agree]
    late = matrix - matrix.min(axis=0)
    assert (n, int(agree.sum())) == (10, 4)
    [warning] = [f for f in report.findings if "do not line up" in f.title]
    assert warning.evidence == {"paired": 10, "ends_agree": 4}
    table = report.tables["ranks"].to_pydict()
    assert table["span"] == spans
    assert [round(100 * i / s, 1) for i, s in zip(idles, spans, strict=True)] == \
        table["idle_pct"]
    skew = report.tables["skew"].to_pydict()
    assert skew["lateness"] == late.sum(axis=1).tolist()
    assert skew["last_at"] == (late > late[::-1]).sum(axis=1).tolist() == [0, 4]


@pytest.mark.slow
def test_a_plain_analyze_of_several_ranks_adds_the_ranks_report(registry):
    trace = tracekit.read(shared_path(*MERGED), registry=registry)
    reports = tracekit.analyze(trace, registry=registry)
    assert [r.analyzer for r in reports] == ["bottleneck", "ranks"]


# -- the toolkit's rules for runs: rank numbers, collectives matched by order, alignment --

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _rank_input(source: str, rank: int | None, ends: list[int], skew: int) -> Trace:
    """One rank of a synthetic run: an all-reduce kernel ending at each of ``ends`` (true
    time) and a gemm before each, launched by one thread, on a clock ``skew`` ns ahead."""
    b = TraceBuilder(source, "test")
    pid = 100 + (rank or 0)
    b.add_process(pid, name="python", rank=rank)
    b.add_device(0, name="H100")
    n = len(ends)
    kernel_ts = [e - 3_000 + skew for e in ends] + [e - 9_000 + skew for e in ends]
    b.add_events({
        "kind": ["slice"] * (3 * n),
        "category": ["gpu.kernel"] * (2 * n) + ["host.op"] * n,
        "name": [NCCL] * n + ["gemm"] * n + ["c10d::allreduce_"] * n,
        "ts_ns": kernel_ts + [e - 20_000 + skew for e in ends],
        "dur_ns": [3_000] * n + [5_000] * n + [1_000] * n,
        "pid": [pid] * (3 * n), "tid": [None] * (2 * n) + [pid] * n,
        "device": [0] * (2 * n) + [None] * n, "stream": [7] * (2 * n) + [None] * n,
    })
    return b.build()


def _ts(trace: Trace, source: str) -> list[int]:
    return trace.events.filter(pc.equal(trace.events["source"].cast(pa.string()), source))[
        "ts_ns"].to_pylist()


def test_alignment_moves_each_rank_by_the_median_end_difference():
    ends = [1_000_000, 2_000_000, 3_000_000, 4_000_000]
    jitter = [0, 10, -10, 4]
    # Rank 1 is the first input: the lowest rank, not the first input, keeps its times.
    one = _rank_input("rank1.json", 1, [e + j for e, j in zip(ends, jitter, strict=True)]
                      + [5_000_000], 250_000)
    zero = _rank_input("rank0.json", 0, ends, 0)
    trace = concat_traces([one, zero])
    aligned = align_collectives(trace)
    assert [(r.source, r.rank) for r in aligned.ranks] == [("rank1.json", 1), ("rank0.json", 0)]
    assert (aligned.counts, aligned.matched) == ([5, 4], 4)
    # Differences -250000 - jitter: -250010, -250004, -250000, -249990; median -250002.
    assert aligned.offsets_ns == [-250_002, 0]
    assert aligned.offset_of("rank1.json") == -250_002
    moved = [a - b for a, b in zip(_ts(aligned.trace, "rank1.json"), _ts(trace, "rank1.json"),
                                   strict=True)]
    assert moved == [-250_002] * 15  # kernels and host ops alike
    assert _ts(aligned.trace, "rank0.json") == _ts(trace, "rank0.json")
    assert aligned.trace.metadata["sources"]["rank1.json"]["alignment_offset_ns"] == -250_002
    assert "alignment_offset_ns" not in trace.metadata["sources"]["rank1.json"]


def test_nothing_moves_without_collectives_on_every_rank():
    trace = concat_traces([_rank_input("a.json", 0, [1_000_000], 50),
                           _rank_input("b.json", 1, [], 0)])
    aligned = align_collectives(trace)
    assert (aligned.offsets_ns, aligned.counts, aligned.matched) == ([0, 0], [1, 0], 0)
    assert aligned.trace is trace


def test_rank_numbers_from_the_trace_then_the_file_name_then_input_order():
    def run(*inputs: tuple[str, int | None]) -> list[tuple[int, str]]:
        trace = concat_traces([_rank_input(s, r, [1_000], 0) for s, r in inputs])
        return [(r.rank, r.rule) for r in input_ranks(trace)]

    assert run(("x.json", 5), ("y.json", 2)) == [(5, DISTRIBUTED), (2, DISTRIBUTED)]
    assert run(("run/rank3/t.json", None), ("sampled_rank-1.json", None)) == \
        [(3, FILE_NAME), (1, FILE_NAME)]
    assert run(("rank-1.json", None), ("frank0.json", None)) == \
        [(0, INPUT_ORDER), (1, INPUT_ORDER)]
    assert run(("a.json", 0), ("b.json", 0)) == [(0, INPUT_ORDER), (1, INPUT_ORDER)]


def test_match_by_order_keeps_the_first_of_each_up_to_the_fewest():
    matched = match_by_order([np.array([5, 9, 12]), np.array([6, 10]), np.array([4, 8, 11])])
    assert matched.tolist() == [[5, 9], [6, 10], [4, 8]]
    assert match_by_order([np.array([1]), np.array([], dtype=np.int64)]).shape == (2, 0)


def _collective_ends_from_json(path) -> np.ndarray:
    """NCCL kernel ends (ns) of one rank, by start, straight from the JSON (in decimal: µs
    since 1970 in float64 lose the ns)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    kernels = sorted((round(Decimal(str(e["ts"])) * 1000), round(Decimal(str(e["dur"])) * 1000))
                     for e in doc["traceEvents"] if e.get("ph") == "X"
                     and e.get("cat") == "kernel" and "nccl" in e["name"].lower())
    return np.array([ts + dur for ts, dur in kernels])


@pytest.mark.slow
def test_the_sampled_ranks_align_on_their_collectives(registry):
    paths = [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]
    ends = [_collective_ends_from_json(p) for p in paths]
    n = min(len(e) for e in ends)
    want = int(np.rint(np.median(ends[0][:n] - ends[1][:n])))
    assert (n, want) == (10, -170_000)
    aligned = align_collectives(tracekit.read(paths, registry=registry))
    assert (aligned.offsets_ns, aligned.matched) == ([0, want], n)
    assert [(r.rank, r.rule) for r in aligned.ranks] == [(0, DISTRIBUTED), (1, DISTRIBUTED)]


def _label(track) -> str:
    return track.name or (track.process.process_name if track.HasField("process") else "")


def test_perfetto_draws_each_rank_as_one_process_group(tmp_path, registry):
    """Each rank's GPU and its streams hang under the rank's host process, named with the rank;
    tracekit's Perfetto reader reads the layout back."""
    trace = concat_traces([_rank_input("host-a/rank1.json", None, [1_000_000, 2_000_000], 0),
                           _rank_input("host-b/rank0.json", None, [1_000_000, 2_000_000], 5)])
    out = tmp_path / "run.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    paths = Counter(" / ".join(_label(t) for t in reversed(decoded.track_path(s.track)))
                    for s in decoded.slices if s.category == "gpu.kernel")
    assert paths == {"python (rank 1) / rank 1 GPU 0: H100 / Stream 7": 4,
                     "python (rank 0) / rank 0 GPU 0: H100 / Stream 7": 4}
    again = tracekit.read(out, registry=registry)
    kernels = again.events.filter(pc.equal(again.events["category"], "gpu.kernel"))
    assert kernels["device"].to_pylist() == [0] * 8
    assert kernels["stream"].to_pylist() == [7] * 8


def test_perfetto_align_collectives_shifts_a_rank_and_says_by_how_much(tmp_path, registry):
    """-O align=collectives: rank 1's clock runs 5 µs ahead (``_rank_input``'s skew): its
    slices move back 5,000 ns, its process name says so, rank 0 keeps its times."""
    trace = concat_traces([_rank_input("host-a/rank0.json", 0, [1_000_000, 2_000_000], 0),
                           _rank_input("host-b/rank1.json", 1, [1_000_000, 2_000_000], 5_000)])
    out = tmp_path / "run.pftrace"
    result = tracekit.write(trace, out, options=["align=collectives"], registry=registry)
    assert result.written["ranks aligned on their collectives"] == 1
    decoded = decode_and_check(out)
    assert decoded.violations == []
    names = {_label(t) for t in decoded.tracks.values() if _label(t).startswith("python")}
    assert names == {"python (rank 0)", "python (rank 1, times -5,000 ns to align)"}
    again = tracekit.read(out, registry=registry)
    kernels = again.events.filter(pc.equal(again.events["category"], "gpu.kernel"))
    ends = sorted(t + d for t, d, n in zip(kernels["ts_ns"].to_pylist(),
                                            kernels["dur_ns"].to_pylist(),
                                            kernels["name"].to_pylist(), strict=True)
                  if n == NCCL)
    assert ends == [1_000_000, 1_000_000, 2_000_000, 2_000_000]
    with pytest.raises(tracekit.OptionError, match="'align': 'clocks' is not known"):
        tracekit.write(trace, tmp_path / "bad.pftrace", options=["align=clocks"],
                       registry=registry)


def test_rank_traces_split_interleaved_rows_like_rank_trace():
    run = concat_traces([_rank_input("a/rank0.json", 0, [1_000, 2_000], 0),
                         _rank_input("b/rank1.json", 1, [1_500], 0)])
    mixed = dataclasses.replace(run, events=run.events.take(pa.array([0, 6, 1, 7, 2, 8, 3, 4,
                                                                      5])))
    for trace in (run, mixed):
        parts = list(rank_traces(trace))
        assert [(r.rank, p.events.num_rows) for r, p in parts] == [(0, 6), (1, 3)]
        for r, part in parts:
            alone = rank_trace(trace, r.source)
            assert part.events.equals(alone.events)
            assert part.processes.equals(alone.processes) and part.metadata == alone.metadata
            assert part.events["name"].combine_chunks().dictionary.to_pylist() == \
                [NCCL, "gemm", "c10d::allreduce_"]


def test_a_tie_at_a_collective_is_nobodys_lateness():
    """Rank 3 is late at two of four collectives; at the other two every rank arrives at
    once: it is last at two, and no rank is counted last where all tie."""
    from tracekit.plugins.diagnosis.ranks import Rank, Skew, straggler

    ranks = [Rank(number=i, rule="test", source=f"r{i}", device=0, span=100_000_000,
                  shares={"compute": 50_000_000 + (5_000_000 if i == 3 else 0),
                          "communication": 0, "memory": 0, "idle": 0},
                  comm_kernel_time=0) for i in range(4)]
    lateness = np.zeros((4, 4), np.int64)
    lateness[3, [1, 3]] = 5_000_000
    skew = Skew(matched=4, spread=lateness.max(axis=0), lateness=lateness, counts=[4] * 4)
    info = straggler(ranks, skew)
    assert info is not None and info["rank"] == 3
    assert info["last_at"] == 2
    assert info["wait_caused_ns"] == 3 * 2 * 5_000_000
    assert info["compute_vs_others"] == 1.1


def test_straggler_figures_stand_beside_the_same_figures_of_the_others():
    """The straggler's total lateness is compared with the median other rank's total, and
    its median lateness per collective with the others' medians per collective."""
    from tracekit.plugins.diagnosis.ranks import Rank, Skew, straggler

    ms = 1_000_000
    ranks = [Rank(number=i, rule="test", source=f"r{i}", device=0, span=100 * ms,
                  shares={"compute": 50 * ms, "communication": 0, "memory": 0, "idle": 0},
                  comm_kernel_time=0) for i in range(4)]
    lateness = np.array([[1, 0, 0, 0, 0], [2, 2, 0, 0, 0], [3, 3, 3, 0, 0],
                         [10, 10, 10, 0, 10]], np.int64) * ms
    skew = Skew(matched=5, spread=lateness.max(axis=0), lateness=lateness, counts=[5] * 4)
    info = straggler(ranks, skew)
    assert info is not None and info["rank"] == 3
    assert (info["lateness_ns"], info["others_lateness_ns"]) == (40 * ms, 4 * ms)
    assert (info["median_lateness_ns"], info["others_median_lateness_ns"]) == (10 * ms, 0)


@pytest.mark.slow
def test_inputs_of_different_runs_are_said_not_to_be_one_run(registry):
    """Three traces of three runs (world sizes 2, 8 and 8; two declare rank 0, as their own
    distributedInfo says): the report warns before it compares them as ranks."""
    paths = [shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz"),
             shared_path("torch-trace", "hta", "trace_diff_control_rank3_a100.json.gz"),
             shared_path("torch-trace", "tracelens", "mi300_resnet_act_checkpoint.json.gz")]
    declared = []
    for path in paths:
        info = json.loads(gzip.decompress(path.read_bytes()))["distributedInfo"]
        declared.append((info["rank"], info["world_size"]))
    assert declared == [(0, 2), (3, 8), (0, 8)]
    [report] = tracekit.analyze(tracekit.read(paths, registry=registry), "ranks",
                                registry=registry)
    [warning] = [f for f in report.findings if f.title.startswith("these inputs may not")]
    assert warning.title == ("these inputs may not be ranks of one run: they declare different "
                             "world sizes (2, 8); rank 0 is declared by more than one input")
    assert warning.evidence == {"world_sizes": [2, 8]}
    # Two ranks of one run say nothing of the kind.
    pair = [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]
    [report] = tracekit.analyze(tracekit.read(pair, registry=registry), "ranks",
                                registry=registry)
    assert not [f for f in report.findings if f.title.startswith("these inputs may not")]


@pytest.mark.slow
def test_inputs_on_unrelated_clocks_are_warned_of(registry):
    """A PyTorch trace (system clock, ns since the epoch) read with an nsys export (session
    ns from 0): 53.7 years apart, their times cannot line up on one timeline. Two ranks of
    one run (their spans overlap) get no such warning."""
    import sqlite3

    torch = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    nsys = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    trace = tracekit.read([torch, nsys], registry=registry)
    doc = json.loads(gzip.decompress(torch.read_bytes()))
    first_us = min(e["ts"] for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float)))
    with sqlite3.connect(f"file:{nsys}?mode=ro", uri=True) as db:
        nsys_end = max(db.execute(f"SELECT MAX(end) FROM {t}").fetchone()[0] or 0
                       for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"))
    assert first_us * 1000 - nsys_end > 50 * 365 * 86_400 * 10**9  # decades apart
    notes = {k: v for k, v in trace.log.outcomes.items() if k[1] == "clock"}
    [(source, _, outcome)] = notes
    assert source == torch.name and outcome.startswith("warning: starts 53.7 years after the "
                                                       "inputs before it end")
    pair = [shared_path("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]
    assert not [k for k in tracekit.read(pair, registry=registry).log.outcomes if k[1] == "clock"]


def test_cpu_only_ranks_get_their_collectives_and_arrival(registry):
    """The gloo DDP run recorded here (fixtures/torch-cpu/record_ddp_cpu.py): rank 1 sleeps
    80 ms a step before its forward. By the JSON: each rank's gloo ranges matched by order,
    the clocks put on each other's by the median end offset, rank 1 reaches most of them
    last; and each rank's time in collective ranges (their union) over its span."""
    paths = [FIXTURES / "torch-cpu" / f"ddp_rank{r}.pt.trace.json.gz" for r in (0, 1)]
    want = []
    for path in paths:
        with gzip.open(path) as f:
            doc = json.load(f)
        ns = lambda v: int(Decimal(str(v)) * 1000)  # noqa: E731
        host = [e for e in doc["traceEvents"] if e.get("ph") == "X"
                and e.get("cat") in ("cpu_op", "user_annotation", "python_function")
                and isinstance(e.get("pid"), int)]
        comm = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in host
                      if e["name"] == "record_param_comms"
                      or e["name"].startswith(("c10d::", "gloo:")))
        union, reach = 0, comm[0][0]
        for a, b in comm:  # sorted by start: what each adds past the furthest end so far
            union += max(0, b - max(a, reach))
            reach = max(reach, b)
        group = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in host
                       if e["name"].startswith("gloo:"))
        span = max(ns(e["ts"]) + ns(e["dur"]) for e in host) - min(ns(e["ts"]) for e in host)
        want.append((doc["distributedInfo"]["rank"], union, span, group))
    n = min(len(w[3]) for w in want)
    ends = np.array([[b for _, b in w[3][:n]] for w in want])
    starts = np.array([[a for a, _ in w[3][:n]] for w in want])
    aligned = starts + np.rint(np.median(ends[0][None, :] - ends, axis=1)).astype(int)[:, None]
    last = np.bincount(aligned.argmax(axis=0), minlength=2)
    [report] = tracekit.analyze(tracekit.read([str(p) for p in paths], registry=registry),
                                "ranks", registry=registry)
    rows = report.tables["cpu_ranks"].to_pylist()
    assert [(r["rank"], r["collectives"], r["span"], r["last_at"]) for r in rows] == [
        (rank, union, span, int(last[i])) for i, (rank, union, span, _) in enumerate(want)]
    assert rows[1]["last_at"] > rows[0]["last_at"]  # rank 1 sleeps
    assert report.table_titles["cpu_ranks"].endswith(f"arrival at {n} collectives matched "
                                                     "by order")
