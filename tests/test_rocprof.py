"""The rocprof CSV reader (v1 and rocprofv3) against Python's csv module."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections import defaultdict

import pyarrow.compute as pc
import pytest
import tracekit
from helpers import SHARED, read_text, shared_path
from perfetto_check import decode_and_check
from tracekit.cli import main
from tracekit.errors import EmptyOutputError, ReaderCrashError, TraceReadError


def rocprof_csvs() -> list[str]:
    files = [p for d in ("rocprof-v1", "rocprof-v3") if (SHARED / d).exists()
             for p in (SHARED / d).rglob("*.csv")]
    return sorted(str(p.relative_to(SHARED)) for p in files) or ["<missing>"]


def csv_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# The two largest CSVs (llama.cpp prefill, tens of thousands of rows) run only in the full suite.
@pytest.mark.parametrize("rel", [pytest.param(r, marks=pytest.mark.slow)
                                 if "jimw_llamacpp" in r else r for r in rocprof_csvs()])
def test_every_csv_reads_one_event_per_row(rel, registry, tmp_path):
    path = shared_path(*rel.split("/"))
    trace = tracekit.read(path, registry=registry)
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    if "counter_collection" in path.name:
        rows = csv_rows(path)
        assert log[(path.name, "counter values of the dispatches (one row each)")] == len(rows)
        dispatches: dict = {}
        for r in rows:
            dispatches.setdefault(r["Dispatch_Id"], {})[r["Counter_Name"]] = \
                float(r["Counter_Value"])
        import json

        got = {json.loads(a)["dispatch_id"]: json.loads(a)["counters"]
               for a in trace.events["args"].to_pylist()}
        assert got == {int(k): v for k, v in dispatches.items()}
        return
    if path.name.startswith("results.") and "stats" in path.name:
        # v1 stats quote names by hand without escaping inner quotes: count lines.
        want = sum(1 for line in path.read_text().splitlines()[1:] if line.strip())
    else:
        want = len(csv_rows(path))
    assert log[(path.name, "events")] == want
    out = tmp_path / "out.pftrace"
    if trace.events["ts_ns"].null_count == trace.events.num_rows:
        # Aggregates and counter-only runs have no timeline to draw, and say so.
        with pytest.raises(EmptyOutputError, match="no event has a timestamp"):
            tracekit.write(trace, out, registry=registry)
        assert not out.exists()
        return
    tracekit.write(trace, out, registry=registry)
    assert decode_and_check(out).violations == []


@pytest.mark.parametrize("rel, start, end", [
    ("rocprof-v3/jimw_llamacpp_rocm7/prefill_kernel_trace.csv", "Start_Timestamp",
     "End_Timestamp"),
    ("rocprof-v1/gunrock_mi300_gfx942/results.csv", "BeginNs", "EndNs"),
])
def test_summary_kernel_totals_equal_csv_sums(rel, start, end, registry):
    path = shared_path(*rel.split("/"))
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in csv_rows(path):
        name = r.get("Kernel_Name") or r["KernelName"]
        want[name][0] += 1
        want[name][1] += int(r[end]) - int(r[start])
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    got = {r["name"]: [r["count"], r["total"]] for r in report.tables["kernels"].to_pylist()}
    assert got == dict(want)


def test_v3_directory_links_hip_calls_to_kernels_in_perfetto(registry, tmp_path):
    directory = shared_path("rocprof-v3", "jimw_llamacpp_rocm7")
    trace = tracekit.read(directory, registry=registry)
    assert trace.sources == ["jimw_llamacpp_rocm7"]
    api = {(int(r["Process_Id"]), int(r["Correlation_Id"]))
           for r in csv_rows(directory / "prefill_hip_api_trace.csv")}
    kernels = csv_rows(directory / "prefill_kernel_trace.csv")
    pid = next(iter(api))[0]
    linked = sum((pid, int(k["Correlation_Id"])) in api for k in kernels)
    out = tmp_path / "out.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    flows = [s for s in decoded.slices if s.category == "gpu.kernel" and s.flows]
    assert len(flows) == linked > 1000


# --- pitfalls 10, 11, 14, 15 ---------------------------------------------------------------

def test_agent_ids_streams_segment_names_and_case(tmp_path, registry):
    new = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id",'
           '"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size"\n'
           '"KERNEL_DISPATCH","Agent 3","1","7","9","1","2","k","5","1191915574691984",'
           '"1191915574692984","64"\n')
    old = ('"Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
           '"Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size"\n'
           '"KERNEL_DISPATCH",1,139690710949888,15,"k",0,671599758568,671599825328,0,128\n')
    rocpd = ('"Guid","Kind","Agent_Id","Queue_Id","Stream_Id","Kernel_Name","Correlation_Id",'
             '"Start_Timestamp","End_Timestamp","Lds_Block_Size","Vgpr_Count"\n'
             '"g1","KERNEL_DISPATCH","Agent 0","1","2","k","4","100","250","32","24"\n')
    rows = [read_text(tmp_path, registry, text, f"{i}_kernel_trace.csv", "rocprof")
            .events.to_pylist()[0] for i, text in enumerate((new, old, rocpd))]
    assert [(r["device"], r["stream"], r["shared_mem_bytes"]) for r in rows] == [
        (3, 7, 64), (1, 139690710949888, 128), (0, 2, 32)]
    # Integers stay exact (no float64 on the way); pid from the file name.
    assert rows[0]["ts_ns"] == 1191915574691984 and rows[0]["dur_ns"] == 1000
    assert [r["pid"] for r in rows] == [0, 1, 2]
    assert rows[2]["registers"] == 24


def test_copies_with_correlation_zero_and_marker_instants(tmp_path, registry):
    copies = ('"Kind","Direction","Source_Agent_Id","Destination_Agent_Id","Correlation_Id",'
              '"Start_Timestamp","End_Timestamp"\n'
              '"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",0,1,0,100,200\n'
              '"MEMORY_COPY","DEVICE_TO_HOST",1,0,0,300,350\n')
    trace = read_text(tmp_path, registry, copies, "run_memory_copy_trace.csv", "rocprof")
    rows = trace.events.to_pylist()
    assert [(r["copy_kind"], r["device"], r["correlation"]) for r in rows] == [
        ("HtoD", 1, None), ("DtoH", 1, None)]
    markers = ('"Domain","Function","Process_Id","Thread_Id","Correlation_Id",'
               '"Start_Timestamp","End_Timestamp"\n'
               '"MARKER_CORE_API","mark",717,717,1,100,100\n'
               '"MARKER_CORE_RANGE_API","range",717,717,2,100,400\n')
    rows = read_text(tmp_path, registry, markers, "other_marker_api_trace.csv",
                     "rocprof").events.to_pylist()
    assert [(r["kind"], r["category"], r["name"], r["dur_ns"]) for r in rows] == [
        ("instant", "host.annotation", "mark", None),
        ("slice", "host.annotation", "range", 300)]


def test_v1_none_cells_clone_names_and_counter_only_runs(tmp_path, registry):
    text = ("Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,vgpr,sgpr,"
            "fbar,sig,obj,TCC_HIT[0]\n"
            '0,"bodyForce(Body*, float, int) [clone .kd]",0,0,0,10,10,1024,256,0,0,None,16,'
            "0,0x0,0x7f00,1234\n")
    [row] = read_text(tmp_path, registry, text, "results.csv", "rocprof").events.to_pylist()
    assert row["name"] == "bodyForce(Body*, float, int) [clone .kd]"
    assert (row["registers"], row["ts_ns"], row["grid_x"]) == (None, None, 4)
    assert '"tcc_hit[0]":"1234"' in row["args"]
    assert '"grd":"1024"' in row["args"]  # work-items; grid_x counts workgroups


def test_v1_stats_with_unescaped_quotes_are_aggregates(tmp_path, registry):
    text = ('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n'
            '"kern<"x">",3,300,100,100.0\n')
    [row] = read_text(tmp_path, registry, text, "results.stats.csv",
                      "rocprof").events.to_pylist()
    assert (row["name"], row["count"], row["dur_ns"], row["ts_ns"]) == ('kern<"x">', 3, 300,
                                                                       None)


# --- malformed CSVs -----------------------------------------------------------------------

HEADER = ('"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp",'
          '"End_Timestamp"\n')


@pytest.mark.parametrize("body, location, message", [
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,100,200\n"HIP_RUNTIME_API","hipFree",1,1\n',
     "line 3", "4 fields where the header has 7"),
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,soon,200\n',
     "line 2", "column Start_Timestamp is not an integer: 'soon'"),
    # pyarrow cannot show a row with invalid UTF-8: the line is found by counting fields
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,100,200\n"HIP_\udcffAPI","x",1,1,1\n',
     "line 3", "5 fields where the header has 7"),
    # a lone CR ends a line for pyarrow, and for the line count
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,100,200\r"HIP_RUNTIME_API","hipFree",1,1,1,\n',
     "line 3", "6 fields where the header has 7"),
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,100,99999999999999999999\n',
     "line 2", "column End_Timestamp is out of the 64-bit integer range: "
     "'99999999999999999999'"),
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,-9223372036854775808,9223372036854775807\n',
     "line 2", "End_Timestamp 9223372036854775807 minus the start -9223372036854775808 "
     "overflows 64 bits"),
])
def test_malformed_rows_name_the_file_and_line(tmp_path, capsys, body, location, message):
    path = tmp_path / "run_hip_api_trace.csv"
    path.write_bytes((HEADER + body).encode("utf-8", "surrogateescape"))
    with pytest.raises(TraceReadError) as caught:
        tracekit.read(path, format="rocprof")
    exc = caught.value
    assert not isinstance(exc, ReaderCrashError)
    assert (exc.path, exc.location, exc.message) == (str(path), location, message)
    assert main(["convert", str(path), "-o", str(tmp_path / "o.pftrace"), "-q"]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert f"{location}: {message}" in err
    assert not (tmp_path / "o.pftrace").exists()


def test_missing_columns_are_not_a_rocprof_file(tmp_path, capsys):
    path = tmp_path / "run_kernel_trace.csv"
    path.write_text('"Kind","Kernel_Name","Start_Timestamp"\n"KERNEL_DISPATCH","k",1\n')
    assert main(["convert", str(path), "--from", "rocprof", "-o",
                 str(tmp_path / "o.pftrace"), "-q"]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert "line 1: not a rocprof CSV header (no Agent_Id, Correlation_Id column)" in err


# --- rocprof v1 results.json -------------------------------------------------------------

def v1_json_files() -> list[str]:
    base = SHARED / "rocprof-v1"
    return sorted(str(p.relative_to(SHARED)) for p in base.rglob("results.json")) \
        if base.exists() else ["<missing>"]


@pytest.mark.parametrize("rel", v1_json_files())
def test_v1_results_json_exact_times_sections_and_flows(rel, registry, tmp_path):
    import json

    path = shared_path(*rel.split("/"))
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    assert events[0] == {}  # the quirk: an empty first event
    xs = [e for e in events if e.get("ph") == "X"]
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["reader"] == "rocprof"
    rows = trace.events.to_pylist()
    assert len(rows) == len(xs)
    # Exact ns from args.BeginNs/EndNs, not the µs strings.
    assert sorted(r["ts_ns"] for r in rows) == sorted(int(e["args"]["BeginNs"]) for e in xs)
    assert sum(r["dur_ns"] or 0 for r in rows) == sum(
        int(e["args"]["EndNs"]) - int(e["args"]["BeginNs"]) for e in xs
        if int(e["args"]["EndNs"]) - int(e["args"]["BeginNs"]) > 1)
    sections = {int(e["pid"]): e["args"]["name"] for e in events if e.get("ph") == "M"}
    gpu = [e for e in xs if sections[int(e["pid"])].startswith("GPU")
           and not sections[int(e["pid"])].startswith("GPU Barriers")]
    # Zero-length "Unknown command type" ops are the barriers of synchronize calls.
    barriers = [e for e in gpu if e["name"] == "Unknown command type"]
    assert all(int(e["args"]["EndNs"]) == int(e["args"]["BeginNs"]) for e in barriers)
    assert sum(r["category"] == "gpu.kernel" for r in rows) == len(gpu) - len(barriers)
    # Every s/t pair becomes a launch link (flow arrow) from its call to its work.
    ends: dict = {}
    for e in events:
        if e.get("ph") in ("s", "t"):
            ends.setdefault(e["id"], set()).add(e["ph"])
    out = tmp_path / "out.pftrace"
    result = tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    device_ends = [s for s in decoded.slices if s.category.startswith("gpu.") and s.flows]
    assert len(device_ends) == sum(v == {"s", "t"} for v in ends.values())
    # args.pid/tid that repeat the row's ids (or its section's) are not kept: the text
    # "19147" would take the key the writer carries a device row's process under.
    for row, e in zip(sorted(rows, key=lambda r: r["ts_ns"]),
                      sorted(xs, key=lambda e: int(e["args"]["BeginNs"])), strict=True):
        kept = json.loads(row["args"] or "{}")
        for key, own in (("pid", (row["pid"], int(e["pid"]))), ("tid", (row["tid"],))):
            if key in e["args"]:
                assert (key in kept) == (int(e["args"][key]) not in own)
    assert not [k for k in result.skipped if k.startswith("field ")]
    back = tracekit.read(out, registry=registry)
    launched_by = sorted((r["ts_ns"], r["pid"]) for r in rows if r["device"] is not None)
    assert sorted((r["ts_ns"], r["pid"]) for r in back.events.to_pylist()
                  if r["device"] is not None) == launched_by


def test_v1_synchronous_copies_take_the_size_of_the_call_that_holds_them(registry):
    """rocprof v1 shashank_mi300a: two 4 GB hipMemcpy HtoD calls, one after the other. The
    second copy's flow start is written at the copy's own start, 13 ms before its call, inside
    the first call: the copy belongs to the second call (the one of the same kind holding
    most of it), so each copy carries its call's 4 GB, as the calls' sizeBytes say."""
    path = shared_path("rocprof-v1", "shashank_mi300a", "results.json")
    calls = [e for e in json.loads(path.read_text())["traceEvents"]
             if e.get("ph") == "X" and e.get("name") == "hipMemcpy"]
    by_kind: dict[str, int] = {}
    for e in calls:
        size, kind = re.search(r"sizeBytes\((\d+)\) kind\((\d)\)", e["args"]["args"]).groups()
        by_kind[{"1": "HtoD", "2": "DtoH"}[kind]] = by_kind.get(
            {"1": "HtoD", "2": "DtoH"}[kind], 0) + int(size)
    assert by_kind == {"HtoD": 8_000_000_000, "DtoH": 4_000_000_000}
    trace = tracekit.read(path, registry=registry)
    rows = trace.events.filter(pc.equal(trace.events["category"], "gpu.memcpy")) \
        .sort_by("ts_ns").to_pylist()
    assert [(r["copy_kind"], r["bytes"], r["correlation"]) for r in rows] == [
        ("HtoD", 4_000_000_000, 0), ("HtoD", 4_000_000_000, 1), ("DtoH", 4_000_000_000, 2)]
    runtime = trace.events.filter(pc.equal(trace.events["name"], "hipMemcpy")) \
        .sort_by("ts_ns").to_pylist()
    assert [r["correlation"] for r in runtime] == [0, 1, 2]


# --- rocprofv2 CSV (pitfall 13) and the rest of rocprofv3's traces ------------------------

def _write(directory, files: dict[str, str]):
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def test_v2_blank_line_stop_timestamp_point_roctx_and_repeated_dispatches(tmp_path, registry):
    """rocprofv2's file plugin: a blank line after each header, Stop_Timestamp on ops,
    roctx as point records, pid from <trace>_<pid>.csv; the ops trace repeats the kernel
    file's dispatch (same Correlation_ID), which is kept once."""
    run = _write(tmp_path / "v2", {
        "results_77.csv": (
            "Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,Workgroup_Size,LDS_Per_Workgroup,"
            "Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,Kernel_Name,"
            "Start_Timestamp,End_Timestamp,Correlation_ID,SQ_WAVES\n\n"
            '1,2,0,77,78,1000,256,0,0,8,0,16,64,"axpy(float*, float const*)",1000,2000,5,4\n'),
        "hip_api_trace_77.csv": (
            "Domain,Function,Start_Timestamp,End_Timestamp,Correlation_ID\n\n"
            'HIP_API_DOMAIN,"hipLaunchKernel",900,950,5\n'
            'HIP_API_DOMAIN,"hipMemcpy",2100,2600,6\n'),
        "hcc_ops_trace_77.csv": (
            "Domain,Operation,Kernel_Name,Start_Timestamp,Stop_Timestamp,Correlation_ID\n\n"
            'HIP_OPS_DOMAIN,"KernelExecution","axpy(float*, float const*)",1000,2000,5\n'
            'HIP_OPS_DOMAIN,"CopyDeviceToHost",,2200,2500,6\n'),
        "roctx_trace_77.csv": (
            "Domain,ROCTX_ID,Message,Timestamp\n\n"
            'ROCTX_DOMAIN,0,"step",800\n'
            'ROCTX_DOMAIN,1,"inner",860\n'
            "ROCTX_DOMAIN,1,,2700\n"
            "ROCTX_DOMAIN,0,,2800\n"
            'ROCTX_DOMAIN,5,"mark",2850\n'
            "ROCTX_DOMAIN,3,,2900\n")})
    trace = tracekit.read(run, registry=registry)
    assert trace.metadata["sources"]["v2"]["files"] == {
        "results_77.csv": "v2_kernel", "hip_api_trace_77.csv": "v2_api",
        "hcc_ops_trace_77.csv": "v2_ops", "roctx_trace_77.csv": "v2_roctx"}
    rows = trace.events.sort_by("ts_ns").to_pylist()
    assert [(r["category"], r["kind"], r["name"], r["ts_ns"], r["dur_ns"], r["pid"],
             r["device"], r["correlation"]) for r in rows] == [
        ("host.annotation", "slice", "step", 800, 2000, 77, None, None),
        ("host.annotation", "slice", "inner", 860, 1840, 77, None, None),
        ("api.runtime", "slice", "hipLaunchKernel", 900, 50, 77, None, 5),
        ("gpu.kernel", "slice", "axpy(float*, float const*)", 1000, 1000, 77, 2, 5),
        ("api.runtime", "slice", "hipMemcpy", 2100, 500, 77, None, 6),
        ("gpu.memcpy", "slice", "CopyDeviceToHost", 2200, 300, 77, 0, 6),
        ("host.annotation", "instant", "mark", 2850, None, 77, None, None)]
    kernel = rows[3]
    assert (kernel["grid_x"], kernel["block_x"]) == (4, 256)  # ceil(1000 / 256) workgroups
    assert '"sq_waves":"4"' in kernel["args"]
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("hcc_ops_trace_77.csv", "skipped: the same dispatch as in results_77.csv")] == 1
    assert log[("hcc_ops_trace_77.csv",
                "device not recorded by rocprofv2: placed on device 0")] == 1
    assert log[("roctx_trace_77.csv", "range ends (joined to their start)")] == 2
    assert log[("roctx_trace_77.csv", "skipped: range end without a start")] == 1


