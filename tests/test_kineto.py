"""The Kineto reader against every real PyTorch trace, checked with independent readings."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import read_through_fifo, shared_path, sweep, torch_traces
from independent import LEGACY_TO_CATEGORY, load, ns, x_counts_by_cat
from tracekit.errors import ReaderCrashError, TraceReadError
from tracekit.plugins.kineto.timestamps import NeedsExactDecimals, us_to_ns


@pytest.mark.parametrize(
    "rel", sweep(torch_traces(), "torch-trace/tracelens/h100_bert-small.json.gz"))
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
    # Before 2021-11 ProfilerStep#N was written with cat Operator: it is a range all the same.
    old_steps = sum(e.get("ph") == "X" and str(e.get("cat")).lower() == "operator"
                    and e["name"].startswith("ProfilerStep#") for e in events)
    expected["host.op"] -= old_steps
    expected["host.annotation"] += old_steps
    got = Counter(slices["category"].cast(pa.string()).to_pylist())
    assert +got == +expected
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_absolute_float_timestamps_are_exact(registry):
    """ns_resolution: absolute epoch µs with ns fractions; a float cannot hold them."""
    path = shared_path("torch-trace", "hta", "ns_resolution_rank0_v100.pt.trace.json.gz")
    doc, events = load(path)
    trace = tracekit.read(path, registry=registry)
    first = next(e for e in events if e.get("ph") == "X")
    row = trace.events.filter(pc.equal(trace.events["name"].cast(pa.string()), first["name"]))
    assert ns(doc, first["ts"]) in row["ts_ns"].to_pylist()
    assert str(first["ts"]).count(".") == 1  # really fractional
    source = trace.metadata["sources"][path.name]
    assert source["timestamps"] == "parsed from the decimal text (absolute µs)"
    # Every slice, against the decimal text read independently (json with Decimal floats):
    # the typed decode reads this document, times from their text.
    text = gzip.decompress(path.read_bytes())
    assert _decode_in_blocks(text, 1 << 20) is not None
    exact = json.loads(text, parse_float=Decimal)["traceEvents"]
    want = sorted((e["name"], ns(doc, e["ts"]), int(e["dur"] * 1000))
                  for e in exact if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "kernel"))
    rows = trace.events.filter(pc.is_in(trace.events["category"].cast(pa.string()),
                                        pa.array(["host.op", "gpu.kernel"])))
    got = sorted(zip(rows["name"].cast(pa.string()).to_pylist(), rows["ts_ns"].to_pylist(),
                     rows["dur_ns"].to_pylist(), strict=True))
    assert len(want) == 28260
    assert got == want


def test_times_past_a_floats_precision_are_read_from_their_text():
    """A block whose float times cannot give their ns switches the typed decode to the
    decimal text from that block on; earlier blocks' small floats stay exact too."""
    small = [f'{{"ph": "X", "cat": "cpu_op", "name": "a", "ts": {i}.125, "dur": 0.5}}'
             for i in range(200)]
    big = [f'{{"ph": "X", "cat": "cpu_op", "name": "b", "ts": 1712195495519689.047, '
           f'"dur": {i}.001}}' for i in range(200)]
    tail = ['{"ph": "i", "ts": null}', '{"ph": "i"}', '{"ph": "i", "ts": 1e3}',
            '{"ph": "i", "ts": 9223372036854775.808}']  # null, absent, exponent, past int64
    data = ('{"traceEvents": [' + ",\n".join(small + big + tail) + "]}").encode()
    for size in (64, 4096, len(data)):
        _, ev, _ = _decode_in_blocks(data, size)
        ts, dur = ev.times("ts"), ev.times("dur")
        assert ts.ns[:200].tolist() == [i * 1000 + 125 for i in range(200)]
        assert ts.ns[200:400].tolist() == [1712195495519689047] * 200
        assert dur.ns[200:400].tolist() == [i * 1000 + 1 for i in range(200)]
        assert ts.valid.tolist() == [True] * 400 + [False, False, True, False]
        assert ts.ns[402] == 1_000_000
        assert ev.exact_times


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
    assert _notices(trace) == {
        ("X", "warning: negative dur (clamped to 0, as Kineto does since 2022)"): 1}


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


@pytest.mark.slow
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


