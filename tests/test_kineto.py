"""The Kineto reader against every real PyTorch trace, checked with independent readings."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import shared_path, torch_traces
from independent import LEGACY_TO_CATEGORY, load, ns, x_counts_by_cat
from tracekit.errors import TraceReadError
from tracekit.plugins.kineto.timestamps import NeedsExactDecimals, us_to_ns


@pytest.mark.parametrize("rel", torch_traces())
def test_every_real_trace_reads_with_exact_counts_and_times(rel, registry):
    path = shared_path(*rel.split("/"))
    doc, events = load(path)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    slices = ev.filter(pc.equal(ev["kind"].cast(pa.string()), "slice"))
    # One slice per X event, per category.
    expected = Counter()
    for cat, n in x_counts_by_cat(events).items():
        expected[LEGACY_TO_CATEGORY.get(cat.lower(), "other")] += n
    got = Counter(slices["category"].cast(pa.string()).to_pylist())
    assert got == expected
    # First and last start times, to the nanosecond, from the decimal text.
    xs = [e for e in events if e.get("ph") == "X"]
    starts = sorted(ns(doc, e["ts"]) for e in xs)
    assert pc.min(slices["ts_ns"]).as_py() == starts[0]
    assert pc.max(slices["ts_ns"]).as_py() == starts[-1]
    # Total duration of all slices (negative durations are clamped to 0).
    total = sum(max(int(Decimal(e.get("dur", 0)) * 1000), 0) for e in xs)
    assert pc.sum(slices["dur_ns"]).as_py() == total
    # Nothing skipped without being counted: every input record has an outcome.
    accounted = sum(n for (_, kind, _), n in trace.log.outcomes.items()
                    if kind != "deviceProperties" and not kind.startswith("derived"))
    assert accounted == len(events)


def test_nccl_trace_details(registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    doc, events = load(path)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    kernels = ev.filter(pc.equal(ev["category"].cast(pa.string()), "gpu.kernel"))
    assert kernels.num_rows == 2700
    # Device rows: device from the GPU pid, stream from args, pid of the launching process.
    src = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert sorted(set(kernels["device"].to_pylist())) == sorted({e["pid"] for e in src})
    assert Counter(kernels["stream"].to_pylist()) == Counter(e["args"]["stream"] for e in src)
    assert set(kernels["pid"].to_pylist()) == {2910249}
    assert kernels["tid"].null_count == kernels.num_rows
    # Correlation as written by the tool.
    assert sorted(kernels["correlation"].to_pylist()) == sorted(
        e["args"]["correlation"] for e in src)
    # fwdbwd flows become flow_id on both ends.
    fwdbwd = {e["id"] for e in events if e.get("cat") == "fwdbwd"}
    linked = Counter(x for x in ev["flow_id"].to_pylist() if x is not None)
    assert set(linked) == fwdbwd and set(linked.values()) == {2}
    # Side tables and metadata.
    assert trace.devices.num_rows == len(doc["deviceProperties"])
    assert trace.devices["name"][0].as_py() == doc["deviceProperties"][0]["name"]
    proc = {r["pid"]: r for r in trace.processes.to_pylist()}
    assert proc[2910249]["name"] == "python3.10" and proc[2910249]["rank"] == 0
    meta = trace.metadata["sources"][path.name]
    assert meta["base_time_ns"] == doc["baseTimeNanoseconds"]
    assert meta["distributed"]["world_size"] == 2


def test_legacy_2021_trace(registry):
    """Operator/Runtime/Kernel categories, 'stream 7' tids, 'async' flows, integer µs."""
    path = shared_path("torch-trace", "kineto-tb_plugin", "resnet50_v100_2021.pt.trace.json.gz")
    _, events = load(path)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    kernels = ev.filter(pc.equal(ev["category"].cast(pa.string()), "gpu.kernel"))
    assert kernels.num_rows == 8772
    assert set(kernels["stream"].to_pylist()) == {
        int(e["tid"].split()[1]) for e in events if e.get("cat") == "Kernel"}
    memory = ev.filter(pc.equal(ev["category"].cast(pa.string()), "host.memory"))
    mem_src = [e for e in events if e.get("name") == "[memory]"]
    assert memory.num_rows == len(mem_src)
    assert pc.sum(memory["bytes"]).as_py() == sum(e["args"]["Bytes"] for e in mem_src)
    outcomes = {(k, o): n for (_, k, o), n in trace.log.outcomes.items()}
    assert outcomes[("s:async", "links (the slices' correlation)")] == 9096


def test_absolute_float_timestamps_are_exact(registry):
    """ns_resolution: absolute epoch µs with ns fractions; a float cannot hold them."""
    path = shared_path("torch-trace", "hta", "ns_resolution_rank0_v100.pt.trace.json.gz")
    doc, events = load(path)
    trace = tracekit.read(path, registry=registry)
    first = next(e for e in events if e.get("ph") == "X")
    row = trace.events.filter(pc.equal(trace.events["name"].cast(pa.string()), first["name"]))
    assert ns(doc, first["ts"]) in row["ts_ns"].to_pylist()
    assert str(first["ts"]).count(".") == 1  # really fractional


def test_rocm_trace_hip_runtime(registry):
    path = shared_path("torch-trace", "tracelens", "mi300_bert-small.json.gz")
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    api = ev.filter(pc.equal(ev["category"].cast(pa.string()), "api.runtime"))
    assert all(n.startswith("hip") for n in set(api["name"].cast(pa.string()).to_pylist()))
    assert set(trace.devices["vendor"].to_pylist()) == {"amd"}


def test_memory_events_give_counter_rows(registry):
    path = shared_path("torch-trace", "tracelens", "h100_bert-small.json.gz")
    _, events = load(path)
    trace = tracekit.read(path, registry=registry)
    counters = trace.events.filter(pc.equal(trace.events["kind"].cast(pa.string()), "counter"))
    mem = [e for e in events if e.get("name") == "[memory]"]
    assert counters.num_rows == 2 * len(mem)
    assert set(counters["name"].cast(pa.string()).to_pylist()) == {
        "GPU 0 memory allocated", "GPU 0 memory reserved", "CPU memory allocated",
        "CPU memory reserved"} & set(counters["name"].cast(pa.string()).to_pylist())
    assert max(counters["value"].to_pylist()) == max(
        max(e["args"]["Total Allocated"], e["args"]["Total Reserved"]) for e in mem)


# -- small synthetic inputs: each pitfall of formats.md section 7 (Kineto, 27-34) -----------

def _write(tmp_path, doc, name="t.json", gz=False):
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path = tmp_path / (name + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def test_bare_array_and_gzip_by_magic(tmp_path, registry):
    path = _write(tmp_path, [_x("cpu_op", "aten::mm", 1, 2)], name="no_extension", gz=True)
    trace = tracekit.read(path, registry=registry)
    assert trace.events["name"].cast(pa.string()).to_pylist() == ["aten::mm"]
    assert trace.events["ts_ns"].to_pylist() == [1000]


def test_relative_timestamps_with_base(tmp_path, registry):
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000,
           "traceEvents": [_x("cpu_op", "a", 4458676522709.059, 0.001)]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    assert trace.events["ts_ns"].to_pylist() == [1700000000000000000 + 4458676522709059]
    assert trace.events["dur_ns"].to_pylist() == [1]


def test_negative_duration_clamped_and_counted(tmp_path, registry):
    doc = {"traceEvents": [_x("Operator", "a", 10, -3)]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    assert trace.events["dur_ns"].to_pylist() == [0]
    assert any("negative" in k for (_, k, _) in trace.log.outcomes)


def test_legacy_categories_case_insensitive_and_misspelled(tmp_path, registry):
    doc = {"traceEvents": [_x("Runtime", "cudaLaunchKernel", 1, 1, correlation=5),
                           _x("gpu_user_Annotation", "step", 1, 1, pid=0, tid="stream 7"),
                           _x("Kernel", "k", 2, 1, pid=0, tid="stream 7", correlation=5)]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    cats = trace.events["category"].cast(pa.string()).to_pylist()
    assert cats == ["api.runtime", "gpu.annotation", "gpu.kernel"]
    assert trace.events["stream"].to_pylist() == [None, 7, 7]
    assert trace.events["pid"].to_pylist() == [1, None, 1]  # kernel: pid of its launcher


def test_string_pids_get_named_synthetic_ids(tmp_path, registry):
    doc = {"traceEvents": [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
         "tid": "PyTorch Profiler", "ts": 1, "dur": 5},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 9}]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    pids = trace.events["pid"].to_pylist()
    assert all(p < -(2**39) for p in pids) and len(set(pids)) == 2
    names = {r["pid"]: r["name"] for r in trace.processes.to_pylist()}
    assert names[pids[0]] == "Spans"


def test_flows_bind_to_innermost_slice_and_old_flow_names(tmp_path, registry):
    doc = {"traceEvents": [
        _x("cpu_op", "outer", 10, 10), _x("cpu_op", "inner", 10, 4),
        _x("cpu_op", "bwd", 30, 2, tid=2),
        {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 10, "cat": "forward_backward",
         "name": "fwd_bwd", "bp": "e"},
        {"ph": "f", "id": 7, "pid": 1, "tid": 2, "ts": 30, "cat": "forward_backward",
         "name": "fwd_bwd", "bp": "e"},
        {"ph": "s", "id": 99, "pid": 1, "tid": 1, "ts": 12, "cat": "ac2g", "name": "ac2g"}]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    rows = dict(zip(trace.events["name"].cast(pa.string()).to_pylist(),
                    trace.events["flow_id"].to_pylist(), strict=True))
    assert rows == {"outer": None, "inner": 7, "bwd": 7}
    skipped = trace.log.skipped()
    assert list(skipped.values()) == [1]  # the ac2g start at ts 12 binds to no slice


def test_counter_events(tmp_path, registry):
    doc = {"traceEvents": [{"ph": "C", "cat": "hardware_counters", "name": "sm", "pid": 1,
                            "tid": 1, "ts": 5, "args": {"util": 50, "occ": 0.5}}]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    assert trace.events["name"].cast(pa.string()).to_pylist() == ["sm util", "sm occ"]
    assert trace.events["value"].to_pylist() == [50.0, 0.5]
    assert set(trace.events["category"].cast(pa.string()).to_pylist()) == {"counter.hardware"}


def test_unescaped_quotes_in_names_are_repaired(tmp_path, registry):
    data = (b'{"traceEvents": [\n{"ph": "X", "cat": "cpu_op", "name": "say "hi" now", '
            b'"pid": 1, "tid": 1, "ts": 1, "dur": 1}\n]}')
    trace = tracekit.read(_write(tmp_path, data), registry=registry)
    assert trace.events["name"].cast(pa.string()).to_pylist() == ['say "hi" now']
    assert trace.metadata["sources"]["t.json"]["repairs"]


def test_unknown_phases_are_counted(tmp_path, registry):
    doc = {"traceEvents": [{"ph": "O", "name": "obj", "pid": 1, "tid": 1, "ts": 1},
                           _x("cpu_op", "a", 1, 1)]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    assert trace.events.num_rows == 1
    assert list(trace.log.skipped().values()) == [1]


@pytest.mark.parametrize("data,message", [
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op"', "ends early"),
    (b'{"traceEvents": [1, 2,, 3]}', "invalid JSON"),
    (b'{"traceEvents": 5, "schemaVersion": 1}', "no 'traceEvents' list"),
    (b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "\xff\xfe"}]}', "UTF-8"),
])
def test_bad_json_gives_one_clear_error(tmp_path, registry, data, message):
    path = _write(tmp_path, data)
    with pytest.raises(TraceReadError, match=message) as info:
        tracekit.read(path, format="kineto", registry=registry)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_us_to_ns_is_exact_or_asks_for_decimals():
    ns, ok = us_to_ns([1, 2.5, None, 4458676522709.059, 0.001])
    assert ns.tolist()[:2] == [1000, 2500] and not ok[2]
    assert ns.tolist()[3:] == [4458676522709059, 1]
    with pytest.raises(NeedsExactDecimals):
        us_to_ns([1712195495406752.8])
    assert us_to_ns([Decimal("1712195495406752.843")])[0].tolist() == [1712195495406752843]
    assert us_to_ns(["12.5"])[0].tolist() == [12500]


def test_merged_ranks_keep_one_device_id_per_gpu(registry):
    """TraceLens' merged file encodes the rank in the GPU pid (rank * 1e8 + device); kernels
    carry args.device, GPU annotations do not: both must land on the same device id."""
    path = shared_path("torch-trace", "hpcte-tracelens-fused", "merged_4rank_rocm_cifar100.json.gz")
    _, events = load(path)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    want = {e["args"]["device"] for e in events
            if e.get("ph") == "X" and "device" in (e.get("args") or {})}
    assert set(pc.unique(ev["device"]).drop_null().to_pylist()) == want == {2, 3, 4, 5}
    annotations = ev.filter(pc.equal(ev["category"].cast(pa.string()), "gpu.annotation"))
    pid_to_device = {e["pid"]: e["args"]["device"] for e in events
                     if e.get("cat") == "kernel"}
    src = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    assert Counter(annotations["device"].to_pylist()) == Counter(
        pid_to_device[e["pid"]] for e in src)
    names = {r["device"]: r["name"] for r in trace.devices.to_pylist()}
    assert names == {2: "RANK 0 - GPU", 3: "RANK 1 - GPU", 4: "RANK 2 - GPU", 5: "RANK 3 - GPU"}