def test_v3_memory_allocation_and_scratch_traces(tmp_path, registry):
    run = _write(tmp_path / "v3", {
        "900_memory_allocation_trace.csv": (
            '"Kind","Operation","Agent_Id","Allocation_Size","Address","Correlation_Id",'
            '"Start_Timestamp","End_Timestamp"\n'
            '"MEMORY_ALLOCATION","MEMORY_ALLOCATION_ALLOCATE","Agent 1","4096",'
            '"0x00007f0000000000","3","100","150"\n'
            '"MEMORY_ALLOCATION","MEMORY_ALLOCATION_FREE","","4096","0x00007f0000000000",'
            '"9","500","520"\n'),
        "900_scratch_memory_trace.csv": (
            '"Kind","Operation","Agent_Id","Queue_Id","Thread_Id","Alloc_Flags",'
            '"Start_Timestamp","End_Timestamp"\n'
            '"SCRATCH_MEMORY","SCRATCH_MEMORY_ALLOC","Agent 1","2","901","0","200","260"\n')})
    trace = tracekit.read(run, registry=registry)
    rows = trace.events.sort_by("ts_ns").to_pylist()
    assert [(r["category"], r["name"], r["ts_ns"], r["dur_ns"], r["pid"], r["tid"],
             r["bytes"], r["correlation"]) for r in rows] == [
        ("host.memory", "MEMORY_ALLOCATION_ALLOCATE", 100, 50, 900, None, 4096, 3),
        ("host.memory", "SCRATCH_MEMORY_ALLOC", 200, 60, 900, 901, None, None),
        ("host.memory", "MEMORY_ALLOCATION_FREE", 500, 20, 900, None, -4096, 9)]
    out = tmp_path / "out.pftrace"
    tracekit.write(trace, out, registry=registry)
    assert decode_and_check(out).violations == []