# -- damaged inputs: the real triton trace with one kind of damage at a time (issue 13) -------

TRITON = ("torch-trace", "hta", "triton_example_cuda12.json.gz")
BASE = 1727743122000000000  # its baseTimeNanoseconds
NEWLINE = b"\n"


def _triton() -> tuple[dict, list[dict]]:
    doc = json.loads(gzip.decompress(shared_path(*TRITON).read_bytes()))
    return doc, doc["traceEvents"]


def _find(events, **match):
    return next(e for e in events if all(e.get(k) == v for k, v in match.items()))


def _notices(trace):
    return {(kind, outcome): n for (_, kind, outcome), n in trace.log.notices().items()}


def _read_ok(path, registry):
    """Read with the kineto reader; anything but a clean read is a failure here."""
    return tracekit.read(path, format="kineto", registry=registry)


def _read_error(path, registry) -> TraceReadError:
    with pytest.raises(TraceReadError) as info:
        tracekit.read(path, format="kineto", registry=registry)
    assert not isinstance(info.value, ReaderCrashError), info.value
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    return info.value


def _accounted(trace) -> int:
    """Input records with an outcome (warnings are about records already counted)."""
    return sum(n for (_, kind, outcome), n in trace.log.outcomes.items()
               if kind != "deviceProperties" and not kind.startswith("derived")
               and not outcome.startswith("warning"))


def test_wrong_json_types_are_coerced_or_skipped_and_counted(tmp_path, registry):
    doc, events = _triton()
    lookup = _find(events, name="TorchDynamo Cache Lookup")
    region = _find(events, name="Torch-Compiled Region: 0/0")
    op = _find(events, cat="cpu_op", name="triton_poi_fused_add_cos_sin_0")
    kernel = _find(events, cat="kernel")
    sync = _find(events, name="cudaDeviceSynchronize")
    step = _find(events, name="ProfilerStep#1")
    spans = _find(events, cat="Trace")
    flow_f = _find(events, ph="f")
    flow_s39 = _find(events, ph="s", id=39)
    window = _find(events, name="Iteration Start: PyTorch Profiler")
    lookup["name"] = 12345                   # a number: kept as its text
    region["name"] = ["a"]                   # a list: the placeholder
    op["ts"] = str(op["ts"])                 # numeric text: coerced exactly
    del step["cat"]                          # no cat: category "other"
    kernel["args"]["correlation"] = "35"     # integer text: coerced
    kernel["args"]["grid"] = "128"           # not a list: grid null
    sync["args"] = [1, 2]                    # not an object: dropped
    sync["pid"] = {"a": 1}                   # not an id: a synthetic one named by its JSON
    flow_f["id"] = [35]                      # not an integer: the flow is skipped
    flow_s39["ts"] = None                    # no ts: skipped
    spans["dur"] = "abc"                     # no usable dur: skipped
    window["ts"] = True                      # a boolean is no time: skipped
    trace = _read_ok(_write(tmp_path, doc), registry)
    ev = trace.events
    rows = {r["name"]: r for r in ev.to_pylist()}
    assert set(rows) == {"ProfilerStep#1", "12345", "<unnamed>", "triton_poi_fused_add_cos_sin_0",
                         "cuLaunchKernel", "cudaDeviceSynchronize", "Record Window End"}
    assert ev.num_rows == 8  # 8 X - Trace + 1 instant, the op and the kernel share a name
    assert rows["ProfilerStep#1"]["category"] == "other"
    cpu_op = next(r for r in ev.to_pylist() if r["name"] == "triton_poi_fused_add_cos_sin_0"
                  and r["category"] == "host.op")
    assert cpu_op["ts_ns"] == BASE + int(Decimal(op["ts"]) * 1000)
    gpu = next(r for r in ev.to_pylist() if r["category"] == "gpu.kernel")
    assert (gpu["correlation"], gpu["pid"], gpu["grid_x"], gpu["block_x"]) == (35, 1670242,
                                                                               None, 128)
    sync_row = rows["cudaDeviceSynchronize"]
    assert sync_row["args"] is None and sync_row["correlation"] is None
    assert sync_row["pid"] < -(2**39)
    assert {r["pid"]: r["name"] for r in trace.processes.to_pylist()}[sync_row["pid"]] == \
        '{"a":1}'
    assert _notices(trace) == {
        ("X", "warning: name is a number (kept as text)"): 1,
        ("X", "warning: name missing or not text (named '<unnamed>')"): 1,
        ("X", "warning: args is not a JSON object (dropped)"): 1,
        ("X", "warning: pid is neither an integer nor a name (named by its JSON text)"): 1,
        ("X:kernel", "warning: args.grid is not a list (null)"): 1,
        ("X:Trace", "skipped: no usable dur (missing, not a number, or out of range)"): 1,
        ("i:None", "skipped: no usable ts (missing, not a number, or out of range)"): 1,
        ("s:ac2g", "skipped: no usable ts (missing, not a number, or out of range)"): 1,
        ("f:ac2g", "skipped: no usable id (not an integer)"): 1,
    }
    assert _accounted(trace) == len(events)


