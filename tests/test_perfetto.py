"""The Perfetto writer: decoded with Perfetto's own protos and checked against the input."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, shared_path, sweep, torch_traces
from hypothesis import given, settings
from hypothesis import strategies as st
from independent import load
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto_check import decode_and_check
from tracekit import fields
from tracekit.builder import TraceBuilder
from tracekit.errors import EmptyOutputError
from tracekit.fields import merge
from tracekit.plugins.perfetto import PerfettoWriter
from tracekit.plugins.perfetto.annotations import AnnotationEncoder, ArgColumns
from tracekit.plugins.perfetto.lanes import _nest_track, nest_slices
from tracekit.plugins.perfetto.wire import MessageColumns

LLAMA = ("rocprof-v3", "jimw_llamacpp_rocm7")


def _convert(path, tmp_path, registry, **kw):
    trace = tracekit.read(path, registry=registry)
    out = tmp_path / "out.pftrace"
    result = tracekit.write(trace, out, registry=registry, **kw)
    return trace, result, decode_and_check(out)


@pytest.mark.slow
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


@pytest.mark.parametrize(
    "rel", sweep(torch_traces(), "torch-trace/tracelens/h100_bert-small.json.gz"))
def test_every_real_trace_converts_without_loss_or_violations(rel, tmp_path, registry):
    path = shared_path(*rel.split("/"))
    trace, result, decoded = _convert(path, tmp_path, registry)
    assert decoded.violations == []
    kinds = Counter(trace.events["kind"].cast(pa.string()).to_pylist())
    assert len(decoded.slices) == kinds["slice"]
    assert len(decoded.instants) == kinds["instant"]
    assert len(decoded.counters) == kinds["counter"]
    # Nothing is lost; empty lists and nulls in args are written as texts, and counted.
    as_text = {k: n for k, n in result.skipped.items() if "empty lists and nulls" in k}
    assert not {k: n for k, n in result.skipped.items() if k not in as_text}
    assert sum(as_text.values()) == sum(
        1 for text, kind in zip(trace.events["args"].to_pylist(),
                                trace.events["kind"].cast(pa.string()).to_pylist(), strict=True)
        if text and kind != "sample" and any(_empty_or_null(v)
                                             for v in json.loads(text).values()))


def _empty_or_null(value) -> bool:
    """An args value Perfetto's annotations cannot hold: null, an empty list or object, or
    a list holding one."""
    return value is None or value in ([], {}) or (
        isinstance(value, list) and any(_empty_or_null(v) for v in value)) or (
        isinstance(value, dict) and any(_empty_or_null(v) for v in value.values()))


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
    trace, _, decoded = _convert(path, tmp_path, registry,
                                 options=["args=false", "flows=false"])
    # The events' own args are left out; typed columns still travel as annotations: the
    # flow ids, and the ids of the profiler's "Spans" process, which its track shows by name.
    assert all(not s.flows for s in decoded.slices)
    keys = Counter(k for s in decoded.slices for k in s.args)
    assert keys == {"flow_id": len(trace.events["flow_id"].drop_null()), "pid": 1, "tid": 1}


def test_deterministic_output(tmp_path, registry):
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    trace = tracekit.read(path, registry=registry)
    tracekit.write(trace, tmp_path / "a.pftrace", registry=registry)
    tracekit.write(trace, tmp_path / "b.pftrace", registry=registry)
    assert (tmp_path / "a.pftrace").read_bytes() == (tmp_path / "b.pftrace").read_bytes()
    assert pc.sum(trace.events["dur_ns"]).as_py() > 0


@pytest.mark.slow
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


def _llama_calls_and_kernels() -> tuple[list[dict], dict[int, list[int]]]:
    """The HIP API calls of the llama.cpp rocprofv3 run, and per correlation id the start
    times of the kernels that carry it, read with csv from the files themselves."""
    with open(shared_path(*LLAMA, "prefill_hip_api_trace.csv"), newline="") as f:
        calls = list(csv.DictReader(f))
    kernels: dict[int, list[int]] = defaultdict(list)
    with open(shared_path(*LLAMA, "prefill_kernel_trace.csv"), newline="") as f:
        for r in csv.DictReader(f):
            kernels[int(r["Correlation_Id"])].append(int(r["Start_Timestamp"]))
    return calls, kernels


def test_graph_launch_fans_out_one_arrow_per_kernel(tmp_path, registry):
    calls, kernels = _llama_calls_and_kernels()
    launches = {int(r["Correlation_Id"]): int(r["Start_Timestamp"]) for r in calls
                if r["Function"] == "hipGraphLaunch"}
    graphs = {c: sorted(kernels[c]) for c in launches if kernels.get(c)}
    assert {c: len(ts) for c, ts in graphs.items()} == {57328: 1123}
    single = {int(r["Start_Timestamp"]): kernels[int(r["Correlation_Id"])][0] for r in calls
              if r["Function"] != "hipGraphLaunch" and len(kernels[int(r["Correlation_Id"])]) == 1}
    assert len(single) == 1  # one hipMemcpyAsync whose correlation one kernel carries
    _, result, decoded = _convert(shared_path(*LLAMA, "prefill_kernel_trace.csv"), tmp_path,
                                  registry)
    assert decoded.violations == []
    # One arrow from the graph launch to each of its kernels: a fan-out, not a chain.
    fanned: dict[int, list[int]] = defaultdict(list)
    for a, b in decoded.arrows:
        if a.name == "hipGraphLaunch":
            assert b.category == "gpu.kernel"
            fanned[a.start].append(b.start)
    assert {start: sorted(ts) for start, ts in fanned.items()} == \
        {launches[c]: ts for c, ts in graphs.items()}
    assert not [a for a, _ in decoded.arrows if a.category == "gpu.kernel"]
    launch = next(s for s in decoded.slices if s.start == launches[57328])
    assert len(launch.flows) == len(set(launch.flows)) == 1123
    # An ordinary launch keeps its one shared id and its one arrow.
    ordinary = [(a.start, b.start) for a, b in decoded.arrows if a.name != "hipGraphLaunch"]
    assert ordinary == list(single.items())
    assert len(decoded.arrows) == 1123 + 1
    assert result.written["flow endpoints"] == 2 * 1123 + 2


def test_launch_flows_fan_out_chain_free_on_a_crafted_graph(tmp_path, registry):
    b = TraceBuilder("graph.json", "test")
    b.add_events({"kind": ["slice"] * 6, "category": ["api.runtime"] * 2 + ["gpu.kernel"] * 4,
                  "name": ["cudaGraphLaunch", "cudaLaunchKernel", "k1", "k2", "k3", "k4"],
                  "ts_ns": [0, 50, 10, 20, 30, 60], "dur_ns": [5, 5, 5, 5, 5, 5],
                  "pid": [7] * 6, "tid": [7, 7, None, None, None, None],
                  "device": [None, None, 0, 0, 0, 0], "stream": [None, None, 1, 1, 1, 1],
                  "correlation": [1, 2, 1, 1, 1, 2]})
    out = tmp_path / "g.pftrace"
    tracekit.write(b.build(), out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    assert sorted((a.name, b.name) for a, b in decoded.arrows) == [
        ("cudaGraphLaunch", "k1"), ("cudaGraphLaunch", "k2"), ("cudaGraphLaunch", "k3"),
        ("cudaLaunchKernel", "k4")]


def _no_time_perf(tmp_path) -> tuple:
    """burn.perf as ``perf script -F comm,tid,period,event,ip,sym,dso`` prints it: the time
    field of every sample header taken out (a derived copy in tmp_path)."""
    text = (FIXTURES / "perf-recorded" / "burn.perf").read_text()
    header = re.compile(r"^(\S+\s+\d+)\s+\d+\.\d+:(\s+\d+\s+\S+:\s*)$", re.M)
    derived, n = header.subn(r"\1\2", text)
    path = tmp_path / "burn_no_time.perf"
    path.write_text(derived)
    return path, n


def test_perf_script_without_time_is_nothing_to_draw(tmp_path, registry):
    path, samples = _no_time_perf(tmp_path)
    assert samples == 346
    trace = tracekit.read(path, format="perf", registry=registry)
    out = tmp_path / "burn.pftrace"
    with pytest.raises(EmptyOutputError) as info:
        tracekit.write(trace, out, registry=registry)
    assert str(info.value).startswith(
        f"{out}: nothing to draw: no event has a timestamp (346 samples without one); ")
    assert "re-run perf script with -F +time" in str(info.value)
    assert not out.exists()
    # The same samples still fold: the stacks are there, only the times are not.
    result = tracekit.write(trace, tmp_path / "burn.folded", registry=registry)
    assert result.written["samples"] == 346


@pytest.mark.parametrize(("rel", "what"), [
    ("vtune-csv/inferno/vtune-topdown.csv", "samples"),
    ("rocprof-v3/rocprofiler-sdk-docs/counter_collection.csv", "events"),
])
def test_untimed_inputs_are_nothing_to_draw(rel, what, tmp_path, registry):
    path = shared_path(*rel.split("/"))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    # VTune: one row per call-tree node; rocprofv3 counters: one event per dispatch.
    n = len(rows) if what == "samples" else len({r["Dispatch_Id"] for r in rows})
    trace = tracekit.read(path, registry=registry)
    stream = io.BytesIO()
    with pytest.raises(EmptyOutputError) as info:
        PerfettoWriter().write(trace, stream)
    assert str(info.value) == f"nothing to draw: no event has a timestamp ({n} {what} without one)"
    assert stream.getvalue() == b""  # raised before a byte was written


def test_timed_counters_alone_are_drawn(tmp_path, registry):
    b = TraceBuilder("counters.csv", "test")
    b.add_events({"kind": ["counter"] * 4, "category": ["counter.memory"] * 4,
                  "name": ["memory used"] * 3 + ["busy %"], "ts_ns": [10, 20, 30, 20],
                  "value": [1.0, 2.5, 2.0, 50.0], "pid": [3] * 4})
    out = tmp_path / "c.pftrace"
    result = tracekit.write(b.build(), out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    assert result.written["counter values"] == 4
    tracks = {u: t.name for u, t in decoded.tracks.items() if t.HasField("counter")}
    assert sorted((tracks[t], ts, v) for t, ts, v in decoded.counters) == [
        ("busy %", 20, 50.0), ("memory used", 10, 1.0), ("memory used", 20, 2.5),
        ("memory used", 30, 2.0)]


def test_empty_trace_and_only_unwritable_rows_are_errors(registry):
    with pytest.raises(EmptyOutputError, match=r"^nothing to draw: the input has no events$"):
        PerfettoWriter().write(TraceBuilder("e.json", "test").build(), io.BytesIO())
    b = TraceBuilder("s.perf", "test")
    b.add_events({"kind": ["sample"] * 3, "category": ["cpu.sample"] * 3, "name": ["f"] * 3,
                  "ts_ns": [1, 2, -5], "pid": [1] * 3, "tid": [1] * 3})
    with pytest.raises(EmptyOutputError) as info:
        PerfettoWriter().write(b.build(), io.BytesIO())
    assert str(info.value) == ("nothing to draw: 1 negative timestamps, "
                               "2 CPU samples without a call stack")


def test_odd_values_are_written_or_counted(tmp_path, registry):
    big = 2**63 - 1
    b = TraceBuilder("odd.json", "test")
    b.add_events({
        "kind": ["slice", "slice", "instant", "counter", "counter", "counter", "counter"],
        "category": ["host.op", "gpu.kernel", "host.op"] + ["counter.memory"] * 4,
        "name": ["a\x00b", "k\ufffd", "i\x00", "m", "m", "m", "m"],
        "ts_ns": [big - 10, 5, big, 1, 2, 3, 4], "dur_ns": [big, 2**62, None] + [None] * 4,
        "pid": [big, big, -(2**63), 1, 1, 1, 1], "tid": [big, None, 1, None, None, None, None],
        "device": [None, 0, None, None, None, None, None],
        "stream": [None, big, None, None, None, None, None],
        "correlation": [big, big, None, None, None, None, None],
        "args": ['{"x": 1e400}', "{", '{"n": 18446744073709551615, "s": "\\u0000"}',
                 None, None, None, "[1, 2]"]})
    trace = b.build()
    # NaN as such (the builder would read it as null, as pandas does).
    i = trace.events.schema.get_field_index("value")
    values = pa.array([None, None, None, math.nan, math.inf, -1e308, 0.5], pa.float64())
    trace = dataclasses.replace(trace, events=trace.events.set_column(
        i, trace.events.schema.field(i), values))
    out = tmp_path / "odd.pftrace"
    result = tracekit.write(trace, out, registry=registry)
    assert dict(result.skipped) == {"counter values that are NaN or infinite": 2}
    decoded = decode_and_check(out)
    assert decoded.violations == []
    assert sorted((s.name, s.start, s.end) for s in decoded.slices) == [
        ("a\x00b", big - 10, big), ("k\ufffd", 5, 5 + 2**62)]
    assert decoded.instants[0][1:] == ("i\x00", big)
    assert sorted(v for _, _, v in decoded.counters) == [-1e308, 0.5]
    assert len(decoded.arrows) == 1  # the huge correlation still links the pair
    args = {s.name: s.args for s in decoded.slices}
    # Args that are not JSON objects are kept as text; typed columns no track holds (the
    # correlation, a kernel's launching pid) are annotations named as the column.
    assert args["a\x00b"] == {"args": '{"x": 1e400}', "correlation": big}
    assert args["k\ufffd"] == {"args": "{", "pid": big, "correlation": big}


# -- column-wise annotations: the same as the per-row encoder ---------------------------------

def _annotations(encoder: AnnotationEncoder, blob_rows: list[bytes]) -> list[list[tuple]]:
    """Each row's encoded TrackEvent.debug_annotations as (name, kind, value) lists."""
    names = {iid: name for name, iid in encoder.iids.items()}
    out = []
    for data in blob_rows:
        te = pb.TrackEvent()
        te.ParseFromString(data)
        out.append([(names[a.name_iid], *_value_of(a)) for a in te.debug_annotations])
    return out