def test_v3_counters_attach_to_the_kernel_trace_dispatches(tmp_path, registry):
    import json

    run = _write(tmp_path / "v3c", {
        "5_kernel_trace.csv": (
            '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id",'
            '"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
            '"KERNEL_DISPATCH","Agent 1","1","0","5","1","3","k","7","100","200"\n'
            '"KERNEL_DISPATCH","Agent 1","1","0","5","2","3","k","8","300","400"\n'),
        "5_counter_collection.csv": (
            '"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id",'
            '"Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size",'
            '"Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name",'
            '"Counter_Value","Start_Timestamp","End_Timestamp"\n'
            '"7","1","Agent 1","1","5","5","64","3","k","64","0","0","8","0","16","SQ_WAVES",'
            '"1","100","200"\n'
            '"7","1","Agent 1","1","5","5","64","3","k","64","0","0","8","0","16","GRBM_COUNT",'
            '"250.5","100","200"\n')})
    trace = tracekit.read(run, registry=registry)
    rows = trace.events.sort_by("ts_ns").to_pylist()
    assert len(rows) == 2  # the counted dispatch is not repeated
    assert json.loads(rows[0]["args"])["counters"] == {"SQ_WAVES": 1.0, "GRBM_COUNT": 250.5}
    assert "counters" not in json.loads(rows[1]["args"])
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("5_counter_collection.csv", "skipped: the same dispatch as in "
                "5_kernel_trace.csv (counters attached there)")] == 1