def test_events_without_names_get_a_placeholder_never_a_contract_error(tmp_path, registry):
    doc, events = _triton()
    unnamed = Counter()
    for e in events:
        if e.get("ph") in ("X", "i"):
            e.pop("name")
            unnamed[e["ph"]] += 1
    events.append({"ph": "C", "cat": "counter", "name": None, "pid": 1, "ts": 5,
                   "args": {"util": 50}})
    trace = _read_ok(_write(tmp_path, doc), registry)
    names = trace.events["name"].cast(pa.string()).to_pylist()
    assert names == ["<unnamed>"] * (unnamed["X"] + unnamed["i"] + 1)
    assert _notices(trace) == {
        ("X", "warning: name missing or not text (named '<unnamed>')"): unnamed["X"],
        ("i", "warning: name missing or not text (named '<unnamed>')"): unnamed["i"],
        ("C", "warning: name missing or not text (named '<unnamed>')"): 1,
    }


def test_huge_and_non_finite_numbers_are_skipped_never_wrapped(tmp_path, registry):
    doc, events = _triton()
    _find(events, name="TorchDynamo Cache Lookup")["ts"] = 2**63
    _find(events, name="Torch-Compiled Region: 0/0")["ts"] = 2**70
    _find(events, cat="cpu_op", name="triton_poi_fused_add_cos_sin_0")["ts"] = 1e300
    _find(events, name="ProfilerStep#1")["dur"] = 1e300
    _find(events, name="cudaDeviceSynchronize")["dur"] = -1  # clamped to 0, as Kineto does
    # 9223372036854775.807 µs is the int64 maximum in ns: beyond it once the base is added.
    _find(events, cat="kernel")["ts"] = 9223372036854775
    trace = _read_ok(_write(tmp_path, doc), registry)
    assert _notices(trace) == {
        ("X:cpu_op", "skipped: no usable ts (missing, not a number, or out of range)"): 3,
        ("X:kernel", "skipped: no usable ts (missing, not a number, or out of range)"): 1,
        ("X:user_annotation",
         "skipped: no usable dur (missing, not a number, or out of range)"): 1,
        ("X", "warning: negative dur (clamped to 0, as Kineto does since 2022)"): 1,
        ("f:ac2g", "skipped: flow endpoint matches no slice"): 1,
    }
    names = trace.events["name"].cast(pa.string()).to_pylist()
    assert names == ["cuLaunchKernel", "cudaDeviceSynchronize", "PyTorch Profiler (0)",
                     "Iteration Start: PyTorch Profiler", "Record Window End"]
    sync = _find(events, name="cudaDeviceSynchronize")
    assert trace.events["dur_ns"].to_pylist()[1] == 0
    assert trace.events["ts_ns"].to_pylist()[1] == BASE + int(Decimal(str(sync["ts"])) * 1000)
    assert _accounted(trace) == len(events)