def _value_of(a: pb.DebugAnnotation) -> tuple:
    kind = a.WhichOneof("value")
    if kind is None:  # an array or dictionary: compared as encoded, without the name
        bare = pb.DebugAnnotation()
        bare.CopyFrom(a)
        bare.ClearField("name_iid")
        return ("nested", bare.SerializeToString())
    value = getattr(a, kind)
    return (kind, value.hex() if kind == "double_value" else value)


def _both_ways(args: list[str | None], keys: dict[str, list[str | None]]):
    """(column-wise, per-row) annotations and collision counts for these args and carried
    keys (JSON value texts)."""
    args_array = pa.array(args, pa.string())
    key_arrays = {k: pa.array(v, pa.string()) for k, v in keys.items()}
    fast, skipped = AnnotationEncoder(), Counter()
    found = fast.columns(ArgColumns(args_array, key_arrays).take(np.arange(len(args))),
                         skipped)
    m = len(args)
    te = MessageColumns(m).repeated_message(4, found.counts, found.items).raw(found.per_row)
    got = _annotations(fast, [te.encode().data[a:b].tobytes() for a, b in
                              zip(te.encode().offsets[:-1], te.encode().offsets[1:],
                                  strict=True)])
    slow = AnnotationEncoder()
    merged = merge(args_array, key_arrays)
    want = _annotations(slow, [slow.encode(t) if t else b"" for t in merged.args.to_pylist()])
    column_wise = [t for t, k, size in zip(args, found.counts, found.per_row.sizes, strict=True)
                   if k and not size]
    return got, want, skipped, merged.collisions, column_wise


