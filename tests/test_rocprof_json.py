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

REAL = ("bonus", "rocprofv3-json", "tracelens_908_results.json.gz")


def load(path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


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
    assert log[("pc_sample_host_trap", "skipped: record kind not read yet")] == 4
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
     "unexpected rocprofv3 JSON structure"),
])
def test_bad_json_gives_one_line(text, message, tmp_path, capsys):
    path = tmp_path / "bad_results.json"
    path.write_text(text)
    out = tmp_path / "out.pftrace"
    code = main(["convert", str(path), "--from", "rocprofv3-json", "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and err.count("\n") == 0 and message in err and str(path) in err
    assert not out.exists()