def test_agent_info_names_the_devices_of_its_prefix_siblings(tmp_path, registry):
    run = _write(tmp_path / "v3a", {
        "7_kernel_trace.csv": (
            '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id",'
            '"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
            '"KERNEL_DISPATCH","Agent 2","1","0","7","1","3","k","7","100","200"\n'),
        "7_agent_info.csv": (
            '"Node_Id","Logical_Node_Id","Agent_Type","Cpu_Cores_Count","Cu_Count","Name",'
            '"Vendor_Name","Product_Name","Model_Name"\n'
            '"0","0","CPU","64","0","AMD EPYC","CPU","AMD EPYC",""\n'
            '"2","2","GPU","0","304","gfx942","AMD","AMD Instinct MI300X","ip discovery"\n')})
    trace = tracekit.read(run / "7_kernel_trace.csv", registry=registry)
    assert trace.devices.select(["device", "name", "compute_capability", "sm_count"]) \
        .to_pylist() == [{"device": 2, "name": "AMD Instinct MI300X",
                          "compute_capability": "gfx942", "sm_count": 304}]
    assert trace.events.num_rows == 1


# --- issue 13: stats files, counter passes, device names, damaged input ------------------

def _sums(path, name_col: str, start: str, end: str) -> dict[str, list[int]]:
    want: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in csv_rows(path):
        want[r[name_col]][0] += 1
        want[r[name_col]][1] += int(r[end]) - int(r[start])
    return dict(want)