ODD_ARGS = [
    None, "", " ", "{}", " {} ", "{ }", '{"a":1}', '{"a" : 1 , "b":"x"}', '{\n  "a": 1\n}',
    '{"a":1,}', '{"a":1', '{"a"}', '{"a":}', '[1, 2]', '"text"', "12", "{", "}{",
    '{"a":1}{"b":2}', '{"a":1} x', '{"a":01}', '{"a":-0}', '{"a":1.0}', '{"a":1e5}',
    '{"a":1E+05}', '{"a":1e400}', '{"a":-1e-400}', '{"a":1.5e-7}', '{"a":NaN}', '{"a":Infinity}',
    '{"a":18446744073709551615}', '{"a":9223372036854775807}', '{"a":-9223372036854775808}',
    '{"a":123456789012345678}', '{"a":true,"b":false,"c":null}', '{"a":tru}', '{"a":True}',
    '{"a":"\\u0041\\n"}', '{"a\\"b":1}', '{"a":"x\ty"}', '{"a":"line\nbreak"}', '{"a":"\x01"}',
    '{"a":"é✓😀"}', '{"é":"ü"}', '{"a":1,"a":2}', '{"a":[1,2,[3,{"b":null}]],"c":{}}',
    '{"a":[]}', '{"a":{}}', '{"a":[1,2}', '{"a":{"b":1]}', '{"a":[1,"]",2]}', '{"a":"{[:,"}',
    '{"a":[1,\n 2]}', '{\t"a"\t:\t1\t}', '{\r\n"a":1}', '{\x0b"a":1}', '{"a":1}\n',
    '{"correlation": 5}', '{"correlation":5}', '{"correlation": 6}', '{"correlation": "5"}',
    '{"x": {"correlation": 5}}', '{"x": "correlation"}', '{"x": "\\"correlation\\""}',
    '{"x": ["correlation"]}', '{"correlation": 5.0}', '{"correlation": 5, "correlation": 5}',
    '{"name": "HtoD", "copy_kind": "HtoD"}', '{"copy_kind": "DtoH"}', '{"pid": true}',
    '{"a":' + " " * 20 + "1}", '{"a": 1' + " " * 20 + "}", "{" + " " * 12 + '"a":1}',
    '{"a" x:1}', '{"a": 1 2}', '{"a":"b" "c"}', '{"a":1 ,\n\t "b" :\r\n[ 1 ] }',
]