def test_nan_and_infinity_tokens_are_read_and_skipped(tmp_path, registry):
    """Python's json.dump writes NaN/Infinity (not JSON); orjson refuses them, so the loader
    falls back to the json module, notes it, and the events are skipped as untimed."""
    doc, events = _triton()
    _find(events, name="TorchDynamo Cache Lookup")["ts"] = float("nan")
    _find(events, name="Torch-Compiled Region: 0/0")["dur"] = float("inf")
    events.append({"ph": "C", "cat": "counter", "name": "util", "pid": 1, "ts": 5,
                   "args": {"a": float("-inf"), "b": 2}})
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(doc))  # allow_nan: the default
    assert b"NaN" in path.read_bytes() and b"-Infinity" in path.read_bytes()
    trace = _read_ok(path, registry)
    assert _notices(trace) == {
        ("document", "warning: read 3 NaN/Infinity tokens (not JSON) as numbers"): 1,
        ("X:cpu_op", "skipped: no usable ts (missing, not a number, or out of range)"): 1,
        ("X:cpu_op", "skipped: no usable dur (missing, not a number, or out of range)"): 1,
        ("C", "warning: a series value is NaN, infinite or too large (no row)"): 1,
    }
    counters = trace.events.filter(pc.equal(trace.events["kind"].cast(pa.string()), "counter"))
    assert counters["name"].cast(pa.string()).to_pylist() == ["util b"]
    assert counters["value"].to_pylist() == [2.0]


def test_unusable_base_time_and_device_properties_are_ignored_with_warnings(tmp_path, registry):
    doc, events = _triton()
    doc["baseTimeNanoseconds"] = 2**63
    doc["deviceProperties"][0]["name"] = 5
    doc["deviceProperties"][1]["numSms"] = "108"  # integer text: coerced
    doc["deviceProperties"][2] = ["not", "an", "object"]
    doc["distributedInfo"] = {"rank": True}
    trace = _read_ok(_write(tmp_path, doc), registry)
    assert _notices(trace) == {
        ("baseTimeNanoseconds", "warning: not a non-negative integer ns count: ignored, times "
         "stay relative to an unknown start"): 1,
        ("deviceProperties", "skipped: no integer id in int32 range"): 1,
        ("deviceProperties", "warning: a field has the wrong type or range (ignored)"): 1,
    }
    op = _find(events, cat="kernel")
    kernel = trace.events.filter(pc.equal(trace.events["category"].cast(pa.string()),
                                          "gpu.kernel"))
    assert kernel["ts_ns"].to_pylist() == [int(Decimal(str(op["ts"])) * 1000)]
    devices = {r["device"]: r for r in trace.devices.to_pylist()}
    assert sorted(devices) == [0, 1, 3, 4, 5, 6, 7]
    # Device 0's name is no text: the GPU's process label names it instead.
    label = _find(events, ph="M", name="process_labels", pid=0)["args"]["labels"]
    assert (devices[0]["name"], devices[1]["sm_count"]) == (label, 108)
    assert {r["rank"] for r in trace.processes.to_pylist()} == {None}
    meta = trace.metadata["sources"]["t.json"]
    assert meta["clock"] == "relative µs from an unknown start (baseTimeNanoseconds unusable)"


def _triton_bytes() -> bytes:
    return gzip.decompress(shared_path(*TRITON).read_bytes())


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.99])
def test_truncated_trace_is_one_clear_error(tmp_path, registry, fraction):
    cut = _triton_bytes()
    cut = cut[: int(len(cut) * fraction)]
    err = _read_error(_write(tmp_path, cut), registry)
    assert "the JSON ends early (a truncated trace" in err.message
    assert err.location == f"line {cut.count(NEWLINE) + 1}"


def test_corrupt_gzip_tail_is_one_clear_error(tmp_path, registry):
    raw = bytearray(shared_path(*TRITON).read_bytes())
    raw[-6] ^= 0xFF  # inside the CRC32 trailer
    path = tmp_path / "t.json.gz"
    path.write_bytes(bytes(raw))
    assert _read_error(path, registry).message.startswith("corrupt gzip data: CRC check failed")


