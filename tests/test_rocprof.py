"""The rocprof CSV reader (v1 and rocprofv3) against Python's csv module."""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest
import tracekit
from helpers import SHARED, read_text, shared_path
from perfetto_check import decode_and_check
from tracekit.cli import main


def rocprof_csvs() -> list[str]:
    files = [p for d in ("rocprof-v1", "rocprof-v3") if (SHARED / d).exists()
             for p in (SHARED / d).rglob("*.csv")]
    return sorted(str(p.relative_to(SHARED)) for p in files) or ["<missing>"]


def csv_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("rel", rocprof_csvs())
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


@pytest.mark.parametrize("body, message", [
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,100,200\n"HIP_RUNTIME_API","hipFree",1,1\n',
     "line 3: 4 fields where the header has 7"),
    ('"HIP_RUNTIME_API","hipMalloc",1,1,1,soon,200\n',
     "line 2: column 'start_timestamp' is not an integer: 'soon'"),
])
def test_malformed_rows_name_the_file_and_line(tmp_path, capsys, body, message):
    path = tmp_path / "run_hip_api_trace.csv"
    path.write_text(HEADER + body)
    assert main(["convert", str(path), "-o", str(tmp_path / "o.pftrace"), "-q"]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert str(path) in err and message in err
    assert not (tmp_path / "o.pftrace").exists()


def test_missing_columns_are_not_a_rocprof_file(tmp_path, capsys):
    path = tmp_path / "run_kernel_trace.csv"
    path.write_text('"Kind","Kernel_Name","Start_Timestamp"\n"KERNEL_DISPATCH","k",1\n')
    assert main(["convert", str(path), "--from", "rocprof", "-o",
                 str(tmp_path / "o.pftrace"), "-q"]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert "line 1: not a rocprof CSV header" in err


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
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    device_ends = [s for s in decoded.slices if s.category.startswith("gpu.") and s.flows]
    assert len(device_ends) == sum(v == {"s", "t"} for v in ends.values())