def test_columnwise_annotations_match_the_per_row_encoder_on_odd_args():
    n = len(ODD_ARGS)
    correlation = ["5" if i % 3 else None for i in range(n)]
    copy_kind = ['"HtoD"' if i % 4 == 0 else '"a\\"b"' if i % 7 == 0 else None
                 for i in range(n)]
    # {"pid": true} and a carried pid 1 are equal to Python: no collision there either.
    pid = ["1" if t and '"pid"' in t else "2" if i % 5 == 0 else None
           for i, t in enumerate(ODD_ARGS)]
    got, want, skipped, collisions, column_wise = _both_ways(
        ODD_ARGS, {"pid": pid, "correlation": correlation, "copy_kind": copy_kind})
    for text, g, w in zip(ODD_ARGS, got, want, strict=True):
        assert g == w, text
    assert {k.split(":")[0].removeprefix("field "): n for k, n in skipped.items()} == \
        dict(collisions)
    # {"correlation": 6} against 5 and {"copy_kind": "DtoH"} against "HtoD"; 5.0 equals 5.
    assert collisions == {"correlation": 1, "copy_kind": 1}
    # Plain JSON goes column-wise; escapes, big numbers and bad JSON one row at a time.
    assert {'{"a":1}', '{\n  "a": 1\n}', '{\t"a"\t:\t1\t}', '{"a":1.0}', '{"a":1E+05}',
            '{"a":true,"b":false,"c":null}', '{"a":[1,2,[3,{"b":null}]],"c":{}}',
            '{"é":"ü"}', '{"correlation":5}', '{"name": "HtoD", "copy_kind": "HtoD"}'} \
        <= set(column_wise)
    assert not {'{"a":"\\u0041\\n"}', '{"a":18446744073709551615}', '{"a":1,"a":2}',
                '{"a":1e400}', '{"a":1', '{\x0b"a":1}', '{"x": {"correlation": 5}}',
                '{"correlation": 6}'} & set(column_wise)