def test_bad_bytes_name_the_line(tmp_path, registry):
    data = _triton_bytes()
    at = data.index(b'"name": "triton_poi') + len(b'"name": "')
    line = data.count(b"\n", 0, at) + 1
    invalid = _read_error(_write(tmp_path, data[:at] + b"\xff\xfe" + data[at:], "u.json"),
                          registry)
    assert (invalid.location, invalid.message) == (f"line {line}", "not valid UTF-8 text")
    utf16 = _read_error(_write(tmp_path, data.decode().encode("utf-16"), "w.json"), registry)
    assert (utf16.location, utf16.message) == ("line 1", "not valid UTF-8 text (UTF-16, or "
                                                         "binary data?)")
    nul = _read_error(_write(tmp_path, data[:at] + b"\x00" + data[at:], "n.json"), registry)
    assert nul.location.startswith(f"line {line} column ")
    assert nul.message == "invalid JSON: unexpected control character in string"
    lone = _read_error(_write(tmp_path, data[:at] + b"\\ud800" + data[at:], "s.json"),
                       registry)
    assert lone.location.startswith(f"line {line} column ")
    assert lone.message == "invalid JSON: no low surrogate in string"
    deep = _read_error(_write(tmp_path, b"[" * 5000 + b"]" * 5000, "d.json"), registry)
    assert deep.message == "the JSON is nested too deeply to be a trace"
    blank = _read_error(_write(tmp_path, b" \n\t\n", "b.json"), registry)
    assert blank.message == "no JSON: the file holds only white space"


def test_escaped_nul_and_bom_are_read_faithfully(tmp_path, registry):
    data = _triton_bytes()
    data = data.replace(b'"name": "triton_poi_fused', b'"name": "tri\\u0000ton_poi_fused')
    trace = tracekit.read(_write(tmp_path, b"\xef\xbb\xbf" + data), registry=registry)  # sniffed
    names = set(trace.events["name"].cast(pa.string()).to_pylist())
    assert "tri\x00ton_poi_fused_add_cos_sin_0" in names
    assert _notices(trace) == {("document", "warning: skipped a UTF-8 byte-order mark"): 1}


class _OnceSource:
    """A stream as the lead's Source presents one: the content can be read once, and there
    is no file behind the path."""

    def __init__(self, data: bytes, head: bytes) -> None:
        self.path = Path("<stdin>")
        self.name = "stdin"
        self.head = head
        self.is_stream, self.is_dir = True, False
        self._data: bytes | None = data

    def read_bytes(self, progress=None) -> bytes:
        data, self._data = self._data, None
        assert data is not None, "read twice"
        return data

    def open(self):
        raise AssertionError("the reader must not open the source again")


@pytest.mark.parametrize("rel", [TRITON, ("torch-trace", "hta",
                                          "ns_resolution_rank0_v100.pt.trace.json.gz")])
@pytest.mark.slow
def test_reads_a_stream_once(registry, rel):
    """Content only through the Source, once (the exact re-parse of absolute float µs too)."""
    from tracekit.builder import TraceBuilder
    from tracekit.plugins.kineto import KinetoReader

    path = shared_path(*rel)
    data = gzip.decompress(path.read_bytes())
    assert KinetoReader.reads_streams
    out = TraceBuilder(path.name, "kineto")
    KinetoReader().read(_OnceSource(data, data[:65536]), out)
    direct = tracekit.read(path, registry=registry)
    assert out.build().events.equals(direct.events)


def test_fifo_input(tmp_path, registry):
    trace = read_through_fifo(shared_path(*TRITON).read_bytes(), tmp_path, registry)
    direct = tracekit.read(shared_path(*TRITON), registry=registry)
    assert trace.events.drop_columns(["source"]).equals(direct.events.drop_columns(["source"]))


# -- the typed decode (plugins/kineto/decode.py) and the forgiving path ----------------------

NCCL = ("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")


def _forgiving(monkeypatch, path, registry):
    """Read ``path`` through the forgiving path only (as a document with odd values is)."""
    import tracekit.plugins.kineto.reader as reader

    with monkeypatch.context() as m:
        m.setattr(reader, "decode", lambda blocks: None)
        return tracekit.read(path, registry=registry)


@pytest.mark.slow
def test_typed_decode_reads_like_the_forgiving_path(monkeypatch, registry):
    from tracekit.inputs import Source
    from tracekit.plugins.kineto.reader import _decode_file

    path = shared_path(*NCCL)
    assert _decode_file(Source(path), None) is not None  # the typed decode takes this file
    fast, slow = tracekit.read(path, registry=registry), _forgiving(monkeypatch, path, registry)
    assert fast.events.num_rows == slow.events.num_rows == 26935
    for column in fast.events.column_names:
        if column != "args":
            assert fast.events[column].to_pylist() == slow.events[column].to_pylist(), column
    # args: the tool's own JSON text, the same JSON as the forgiving path's re-encoding.
    fast_args, slow_args = fast.events["args"].to_pylist(), slow.events["args"].to_pylist()
    assert [json.loads(a) if a else None for a in fast_args] == \
        [json.loads(a) if a else None for a in slow_args]
    _, events = load(path)
    assert sum(a is not None for a in fast_args) == sum(
        1 for e in events if e.get("ph") in ("X", "i", "I") and e.get("args")) == 26933
    for table in ("processes", "threads", "devices"):
        assert getattr(fast, table).equals(getattr(slow, table)), table
    assert fast.log.outcomes == slow.log.outcomes
    assert fast.metadata == slow.metadata