def test_v1_folder_stats_file_adds_no_events_on_top_of_the_trace(registry):
    """results.stats.csv totals the kernels results.csv records: read as one folder, the
    kernels are counted once (it used to double every call and total)."""
    folder = shared_path("rocprof-v1", "gunrock_mi300_gfx942")
    want = _sums(folder / "results.csv", "KernelName", "BeginNs", "EndNs")
    trace = tracekit.read(folder, registry=registry)
    [report] = tracekit.analyze(trace, "summary", registry=registry)
    got = {r["name"]: [r["count"], r["total"]] for r in report.tables["kernels"].to_pylist()}
    assert got == want
    assert sum(n for n, _ in want.values()) == trace.events.num_rows == 56
    assert trace.events["count"].null_count == 56  # no aggregate row came in
    stats_rows = sum(1 for line in (folder / "results.stats.csv").read_text().splitlines()[1:]
                     if line.strip())
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("results.stats.csv", "skipped: aggregate totals of the run the trace files "
                "here record (not added on top of their events)")] == stats_rows == 8
    assert "aggregates_only" not in trace.metadata["sources"][folder.name]


def test_stats_file_alone_is_aggregates_and_says_so(registry):
    path = shared_path("rocprof-v1", "gunrock_mi300_gfx942", "results.stats.csv")
    trace = tracekit.read(path, registry=registry)
    assert trace.events.num_rows == 8 and trace.events["ts_ns"].null_count == 8
    assert trace.metadata["sources"][path.name]["aggregates_only"] is True
    notices = {(k[1], k[2]) for k in trace.log.notices()}
    assert (path.name, "warning: aggregate totals only (a stats file): no timeline and no "
            "per-call times: read results.csv for the trace") in notices


def test_v3_domain_stats_and_stats_categories(tmp_path, registry):
    head = '"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs","MaxNs","StdDev"\n'
    run = _write(tmp_path / "stats", {
        "9_domain_stats.csv": head + '"HIP_RUNTIME_API",3,300,100,60.0,90,110,1.0\n'
                                     '"KERNEL_DISPATCH",2,200,100,40.0,90,110,1.0\n',
        "9_hip_api_stats.csv": head + '"hipMalloc",3,300,100,100.0,90,110,1.0\n',
        "9_memory_allocation_stats.csv": head + '"MEMORY_ALLOCATION_ALLOCATE",1,50,50,'
                                                '100.0,50,50,0.0\n'})
    trace = tracekit.read(run, registry=registry)
    rows = sorted((r["category"], r["name"], r["count"], r["dur_ns"])
                  for r in trace.events.to_pylist())
    assert rows == [("api.runtime", "hipMalloc", 3, 300),
                    ("host.memory", "MEMORY_ALLOCATION_ALLOCATE", 1, 50)]
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("9_domain_stats.csv", "skipped: per-domain totals (the other stats files "
                "break them down)")] == 2


def _counter_file(rows, pid: int, shift_ns: int, counters: dict[str, str]) -> str:
    """A rocprofv3 counter_collection.csv (the ROCm 6.4+ columns) for kernel-trace rows."""
    head = ('"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id",'
            '"Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size",'
            '"Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name",'
            '"Counter_Value","Start_Timestamp","End_Timestamp"\n')
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in rows:
        for name, value in counters.items():
            writer.writerow([r["Correlation_Id"], r["Dispatch_Id"], r["Agent_Id"],
                             r["Queue_Id"], pid, pid, r["Grid_Size_X"], r["Kernel_Id"],
                             r["Kernel_Name"], r["Workgroup_Size_X"], r["LDS_Block_Size"],
                             r["Scratch_Size"], r["VGPR_Count"], r["Accum_VGPR_Count"],
                             r["SGPR_Count"], name, value,
                             int(r["Start_Timestamp"]) + shift_ns,
                             int(r["End_Timestamp"]) + shift_ns])
    return head + out.getvalue()


def test_v3_counter_pass_of_another_process_stays_off_the_timeline(tmp_path, registry):
    """A run folder with its kernel trace, the counters of the same process, and a replay
    pass (another pid, 14 s later, the same dispatch ids and kernels): the replay is
    counted and left off; the traced run's span and dispatches are unchanged."""
    real = shared_path("rocprof-v3", "jimw_llamacpp_rocm7")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("prefill_kernel_trace.csv", "prefill_hip_api_trace.csv"):
        shutil.copyfile(real / name, run / name)
    kernels = csv_rows(real / "prefill_kernel_trace.csv")
    api = csv_rows(real / "prefill_hip_api_trace.csv")
    [pid] = {int(r["Process_Id"]) for r in api}
    measured = kernels[:3]
    (run / "prefill_counter_collection.csv").write_text(
        _counter_file(measured, pid, 0, {"SQ_WAVES": "4", "GRBM_COUNT": "250.5"}))
    (run / "replay").mkdir()
    (run / "replay" / "4000001_counter_collection.csv").write_text(
        _counter_file(kernels[:5], 4000001, 14_000_000_000, {"SQ_WAVES": "8"}))
    trace = tracekit.read(run, registry=registry)
    # The span is the traced run's, as the CSVs give it.
    starts = [int(r["Start_Timestamp"]) for r in kernels + api]
    ends = [int(r["End_Timestamp"]) for r in kernels + api]
    ev = trace.events
    span = pc.max(pc.add(ev["ts_ns"], pc.fill_null(ev["dur_ns"], 0))).as_py() - \
        pc.min(ev["ts_ns"]).as_py()
    assert span == max(ends) - min(starts)
    assert ev.num_rows == len(kernels) + len(api)
    # Every row is the traced process's: a kernel-trace file is one process.
    assert set(ev["pid"].to_pylist()) == {pid}
    assert [p["pid"] for p in trace.processes.to_pylist()] == [pid]
    rows = {int(json.loads(r["args"])["dispatch_id"]): json.loads(r["args"])
            for r in ev.filter(pc.equal(ev["category"], "gpu.kernel")).to_pylist()}
    assert {d for d, a in rows.items() if "counters" in a} == \
        {int(r["Dispatch_Id"]) for r in measured}
    assert rows[int(measured[0]["Dispatch_Id"])]["counters"] == {"SQ_WAVES": 4,
                                                                 "GRBM_COUNT": 250.5}
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("prefill_counter_collection.csv", "skipped: the same dispatch as in "
                "prefill_kernel_trace.csv (counters attached there)")] == 3
    assert log[("4000001_counter_collection.csv", "skipped: counter collection of another "
                "process or pass (no dispatch in prefill_kernel_trace.csv with its process "
                "and Dispatch_Id)")] == 5
    # Read alone, the replay pass is its own process's kernels, 14 s later.
    alone = tracekit.read(run / "replay" / "4000001_counter_collection.csv",
                          registry=registry).events
    assert set(alone["pid"].to_pylist()) == {4000001}
    assert alone["ts_ns"].to_pylist() == [int(r["Start_Timestamp"]) + 14_000_000_000
                                          for r in kernels[:5]]


