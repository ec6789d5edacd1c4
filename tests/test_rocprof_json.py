"""rocprofv3 JSON output against independent readings with Python's json module."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pyarrow.compute as pc
import pytest
import tracekit
from helpers import shared_path
from perfetto_check import decode_and_check
from tracekit.cli import main
from tracekit.errors import ReaderCrashError, TraceReadError

REAL = ("bonus", "rocprofv3-json", "tracelens_908_results.json.gz")


def load(path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.mark.slow  # parses a 40 MB JSON; the synthetic tests below run in the fast set
def test_real_file_kernel_dispatches_names_and_totals(registry, tmp_path):
    path = shared_path(*REAL)
    tool = load(path)["rocprofiler-sdk-tool"][0]
    records = tool["buffer_records"]["kernel_dispatch"]
    symbols = {s["kernel_id"]: s["formatted_kernel_name"] for s in tool["kernel_symbols"]}
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        name = symbols[r["dispatch_info"]["kernel_id"]]
        want[name][0] += 1
        want[name][1] += r["end_timestamp"] - r["start_timestamp"]
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["reader"] == "rocprofv3-json"
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("buffer_records.kernel_dispatch", "events")] == len(records) == 43_915
    [report] = tracekit.analyze(trace, "summary", registry=registry)
    got = {r["name"]: [r["count"], r["total"]] for r in report.tables["kernels"].to_pylist()}
    assert got == dict(want)
    # Agents are numbered by node id, as the CSV output's Agent_Id is.
    node = {a["id"]["handle"]: a["node_id"] for a in tool["agents"]}
    assert set(trace.events["device"].to_pylist()) == {
        node[r["dispatch_info"]["agent_id"]["handle"]] for r in records}
    gpus = {a["node_id"]: a["product_name"] for a in tool["agents"] if a["type"] == 2}
    assert {d["device"]: d["name"] for d in trace.devices.to_pylist()} == gpus
    assert set(trace.events["pid"].to_pylist()) == {tool["metadata"]["pid"]}
    out = tmp_path / "out.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    assert sum(s.category == "gpu.kernel" for s in decoded.slices) == len(records)


def _doc() -> dict:
    """A rocprofv3 JSON document with one record of each traced kind, written from the
    schema (source/docs/rocprofv3-schema.json): two processes reuse correlation id 7."""
    kinds = [{"kind": k, "operations": ops} for k, ops in (
        ("NONE", []), ("HIP_RUNTIME_API", ["hipNone", "hipLaunchKernel", "hipMemcpyAsync"]),
        ("MARKER_CORE_API", ["roctxMarkA", "roctxRangePushA", "roctxRangePop"]),
        ("MEMORY_COPY", ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_DEVICE"]),
        ("KERNEL_DISPATCH", ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE",
                             "KERNEL_DISPATCH_COMPLETE"]),
        ("MEMORY_ALLOCATION", ["MEMORY_ALLOCATION_NONE", "MEMORY_ALLOCATION_ALLOCATE",
                               "MEMORY_ALLOCATION_FREE"]))]

    def corr(i):
        return {"internal": i, "external": 0}

    def process(pid: int, offset: int) -> dict:
        t = 1_000_000 * offset
        return {
            "metadata": {"pid": pid, "init_time": t, "fini_time": t + 10_000,
                         "command": ["./app"]},
            "agents": [{"id": {"handle": 100}, "type": 1, "node_id": 0, "name": "cpu"},
                       {"id": {"handle": 101}, "type": 2, "node_id": 1, "name": "gfx942",
                        "product_name": "AMD Instinct MI300X", "cu_count": 304}],
            "counters": [], "code_objects": [],
            "kernel_symbols": [{"kernel_id": 0, "kernel_name": ""},
                               {"kernel_id": 1, "kernel_name": "axpy.kd",
                                "formatted_kernel_name": "axpy"}],
            "strings": {"buffer_records": kinds,
                        "marker_api": [{"key": 9, "value": "step 1"}]},
            "callback_records": {"counter_collection": []},
            "buffer_records": {
                "hip_api": [
                    {"size": 1, "kind": 1, "operation": 1, "correlation_id": corr(7),
                     "start_timestamp": t + 100, "end_timestamp": t + 200, "thread_id": pid},
                    {"size": 1, "kind": 1, "operation": 2, "correlation_id": corr(8),
                     "start_timestamp": t + 300, "end_timestamp": t + 400, "thread_id": pid}],
                "marker_api": [
                    {"size": 1, "kind": 2, "operation": 1, "correlation_id": corr(9),
                     "start_timestamp": t + 50, "end_timestamp": t + 50, "thread_id": pid}],
                "kernel_dispatch": [
                    {"size": 1, "kind": 4, "operation": 2, "thread_id": pid,
                     "correlation_id": corr(7), "start_timestamp": t + 500,
                     "end_timestamp": t + 900,
                     "dispatch_info": {"agent_id": {"handle": 101}, "queue_id": {"handle": 3},
                                       "kernel_id": 1, "dispatch_id": 1,
                                       "private_segment_size": 0, "group_segment_size": 64,
                                       "workgroup_size": {"x": 256, "y": 1, "z": 1},
                                       "grid_size": {"x": 1000, "y": 1, "z": 1}},
                     "stream_id": {"handle": 0}}],
                "memory_copy": [
                    {"size": 1, "kind": 3, "operation": 1, "correlation_id": corr(8),
                     "start_timestamp": t + 1000, "end_timestamp": t + 1500, "thread_id": pid,
                     "dst_agent_id": {"handle": 101}, "src_agent_id": {"handle": 100},
                     "bytes": 4096}],
                "memory_allocation": [
                    {"size": 1, "kind": 5, "operation": 1, "correlation_id": corr(0),
                     "start_timestamp": t + 10, "end_timestamp": t + 20, "thread_id": pid,
                     "agent_id": {"handle": 101}, "address": "0x7f00",
                     "allocation_size": 1 << 20},
                    {"size": 1, "kind": 5, "operation": 2, "correlation_id": corr(0),
                     "start_timestamp": t + 2000, "end_timestamp": t + 2010,
                     "thread_id": pid, "agent_id": {"handle": 0}, "address": "0x7f00",
                     "allocation_size": 1 << 20}],
                "pc_sample_host_trap": [{"size": 1}, {"size": 1}]}}

    return {"rocprofiler-sdk-tool": [process(41, 1), process(42, 2)]}


def test_every_record_kind_and_per_process_correlation(tmp_path, registry):
    path = tmp_path / "run_results.json"
    path.write_text(json.dumps(_doc()))
    trace = tracekit.read(path, registry=registry)
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("buffer_records.hip_api", "events")] == 4
    assert log[("buffer_records.memory_allocation", "events")] == 4
    assert log[("pc_sample_host_trap", "skipped: tracekit does not read this record kind")] == 4
    rows = trace.events.filter(pc.equal(trace.events["pid"], 41)).sort_by("ts_ns").to_pylist()
    got = [(r["category"], r["kind"], r["name"], r["ts_ns"] - 1_000_000, r["dur_ns"],
            r["correlation"], r["bytes"]) for r in rows]
    assert got == [
        ("host.memory", "slice", "MEMORY_ALLOCATION_ALLOCATE", 10, 10, 0, 1 << 20),
        ("host.annotation", "instant", "step 1", 50, None, None, None),
        ("api.runtime", "slice", "hipLaunchKernel", 100, 100, 7, None),
        ("api.runtime", "slice", "hipMemcpyAsync", 300, 100, 8, None),
        ("gpu.kernel", "slice", "axpy", 500, 400, 7, None),
        ("gpu.memcpy", "slice", "Memcpy HtoD", 1000, 500, 8, 4096),
        ("host.memory", "slice", "MEMORY_ALLOCATION_FREE", 2000, 10, 0, -(1 << 20))]
    kernel = rows[4]
    assert (kernel["device"], kernel["grid_x"], kernel["block_x"], kernel["stream"]) == \
        (1, 4, 256, 0)
    assert rows[5]["copy_kind"] == "HtoD" and rows[5]["device"] == 1
    # Both processes use correlation 7 and 8: flows stay within each process.
    out = tmp_path / "out.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    assert decoded.flow_links() == 4


@pytest.mark.parametrize("text, message", [
    ('{"rocprofiler-sdk-tool": [', "invalid JSON"),
    ('{"rocprofiler-sdk-tool": {"x": 1}}', "no 'rocprofiler-sdk-tool' list"),
    ('{"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": [1, 2]}}]}',
     "rocprofiler-sdk-tool[0].buffer_records.kernel_dispatch[0]: 1 is not a record object"),
])
def test_bad_json_gives_one_line(text, message, tmp_path, capsys):
    path = tmp_path / "bad_results.json"
    path.write_text(text)
    out = tmp_path / "out.pftrace"
    code = main(["convert", str(path), "--from", "rocprofv3-json", "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and err.count("\n") == 0 and message in err and path.name in err
    assert not out.exists()


# --- damaged input (issue 13) -----------------------------------------------------------

def _set(doc: dict, path: tuple, value) -> dict:
    target = doc["rocprofiler-sdk-tool"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


KD = ("buffer_records", "kernel_dispatch", 0)
WHERE = "rocprofiler-sdk-tool[0].buffer_records"


@pytest.mark.parametrize("path, value, location, message", [
    ((*KD, "end_timestamp"), 2**63, f"{WHERE}.kernel_dispatch[0].end_timestamp",
     "9223372036854775808 is beyond 64 bits"),
    ((*KD, "start_timestamp"), 2**70, f"{WHERE}.kernel_dispatch[0].start_timestamp",
     "1.1805916207174113e+21 is not an integer of 64 bits"),
    ((*KD, "end_timestamp"), 1e300, f"{WHERE}.kernel_dispatch[0].end_timestamp",
     "1e+300 is not an integer of 64 bits"),
    ((*KD, "start_timestamp"), -(2**63), f"{WHERE}.kernel_dispatch[0].end_timestamp",
     "1000900 minus the start -9223372036854775808 overflows 64 bits"),
    (("buffer_records", "hip_api", 1, "start_timestamp"), "abc",
     f"{WHERE}.hip_api[1].start_timestamp", "'abc' is text where record 0 has a number"),
    (("buffer_records", "hip_api", 1), [1, 2], f"{WHERE}.hip_api[1]",
     "[1, 2] is not a record object"),
    ((*KD, "dispatch_info", "workgroup_size", "x"), 2**40, f"{WHERE}.kernel_dispatch[0]",
     "block_x 1099511627776 does not fit 32 bits"),
    (("buffer_records", "memory_copy"), {"x": 1}, "rocprofiler-sdk-tool[0].buffer_records"
     ".memory_copy", "{'x': 1} is not a list"),
])
def test_damaged_record_values_give_one_line_naming_the_record(path, value, location,
                                                               message, tmp_path, registry):
    file = tmp_path / "run_results.json"
    file.write_text(json.dumps(_set(_doc(), path, value)))
    with pytest.raises(TraceReadError) as caught:
        tracekit.read(file, registry=registry)
    exc = caught.value
    assert not isinstance(exc, ReaderCrashError)
    assert (exc.path, exc.location, exc.message) == (str(file), location, message)


def test_damaged_names_and_metadata_are_left_out_and_counted(tmp_path, registry):
    """Descriptive entries of the wrong type lose what they describe, not the read: a pid
    that is text, a command that is a number, a product name that is a number, a kernel
    symbol whose id is text, a marker whose key is text; invalid UTF-8 is replaced."""
    doc = _doc()
    doc["rocprofiler-sdk-tool"][1]["agents"][1]["product_name"] = ["x"]
    for path, value in ((("metadata", "pid"), "41"), (("metadata", "command"), 7),
                        (("agents", 1, "product_name"), 5),
                        (("kernel_symbols", 1, "kernel_id"), "1"),
                        (("strings", "marker_api", 0, "key"), "9")):
        _set(doc, path, value)
    file = tmp_path / "run_results.json"
    file.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).replace(
        "hipMemcpyAsync", "hipMemcpy\udcffAsync").encode("utf-8", "surrogateescape"))
    trace = tracekit.read(file, registry=registry)
    first = trace.events.filter(pc.is_null(trace.events["pid"]))
    assert sorted(first["name"].to_pylist()) == [
        "<unknown kernel>", "MEMORY_ALLOCATION_ALLOCATE", "MEMORY_ALLOCATION_FREE",
        "Memcpy HtoD", "hipLaunchKernel", "hipMemcpy\ufffdAsync", "roctxRangePushA"]
    assert [p["pid"] for p in trace.processes.to_pylist()] == [42]
    assert {d["device"]: d["name"] for d in trace.devices.to_pylist()} == {1: None}
    notices = {(k[1], k[2]): v for k, v in trace.log.notices().items()}
    assert notices[("names (strings, kernel_symbols, agents)",
                    "warning: entries whose id is not an integer (left out)")] == 2
    assert notices[(file.name, "warning: invalid UTF-8, replaced with U+FFFD")] == 2