def _decode_in_blocks(data: bytes, size: int):
    from tracekit.plugins.kineto.decode import decode, memory_blocks

    return decode(memory_blocks(data, size))


def test_typed_decode_splits_blocks_between_events_only():
    """Blocks end anywhere; a split point inside a string or inside a later top-level field
    (objects in a list after the events) must not cut an event."""
    events = [_x("cpu_op", f"op {i}", i, 1, **{"External id": i}) for i in range(300)]
    events[100]["name"] = 'tricky}, {"name": "x"'
    events[200]["args"] = {"shapes": [{"a": 1}, {"b": 2}]}
    doc = {"schemaVersion": 1, "traceEvents": events,
           "deviceProperties": [{"id": 0, "name": "A"}, {"id": 1, "name": "B"}],
           "baseTimeNanoseconds": 5}
    data = json.dumps(doc, indent=2).encode()
    whole = _decode_in_blocks(data, len(data))
    assert whole is not None
    for size in (97, 1000, 4096):
        top, ev, notes = _decode_in_blocks(data, size)
        assert top == {"schemaVersion": 1, "deviceProperties": doc["deviceProperties"],
                       "baseTimeNanoseconds": 5}
        assert ev.n == 300 and notes == []
        assert ev.field("name").to_pylist() == [e["name"] for e in events]
        assert ev.times("ts").ns.tolist() == [i * 1000 for i in range(300)]
        assert [json.loads(a) for a in ev.text.to_pylist()] == [e["args"] for e in events]


def test_typed_decode_leaves_odd_documents_to_the_forgiving_path(tmp_path, registry):
    events = [_x("kernel", f"k{i}", i, 1, correlation=i, stream=7, device=0) for i in range(2000)]
    good = json.dumps({"traceEvents": events}).encode()
    assert _decode_in_blocks(good, 4096) is not None
    events[1900]["args"]["correlation"] = "1900"  # integer text, far past the first block
    odd = json.dumps({"traceEvents": events}).encode()
    assert _decode_in_blocks(odd, 4096) is None
    trace = tracekit.read(_write(tmp_path, odd), registry=registry)
    assert trace.events["correlation"].to_pylist() == list(range(2000))  # coerced, as before
    for doc in ([{"ph": "X", "ts": True}], [{"ph": "X", "args": [1]}], [3, {"ph": "i"}]):
        assert _decode_in_blocks(json.dumps(doc).encode(), 64) is None, doc
    # Epoch µs past a float's ns precision, with more decimals than ns: rounded by the
    # forgiving path (exact_ns), not by the typed decode.
    sub_ns = b'{"traceEvents": [{"ph": "i", "ts": 1700000000000000.1235}]}'
    assert _decode_in_blocks(sub_ns, 64) is None
    surrogate = b'{"traceEvents": [{"ph": "i", "ts": 1, "args": {"k": "\\ud800"}}]}'
    assert _decode_in_blocks(surrogate, 64) is None
    error = _read_error(_write(tmp_path, surrogate, name="s.json"), registry)
    assert "surrogate" in str(error)  # refused, as the forgiving path always did


def test_args_keep_the_tools_json_text(tmp_path, registry):
    data = (b'{"traceEvents": [\n'
            b'  {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1,'
            b' "dur": 1, "args": {\n    "big": 12345678901234567890, "f": 1e5\n  }},\n'
            b'  {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2,'
            b' "dur": 1, "args": { }},\n'
            b'  {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 3,'
            b' "dur": 1, "args": null}\n]}')
    trace = tracekit.read(_write(tmp_path, data), registry=registry)
    assert trace.events["args"].to_pylist() == [
        '{\n    "big": 12345678901234567890, "f": 1e5\n  }', None, None]