_json_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
                 | st.floats(allow_nan=False, allow_infinity=False)
                 | st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
                           max_size=8))
_json_values = st.recursive(_json_scalars,
                            lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                            max_leaves=6)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(["a", "b", "correlation", "é", ""])
                                          | st.text(max_size=5), _json_values, max_size=5),
                          st.sampled_from([None, 0, 2]), st.integers(0, 3),
                          st.sampled_from([None, "5", "-7", '"x"', "1.5"])),
                min_size=1, max_size=12))
def test_columnwise_annotations_match_the_per_row_encoder(rows):
    args = []
    for obj, indent, cut, _ in rows:
        text = json.dumps(obj, indent=indent, ensure_ascii=bool(cut % 2))
        args.append(text[:-cut] if cut == 3 else text)
    carried = [r[3] for r in rows]
    got, want, _, _, _ = _both_ways(args, {"correlation": carried})
    assert got == want


def _replayed(track, start, end):
    """nest_slices by the lane-by-lane replay alone, for every track."""
    order = np.lexsort((-(end - start), start, track))
    t, s, e = track[order], start[order], end[order]
    n = len(order)
    out = (np.empty(2 * n, dtype=np.int64), np.empty(2 * n, dtype=bool),
           np.empty(2 * n, dtype=np.int64))
    bounds = np.r_[0, np.flatnonzero(np.diff(t)) + 1, n]
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if b > a:
            _nest_track(order[a:b], s[a:b].tolist(), e[a:b].tolist(), *out,
                        np.zeros(n, dtype=np.int64), 2 * a)
    return out


