"""nsys exports of versions and setups the real fixtures lack, made from copies of them as the
documented nsys versions shape them: optional tables without a column, the runtime table
before eventClass, exports with --ts-normalize / --ts-shift, cuBLAS and cuDNN ranges."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from helpers import shared_path
from test_nsys import category_counts, damaged, read_error, sql

CLOVERLEAF = "pipit_cloverleaf_nsys2024.5.1_a100.sqlite"
MEMFUSION = "memfusion_nsys2023.1.2_rtx3090_tensorrt.sqlite"
SAXPY = "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite"
SMALL = "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"


def rebuilt_without(table: str, column: str) -> list[str]:
    """SQL that drops ``column`` from ``table`` (as an older or newer nsys writes it)."""
    return [f'ALTER TABLE "{table}" DROP COLUMN "{column}"']


def log(trace) -> dict[tuple[str, str], int]:
    return {(kind, outcome): n for (_, kind, outcome), n in trace.log.outcomes.items()}


# -- 1. an optional table without a column it needs is skipped, counted ------------------------

def test_optional_tables_without_a_needed_column_are_skipped_and_counted(tmp_path, registry):
    real = shared_path("nsys-sqlite", CLOVERLEAF)
    sched = sql(real, "SELECT count(*) FROM SCHED_EVENTS")[0][0]
    diagnostics = sql(real, "SELECT count(*) FROM DIAGNOSTIC_EVENT")[0][0]
    assert (sched, diagnostics) == (1254, 19)
    path = damaged(tmp_path, *rebuilt_without("SCHED_EVENTS", "isSchedIn"),
                   "ALTER TABLE DIAGNOSTIC_EVENT RENAME COLUMN timestamp TO ts",
                   # GPU metrics as an export with another layout might hold them
                   "CREATE TABLE GPU_METRICS (timestamp INT, metricId INT, value INT)",
                   "INSERT INTO GPU_METRICS VALUES (1000, 5, 80), (2000, 5, 20), (1000, 7, 3)",
                   base=CLOVERLEAF)
    trace = tracekit.read(path, registry=registry)
    before = tracekit.read(real, registry=registry)
    got, want = log(trace), log(before)
    skipped = {("SCHED_EVENTS", "skipped: column isSchedIn is missing"): 1254,
               ("DIAGNOSTIC_EVENT", "skipped: column timestamp is missing"): 19,
               ("GPU_METRICS", "skipped: column typeId is missing"): 3}
    assert {k: v for k, v in got.items() if k not in want} == skipped
    assert {k: v for k, v in want.items() if k not in got} == {
        ("SCHED_EVENTS", "events (a sched-in and its sched-out per slice)"): 1254,
        ("DIAGNOSTIC_EVENT", "events"): 19}
    # Everything else is read as before: only the two tables' events are missing.
    lost = category_counts(before) - category_counts(trace)
    assert lost == Counter({"host.sched": 627, "host.instant": 19})
    assert category_counts(trace)["gpu.kernel"] == 1312


def test_the_command_converts_and_says_what_it_skipped(tmp_path):
    path = damaged(tmp_path, "CREATE TABLE GPU_METRICS (timestamp INT, metricId INT, "
                             "value INT)", "INSERT INTO GPU_METRICS VALUES (1000, 5, 80)")
    out = tmp_path / "x.pftrace"
    done = subprocess.run([sys.executable, "-m", "tracekit", "convert", str(path), "-o",
                           str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0
    assert "warning: damaged.sqlite: 1 GPU_METRICS records skipped: column typeId is missing" \
        in done.stderr.splitlines()
    assert "Traceback" not in done.stderr
    info = subprocess.run([sys.executable, "-m", "tracekit", "info", str(path)],
                          capture_output=True, text=True)
    assert info.returncode == 0
    [line] = [x for x in info.stdout.splitlines() if "GPU_METRICS" in x]
    assert line.split() == ["GPU_METRICS", "1", "skipped:", "column", "typeId", "is", "missing"]


def test_call_chains_without_a_column_leave_samples_without_stacks(tmp_path, registry):
    real = shared_path("nsys-sqlite", SMALL)
    [(samples, chains)] = sql(real, "SELECT (SELECT count(*) FROM COMPOSITE_EVENTS), "
                                    "(SELECT count(*) FROM SAMPLING_CALLCHAINS)")
    path = damaged(tmp_path, *rebuilt_without("SAMPLING_CALLCHAINS", "stackDepth"),
                   loosen=["SAMPLING_CALLCHAINS"])
    trace = tracekit.read(path, registry=registry)
    got = log(trace)
    assert got[("SAMPLING_CALLCHAINS", "skipped: column stackDepth is missing")] == chains > 0
    assert ("SAMPLING_CALLCHAINS", "call stacks of the samples") not in got
    assert got[("COMPOSITE_EVENTS", "events")] == samples > 0
    cpu = trace.events.filter(pc.equal(trace.events["category"], "cpu.sample"))
    assert set(cpu["name"].cast(pa.string()).to_pylist()) == {"[no call stack]"}
    assert cpu["stack_id"].null_count == samples


def test_os_runtime_and_nvtx_without_a_column_are_skipped(tmp_path, registry):
    real = shared_path("nsys-sqlite", CLOVERLEAF)
    [(calls, chains)] = sql(real, "SELECT (SELECT count(*) FROM OSRT_API), "
                                  "(SELECT count(*) FROM OSRT_CALLCHAINS)")
    path = damaged(tmp_path, *rebuilt_without("OSRT_API", "nameId"), base=CLOVERLEAF)
    trace = tracekit.read(path, registry=registry)
    got = log(trace)
    assert got[("OSRT_API", "skipped: column nameId is missing")] == calls == 1831
    # Its call chains were not read either: they only serve the calls.
    assert got[("OSRT_CALLCHAINS", "skipped: OSRT_API skipped (column nameId is missing)")] \
        == chains == 8930
    assert category_counts(trace)["host.os"] == 0
    nvtx = sql(shared_path("nsys-sqlite", SAXPY), "SELECT count(*) FROM NVTX_EVENTS")[0][0]
    path = damaged(tmp_path, *rebuilt_without("NVTX_EVENTS", "eventType"), base=SAXPY)
    got = log(tracekit.read(path, registry=registry))
    assert got[("NVTX_EVENTS", "skipped: column eventType is missing")] == nvtx == 24


def test_core_tables_without_a_needed_column_still_fail(tmp_path, registry):
    for table, column in (("CUPTI_ACTIVITY_KIND_KERNEL", "end"), (RUNTIME, "nameId"),
                          ("CUPTI_ACTIVITY_KIND_MEMCPY", "start")):
        path = damaged(tmp_path, *rebuilt_without(table, column))
        assert str(read_error(path, registry)) == (
            f"{path}: table {table}: column {column} is missing (not an nsys export this "
            "reader knows, or a damaged one)")



# -- 2. the runtime table before eventClass: driver calls told by name -------------------------

OLD_RUNTIME = [  # CUPTI_ACTIVITY_KIND_RUNTIME as nsys ~2019.3 (CUDA 10.1) wrote it
    f"CREATE TABLE old AS SELECT start, end, globalTid, correlationId, nameId, returnValue "
    f"FROM {RUNTIME} WHERE eventClass IS NOT 67",
    f"DROP TABLE {RUNTIME}", f"ALTER TABLE old RENAME TO {RUNTIME}"]


def api_calls(trace) -> Counter:
    api = trace.events.filter(pc.starts_with(trace.events["category"].cast(pa.string()), "api."))
    return Counter(zip(api["category"].cast(pa.string()).to_pylist(),
                       api["name"].cast(pa.string()).to_pylist(), strict=True))


def test_runtime_without_event_class_tells_driver_calls_by_name(tmp_path, registry):
    real = shared_path("nsys-sqlite", MEMFUSION)
    assert sql(real, f"SELECT eventClass, count(*) FROM {RUNTIME} GROUP BY 1") == \
        [(0, 141), (1, 5527)]
    path = damaged(tmp_path, *OLD_RUNTIME, base=MEMFUSION)
    trace = tracekit.read(path, registry=registry)
    calls = api_calls(trace)
    assert sum(calls.values()) == 5668
    assert sum(n for (cat, _), n in calls.items() if cat == "api.driver") == 5527
    # The same calls, names and categories as the export that has eventClass.
    assert calls == api_calls(tracekit.read(real, registry=registry))
    assert {(name, n) for (cat, name), n in calls.items() if cat == "api.driver"} == {
        ("cuModuleUnload", 5490), ("cuLaunchKernelEx", 22), ("cuMemUnmap", 7),
        ("cuMemRelease", 7), ("cuMemAddressFree", 1)}


def test_driver_names_are_cu_and_a_capital(tmp_path, registry):
    names = ["cuLaunchKernel", "cuMemcpyHtoDAsync_v2", "cudaMalloc", "cublasSgemm_v2",
             "cudnnConvolutionForward", "__cudaRegisterFatBinary", "cuInit"]
    new = " UNION ".join(f"SELECT '{n}' AS x" for n in names)
    path = damaged(tmp_path, *OLD_RUNTIME, f"DELETE FROM {RUNTIME}",
                   f"INSERT INTO StringIds (value) SELECT x FROM ({new}) WHERE x NOT IN "
                   "(SELECT value FROM StringIds)",
                   *(f"INSERT INTO {RUNTIME} VALUES ({10 * i}, {10 * i + 5}, {1 << 24 | 7}, "
                     f"{i}, (SELECT id FROM StringIds WHERE value = '{n}'), 0)"
                     for i, n in enumerate(names)))
    trace = tracekit.read(path, registry=registry)
    assert sorted(api_calls(trace)) == sorted([
        ("api.driver", "cuLaunchKernel"), ("api.driver", "cuMemcpyHtoDAsync"),
        ("api.runtime", "cudaMalloc"), ("api.runtime", "cublasSgemm"),
        ("api.runtime", "cudnnConvolutionForward"), ("api.runtime", "__cudaRegisterFatBinary"),
        ("api.driver", "cuInit")])


# -- 3. exports made with --ts-normalize / --ts-shift ------------------------------------------

SESSION_CLOCK = "nsys session ns (0 at session start)"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


def source_meta(trace) -> dict:
    [meta] = trace.metadata["sources"].values()
    return meta


def flags(table: str, normalize: str, shift: str, moved: int = 0) -> list[str]:
    """SQL that records the export flags in ``table`` and moves the kernels by ``moved`` ns,
    as nsys export applies them to every timestamp."""
    return [f"UPDATE {table} SET value = '{normalize}' WHERE name = 'EXPORT_PARAM_TIME_NORMALIZE'",
            f"UPDATE {table} SET value = '{shift}' WHERE name = 'EXPORT_PARAM_TIME_SHIFT'",
            f"UPDATE {KERNEL} SET start = start + {moved}, end = end + {moved}"]


def test_the_fixtures_record_neither_flag_and_keep_the_session_clock(registry):
    for name in (MEMFUSION, CLOVERLEAF, SMALL, "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite"):
        path = shared_path("nsys-sqlite", name)
        table = "EXPORT_META_DATA" if name == MEMFUSION else "META_DATA_EXPORT"
        rows = dict(sql(path, f"SELECT name, value FROM {table} WHERE name LIKE '%TIME_%'"))
        assert {k: rows[k] for k in ("EXPORT_PARAM_TIME_NORMALIZE", "EXPORT_PARAM_TIME_SHIFT",
                                     "EXPORT_CONFIG_TIME_SHIFT")} == {
            "EXPORT_PARAM_TIME_NORMALIZE": "false", "EXPORT_PARAM_TIME_SHIFT": "0",
            "EXPORT_CONFIG_TIME_SHIFT": "0"}
        meta = source_meta(tracekit.read(path, registry=registry))
        epoch = sql(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
        assert (meta["clock"], meta["session_start_utc_epoch_ns"]) == (SESSION_CLOCK, epoch)
        assert not {"session_start_ns", "export_ts_normalize", "export_ts_shift_ns"} & set(meta)


def kernel_starts(trace) -> list[int]:
    kernels = trace.events.filter(pc.equal(trace.events["category"], "gpu.kernel"))
    return sorted(kernels["ts_ns"].to_pylist())


def test_ts_normalize_gives_the_utc_clock_and_no_epoch_to_add(tmp_path, registry):
    real = shared_path("nsys-sqlite", SMALL)
    epoch = sql(real, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    assert epoch == 1769308002162486533
    starts = [r[0] for r in sql(real, f"SELECT start FROM {KERNEL} ORDER BY start")]
    path = damaged(tmp_path, *flags("META_DATA_EXPORT", "true", "0", moved=epoch))
    trace = tracekit.read(path, registry=registry)
    meta = source_meta(trace)
    assert meta["clock"] == "UTC ns since the Unix epoch (nsys export --ts-normalize)"
    assert meta["session_start_ns"] == epoch and meta["export_ts_normalize"] is True
    assert "session_start_utc_epoch_ns" not in meta and "export_ts_shift_ns" not in meta
    assert kernel_starts(trace) == [s + epoch for s in starts]
    # With a shift as well, both apply.
    path = damaged(tmp_path, *flags("META_DATA_EXPORT", "true", "-5000", moved=epoch - 5000))
    meta = source_meta(tracekit.read(path, registry=registry))
    assert meta["clock"] == ("UTC ns since the Unix epoch, shifted by -5000 ns (nsys export "
                             "--ts-normalize --ts-shift -5000)")
    assert (meta["session_start_ns"], meta["export_ts_shift_ns"]) == (epoch - 5000, -5000)
    assert "session_start_utc_epoch_ns" not in meta


def test_ts_shift_alone_moves_the_session_start(tmp_path, registry):
    real = shared_path("nsys-sqlite", MEMFUSION)
    epoch = sql(real, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    path = damaged(tmp_path, *flags("EXPORT_META_DATA", "false", "1000000000",
                                    moved=1_000_000_000), base=MEMFUSION)
    meta = source_meta(tracekit.read(path, registry=registry))
    assert meta["clock"] == ("nsys session ns shifted by 1000000000 ns (session start at "
                             "1000000000; nsys export --ts-shift 1000000000)")
    assert (meta["session_start_ns"], meta["export_ts_shift_ns"]) == (1_000_000_000,) * 2
    assert meta["session_start_utc_epoch_ns"] == epoch == 1690709432747674811
    assert "export_ts_normalize" not in meta


def test_export_flags_not_understood_are_warnings(tmp_path, registry):
    path = damaged(tmp_path, *flags("META_DATA_EXPORT", "maybe", "12abc"),
                   "UPDATE META_DATA_EXPORT SET value = '7' "
                   "WHERE name = 'EXPORT_CONFIG_TIME_SHIFT'")
    trace = tracekit.read(path, registry=registry)
    meta = source_meta(trace)
    assert meta["clock"] == SESSION_CLOCK and "session_start_utc_epoch_ns" in meta
    assert {k: v for k, v in log(trace).items() if k[0] == "export flags"} == {
        ("export flags", "warning: EXPORT_PARAM_TIME_NORMALIZE 'maybe' not understood (true "
                         "or false); timestamps taken as on the session clock"): 1,
        ("export flags", "warning: EXPORT_PARAM_TIME_SHIFT '12abc' is not an integer (ns); "
                         "taken as 0"): 1,
        ("export flags", "warning: EXPORT_CONFIG_TIME_SHIFT differs from "
                         "EXPORT_PARAM_TIME_SHIFT and is not read (what it shifts is not "
                         "documented)"): 1}


# -- 4. cuBLAS and cuDNN calls -----------------------------------------------------------------

def library_rows(gtid: int) -> list[str]:
    """cuBLAS and cuDNN calls as nsys 2022.2 writes them (eventClass 29 CUBLAS, 28 CUDNN), on
    the thread of the export's first cudaHostRegister, one around it."""
    return [
        "INSERT INTO StringIds (id, value) VALUES (9001, 'cublasCreate_v2'), "
        "(9002, 'cublasSgemm_v2'), (9003, 'cudnnConvolutionForward')",
        f"INSERT INTO CUBLAS_EVENTS VALUES (391000000, 698000000, 29, {gtid}, 9001), "
        f"(700600000, 700650000, 29, {gtid}, 9002), (700700000, 700760000, 29, {gtid}, 9002)",
        f"INSERT INTO CUDNN_EVENTS VALUES (700800000, 700900000, 28, {gtid}, 9003)"]