class _Progress:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, float]] = []

    def phase(self, label: str, total: float = 0) -> None:
        self.calls.append(("phase", label, total))

    def update(self, done: float, total: float | None = None) -> None:
        self.calls.append(("update", done, total))


def test_progress_counts_the_bytes_read_of_a_gzip_file(tmp_path, monkeypatch):
    from tracekit.builder import TraceBuilder
    from tracekit.inputs import Source
    from tracekit.plugins.kineto import KinetoReader, decode

    original = shared_path("torch-trace", "tracelens", "h100_bert-small.json.gz")
    monkeypatch.setattr(decode, "BLOCK", 1 << 17)  # the 1.08 MB of text in 128 KiB blocks
    path = _write(tmp_path, gzip.decompress(original.read_bytes()), gz=True)
    size = path.stat().st_size
    progress = _Progress()
    out = TraceBuilder(path.name, "kineto")
    out.progress = progress
    KinetoReader().read(Source(path), out)
    ev = out.build().events
    _, events = load(original)
    assert pc.sum(pc.equal(ev["kind"].cast(pa.string()), "slice")).as_py() == \
        sum(x_counts_by_cat(events).values())
    assert progress.calls[0] == ("phase", f"reading {path.name}", size)
    done = [c[1] for c in progress.calls if c[0] == "update"]
    assert len(done) >= 9 and done == sorted(done) and done[-1] == size
    assert all(c[2] == size for c in progress.calls if c[0] == "update")
    assert progress.calls[-1] == ("phase", f"converting {path.name}", 0)


def test_compact_of_values_all_null_with_an_empty_dictionary() -> None:
    """Slices none of which has a category (rocprof v1's JSON read as a Chrome trace) gave an
    IndexError: the codes of nulls were looked up in an empty remap."""
    import pyarrow as pa
    from tracekit.plugins.kineto.fields import compact

    values = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()),
                                            pa.array([], pa.string()))
    out = compact(values)
    assert out.null_count == 2 and len(out.dictionary) == 0 and out.to_pylist() == [None, None]


def test_rocprof_v1_json_read_as_chrome_trace_is_no_crash() -> None:
    """``--from kineto`` (or standard input) on rocprof v1's results.json reads its slices."""
    trace = tracekit.read(shared_path("rocprof-v1", "shashank_mi300a", "results.json"),
                          format="kineto")
    kinds = trace.events.column("kind").to_pylist()
    assert (len(kinds), kinds.count("slice")) == (17, 17)


def test_rocm_device_properties_and_global_work_sizes(registry):
    """mi300_bert-small (ROCm): deviceProperties numbers its one GPU 0 (HIP's ordinal) while
    the GPU events run on device 2 (ROCm's agent index, CPU agents first): the properties are
    that device's. Kernels launched by hipExtModuleLaunchKernel carry the global work size as
    their grid: in blocks it is divided by the block size (73,728 / 256 = 288)."""
    import math

    path = shared_path("torch-trace", "tracelens", "mi300_bert-small.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    [props] = doc["deviceProperties"]
    events = doc["traceEvents"]
    launcher = {e["args"]["correlation"]: e["name"] for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert {e["args"]["device"] for e in kernels} == {2} and props["id"] == 0
    trace = tracekit.read(path, registry=registry)
    [gpu] = [d for d in trace.devices.to_pylist() if d["device"] == 2]
    assert (gpu["name"], gpu["sm_count"]) == (props["name"], props["numSms"]) == (
        "AMD Instinct MI300X VF", 304)
    assert 0 not in trace.devices["device"].to_pylist()
    want = sorted(
        (e["ts"], math.ceil(e["args"]["grid"][0] / e["args"]["block"][0])
         if launcher[e["args"]["correlation"]] == "hipExtModuleLaunchKernel"
         else e["args"]["grid"][0]) for e in kernels)
    rows = trace.events.filter(pc.equal(trace.events["category"].cast(pa.string()),
                                        "gpu.kernel")).sort_by("ts_ns")
    assert rows["grid_x"].to_pylist() == [g for _, g in want]
    assert 288 in rows["grid_x"].to_pylist()