SYSINFO = """CMD: rocminfo
ROCk module version 6.9.4 is loaded
==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    Intel(R) Xeon(R) Platinum 8480C
  Marketing Name:          Intel(R) Xeon(R) Platinum 8480C
  Node:                    0
  Device Type:             CPU
  Compute Unit:            112
*******
Agent 2
*******
  Name:                    Intel(R) Xeon(R) Platinum 8480C
  Marketing Name:          Intel(R) Xeon(R) Platinum 8480C
  Node:                    1
  Device Type:             CPU
  Compute Unit:            112
*******
Agent 3
*******
  Name:                    gfx942
  Uuid:                    GPU-9d90a620d997480d
  Marketing Name:          AMD Instinct MI300X
  Node:                    2
  Device Type:             GPU
  Compute Unit:            304
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
*******
Agent 4
*******
  Name:                    gfx942
  Marketing Name:          AMD Instinct MI300X
  Node:                    3
  Device Type:             GPU
  Compute Unit:            304
"""


def test_v1_csv_devices_named_by_the_sysinfo_beside_it(tmp_path, registry):
    """rocprof v1 writes rocminfo's output as results.sysinfo.txt; gpu-id is the GPU's node
    (2 here, the first GPU of a machine with two CPU agents)."""
    shutil.copyfile(shared_path("rocprof-v1", "gunrock_mi300_gfx942", "results.csv"),
                    tmp_path / "results.csv")
    (tmp_path / "results.sysinfo.txt").write_text(SYSINFO)
    for source in (tmp_path / "results.csv", tmp_path):
        trace = tracekit.read(source, registry=registry)
        assert set(trace.events["device"].to_pylist()) == {2}
        assert trace.devices.select(["device", "name", "compute_capability", "sm_count"]) \
            .to_pylist() == [
            {"device": 2, "name": "AMD Instinct MI300X", "compute_capability": "gfx942",
             "sm_count": 304},
            {"device": 3, "name": "AMD Instinct MI300X", "compute_capability": "gfx942",
             "sm_count": 304}]


@pytest.mark.parametrize("folder, devices, name", [
    ("hgliu_mi300x_2025", range(2, 10), "AMD Instinct MI300X"),  # ROCm 6: by node
    ("shashank_mi300a", range(4, 8), "AMD Instinct MI300A"),
    ("kokkos_2021_gfx906", range(0, 4), "Vega 20"),  # ROCm 4: by position among GPUs
])
def test_v1_results_json_devices_named_from_other_data(folder, devices, name, registry):
    """results.json keeps rocminfo in otherData with the spaces removed
    (``AMDInstinctMI300X``): the product name is spaced again at its words."""
    path = shared_path("rocprof-v1", folder, "results.json")
    other = json.loads(path.read_text())["otherData"]
    gpu_agents = sorted((int(k.split(".")[0][5:]) for k, v in other.items()
                         if k.endswith(".DeviceType") and v == "GPU"))
    arch = {other[f"Agent{a}.Name"] for a in gpu_agents}
    cus = {int(other[f"Agent{a}.ComputeUnit"]) for a in gpu_agents}
    assert {other[f"Agent{a}.MarketingName"] for a in gpu_agents} == {name.replace(" ", "")}
    trace = tracekit.read(path, registry=registry)
    got = trace.devices.select(["device", "name", "compute_capability", "sm_count"])
    assert got.to_pylist() == [{"device": d, "name": name, "compute_capability": a,
                                "sm_count": c} for d in devices for a in arch for c in cus]
    used = set(trace.events["device"].to_pylist()) - {None}
    assert used and used <= set(devices)