def test_cublas_and_cudnn_calls_are_api_ranges_on_their_thread(tmp_path, registry):
    real = shared_path("nsys-sqlite", SAXPY)
    assert sql(real, "SELECT (SELECT count(*) FROM CUBLAS_EVENTS), "
                     "(SELECT count(*) FROM CUDNN_EVENTS)") == [(0, 0)]
    [(gtid,)] = sql(real, f"SELECT globalTid FROM {RUNTIME} ORDER BY start LIMIT 1")
    assert gtid == 302119224788637
    path = damaged(tmp_path, *library_rows(gtid), base=SAXPY)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events.filter(pc.is_in(trace.events["name"].cast(pa.string()), pa.array(
        ["cublasCreate", "cublasSgemm", "cudnnConvolutionForward"])))
    rows = sorted((r["ts_ns"], r["dur_ns"], r["name"], r["category"], r["kind"], r["pid"],
                   r["tid"], r["args"]) for r in ev.to_pylist())
    pid, tid = (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF
    assert (pid, tid) == (1230493, 1230493)
    assert rows == [
        (391000000, 307000000, "cublasCreate", "api.runtime", "slice", pid, tid,
         '{"eventClass":29}'),
        (700600000, 50000, "cublasSgemm", "api.runtime", "slice", pid, tid, '{"eventClass":29}'),
        (700700000, 60000, "cublasSgemm", "api.runtime", "slice", pid, tid, '{"eventClass":29}'),
        (700800000, 100000, "cudnnConvolutionForward", "api.runtime", "slice", pid, tid,
         '{"eventClass":28}')]
    got = log(trace)
    assert (got[("CUBLAS_EVENTS", "events")], got[("CUDNN_EVENTS", "events")]) == (3, 1)
    assert not [k for k in got if k[0] in ("CUBLAS_EVENTS", "CUDNN_EVENTS") and k[1] != "events"]
    # Nothing else changes; the cuBLAS range around cudaHostRegister nests in Perfetto.
    before = category_counts(tracekit.read(real, registry=registry))
    assert category_counts(trace) - before == Counter({"api.runtime": 4})
    tracekit.write(trace, tmp_path / "o.pftrace", registry=registry)


def test_library_table_without_a_needed_column_is_skipped(tmp_path, registry):
    [(gtid,)] = sql(shared_path("nsys-sqlite", SAXPY),
                    f"SELECT globalTid FROM {RUNTIME} ORDER BY start LIMIT 1")
    path = damaged(tmp_path, *library_rows(gtid), *rebuilt_without("CUDNN_EVENTS", "nameId"),
                   base=SAXPY, loosen=["CUDNN_EVENTS"])
    got = log(tracekit.read(path, registry=registry))
    assert got[("CUDNN_EVENTS", "skipped: column nameId is missing")] == 1
    assert got[("CUBLAS_EVENTS", "events")] == 3
