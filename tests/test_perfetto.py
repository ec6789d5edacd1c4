"""The Perfetto writer: decoded with Perfetto's own protos and checked against the input."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, shared_path, torch_traces
from independent import load
from perfetto_check import decode_and_check
from tracekit.builder import TraceBuilder
from tracekit.plugins.perfetto.lanes import nest_slices


def _convert(path, tmp_path, registry, **kw):
    trace = tracekit.read(path, registry=registry)
    out = tmp_path / "out.pftrace"
    result = tracekit.write(trace, out, registry=registry, **kw)
    return trace, result, decode_and_check(out)


def test_nccl_trace_end_to_end(tmp_path, registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    _, events = load(path)
    _trace, result, decoded = _convert(path, tmp_path, registry)
    assert decoded.violations == []
    xs = [e for e in events if e.get("ph") == "X"]
    assert len(decoded.slices) == len(xs) == 26933 == result.written["slices"]
    # Each slice keeps its input's duration: compare the multisets of (name, dur).
    want = Counter((e["name"], round(float(e["dur"]) * 1000)) for e in xs)
    got = Counter((s.name, s.end - s.start) for s in decoded.slices)
    assert got == want
    # Kernels sit on stream tracks under the GPU's track.
    on_streams = [s for s in decoded.slices if s.category == "gpu.kernel"]
    assert len(on_streams) == 2700
    for s in on_streams[:50]:
        stream, gpu = decoded.track_path(s.track)[:2]
        assert stream.name.startswith("Stream ") and gpu.name.startswith("rank 0 GPU 0: ")
    # Flows: every kernel launched by a runtime call is linked to it.
    runtime_flows = {f for s in decoded.slices if s.category == "api.runtime" for f in s.flows}
    kernel_flows = [s.flows for s in on_streams]
    assert all(len(f) == 1 and f[0] in runtime_flows for f in kernel_flows)
    # args survive as debug annotations.
    k = next(s for s in on_streams)
    assert {"correlation", "grid", "block", "stream"} <= set(k.args)


@pytest.mark.parametrize("rel", torch_traces())
def test_every_real_trace_converts_without_loss_or_violations(rel, tmp_path, registry):
    path = shared_path(*rel.split("/"))
    trace, result, decoded = _convert(path, tmp_path, registry)
    assert decoded.violations == []
    kinds = Counter(trace.events["kind"].cast(pa.string()).to_pylist())
    assert len(decoded.slices) == kinds["slice"]
    assert len(decoded.instants) == kinds["instant"]
    assert len(decoded.counters) == kinds["counter"]
    assert not result.skipped


def test_recorded_cpu_trace_round_trip(tmp_path, registry):
    _trace, _, decoded = _convert(FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz",
                                 tmp_path, registry)
    assert decoded.violations == []
    counters = [t for t in decoded.tracks.values() if t.HasField("counter")]
    assert {t.name for t in counters} == {"CPU memory allocated", "CPU memory reserved"}
    assert decoded.flow_links() == 21  # fwdbwd pairs


def test_overlapping_slices_go_to_lanes_and_nothing_is_dropped(tmp_path, registry):
    b = TraceBuilder("overlap.json", "test")
    b.add_events({"kind": ["slice"] * 4, "category": ["gpu.memcpy"] * 4,
                  "name": ["a", "b", "c", "d"], "ts_ns": [0, 5, 6, 20], "dur_ns": [10, 10, 2, 1],
                  "device": [0] * 4, "stream": [3] * 4})
    out = tmp_path / "o.pftrace"
    tracekit.write(b.build(), out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    lanes = {s.name: decoded.tracks[s.track].name for s in decoded.slices}
    # c fits inside a, so it nests there; b overlaps a without fitting: a second lane.
    assert lanes == {"a": "Stream 3", "b": "Stream 3 (overlap 1)", "c": "Stream 3",
                     "d": "Stream 3"}


def test_nest_slices_orders_begin_end_properly():
    track = np.array([0, 0, 0, 0])
    start = np.array([0, 0, 2, 2])
    end = np.array([10, 10, 2, 6])
    rows, begins, lanes = nest_slices(track, start, end)
    assert lanes.tolist() == [0] * 8
    seq = [(int(r), bool(b)) for r, b in zip(rows, begins, strict=True)]
    # Identical intervals nest; the zero-length slice opens and closes inside its parent.
    assert seq[0][1] and seq[1][1] and seq[-1] == (seq[0][0], False)
    depth = 0
    for _, is_begin in seq:
        depth += 1 if is_begin else -1
        assert depth >= 0


def test_untimed_rows_and_samples_are_counted_not_dropped(tmp_path, registry):
    b = TraceBuilder("agg.csv", "test")
    b.add_events({"kind": ["slice", "slice", "sample"], "category": ["gpu.kernel"] * 2 +
                  ["cpu.sample"], "name": ["k", "k", "f"], "ts_ns": [None, 5, 7],
                  "dur_ns": [100, 1, None], "count": [3, None, None], "device": [0, 0, None],
                  "stream": [1, 1, None], "pid": [None, None, 1], "tid": [None, None, 1]})
    result = tracekit.write(b.build(), tmp_path / "a.pftrace", registry=registry)
    assert result.written["slices"] == 1
    assert dict(result.skipped) == {"untimed aggregate rows (no timestamp)": 1,
                                    "CPU samples without a call stack": 1}


def test_options_turn_off_args_and_flows(tmp_path, registry):
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    _, _, decoded = _convert(path, tmp_path, registry, options=["args=false", "flows=false"])
    assert all(not s.args and not s.flows for s in decoded.slices)


def test_deterministic_output(tmp_path, registry):
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    trace = tracekit.read(path, registry=registry)
    tracekit.write(trace, tmp_path / "a.pftrace", registry=registry)
    tracekit.write(trace, tmp_path / "b.pftrace", registry=registry)
    assert (tmp_path / "a.pftrace").read_bytes() == (tmp_path / "b.pftrace").read_bytes()
    assert pc.sum(trace.events["dur_ns"]).as_py() > 0


def test_two_ranks_into_one_trace(tmp_path, registry):
    paths = [shared_path("torch-trace", "hta", f"sampled_rank-{r}.json.gz") for r in (0, 1)]
    trace = tracekit.read(paths, registry=registry)
    assert trace.sources == [p.name for p in paths]
    out = tmp_path / "ranks.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    xs = sum(sum(e.get("ph") == "X" for e in load(p)[1]) for p in paths)
    assert len(decoded.slices) == xs
    gpus = {d.name for d in decoded.tracks.values() if "GPU" in d.name}
    assert any(g.startswith("rank 0 GPU") for g in gpus)
    assert any(g.startswith("rank 1 GPU") for g in gpus)
    # Each rank's kernels stay under its own GPU group.
    per_rank = Counter(decoded.track_path(s.track)[1].name.split(" GPU")[0]
                       for s in decoded.slices if s.category == "gpu.kernel")
    kernels = [sum(e.get("cat") == "kernel" for e in load(p)[1]) for p in paths]
    assert per_rank == {"rank 0": kernels[0], "rank 1": kernels[1]}