def test_damaged_csv_rows_are_read_with_warnings(tmp_path, registry):
    """What a reader can keep it keeps and counts: invalid UTF-8 replaced, a NUL kept, a
    missing name filled, an end before the start left without a duration, a header
    alone read as no rows; a byte order mark and CRLF line ends are fine."""
    head = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id",'
            '"Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"')
    path = tmp_path / "4_kernel_trace.csv"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join([
        head, '"KERNEL_DISPATCH","Agent 1","1","0","5","1","3","k\udcff1","7","100","200"',
        '"KERNEL_DISPATCH","Agent 1","1","0","5","2","3","k\x002","8","300","400"',
        '"KERNEL_DISPATCH","Agent 1","1","0","5","3","3","","9","500","450"']).encode(
        "utf-8", "surrogateescape") + b"\r\n")
    trace = tracekit.read(path, registry=registry)
    rows = trace.events.select(["name", "ts_ns", "dur_ns", "device"]).to_pylist()
    assert rows == [{"name": "k\ufffd1", "ts_ns": 100, "dur_ns": 100, "device": 1},
                    {"name": "k\x002", "ts_ns": 300, "dur_ns": 100, "device": 1},
                    {"name": "<unnamed>", "ts_ns": 500, "dur_ns": None, "device": 1}]
    assert {(k[2], v) for k, v in trace.log.notices().items()} == {
        ("warning: cells with invalid UTF-8, replaced with U+FFFD (the first on line 2)", 1),
        ("warning: rows without a name (named <unnamed>)", 1),
        ("warning: rows that end before they start (duration left empty)", 1)}
    path.write_text(head + "\n")
    empty = tracekit.read(path, registry=registry)
    assert empty.events.num_rows == 0
    assert [k[2] for k in empty.log.notices()] == ["warning: no rows (the header alone)"]


@pytest.mark.parametrize("name, text, location, message", [
    ("5_kernel_trace.csv",
     '"Kind","Agent_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
     '"KERNEL_DISPATCH","Agent 4294967296","k","1","100","200"\n',
     "line 2", "column Agent_Id is out of range (a 32-bit field): 'Agent 4294967296'"),
    ("6_kernel_trace.csv",
     '"Kind","Agent_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
     '"KERNEL_DISPATCH","1","k","1","1e300","200"\n',
     "line 2", "column Start_Timestamp is not an integer: '1e300'"),
    ("7_kernel_trace.csv",
     '"Kind","Agent_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
     '"KERNEL_DISPATCH","1","k","1","9223372036854775808","200"\n',
     "line 2", "column Start_Timestamp is out of the 64-bit integer range: "
     "'9223372036854775808'"),
    ("8_kernel_trace.csv", '\ufeff"Kind","Agent_Id"\n'.encode("utf-16").decode("latin-1"),
     "line 1", "UTF-16 text: rocprof writes UTF-8 (convert the file first)"),
    ("results.stats.csv", '"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n'
     '"k",1,100,100,100.0\n"k2",2\n', "line 3", "2 fields where the header has 5"),
    ("9_kernel_trace.csv", '"Kind","Agent_Id","Kernel_Name","Start_Timestamp"\n',
     "line 1", "not a rocprof CSV header (no Correlation_Id column)"),
])
def test_damaged_csv_gives_one_line_naming_file_and_line(name, text, location, message,
                                                         tmp_path, registry):
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1") if name.startswith("8_") else text.encode())
    with pytest.raises(TraceReadError) as caught:
        tracekit.read(path, format="rocprof", registry=registry)
    exc = caught.value
    assert not isinstance(exc, ReaderCrashError)
    assert (exc.path, exc.location, exc.message) == (str(path), location, message)


@pytest.mark.parametrize("change, location, message", [
    ({"args": {"BeginNs": "1" * 30, "EndNs": "1"}}, "traceEvents[1]",
     "args.BeginNs is not a 64-bit integer: '111111111111111111111111111111'"),
    ({"ts": "NaN"}, "traceEvents[1]",
     "ts is not a time in µs that fits 64 bits of ns: 'NaN'"),
    ({"dur": 1e300}, "traceEvents[1]",
     "dur is not a time in µs that fits 64 bits of ns: 1e+300"),
    ({"args": {"BeginNs": "1", "EndNs": "2", "dev-id": "4294967296"}}, "traceEvents[1]",
     "args.dev-id does not fit 32 bits: 4294967296"),
])
def test_damaged_v1_results_json_gives_one_line(change, location, message, tmp_path,
                                                registry):
    event = {"ph": "X", "name": "k", "pid": 6, "tid": 1, "ts": "1", "dur": "2",
             "args": {"BeginNs": "1000", "EndNs": "3000"}}
    event.update(change)
    doc = {"traceEvents": [{}, event, {"ph": "M", "name": "process_name", "pid": 6,
                                       "args": {"name": "GPU0"}}]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceReadError) as caught:
        tracekit.read(path, format="rocprof", registry=registry)
    exc = caught.value
    assert not isinstance(exc, ReaderCrashError)
    assert (exc.location, exc.message) == (location, message)


def test_v1_results_json_odd_values_are_read(tmp_path, registry):
    """args that are no object, ids of the wrong type, a name that is a number: the
    event stays, what cannot be read is left out and counted."""
    doc = {"traceEvents": [
        {}, {"ph": "M", "name": "process_name", "pid": 6, "args": {"name": "GPU0"}},
        {"ph": "X", "name": 12, "pid": 6, "tid": [1], "ts": "1", "dur": "2", "args": 5},
        {"ph": "X", "name": "k", "pid": {"x": 1}, "tid": 1, "ts": 3, "dur": 1,
         "args": {"BeginNs": "3000", "EndNs": "4000", "pid": [1]}},
        {"ph": "s", "id": [1], "pid": 6, "tid": 1, "ts": 1}]}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    trace = tracekit.read(path, format="rocprof", registry=registry)
    rows = trace.events.select(["category", "name", "ts_ns", "dur_ns", "device", "pid"])
    assert rows.to_pylist() == [
        {"category": "gpu.kernel", "name": "12", "ts_ns": 1000, "dur_ns": 2000,
         "device": 0, "pid": None},
        {"category": "other", "name": "k", "ts_ns": 3000, "dur_ns": 1000, "device": None,
         "pid": None}]
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("trace events (X)", "warning: args that are not an object (left out)")] == 1