_interval = st.tuples(st.integers(0, 3), st.integers(0, 40), st.integers(0, 12))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(_interval, max_size=40), st.booleans())
def test_nest_slices_orders_like_the_replay(intervals, laminar):
    if laminar:  # mostly nesting slices: a child fits in the slice before it, or follows it
        intervals = [(t, s, d) if i == 0 or intervals[i - 1][0] != t else
                     (t, intervals[i - 1][1] + s % (intervals[i - 1][2] + 1),
                      min(d, intervals[i - 1][2] - s % (intervals[i - 1][2] + 1)))
                     for i, (t, s, d) in enumerate(intervals)]
    track = np.array([i[0] for i in intervals], dtype=np.int64)
    start = np.array([i[1] for i in intervals], dtype=np.int64)
    end = start + np.array([i[2] for i in intervals], dtype=np.int64)
    got = nest_slices(track, start, end)
    want = _replayed(track, start, end)
    for g, w in zip(got, want, strict=True):
        assert g.tolist() == w.tolist()


def _columnwise(args: list[str | None], keys: dict[str, pa.Array]):
    """Column-wise annotations per row as (name, kind, value) lists, and what was skipped."""
    encoder, skipped = AnnotationEncoder(), Counter()
    found = encoder.columns(ArgColumns(pa.array(args, pa.string()), keys)
                            .take(np.arange(len(args))), skipped)
    te = MessageColumns(len(args)).repeated_message(4, found.counts, found.items) \
        .raw(found.per_row).encode()
    return _annotations(encoder, [te.data[a:b].tobytes() for a, b in
                                  zip(te.offsets[:-1], te.offsets[1:], strict=True)]), skipped


