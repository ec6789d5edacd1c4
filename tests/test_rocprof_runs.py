"""rocprof folders that mix runs: one run is read, the other files are counted with why
(docs/formats/rocprof.md, "One run at a time")."""

from __future__ import annotations

import csv
import io

import pyarrow.compute as pc
import pytest
import tracekit
from helpers import shared_path
from tracekit.errors import TraceReadError

S = 1_000_000_000
KERNEL_HEAD = ["Kind", "Agent_Id", "Queue_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
               "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp"]
API_HEAD = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id",
            "Start_Timestamp", "End_Timestamp"]
COPY_HEAD = ["Kind", "Direction", "Source_Agent_Id", "Destination_Agent_Id", "Correlation_Id",
             "Start_Timestamp", "End_Timestamp"]
STATS_HEAD = ["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage", "MinNs", "MaxNs",
              "StdDev"]
COUNTER_HEAD = ["Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Process_Id",
                "Thread_Id", "Grid_Size", "Kernel_Id", "Kernel_Name", "Workgroup_Size",
                "LDS_Block_Size", "Scratch_Size", "VGPR_Count", "SGPR_Count", "Counter_Name",
                "Counter_Value"]


def _csv(head: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([head, *rows])
    return out.getvalue()


def launches(pid: int, t0: int, n: int, first_id: int = 1) -> str:
    """An API trace of ``n`` hipLaunchKernel calls, 1 µs each, every 10 µs from ``t0``."""
    return _csv(API_HEAD, [["HIP_RUNTIME_API", "hipLaunchKernel", pid, pid, first_id + i,
                            t0 + 10_000 * i, t0 + 10_000 * i + 1_000] for i in range(n)])


def kernels(t0: int, n: int, first_id: int = 1) -> str:
    """A kernel trace (no Process_Id column, as rocprofv3 writes it) of the kernels those
    calls launch, 5 µs each, 2 µs after each call."""
    return _csv(KERNEL_HEAD, [["KERNEL_DISPATCH", 1, 1, 7, i + 1, 3, "k", first_id + i,
                               t0 + 10_000 * i + 2_000, t0 + 10_000 * i + 7_000]
                              for i in range(n)])


def copies(t0: int) -> str:
    return _csv(COPY_HEAD, [["MEMORY_COPY", "HOST_TO_DEVICE", 0, 1, 0, t0, t0 + 500]])


def folder(tmp_path, files: dict[str, str]):
    directory = tmp_path / "out"
    directory.mkdir()
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def outcomes(trace) -> dict[tuple[str, str], int]:
    return {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}


def span(trace) -> int:
    ev = trace.events
    return pc.max(pc.add(ev["ts_ns"], pc.fill_null(ev["dur_ns"], 0))).as_py() - \
        pc.min(ev["ts_ns"]).as_py()


def test_one_run_in_several_files_reads_whole(tmp_path, registry):
    t0 = 5_000 * S
    d = folder(tmp_path, {
        "app_hip_api_trace.csv": launches(42, t0, 3),
        "app_kernel_trace.csv": kernels(t0, 3),
        "app_memory_copy_trace.csv": copies(t0 - 200_000),  # before the first launch
        "app_hip_api_stats.csv": _csv(STATS_HEAD, [["hipLaunchKernel", 3, 3000, 1000, 100,
                                                    1000, 1000, 0]])})
    trace = tracekit.read(d, registry=registry)
    assert outcomes(trace) == {
        ("app_hip_api_trace.csv", "events"): 3, ("app_kernel_trace.csv", "events"): 3,
        ("app_memory_copy_trace.csv", "events"): 1,
        ("app_hip_api_stats.csv", "skipped: aggregate totals of the run the trace files "
         "here record (not added on top of their events)"): 1}
    assert "runs" not in trace.metadata["sources"]["out"]
    assert span(trace) == 200_000 + 27_000
    # The kernels take the launching process (by correlation id).
    assert set(trace.events["pid"].to_pylist()) == {42, None}


def test_two_processes_one_after_the_other_are_two_runs(tmp_path, registry):
    t0 = 5_000 * S
    d = folder(tmp_path, {
        "100_hip_api_trace.csv": launches(100, t0, 2),
        "100_kernel_trace.csv": kernels(t0, 2),
        "200_hip_api_trace.csv": launches(200, t0 + 3 * S, 4),
        "200_kernel_trace.csv": kernels(t0 + 3 * S, 4)})
    trace = tracekit.read(d, registry=registry)
    log = outcomes(trace)
    # The run with more GPU records (4 kernels) is read.
    assert log[("200_kernel_trace.csv", "events")] == 4
    assert log[("200_hip_api_trace.csv", "events")] == 4
    apart = "3 s before the run read"  # 2.999983 s from the end of pid 100's last kernel
    assert log[("100_hip_api_trace.csv", f"skipped: another run (process 100, not 200; "
                f"{apart}); -O run=100_hip_api_trace.csv reads it")] == 2
    assert log[("100_kernel_trace.csv", f"skipped: another run (process 100, not 200; "
                f"{apart}); -O run=100_kernel_trace.csv reads it")] == 2
    assert log[("out", "warning: the files hold 2 runs (other processes or clocks): read "
                "200_hip_api_trace.csv, 200_kernel_trace.csv (process 200), the one with the "
                "most GPU records; -O run=<file or process id> reads another")] == 2
    assert span(trace) == 37_000
    assert [r["read"] for r in trace.metadata["sources"]["out"]["runs"]] == [False, True]
    # -O run= picks the other, by process or by file name.
    for pick in ("100", "100_kernel_trace.csv"):
        other = tracekit.read(d, options=[f"run={pick}"], registry=registry)
        assert set(other.events["pid"].to_pylist()) == {100}
        assert other.events.num_rows == 4 and span(other) == 17_000
    # A file named on its own reads its prefix siblings' run.
    named = tracekit.read(d / "100_kernel_trace.csv", registry=registry)
    assert named.events.num_rows == 4


def test_a_file_named_reads_its_own_run(tmp_path, registry):
    """Prefix siblings of two runs: the run of the file named is read, not the one with
    the most GPU records."""
    t0 = 5_000 * S
    d = folder(tmp_path, {"run_hip_api_trace.csv": launches(100, t0, 2),
                          "run_kernel_trace.csv": kernels(t0 + 3 * S, 4)})
    trace = tracekit.read(d / "run_hip_api_trace.csv", registry=registry)
    log = outcomes(trace)
    assert log[("run_hip_api_trace.csv", "events")] == 2
    assert log[("run_hip_api_trace.csv", "warning: the files hold 2 runs (other processes or "
                "clocks): read run_hip_api_trace.csv (process 100), the run of "
                "run_hip_api_trace.csv; -O run=<file or process id> reads another")] == 2
    assert log[("run_kernel_trace.csv", "skipped: another run (3 s after the run read); "
                "-O run=run_kernel_trace.csv reads it")] == 4


def test_processes_at_the_same_time_are_one_multi_process_run(tmp_path, registry):
    t0 = 5_000 * S
    d = folder(tmp_path, {
        "100_hip_api_trace.csv": launches(100, t0, 3),
        "100_kernel_trace.csv": kernels(t0, 3),
        "200_hip_api_trace.csv": launches(200, t0 + 5_000, 3),
        "200_kernel_trace.csv": kernels(t0 + 5_000, 3)})
    trace = tracekit.read(d, registry=registry)
    assert trace.events.num_rows == 12
    assert not [k for k in outcomes(trace) if k[1].startswith("skipped")]
    assert [p["pid"] for p in trace.processes.to_pylist()] == [100, 200]


def test_files_on_different_clocks_are_different_runs(tmp_path, registry):
    """The same pid (a container's) and files without one, from two boots: only the clock
    tells them apart."""
    early, late = 900 * S, 8_800_000 * S
    d = folder(tmp_path, {
        "a_hip_api_trace.csv": launches(7, early, 5),
        "a_kernel_trace.csv": kernels(early, 5),
        "b_hip_api_trace.csv": launches(7, late, 2),
        "b_kernel_trace.csv": kernels(late, 2),
        "b_memory_copy_trace.csv": copies(late - 100_000)})
    trace = tracekit.read(d, registry=registry)
    log = outcomes(trace)
    assert trace.events.num_rows == 10 and span(trace) == 47_000
    apart = "8,799,100 s (102 days) after the run read"
    assert log[("b_kernel_trace.csv", f"skipped: another run ({apart}); "
                "-O run=b_kernel_trace.csv reads it")] == 2
    assert log[("b_hip_api_trace.csv", f"skipped: another run (process 7 again; {apart}); "
                "-O run=b_hip_api_trace.csv reads it")] == 2
    assert log[("b_memory_copy_trace.csv", "skipped: another run (8,799,100 s (102 days) "
                "after the run read); -O run=b_memory_copy_trace.csv reads it")] == 1
    late_run = tracekit.read(d, options=["run=b_memory_copy_trace.csv"], registry=registry)
    assert late_run.events.num_rows == 5 and span(late_run) == 100_000 + 17_000


def test_device_file_between_runs_joins_the_one_its_correlation_ids_name(tmp_path, registry):
    """A kernel trace without a pid, within a second of two runs: it goes with the run whose
    calls launched it (the later one here), though the earlier one is nearer."""
    t0 = 5_000 * S
    d = folder(tmp_path, {
        "1_hip_api_trace.csv": launches(1, t0, 3, first_id=1),
        "2_hip_api_trace.csv": launches(2, t0 + S // 2, 3, first_id=101),
        "x_kernel_trace.csv": kernels(t0 + 100_000, 3, first_id=101)})
    trace = tracekit.read(d, registry=registry)
    assert outcomes(trace)[("x_kernel_trace.csv", "events")] == 3
    assert set(trace.events["pid"].to_pylist()) == {2}


def test_untimed_files_join_the_run_of_their_process(tmp_path, registry):
    t0 = 5_000 * S
    counters = _csv(COUNTER_HEAD, [[1, 1, 1, 1, 300, 300, 64, 3, "k", 64, 0, 0, 8, 16,
                                    "SQ_WAVES", 1]])
    d = folder(tmp_path, {
        "100_hip_api_trace.csv": launches(100, t0, 3),
        "100_kernel_trace.csv": kernels(t0, 3),
        "300_hip_api_trace.csv": launches(300, t0 + 60 * S, 1),
        "300_counter_collection.csv": counters,  # no timestamps: placed by its Process_Id
        "other_hip_api_stats.csv": _csv(STATS_HEAD, [["hipMalloc", 1, 10, 10, 100, 10, 10,
                                                      0]])})
    trace = tracekit.read(d, registry=registry)
    log = outcomes(trace)
    assert log[("300_counter_collection.csv", "skipped: another run (process 300, not 100; "
                "no timestamps); -O run=300_hip_api_trace.csv reads it")] == 1
    # A stats file names no process: it goes with the run read, as totals of its trace.
    assert log[("other_hip_api_stats.csv", "skipped: aggregate totals of the run the trace "
                "files here record (not added on top of their events)")] == 1
    assert trace.events.num_rows == 6
    # Read the run of process 300: there its counters are the kernel rows (no kernel trace).
    other = tracekit.read(d, options=["run=300"], registry=registry)
    assert sorted(other.events["category"].to_pylist()) == ["api.runtime", "gpu.kernel"]


def test_the_docs_folder_reads_its_one_kernel_run(registry):
    """rocprofiler-sdk's documentation excerpts: six runs (three processes, four boots)."""
    d = shared_path("rocprof-v3", "rocprofiler-sdk-docs")
    trace = tracekit.read(d, registry=registry)
    log = outcomes(trace)
    runs = "-O run={} reads it"
    assert log == {
        ("kernel_trace_2024-08.csv", "events"): 7,
        ("hip_runtime_trace.csv", "skipped: another run (process 238; 7,627,414 s (88 days) "
         "before the run read); " + runs.format("hip_runtime_trace.csv")): 8,
        ("hsa_api_trace.csv", "skipped: another run (process 197; 7,311,486 s (85 days) "
         "before the run read); " + runs.format("hsa_api_trace.csv")): 10,
        ("marker_api_trace.csv", "skipped: another run (process 717; 7,299,216 s (84 days) "
         "before the run read); " + runs.format("marker_api_trace.csv")): 5,
        ("kernel_trace_2024-07.csv", "skipped: another run (8,818,659 s (102 days) before "
         "the run read); " + runs.format("kernel_trace_2024-07.csv")): 1,
        ("memory_copy_trace_2024-07.csv", "skipped: another run (8,804,374 s (102 days) "
         "before the run read); " + runs.format("memory_copy_trace_2024-07.csv")): 2,
        ("memory_copy_trace_2024-10.csv", "skipped: another run (8,804,374 s (102 days) "
         "before the run read); " + runs.format("memory_copy_trace_2024-10.csv")): 2,
        # Its process (19396) has no timed file; its dispatches are not the kernel trace's.
        ("counter_collection.csv", "counter values of the dispatches (one row each)"): 7,
        ("counter_collection.csv", "skipped: counter collection of another process or pass "
         "(no dispatch in kernel_trace_2024-08.csv with its process and Dispatch_Id)"): 7,
        ("hip_api_stats.csv", "skipped: aggregate totals of the run the trace files here "
         "record (not added on top of their events)"): 17,
        ("rocprofiler-sdk-docs", "warning: the files hold 6 runs (other processes or "
         "clocks): read kernel_trace_2024-08.csv (no process named), the one with the most "
         "GPU records; -O run=<file or process id> reads another"): 6}
    assert trace.events.num_rows == 7
    assert span(trace) == 8819330200369359 - 8819330200067564 == 301_795
    runs_found = trace.metadata["sources"]["rocprofiler-sdk-docs"]["runs"]
    assert [(r["files"], r["pids"], r["gpu_records"]) for r in runs_found] == [
        (["kernel_trace_2024-07.csv"], [], 1),
        (["memory_copy_trace_2024-07.csv", "memory_copy_trace_2024-10.csv"], [], 2),
        (["hip_runtime_trace.csv"], [238], 0),
        (["hsa_api_trace.csv"], [197], 0),
        (["marker_api_trace.csv"], [717], 0),
        (["kernel_trace_2024-08.csv"], [], 7)]


def test_the_docs_folder_copies_in_two_formats_are_read_once(registry):
    d = shared_path("rocprof-v3", "rocprofiler-sdk-docs")
    trace = tracekit.read(d, options=["run=memory_copy_trace_2024-10.csv"], registry=registry)
    log = outcomes(trace)
    assert log[("memory_copy_trace_2024-07.csv", "events")] == 2
    assert log[("memory_copy_trace_2024-10.csv", "skipped: the same records as in "
                "memory_copy_trace_2024-07.csv (read once)")] == 2
    rows = trace.events.to_pylist()
    assert [(r["name"], r["ts_ns"], r["dur_ns"]) for r in rows] == [
        ("Memcpy HtoD", 14955949675563, 563880), ("Memcpy DtoH", 14955952733485, 581800)]
    # -O run=all reads every file as one (the copies still once), and says so.
    every = tracekit.read(d, options=["run=all"], registry=registry)
    assert every.events.num_rows == 8 + 10 + 5 + 1 + 7 + 2
    assert outcomes(every)[("rocprofiler-sdk-docs", "warning: read as one though the files "
                            "hold 6 runs (-O run=all)")] == 6


@pytest.mark.parametrize("pick, message", [
    ("nope", "-O run=nope: nope names no trace file or process here; the runs: "
             "kernel_trace_2024-07.csv (no process named);"),
    ("19396", "-O run=19396: 19396 has no timed records (only in counter_collection.csv): "
              "name a trace file or the process of one;"),
])
def test_a_run_that_is_not_there_is_a_one_line_error(pick, message, registry):
    d = shared_path("rocprof-v3", "rocprofiler-sdk-docs")
    with pytest.raises(TraceReadError) as info:
        tracekit.read(d, options=[f"run={pick}"], registry=registry)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_llama_folder_is_one_run_as_before(registry):
    d = shared_path("rocprof-v3", "jimw_llamacpp_rocm7")
    trace = tracekit.read(d, registry=registry)
    assert outcomes(trace) == {("prefill_hip_api_trace.csv", "events"): 5,
                               ("prefill_kernel_trace.csv", "events"): 1128}
    assert span(trace) == 90754928429955 - 90754787703777 == 140_726_178
    assert set(trace.events["pid"].to_pylist()) == {3985093}
    assert "runs" not in trace.metadata["sources"]["jimw_llamacpp_rocm7"]


def test_records_written_twice_count_once_when_choosing_the_run(tmp_path, registry):
    """Run A's kernel trace is there twice (a copy under another name): its 3 kernels
    count once, so run B's 4 kernels are the most GPU records."""
    t0 = 5_000 * S
    d = folder(tmp_path, {
        "100_kernel_trace.csv": kernels(t0, 3),
        "100_kernel_trace_copy.csv": kernels(t0, 3),
        "200_kernel_trace.csv": kernels(t0 + 3 * S, 4)})
    trace = tracekit.read(d, registry=registry)
    assert outcomes(trace)[("200_kernel_trace.csv", "events")] == 4
    a = tracekit.read(d, options=["run=100"], registry=registry)
    assert outcomes(a)[("100_kernel_trace_copy.csv", "skipped: the same records as in "
                        "100_kernel_trace.csv (read once)")] == 3
    assert a.events.num_rows == 3