@pytest.mark.parametrize("folder,events,skipped", [
    ("kokkos_2021_gfx906", 157, {"results.stats.csv": 8, "results.hip_stats.csv": 17,
                                 "results.copy_stats.csv": 3, "results.db": 1}),
    ("shashank_mi300a", 17, {"results.hip_stats.csv": 7, "output_vec_add_gpu.csv": 1}),
    ("hgliu_mi300x_2025", 16, {"results.hip_stats.csv": 6, "results.copy_stats.csv": 2}),
])
def test_a_v1_folder_of_totals_reads_its_results_json(folder, events, skipped):
    path = shared_path("rocprof-v1", folder)
    trace = tracekit.read(path)
    alone = tracekit.read(path / "results.json")
    assert trace.events.num_rows == alone.events.num_rows == events
    assert trace.events.drop_columns(["source"]).equals(alone.events.drop_columns(["source"]))
    noted = {kind: n for (_, kind, outcome), n in trace.log.outcomes.items()
             if outcome.startswith("skipped:") and kind in skipped}
    assert noted == skipped


def test_pc_sampling_file_in_a_run_folder_is_counted_as_pc_samples(tmp_path, registry):
    """rocprofv3's PC sampling CSV (Sample_Timestamp, Exec_Mask, Dispatch_Id, Instruction
    ...) is not read; in a run's folder its rows are counted as PC samples, not as a
    file that is not rocprof's."""
    shutil.copy(shared_path("rocprof-v3", "rocprofiler-sdk-docs", "kernel_trace_2024-08.csv"),
                tmp_path / "run_kernel_trace.csv")
    (tmp_path / "run_pc_sampling_host_trap.csv").write_text(
        '"Sample_Timestamp","Exec_Mask","Dispatch_Id","Instruction","Instruction_Comment",'
        '"Correlation_Id"\n'
        '1000001000,18446744073709551615,1,"s_waitcnt vmcnt(0)","k.cpp:10",1\n'
        '1000002000,18446744073709551615,1,"v_add_f32 v0, v1, v2","k.cpp:11",1\n')
    trace = tracekit.read(tmp_path, registry=registry)
    outcomes = {(k, o): n for (_, k, o), n in trace.log.outcomes.items()
                if k == "run_pc_sampling_host_trap.csv"}
    assert outcomes == {("run_pc_sampling_host_trap.csv",
                         "skipped: PC samples, which tracekit does not read"): 2}


def test_a_database_that_is_not_sqlite_or_is_gzipped_is_named_so(tmp_path, registry):
    """--from rocprof-db on a JSON file is 'not an SQLite file', not 'damaged'; a gzipped
    rocpd database is told to be uncompressed."""
    import gzip

    import tracekit.errors

    json_file = tmp_path / "trace.json"
    json_file.write_text('{"traceEvents": []}')
    with pytest.raises(tracekit.errors.TraceReadError,
                       match=r"not an SQLite file \(it does not start with 'SQLite format 3'\)"):
        tracekit.read(json_file, format="rocprof-db", registry=registry)
    db_gz = tmp_path / "results.db.gz"
    db_gz.write_bytes(gzip.compress(shared_path("bonus", "rocpd-sqlite",
                                                "hgliu_15_results.db").read_bytes()))
    with pytest.raises(tracekit.errors.TraceReadError,
                       match=r"gzip-compressed: an SQLite database is read in place"):
        tracekit.read(db_gz, format="rocprof-db", registry=registry)


def test_roctx_ranges_alone_are_told_to_record_with_rocprofv3():
    """rocprofiler-sdk's marker_api_trace.csv: roctx ranges named after HIP calls, no GPU
    work. The way to get the GPU side is rocprofv3's, not Nsight Systems'."""
    path = shared_path("rocprof-v3", "rocprofiler-sdk-docs", "marker_api_trace.csv")
    rows = list(csv.DictReader(path.open()))
    assert any(r["Function"].startswith("hip") for r in rows)
    [report] = tracekit.analyze(tracekit.read(path), "cpu")
    [calls] = [f for f in report.findings if f.title.startswith("ranges named after GPU calls")]
    assert "rocprofv3 --marker-trace --kernel-trace" in calls.suggestion
    assert "nsys" not in calls.suggestion


@pytest.mark.parametrize("name", ["memory_copy_trace_2024-07.csv", "memory_copy_trace_2024-10.csv"])
def test_copies_without_kernels_are_not_called_an_idle_gpu(name):
    """rocprofiler-sdk's copy traces: an HtoD and a DtoH copy, no kernel record. The GPU's
    time between them is where the kernel ran untraced: the verdict asks for kernel tracing
    instead of explaining an idle GPU."""
    path = shared_path("rocprof-v3", "rocprofiler-sdk-docs", name)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 2 and not any("KERNEL" in r["Kind"] for r in rows)
    assert sorted(r["Direction"].removeprefix("MEMORY_COPY_") for r in rows) == \
        ["DEVICE_TO_HOST", "HOST_TO_DEVICE"]
    [report] = tracekit.analyze(tracekit.read(path), "bottleneck")
    assert report.title == ("Bottleneck: unknown, the trace records copies but no kernels "
                            "(kernel tracing was off)")
    assert report.findings[0].suggestion.startswith(
        "record the kernels too (rocprofv3 --kernel-trace --memory-copy-trace --hip-trace)")
    # Nothing to stand by: no critical finding, and no advice on the copies' share.
    assert not [f for f in report.findings if f.severity == "critical"]
    [transfer] = [f for f in report.findings if f.title.startswith("transfer:")]
    assert transfer.suggestion.startswith("record the kernels before judging the copies")


def test_copies_run_as_blit_kernels_are_recorded_copies():
    """llama.cpp's rocprofv3 run has no memory-copy trace, but ROCm ran its copies as
    __amd_rocclr_copyBuffer kernels, which the kernel trace holds: its copies are on the GPU
    timeline, and no finding says they were not recorded."""
    folder = shared_path("rocprof-v3", "jimw_llamacpp_rocm7")
    blits = [r for p in folder.glob("*kernel_trace.csv") for r in csv.DictReader(p.open())
             if r["Kernel_Name"].startswith("__amd_rocclr_copyBuffer")]
    assert blits
    [report] = tracekit.analyze(tracekit.read(folder), "bottleneck")
    assert not [f for f in report.findings if f.title.startswith("copies not recorded")]