def test_typed_carried_keys_match_their_json_text():
    # fields.carry(typed=True) hands the writer the columns themselves: the annotations are
    # those of the values' JSON text (what the per-row encoder reads), collisions included.
    args = [None, '{"a":1}', '{"correlation": 7}', '{"x": "correlation"}', "",
            '{"copy_kind": "DtoH"}', '{"correlation": 3.0}', '{"b": [1, 2]}']
    typed = {
        "correlation": pa.array([5, -7, 7, 9, 2**62, None, 3, 0], pa.int64()),
        "grid_x": pa.array([1, None, 3, None, 5, 6, None, None], pa.int32()),
        "copy_kind": pa.array(["HtoD", 'a"b', None, "é\n", None, "HtoD", None, "\x01"])
        .dictionary_encode(),
        "value": pa.array([1.0, 0.5, None, 1e20, -0.0, None, 2.5e-7, None]),
    }
    got, skipped = _columnwise(args, typed)
    want, want_skipped = _columnwise(
        args, {k: fields.json_values(v)[0] for k, v in typed.items()})
    assert got == want and skipped == want_skipped
    assert got[0] == [("correlation", "int_value", 5), ("grid_x", "int_value", 1),
                      ("copy_kind", "string_value", "HtoD"), ("value", "int_value", 1)]
    assert got[3] == [("x", "string_value", "correlation"), ("correlation", "int_value", 9),
                      ("copy_kind", "string_value", "é\n"), ("value", "double_value",
                                                             (1e20).hex())]
    assert got[4] == [("correlation", "int_value", 2**62), ("grid_x", "int_value", 5),
                      ("value", "int_value", 0)]
    assert got[7] == [("b", "nested", got[7][0][2]), ("correlation", "int_value", 0),
                      ("copy_kind", "string_value", "\x01")]
    # {"copy_kind": "DtoH"} against HtoD; 3.0 in args equals the carried 3.
    assert dict(skipped) == {fields.field_skip("copy_kind", "args already has this key with "
                                               "another value (args kept)"): 1}


def test_columnwise_split_checks_what_stands_between_tokens():
    texts = ['{ "a" : 1 , "b" : "x" }', '{"a" x: 1}', '{"a": "x" y}', '{x "a": 1}',
             '{"a": 1, x "b": 2}', '{"a": [1] x}', "{ }", "{ x }",
             '{\n  "a": [1, 2],\n  "b": {"c": "d"}\n}', '{"a":\x0b1}', '{"a": "\t"}']
    got, want, _, _, column_wise = _both_ways(texts, {})
    assert got == want
    assert set(column_wise) == {texts[0], texts[8]}
    assert got[6] == [] and got[7] == [("args", "string_value", "{ x }")]


def test_nest_slices_orders_like_the_replay_where_times_do_not_pack():
    # Times 2**62 apart do not pack with the track into one sort key: the lexsort way.
    track = np.array([0, 0, 1, 1, 0, 1], dtype=np.int64)
    start = np.array([0, 5, 2**62, 2**62 + 1, 5, 0], dtype=np.int64)
    end = start + np.array([10, 2, 3, 1, 2, 4])
    got = nest_slices(track, start, end)
    want = _replayed(track, start, end)
    for g, w in zip(got, want, strict=True):
        assert g.tolist() == w.tolist()
    assert got[0].tolist() == [0, 1, 4, 4, 1, 0, 5, 5, 2, 3, 3, 2]


def test_nest_slices_keeps_a_lane_open_until_a_later_overlap_looks_at_it():
    # B overlaps A and goes to lane 1; the replay ends it only when F, overlapping E, looks
    # at lane 1, after the run of nested slices C, G, D in between (taken without replay).
    track = np.zeros(7, dtype=np.int64)
    start = np.array([0, 5, 15, 16, 20, 25, 15])
    end = np.array([10, 15, 20, 18, 30, 35, 15])
    got = nest_slices(track, start, end)
    for g, w in zip(got, _replayed(track, start, end), strict=True):
        assert g.tolist() == w.tolist()
    assert got[0].tolist() == [0, 1, 0, 2, 6, 6, 3, 3, 2, 4, 1, 5, 4, 5]
    assert got[2].tolist() == [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1]


def test_columns_left_out_for_one_reason_are_said_in_one_line(tmp_path, registry):
    """saxpy's 5,451 nsys CPU samples are written without their args, name and value (a
    PerfSample carries none): one warning, not one per column."""
    import sqlite3

    from tracekit.overview import conversion_lines

    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        [(samples,)] = db.execute("SELECT COUNT(*) FROM COMPOSITE_EVENTS").fetchall()
    trace = tracekit.read(path, registry=registry)
    result = tracekit.write(trace, tmp_path / "s.pftrace", registry=registry)
    lines = [line for line in conversion_lines(trace, result) if "written without" in line]
    assert lines == [f"warning: {samples:,} events written without their args, name and value: "
                     "a CPU sample carries no annotations in Perfetto"]
