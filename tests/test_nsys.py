"""The nsys reader against every real export, checked with independent SQL on the source."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import sqlite3
from collections import Counter, defaultdict

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import SHARED, shared_path, sweep
from perfetto_check import decode_and_check
from tracekit.errors import FormatDetectionError, ReaderCrashError, TraceReadError


def nsys_files() -> list[str]:
    base = SHARED / "nsys-sqlite"
    return sorted(p.name for p in base.glob("*.sqlite")) if base.exists() else ["<missing>"]


@contextlib.contextmanager
def writable(path):
    """A connection to build a synthetic export; committed and closed on exit."""
    con = sqlite3.connect(path)
    try:
        yield con
        con.commit()
    finally:
        con.close()


def sql(path, query, parameters=()):
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query, parameters).fetchall()
    finally:
        con.close()


def tables(path) -> set[str]:
    return {r[0] for r in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}


def frame_name(symbol: str | None, module: str | None) -> str:
    """The name a call-chain frame should get: an unresolved symbol (an address, or
    nothing) is named after its module's file name, as Nsight Systems shows it."""
    if (symbol is None or symbol == "" or re.fullmatch(r"0x[0-9a-f]+", symbol)) and module:
        base = module.rsplit("/", 1)[-1]
        return base if base.startswith("[") and base.endswith("]") else f"[{base}]"
    return "[unknown]" if symbol is None else symbol


def category_counts(trace) -> Counter:
    return Counter(trace.events["category"].cast(pa.string()).to_pylist())


@pytest.mark.parametrize("name", sweep(nsys_files(),
                                       "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"))
def test_every_export_reads_with_counts_equal_to_sql(name, registry, tmp_path):
    path = shared_path("nsys-sqlite", name)
    digest, mtime = hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns
    trace = tracekit.read(path, registry=registry)
    have = tables(path)
    got = category_counts(trace)
    count = {t: sql(path, f"SELECT count(*) FROM {t}")[0][0] for t in have}
    assert got["gpu.kernel"] == count.get("CUPTI_ACTIVITY_KIND_KERNEL", 0)
    assert got["gpu.memcpy"] == count.get("CUPTI_ACTIVITY_KIND_MEMCPY", 0)
    assert got["gpu.memset"] == count.get("CUPTI_ACTIVITY_KIND_MEMSET", 0)
    assert got["gpu.sync"] == count.get("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", 0)
    assert got["host.os"] == count.get("OSRT_API", 0)
    assert got["cpu.sample"] == count.get("COMPOSITE_EVENTS", 0)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in have:
        # Backtrace-carrier rows (eventClass 67) repeat an API call: not events.
        api = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                        "WHERE eventClass IS NOT 67")[0][0]
        assert got["api.runtime"] + got["api.driver"] == api
        driver = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                           "WHERE eventClass = 1")[0][0]
        assert got["api.driver"] == driver
    if "NVTX_EVENTS" in have:
        nvtx = sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE (eventType IN (59,60,70,71) "
                         "AND end IS NOT NULL) OR eventType = 34")[0][0]
        assert got["host.annotation"] == nvtx
    # Every row of every event table is accounted for.
    accounted = defaultdict(int)
    for (_, table, _), n in trace.log.outcomes.items():
        accounted[table] += n
    for table, n in accounted.items():
        if table in count:
            assert n == count[table], table
    # The file is untouched.
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert path.stat().st_mtime_ns == mtime
    # And it converts to a valid Perfetto trace with every slice.
    out = tmp_path / "out.pftrace"
    result = tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    kinds = Counter(trace.events["kind"].cast(pa.string()).to_pylist())
    assert len(decoded.slices) == kinds["slice"]
    # nsys diagnostics from before the session start have negative times: counted, not drawn.
    before_start = sum(1 for e in trace.events.to_pylist()
                       if e["ts_ns"] is not None and e["ts_ns"] < 0)
    assert result.skipped.get("negative timestamps", 0) == before_start
    assert len(decoded.instants) == kinds["instant"] - before_start
    assert len(decoded.samples) == kinds["sample"]


@pytest.mark.slow  # reads a whole real export; the sweep above keeps one fast
def test_cloverleaf_kernels_memcpys_flows_and_summary(registry, tmp_path):
    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    trace = tracekit.read(path, registry=registry)
    out = tmp_path / "clover.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    kernels = [s for s in decoded.slices if s.category == "gpu.kernel"]
    copies = [s for s in decoded.slices if s.category == "gpu.memcpy"]
    assert (len(kernels), len(copies)) == (1312, 279)
    api_flows = {f for s in decoded.slices if s.category.startswith("api.") for f in s.flows}
    assert all(s.flows and s.flows[0] in api_flows for s in kernels + copies)
    [report] = tracekit.analyze(trace, "summary", registry=registry)
    expected = dict(sql(path, "SELECT s.value, sum(k.end - k.start) FROM "
                              "CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                              "ON s.id = k.demangledName GROUP BY s.value"))
    got = {r["name"]: r["total"] for r in report.tables["kernels"].to_pylist()}
    assert got == expected
    medians = {r["name"]: r["median"] for r in report.tables["kernels"].to_pylist()}
    durs = defaultdict(list)
    for n, d in sql(path, "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                          "JOIN StringIds s ON s.id = k.demangledName"):
        durs[n].append(d)
    import statistics
    assert medians == {n: statistics.median(v) for n, v in durs.items()}


def test_memcpy_kinds_from_enum_tables_and_api_names(registry):
    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    trace = tracekit.read(path, registry=registry)
    [report] = tracekit.analyze(trace, "summary", registry=registry)
    sizes = {r["name"]: r["total"] for r in report.tables["memops_size"].to_pylist()}
    rows = sql(path, "SELECT e.name, sum(m.bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN "
                     "ENUM_CUDA_MEMCPY_OPER e ON e.id = m.copyKind GROUP BY e.name")
    short = {"CUDA_MEMCPY_KIND_HTOD": "HtoD", "CUDA_MEMCPY_KIND_DTOH": "DtoH",
             "CUDA_MEMCPY_KIND_DTOD": "DtoD"}
    assert sizes == {f"memcpy {short[k]}": v for k, v in rows}
    api = {r["name"]: r["count"] for r in report.tables["api"].to_pylist()}
    want = Counter()
    for name, n in sql(path, "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                             "JOIN StringIds s ON s.id = r.nameId GROUP BY s.value"):
        want[re.sub(r"_v\d+$", "", name)] += n
    assert api == dict(want)


def test_sync_records_take_the_device_of_their_context(registry):
    """Every synchronization record of this two-GPU export says device 0; the second
    process's context runs all its kernels on device 1, so its waits are on device 1."""
    path = shared_path("nsys-sqlite", "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite")
    device_of = dict(sql(path, "SELECT DISTINCT (globalPid >> 24) & 16777215, deviceId "
                               "FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    want = Counter(device_of[pid] for (pid,) in sql(
        path, "SELECT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"))
    trace = tracekit.read(path, registry=registry)
    sync = trace.events.filter(pc.equal(trace.events["category"].cast(pa.string()), "gpu.sync"))
    assert Counter(sync["device"].to_pylist()) == want == {0: 122, 1: 122}
    assert trace.log.outcomes[(path.name, "derived from CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                               "device taken from its context's kernels and copies (the "
                               "record's deviceId differed)")] == 122


@pytest.mark.parametrize("name,want", [
    ("mordred_nsys2021_quadro-rtx6000_report1.sqlite", {"Context sync": 9, "Event sync": 6}),
    ("pipit_cloverleaf_nsys2024.5.1_a100.sqlite", {"Context sync": 1312}),
    ("nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite", {"Stream sync": 8,
                                                        "Stream wait sync": 236}),
])
def test_waits_are_named_by_the_call_that_made_them(name, want, registry):
    """nsys records every cudaDeviceSynchronize of these exports as syncType 1, 'Event sync'
    in the export's own enum, and mordred's cudaEventSynchronize as 2, 'Stream wait sync':
    the runtime call of the same process and correlation says what the wait was."""
    path = shared_path("nsys-sqlite", name)
    kinds = {"cudaDeviceSynchronize": "Context sync", "cudaEventSynchronize": "Event sync",
             "cudaStreamSynchronize": "Stream sync", "cudaStreamWaitEvent": "Stream wait sync"}
    rows = sql(path, "SELECT s.syncType, n.value FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION s "
                     "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = s.correlationId "
                     "AND r.globalTid >> 24 = s.globalPid >> 24 JOIN StringIds n "
                     "ON n.id = r.nameId")
    by_call = Counter(kinds[re.sub(r"_v\d+$", "", call)] for _, call in rows)
    trace = tracekit.read(path, registry=registry)
    sync = trace.events.filter(pc.equal(trace.events["category"].cast(pa.string()), "gpu.sync"))
    assert Counter(sync["name"].cast(pa.string()).to_pylist()) == by_call == want
    labels = {1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}
    differ = sum(1 for kind, call in rows if labels[kind] != kinds[re.sub(r"_v\d+$", "", call)])
    assert trace.log.outcomes.get((path.name, "derived from CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                                   "named by the runtime call "
                                   "that made the wait (its syncType said another kind)"),
                                  0) == differ


def test_an_export_cut_to_a_window_says_so(registry):
    """This export was cut to one second by a script that says so in META_DATA_EXPORT: the
    GPU work that ran first was launched before the window, not before the recording."""
    path = shared_path("nsys-sqlite", "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite")
    meta = dict(sql(path, "SELECT name, value FROM META_DATA_EXPORT"))
    window = f"{meta['DERIVED_WINDOW_NS']} ns, derived by {meta['DERIVED_BY']}"
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["export_window"] == window == (
        "155330248986-156330248986 ns, derived by scripts/derive_test_fixture.py")
    assert trace.log.outcomes[(path.name, "export", f"cut to a time window ({window}): GPU "
                               "work that was launched before it has no launching call in "
                               "the trace")] == 1
    (report,) = tracekit.analyze(trace, "bottleneck", registry=registry)
    [note] = [n for n in report.notes if "GPU operations ran before" in n]
    assert f"launched before the window the export was cut to ({window})" in note
    (launch,) = tracekit.analyze(trace, "launch", registry=registry)
    [note] = [n for n in launch.notes if "kernels ran before" in n]
    assert f"launched before the window the export was cut to ({window})" in note


def test_scheduling_slices_get_a_track_beside_their_thread(registry, tmp_path):
    """nsys' 'running' intervals cut across a thread's calls: on the thread's own track they
    made overlap lanes; on a '<thread> (scheduled)' track beside it they nest."""
    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    sched = ev.filter(pc.equal(ev["category"].cast(pa.string()), "host.sched"))
    per_thread = Counter(zip(sched["pid"].to_pylist(), sched["tid"].to_pylist(), strict=True))
    out = tmp_path / "clover.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    names = [d.name for d in decoded.tracks.values()]
    assert not [n for n in names if "(overlap" in n]
    scheduled = {d.uuid for d in decoded.tracks.values() if d.name.endswith(" (scheduled)")}
    assert len(scheduled) == len(per_thread)
    assert sum(s.track in scheduled for s in decoded.slices) == sched.num_rows == \
        sql(path, "SELECT count(*) FROM SCHED_EVENTS WHERE isSchedIn = 1")[0][0]


def test_overlap_lanes_of_a_stream_sort_right_after_it(registry, tmp_path):
    path = shared_path("nsys-sqlite", "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite")
    out = tmp_path / "ai.pftrace"
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    tracks = decode_and_check(out).tracks
    under: dict[int, list] = defaultdict(list)
    for d in tracks.values():
        if d.parent_uuid and tracks[d.parent_uuid].name.startswith("GPU"):
            under[d.parent_uuid].append(d)
    lanes = 0
    for children in under.values():
        order = [d.name for d in sorted(children, key=lambda d: d.sibling_order_rank)]
        for i, name in enumerate(order):
            if "(overlap" in name:
                lanes += 1
                assert order[i - 1] == name.split(" (overlap")[0]
    assert lanes == 2


def test_pid_tid_decoded_with_vm_byte_masked(registry):
    path = shared_path("nsys-sqlite", "memfusion_nsys2023.1.2_rtx3090_tensorrt.sqlite")
    trace = tracekit.read(path, registry=registry)
    api = trace.events.filter(pc.equal(trace.events["category"].cast(pa.string()),
                                       "api.runtime"))
    want = Counter(sql(path, "SELECT (globalTid >> 24) & 16777215, globalTid & 16777215 FROM "
                             "CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 0"))
    assert Counter(zip(api["pid"].to_pylist(), api["tid"].to_pylist(), strict=True)) == want
    raw = sql(path, "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1")[0][0]
    assert raw >> 24 > 0xFFFFFF  # the VM byte is set: a naive shift would be wrong


def test_backtrace_carrier_rows_are_not_duplicated(registry):
    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    trace = tracekit.read(path, registry=registry)
    outcomes = {(k, o): n for (_, k, o), n in trace.log.outcomes.items()}
    carriers = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                         "WHERE eventClass = 67")[0][0]
    assert carriers == 38
    assert outcomes[("CUPTI_ACTIVITY_KIND_RUNTIME",
                     "not needed: backtrace row repeating an API call")] == carriers
    api = trace.events.filter(pc.starts_with(trace.events["category"].cast(pa.string()), "api."))
    pairs = Counter(zip(api["tid"].to_pylist(), api["correlation"].to_pylist(), strict=True))
    assert max(pairs.values()) == 1


def test_schema_versions_and_session_clock(registry):
    old = tracekit.read(shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite"),
                        registry=registry)
    new = tracekit.read(shared_path("nsys-sqlite",
                                    "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"),
                        registry=registry)
    meta_old = next(iter(old.metadata["sources"].values()))
    meta_new = next(iter(new.metadata["sources"].values()))
    assert meta_old["schema_version"] == "2.9.1"  # from EXPORT_META_DATA
    assert meta_new["schema_version"] == "3.24.14"  # from META_DATA_EXPORT
    epoch = sql(shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"),
                "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    assert meta_new["session_start_utc_epoch_ns"] == epoch


# -- synthetic exports for the pitfalls (formats.md section 7) ----------------------------------

def _export(tmp_path, name="x.sqlite", *, kernels=(), runtime=(), nvtx=(), strings=()):
    path = tmp_path / name
    with writable(path) as con:
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", strings)
        if kernels:
            con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, "
                        "deviceId INT, streamId INT, correlationId INT, globalPid INT, "
                        "demangledName INT, shortName INT)")
            con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?)",
                            kernels)
        if runtime:
            con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, "
                        "eventClass INT, globalTid INT, correlationId INT, nameId INT)")
            con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?)", runtime)
        if nvtx:
            con.execute("CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, "
                        "globalTid INT, textId INT)")
            con.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?)", nvtx)
    return path


def _gtid(pid, tid, vm=1):
    return (vm << 48) | (pid << 24) | tid


def test_correlation_is_per_process(tmp_path, registry):
    """Two processes reuse correlation id 7: each kernel links to its own process's call."""
    strings = [(1, "kernA"), (2, "kernB"), (3, "cudaLaunchKernel_v7000")]
    kernels = [(100, 200, 0, 7, 7, _gtid(10, 0), 1, 1), (300, 400, 0, 7, 7, _gtid(20, 0), 2, 2)]
    runtime = [(90, 95, 0, _gtid(10, 10), 7, 3), (290, 295, 0, _gtid(20, 20), 7, 3)]
    path = _export(tmp_path, kernels=kernels, runtime=runtime, strings=strings)
    out = tmp_path / "o.pftrace"
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    decoded = decode_and_check(out)
    by_name = {s.name: s for s in decoded.slices if s.category == "gpu.kernel"}
    calls = {s.start: s for s in decoded.slices if s.category == "api.runtime"}
    assert by_name["kernA"].flows == calls[90].flows and by_name["kernB"].flows == calls[290].flows
    assert by_name["kernA"].flows != by_name["kernB"].flows
    assert {s.name for s in calls.values()} == {"cudaLaunchKernel"}  # _v7000 removed


def test_nvtx_text_or_text_id_and_unterminated_ranges(tmp_path, registry):
    strings = [(5, "registered")]
    nvtx = [(10, 20, 59, "plain", _gtid(1, 1), None), (30, 40, 59, None, _gtid(1, 1), 5),
            (50, None, 60, "open", _gtid(1, 1), None), (60, None, 34, "mark", _gtid(1, 1), None)]
    trace = tracekit.read(_export(tmp_path, nvtx=nvtx, strings=strings), registry=registry)
    rows = sorted(zip(trace.events["name"].cast(pa.string()).to_pylist(),
                      trace.events["kind"].cast(pa.string()).to_pylist(), strict=True))
    assert rows == [("mark", "instant"), ("plain", "slice"), ("registered", "slice")]
    assert list(trace.log.skipped().values()) == [1]


def test_short_names_option(tmp_path, registry):
    strings = [(1, "void ns::kern<int>(int*)"), (2, "kern")]
    path = _export(tmp_path, kernels=[(0, 5, 0, 1, 1, _gtid(1, 0), 1, 2)], strings=strings)
    names = tracekit.read(path, options=["short_names=true"], registry=registry).events["name"]
    assert names.cast(pa.string()).to_pylist() == ["kern"]


def test_export_without_cuda_tables_reads_what_is_there(tmp_path, registry):
    path = _export(tmp_path)
    with writable(path) as con:
        con.execute("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INT)")
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000)")
    trace = tracekit.read(path, registry=registry)
    assert trace.events.num_rows == 0
    meta = trace.metadata["sources"]["x.sqlite"]
    assert meta["session_start_utc_epoch_ns"] == 1700000000000000000


def test_not_nsys_sqlite_files(tmp_path, registry):
    nvprof = tmp_path / "nvprof.sqlite"
    with writable(nvprof) as con:
        con.execute("CREATE TABLE StringTable (_id_ INTEGER PRIMARY KEY, value TEXT)")
    with pytest.raises(TraceReadError, match="not an Nsight Systems export: an nvprof export"):
        tracekit.read(nvprof, registry=registry)
    other = tmp_path / "other.sqlite"
    with writable(other) as con:
        con.execute("CREATE TABLE t (a INT)")
    with pytest.raises(TraceReadError, match="not an Nsight Systems export"):
        tracekit.read(other, registry=registry)
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with pytest.raises((TraceReadError, FormatDetectionError)) as info:
        tracekit.read(corrupt, registry=registry)
    assert "\n" not in str(info.value) and str(corrupt) in str(info.value)


def test_report_without_nsys_gives_the_command(tmp_path, registry, monkeypatch):
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\x00binary report")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TraceReadError, match=r"Run \(in its folder\): nsys export --type "
                                             r"sqlite --output run\.sqlite run\.nsys-rep$"):
        tracekit.read(report, registry=registry)


def test_nvtx_non_range_rows_and_nvtxt_ranges(tmp_path, registry):
    """Domain (75) and category (33) rows are not ranges; 70/71 (.nvtxt imports) are."""
    nvtx = [(0, None, 75, "my domain", _gtid(1, 1), None),
            (0, None, 33, "my category", _gtid(1, 1), None),
            (10, 20, 70, "imported", _gtid(1, 1), None),
            (30, 90, 60, "start/end", _gtid(1, 1), None)]
    trace = tracekit.read(_export(tmp_path, nvtx=nvtx), registry=registry)
    assert sorted(trace.events["name"].cast(pa.string()).to_pylist()) == ["imported",
                                                                          "start/end"]
    outcomes = {o: n for (_, _, o), n in trace.log.outcomes.items()}
    assert outcomes["domain names (kept in args ids)"] == 1
    assert outcomes["categories (kept in args ids)"] == 1


def test_five_digit_api_version_suffix(tmp_path, registry):
    strings = [(1, "cudaGraphAddKernelNode_v10000"), (2, "cuLaunchKernel")]
    runtime = [(0, 5, 0, _gtid(1, 1), 1, 1), (10, 15, 1, _gtid(1, 1), 2, 2)]
    trace = tracekit.read(_export(tmp_path, runtime=runtime, strings=strings), registry=registry)
    rows = dict(zip(trace.events["name"].cast(pa.string()).to_pylist(),
                    trace.events["category"].cast(pa.string()).to_pylist(), strict=True))
    assert rows == {"cudaGraphAddKernelNode": "api.runtime", "cuLaunchKernel": "api.driver"}


@pytest.mark.parametrize("enum_rows", [None, "name_only", "with_label"])
def test_memory_kinds_use_nsys_numbering(tmp_path, registry, enum_rows):
    """0 is Pageable in nsys (CUPTI's 0 is Unknown), with or without the file's ENUM table."""
    path = _export(tmp_path, strings=[(1, "x")])
    with writable(path) as con:
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT, end INT, deviceId INT, "
                    "streamId INT, correlationId INT, globalPid INT, bytes INT, copyKind INT, "
                    "srcKind INT, dstKind INT)")
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES "
                    "(0, 10, 0, 7, 1, ?, 64, 1, 0, 2)", (_gtid(1, 0),))
        if enum_rows == "name_only":
            con.execute("CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT)")
            con.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?, ?)",
                            [(0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE"),
                             (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE")])
        elif enum_rows == "with_label":
            con.execute("CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, "
                        "label TEXT)")
            con.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?, ?, ?)",
                            [(0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
                             (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device")])
    ev = tracekit.read(path, registry=registry).events
    src, dst = ev["src_kind"][0].as_py(), ev["dst_kind"][0].as_py()
    assert (src, dst) == ("Pageable", "Device")
    assert ev["copy_kind"][0].as_py() == "HtoD"
    assert ev["name"][0].as_py() == "[CUDA memcpy Host-to-Device]"


@pytest.mark.slow  # reads a whole real export; the sweep above keeps one fast
def test_nvtx_summary_matches_sql(registry):
    path = shared_path("nsys-sqlite", "nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite")
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    got = {r["name"]: (r["count"], r["total"]) for r in report.tables["ranges"].to_pylist()}
    # emit_nvtx's ranges carry per-call counters ("aten::mm, op_id = 31"): grouped by the op.
    want: dict[str, tuple[int, int]] = {}
    counted = 0
    for name, n, total in sql(path, "SELECT coalesce(e.text, s.value), count(*), "
                                    "sum(e.end - e.start) FROM NVTX_EVENTS e LEFT JOIN "
                                    "StringIds s ON s.id = e.textId WHERE e.eventType IN "
                                    "(59, 60, 70, 71) AND e.end IS NOT NULL GROUP BY 1"):
        op = re.sub(r", (seq|op_id|sizes|input_op_ids) = .*$", "", name)
        counted += n * (op != name)
        before = want.get(op, (0, 0))
        want[op] = (before[0] + n, before[1] + total)
    assert got == want and len(got) > 1
    assert counted > 16_000
    assert any(f"{counted:,} ranges named with emit_nvtx's per-call counters" in n
               for n in report.notes)
    # emit_nvtx's ranges nest (an op inside the op that called it): the note names a pair
    # that does, by SQL.
    [nest] = [n for n in report.notes if n.startswith("ranges nest (")]
    inner, outer = nest.removeprefix("ranges nest (").split("): ")[0].split(" inside ")
    assert sql(path, "SELECT count(*) FROM NVTX_EVENTS i JOIN NVTX_EVENTS o ON "
                     "i.globalTid = o.globalTid AND o.start <= i.start AND i.start < o.end "
                     "AND i.rowid != o.rowid WHERE i.text = ? AND o.text = ?",
               (inner, outer))[0][0] > 0


def test_os_runtime_summary_matches_sql(registry):
    """cf. nsys osrt_sum: per OS runtime call name, count and total (mordred: poll, 64 calls,
    half the time)."""
    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    got = {r["name"]: (r["count"], r["total"]) for r in report.tables["os"].to_pylist()}
    want = {name: (n, total) for name, n, total in sql(
        path, "SELECT s.value, count(*), sum(o.end - o.start) FROM OSRT_API o JOIN StringIds s "
              "ON s.id = o.nameId GROUP BY 1")}
    assert got == want
    assert report.tables["os"].to_pylist()[0]["name"] == "poll" and want["poll"][0] == 64


@pytest.mark.parametrize("name", sweep(["pipit_cloverleaf_nsys2024.5.1_a100.sqlite",
                                        "mordred_nsys2021_quadro-rtx6000_report1.sqlite"],
                                       "mordred_nsys2021_quadro-rtx6000_report1.sqlite"))
def test_cpu_samples_with_their_call_stacks(name, registry):
    path = shared_path("nsys-sqlite", name)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events.filter(pc.equal(trace.events["kind"].cast(pa.string()), "sample"))
    stacks = {r["stack_id"]: r for r in trace.stacks.to_pylist()}
    frames = {r["frame_id"]: r for r in trace.frames.to_pylist()}

    def path_of(stack_id):
        out = []
        while stack_id is not None:
            frame = frames[stacks[stack_id]["frame_id"]]
            out.append((frame["name"], frame["module"]))
            stack_id = stacks[stack_id]["parent_id"]
        return out  # leaf first

    want = defaultdict(list)
    for sid, sym, mod in sql(path, "SELECT c.id, s.value, m.value FROM SAMPLING_CALLCHAINS c "
                                   "LEFT JOIN StringIds s ON s.id = c.symbol LEFT JOIN "
                                   "StringIds m ON m.id = c.module ORDER BY c.id, c.stackDepth"):
        want[sid].append((frame_name(sym, mod), mod))
    samples = sql(path, "SELECT id, start, (globalTid >> 24) & 16777215, globalTid & 16777215 "
                        "FROM COMPOSITE_EVENTS ORDER BY id")
    assert ev.num_rows == len(samples)
    got = list(zip(ev["ts_ns"].to_pylist(), ev["pid"].to_pylist(), ev["tid"].to_pylist(),
                   ev["stack_id"].to_pylist(), ev["name"].cast(pa.string()).to_pylist(),
                   strict=True))
    for (sid, start, pid, tid), (ts, p, t, stack, leaf) in zip(samples, got, strict=True):
        assert (ts, p, t) == (start, pid, tid)
        assert path_of(stack) == want[sid]
        assert leaf == want[sid][0][0]
    # Shared frames: far fewer call sites than frames listed in all samples.
    assert trace.stacks.num_rows < sum(len(v) for v in want.values())


def test_gpu_memory_usage_events_give_instants_and_running_totals(tmp_path, registry):
    path = _export(tmp_path, strings=[(1, "x")])
    with writable(path) as con:
        con.execute("CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INT, globalPid INT, "
                    "deviceId INT, contextId INT, address INT, pc INT, bytes INT, memKind INT, "
                    "memoryOperationType INT, name TEXT, correlationId INT)")
        rows = [(10, _gtid(5, 0), 0, 1, 100, 0, 1000, 2, 0, None, 1),
                (20, _gtid(5, 0), 1, 1, 200, 0, 64, 2, 0, None, 2),
                (30, _gtid(5, 0), 0, 1, 300, 0, 500, 2, 0, None, 3),
                (40, _gtid(5, 0), 0, 1, 100, 0, 1000, 2, 1, None, 4)]
        con.executemany("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        rows)
    ev = tracekit.read(path, registry=registry).events
    inst = ev.filter(pc.equal(ev["kind"].cast(pa.string()), "instant"))
    assert inst["bytes"].to_pylist() == [1000, 64, 500, -1000]
    cnt = ev.filter(pc.equal(ev["kind"].cast(pa.string()), "counter"))
    got = list(zip(cnt["name"].cast(pa.string()).to_pylist(), cnt["ts_ns"].to_pylist(),
                   cnt["value"].to_pylist(), strict=True))
    assert sorted(got, key=lambda r: r[1]) == [
        ("GPU 0 memory allocated", 10, 1000.0), ("GPU 1 memory allocated", 20, 64.0),
        ("GPU 0 memory allocated", 30, 1500.0), ("GPU 0 memory allocated", 40, 500.0)]



@pytest.mark.slow  # reads a whole real export; the sweep above keeps one fast
def test_cpu_samples_in_perfetto_with_their_stacks(registry, tmp_path):
    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    tracekit.write(tracekit.read(path, registry=registry), tmp_path / "s.pftrace",
                   registry=registry)
    decoded = decode_and_check(tmp_path / "s.pftrace")
    assert decoded.violations == []
    want = defaultdict(list)
    for sid, sym, mod in sql(path, "SELECT c.id, s.value, m.value FROM SAMPLING_CALLCHAINS c "
                                   "JOIN StringIds s ON s.id = c.symbol LEFT JOIN StringIds m "
                                   "ON m.id = c.module ORDER BY c.id, c.stackDepth DESC"):
        want[sid].append(frame_name(sym, mod))  # root first, as Perfetto's callstacks list
    rows = sql(path, "SELECT start, (globalTid >> 24) & 16777215, globalTid & 16777215, id "
                     "FROM COMPOSITE_EVENTS WHERE id IN (SELECT id FROM SAMPLING_CALLCHAINS)")
    expected = sorted((ts, pid, tid, want[sid]) for ts, pid, tid, sid in rows)
    assert sorted(decoded.samples) == expected


@pytest.mark.slow  # runs the CLI in a new process
def test_newer_schema_reads_what_it_can_and_warns_once(tmp_path):
    strings = [(1, "k")]
    path = _export(tmp_path, kernels=[(0, 5, 0, 1, 1, _gtid(1, 0), 1, 1)], strings=strings)
    with writable(path) as con:
        con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
        con.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '4.0.0')")
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "tracekit", "convert", str(path), "-o",
                           str(tmp_path / "o.pftrace")], capture_output=True, text=True)
    assert proc.returncode == 0
    warnings = [line for line in proc.stderr.splitlines() if "newer than" in line]
    assert len(warnings) == 1 and "4.0.0" in warnings[0]
    assert "1 slices" in proc.stderr


def test_kernel_starting_before_its_launch_returns(tmp_path, registry):
    strings = [(1, "k"), (2, "cudaLaunchKernel_v7000")]
    kernels = [(100, 300, 0, 7, 9, _gtid(3, 0), 1, 1)]
    runtime = [(90, 150, 0, _gtid(3, 3), 9, 2)]  # the kernel starts at 100, the call ends at 150
    path = _export(tmp_path, kernels=kernels, runtime=runtime, strings=strings)
    tracekit.write(tracekit.read(path, registry=registry), tmp_path / "o.pftrace",
                   registry=registry)
    decoded = decode_and_check(tmp_path / "o.pftrace")
    assert decoded.violations == []
    flows = {s.category: s.flows for s in decoded.slices}
    assert flows["gpu.kernel"] == flows["api.runtime"] != []


def test_start_end_range_ending_on_another_thread(tmp_path, registry):
    path = _export(tmp_path, strings=[(1, "x")])
    with writable(path) as con:
        con.execute("CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, "
                    "globalTid INT, endGlobalTid INT, textId INT)")
        con.execute("INSERT INTO NVTX_EVENTS VALUES (10, 50, 60, 'load', ?, ?, NULL)",
                    (_gtid(4, 4), _gtid(4, 9)))
    trace = tracekit.read(path, registry=registry)
    row = trace.events.to_pylist()[0]
    assert (row["name"], row["ts_ns"], row["dur_ns"], row["pid"], row["tid"]) == \
        ("load", 10, 40, 4, 4)
    import json
    assert json.loads(row["args"])["endGlobalTid"] == _gtid(4, 9)


@pytest.mark.slow  # reads a whole real export; the sweep above keeps one fast
def test_profiler_overhead_and_diagnostics_equal_sql(registry):
    path = shared_path("nsys-sqlite", "pipit_cloverleaf_nsys2024.5.1_a100.sqlite")
    trace = tracekit.read(path, registry=registry)
    ev = trace.events.to_pylist()
    overhead = [e for e in ev if e["category"] == "host.overhead"]
    [(n, total)] = sql(path, "SELECT count(*), sum(end - start) FROM PROFILER_OVERHEAD")
    assert (len(overhead), sum(e["dur_ns"] for e in overhead)) == (n, total)
    want_names = Counter(r[0] for r in sql(path, "SELECT s.value FROM PROFILER_OVERHEAD o "
                                                 "JOIN StringIds s ON s.id = o.nameId"))
    assert Counter(e["name"] for e in overhead) == want_names
    diags = [e for e in ev if e["name"] == "nsys diagnostic"]
    texts = [r[0] for r in sql(path, "SELECT text FROM DIAGNOSTIC_EVENT")]
    assert sorted(json.loads(e["args"])["text"] for e in diags) == sorted(texts)
    assert sorted(e["ts_ns"] for e in diags) == sorted(
        r[0] for r in sql(path, "SELECT timestamp FROM DIAGNOSTIC_EVENT"))


@pytest.mark.parametrize("name", sweep(["nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite",
                                        "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"],
                                       "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"))
def test_cupti_overhead_equals_sql(name, registry):
    """CUPTI's own overhead ("Command Buffer Full": the launch queue was full) as
    host.overhead slices on the stalled thread, the delayed call's correlationId in args."""
    path = shared_path("nsys-sqlite", name)
    want = Counter((r[0], r[1], r[2], r[3]) for r in sql(path, """
        SELECT s.value, o.start, o.end - o.start, o.correlationId
        FROM CUPTI_ACTIVITY_KIND_OVERHEAD o JOIN StringIds s ON s.id = o.nameId"""))
    trace = tracekit.read(path, registry=registry)
    got = Counter((e["name"], e["ts_ns"], e["dur_ns"], json.loads(e["args"]).get("correlationId"))
                  for e in trace.events.to_pylist() if e["category"] == "host.overhead")
    # (host.overhead also holds nsys's own PROFILER_OVERHEAD rows)
    assert got & want == want and sum(want.values()) in (198, 3)
    log = {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}
    assert log[("CUPTI_ACTIVITY_KIND_OVERHEAD", "events")] == sum(want.values())


def test_gpu_metrics_become_counters_named_from_target_info(tmp_path, registry):
    path = _export(tmp_path)
    with writable(path) as con:
        con.execute("CREATE TABLE GPU_METRICS (rawTimestamp INT, timestamp INT, typeId INT, "
                    "metricId INT, value INT)")
        con.executemany("INSERT INTO GPU_METRICS VALUES (?,?,?,?,?)",
                        [(0, 1000, 1, 5, 80), (0, 2000, 1, 5, 20), (0, 1000, 1, 7, 3)])
        con.execute("CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INT, sourceId INT, "
                    "typeName TEXT, metricId INT, metricName TEXT)")
        con.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (1, 0, 'GH100', 5, "
                    "'SM Active [Throughput %]')")
    trace = tracekit.read(path, registry=registry)
    rows = sorted((r["name"], r["ts_ns"], r["value"]) for r in trace.events.to_pylist())
    assert rows == [("SM Active [Throughput %] (GPU type 1)", 1000, 80.0),
                    ("SM Active [Throughput %] (GPU type 1)", 2000, 20.0),
                    ("metric 7 (GPU type 1)", 1000, 3.0)]
    assert {r["category"] for r in trace.events.to_pylist()} == {"counter.gpu_metrics"}


def test_whole_graph_rows_are_gpu_work_linked_to_their_launch(tmp_path, registry):
    g = _gtid(300, 301)
    path = _export(tmp_path, runtime=[(100, 150, 0, g, 9, 1)],
                   strings=[(1, "cudaGraphLaunch_v10000")])
    with writable(path) as con:
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INT, end INT, "
                    "deviceId INT, contextId INT, greenContextId INT, streamId INT, "
                    "correlationId INT, globalPid INT, graphId INT, graphExecId INT)")
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES "
                    "(200, 900, 0, 1, NULL, 7, 9, ?, 4, 5)", ((300 << 24) | (1 << 48),))
    trace = tracekit.read(path, registry=registry)
    [graph] = [r for r in trace.events.to_pylist() if r["category"] == "gpu.graph"]
    assert (graph["ts_ns"], graph["dur_ns"], graph["device"], graph["stream"],
            graph["correlation"], graph["pid"]) == (200, 700, 0, 7, 9, 300)
    assert json.loads(graph["args"]) == {"graphId": 4, "graphExecId": 5, "contextId": 1}
    [report] = tracekit.analyze(trace, "launch", registry=registry)
    [delay] = report.tables["delay"].to_pylist()
    assert delay["linked"] == 0  # launch counts kernels; the graph is work for the rest
    [breakdown] = tracekit.analyze(trace, "breakdown", registry=registry)
    [device] = breakdown.tables["devices"].to_pylist()
    assert (device["span"], device["compute"]) == (700, 700)


def test_os_runtime_calls_carry_their_call_stacks(registry):
    path = shared_path("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
    trace = tracekit.read(path, registry=registry)
    osrt = [e for e in trace.events.to_pylist() if e["category"] == "host.os"]
    [(with_chain,)] = sql(path, "SELECT count(*) FROM OSRT_API WHERE callchainId IN "
                                "(SELECT id FROM OSRT_CALLCHAINS)")
    assert sum(e["stack_id"] is not None for e in osrt) == with_chain > 0
    # The leaf of each call's stack is its callchain's stackDepth 0 symbol, per call.
    leaves = Counter(r[0] for r in sql(
        path, "SELECT s.value FROM OSRT_API o JOIN OSRT_CALLCHAINS c ON c.id = o.callchainId "
              "AND c.stackDepth = 0 JOIN StringIds s ON s.id = c.symbol"))
    stacks = {r["stack_id"]: r["frame_id"] for r in trace.stacks.to_pylist()}
    frames = {r["frame_id"]: r["name"] for r in trace.frames.to_pylist()}
    got = Counter(frames[stacks[e["stack_id"]]] for e in osrt if e["stack_id"] is not None)
    assert got == leaves
    # The samples' tree and the OS runtime tree share the tables without colliding ids.
    ids = trace.stacks["stack_id"].to_pylist()
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", sweep(["pipit_cloverleaf_nsys2024.5.1_a100.sqlite",
                                        "mordred_nsys2021_quadro-rtx6000_report1.sqlite"],
                                       "mordred_nsys2021_quadro-rtx6000_report1.sqlite"))
def test_scheduling_slices_pair_sched_in_with_sched_out_as_sql_does(name, registry):
    path = shared_path("nsys-sqlite", name)
    want = {(r[0] & 0xFFFFFF, r[1]): r[2] for r in sql(path, """
        WITH ordered AS (
          SELECT globalTid, start, isSchedIn,
                 LEAD(start) OVER w AS next_start, LEAD(isSchedIn) OVER w AS next_in
          FROM SCHED_EVENTS WINDOW w AS (PARTITION BY globalTid ORDER BY start, isSchedIn))
        SELECT globalTid, count(*), sum(next_start - start) FROM ordered
        WHERE isSchedIn = 1 AND next_in = 0 GROUP BY globalTid""")}
    trace = tracekit.read(path, registry=registry)
    got: dict = {}
    for e in trace.events.to_pylist():
        if e["category"] == "host.sched":
            acc = got.setdefault(e["tid"], [0, 0])
            acc[0] += 1
            acc[1] += e["dur_ns"]
    assert got == {tid: [n, total] for (tid, n), total in want.items()}


def test_device_ids_are_the_exports_gpu_ids_whatever_ordinal_a_process_saw(tmp_path, registry):
    """Pitfall 9: with CUDA_VISIBLE_DEVICES, process 10 sees GPU 1 as cuda:0 and process 20
    sees GPU 0 as cuda:0. deviceId is the export's GPU id (NVIDIA's reports join it with
    TARGET_INFO_GPU.id), so it is not remapped; the ordinals are kept as metadata."""
    strings = [(1, "kernA"), (2, "kernB")]
    kernels = [(100, 200, 1, 7, 7, _gtid(10, 0), 1, 1), (300, 400, 0, 7, 8, _gtid(20, 0), 2, 2)]
    path = _export(tmp_path, kernels=kernels, strings=strings)
    with writable(path) as con:
        con.execute("CREATE TABLE TARGET_INFO_GPU (id INT, name TEXT)")
        con.executemany("INSERT INTO TARGET_INFO_GPU VALUES (?, ?)",
                        [(0, "GPU zero"), (1, "GPU one")])
        con.execute("CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INT, cudaId INT NOT NULL, "
                    "pid INT NOT NULL, uuid TEXT, numMultiprocessors INT)")
        con.executemany("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?, NULL, 80)",
                        [(1, 0, 10), (0, 0, 20)])
    trace = tracekit.read(path, registry=registry)
    names = {d["device"]: d["name"] for d in trace.devices.to_pylist()}
    on = {(r["name"], r["pid"]): names[r["device"]] for r in trace.events.to_pylist()}
    assert on == {("kernA", 10): "GPU one", ("kernB", 20): "GPU zero"}
    assert trace.metadata["sources"][path.name]["cuda_ordinals"] == {"10": {"0": 1},
                                                                     "20": {"0": 0}}


def test_cuda_ordinals_of_the_real_2026_export(registry):
    path = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
        rows = con.execute("SELECT pid, cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE").fetchall()
        gpus = {r[0] for r in con.execute("SELECT id FROM TARGET_INFO_GPU")}
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["cuda_ordinals"] == {
        str(p): {str(c): g} for p, c, g in rows}
    kernels = trace.events.filter(pc.equal(trace.events["category"], "gpu.kernel"))
    assert set(kernels["device"].to_pylist()) <= gpus


# -- unresolved call-chain frames ---------------------------------------------------------------

CLOVERLEAF = "pipit_cloverleaf_nsys2024.5.1_a100.sqlite"
RAW = re.compile(r"0x[0-9a-f]+$")


def _sample_paths(path) -> dict[int, list[tuple[str | None, str | None]]]:
    """Per sampled chain id, its (symbol, module) strings, leaf first, from SQL."""
    chains = defaultdict(list)
    for cid, sym, mod in sql(path, "SELECT c.id, s.value, m.value FROM SAMPLING_CALLCHAINS c "
                                   "LEFT JOIN StringIds s ON s.id = c.symbol LEFT JOIN "
                                   "StringIds m ON m.id = c.module WHERE c.id IN "
                                   "(SELECT id FROM COMPOSITE_EVENTS) "
                                   "ORDER BY c.id, c.stackDepth"):
        chains[cid].append((sym, mod))
    return chains


@pytest.mark.slow  # reads a whole real export; the sweep above keeps one fast
def test_unresolved_frames_are_named_after_their_module(registry, tmp_path):
    """530-odd of the ~550 sampled stacks of the CloverLeaf export hold raw 0x7f72... frames
    although their module is known; named [module] they merge in a flame graph."""
    path = shared_path("nsys-sqlite", CLOVERLEAF)
    chains = _sample_paths(path)
    paths = {tuple(c) for c in chains.values()}
    raw_before = sum(any(RAW.match(s or "") for s, _ in p) for p in paths)
    assert (raw_before, len(paths)) == (528, 553)
    # Every raw frame's module is known, so none should stay raw.
    assert sql(path, "SELECT count(*) FROM SAMPLING_CALLCHAINS c JOIN StringIds s ON "
                     "s.id = c.symbol WHERE s.value GLOB '0x*' AND c.module NOT IN "
                     "(SELECT id FROM StringIds)")[0][0] == 0
    trace = tracekit.read(path, registry=registry)
    stacks = {r["stack_id"]: r for r in trace.stacks.to_pylist()}
    frames = {r["frame_id"]: r for r in trace.frames.to_pylist()}

    def names_of(stack_id):
        out = []
        while stack_id is not None:
            out.append(frames[stacks[stack_id]["frame_id"]]["name"])
            stack_id = stacks[stack_id]["parent_id"]
        return tuple(out)

    samples = trace.events.filter(pc.equal(trace.events["category"], "cpu.sample"))
    leaf_stacks = set(samples["stack_id"].drop_null().to_pylist())
    assert len(leaf_stacks) == len(paths)
    got = {names_of(s) for s in leaf_stacks}
    assert sum(any(RAW.match(n) for n in p) for p in got) == 0
    # What a flame graph shows: 553 distinct paths before, 202 after the merge.
    want = {tuple(frame_name(s, m) for s, m in p) for p in paths}
    assert got == want
    assert (len({tuple(s for s, _ in p) for p in paths}), len(want)) == (553, 202)
    folded = tmp_path / "out.folded"
    tracekit.write(trace, folded, registry=registry)
    assert not any(RAW.search(line) for line in folded.read_text().splitlines())


def test_unresolved_frames_keep_their_address(registry):
    """The address of each unresolved frame stays in frames.address, as int64 (kernel
    addresses above 2**63 wrap to negative, as Perfetto stores them)."""
    path = shared_path("nsys-sqlite", CLOVERLEAF)
    want = Counter()
    for table in ("SAMPLING_CALLCHAINS", "OSRT_CALLCHAINS"):
        # One frame per distinct (symbol, module) pair of each call-chain table.
        for (sym,) in sql(path, f"SELECT s.value FROM (SELECT DISTINCT symbol, module "
                                f"FROM {table}) c JOIN StringIds s ON s.id = c.symbol "
                                "WHERE s.value GLOB '0x*'"):
            value = int(sym, 16)
            want[value - (1 << 64) if value >= 1 << 63 else value] += 1
    frames = tracekit.read(path, registry=registry).frames
    got = Counter(a for a in frames["address"].to_pylist() if a is not None)
    assert got == want and sum(want.values()) == 690
    assert min(got) < 0  # [kernel.kallsyms] frames
    named = {r["name"] for r in frames.to_pylist() if r["address"] is not None}
    assert "[kernel.kallsyms]" in named and "[ld-2.31.so]" in named
    assert not any(RAW.match(n) for n in named)


# -- damaged exports: derived copies of a real export ----------------------------------------

SMALL = "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


def damaged(tmp_path, *statements, base=SMALL, loosen=()):
    """A copy of a real export changed by SQL; the tables in ``loosen`` are rebuilt without
    their constraints first, so that they can hold NULLs."""
    path = tmp_path / "damaged.sqlite"
    shutil.copyfile(shared_path("nsys-sqlite", base), path)
    with writable(path) as con:
        for table in loosen:
            con.execute(f'CREATE TABLE "tmp_{table}" AS SELECT * FROM "{table}"')
            con.execute(f'DROP TABLE "{table}"')
            con.execute(f'ALTER TABLE "tmp_{table}" RENAME TO "{table}"')
        for statement in statements:
            con.execute(statement)
    return path


def read_error(path, registry, **kwargs) -> TraceReadError:
    """The TraceReadError of reading ``path``: a proper one (no crash), on one line."""
    with pytest.raises(TraceReadError) as info:
        tracekit.read(path, registry=registry, **kwargs)
    assert not isinstance(info.value, ReaderCrashError), str(info.value)
    assert "\n" not in str(info.value) and "SELECT" not in str(info.value)
    return info.value


def notices(trace) -> dict[tuple[str, str], int]:
    return {(table, outcome): n for (_, table, outcome), n in trace.log.notices().items()
            if "does not read" not in outcome}


@pytest.mark.parametrize(("value", "where", "message"), [
    ("'abc'", "rowid = 2", "column start: 1 value is not an integer (first: 'abc')"),
    ("x'ff00'", "1", "column start: 4 values are not integers (first: '\ufffd\\x00')"),
    ("3.7", "rowid = 1", "column start: 1 value is not an integer (first: 3.7)"),
    ("1e300", "rowid = 3", "column start: 1 value is not an integer (first: 1e+300)"),
    ("9223372036854775808", "rowid = 1",
     "column start: 1 value is not an integer (first: 9.223372036854776e+18)"),
])
def test_wrong_type_in_an_event_column_names_table_and_column(tmp_path, registry, value, where,
                                                              message):
    assert sql(shared_path("nsys-sqlite", SMALL), f"SELECT count(*) FROM {KERNEL}")[0][0] == 4
    path = damaged(tmp_path, f"UPDATE {KERNEL} SET start = {value} WHERE {where}")
    error = read_error(path, registry)
    assert str(error) == f"{path}: table {KERNEL}: {message}"


def test_out_of_range_int32_and_a_bad_value_past_the_drivers_first_batch(tmp_path, registry):
    path = damaged(tmp_path, f"UPDATE {KERNEL} SET gridX = 4294967296 WHERE rowid = 4")
    assert str(read_error(path, registry)).endswith(
        f"table {KERNEL}: column gridX: 1 value is not a 32-bit integer (first: 4294967296)")
    # The ADBC driver types a column by its first 1024 rows and fails on a later change.
    assert sql(shared_path("nsys-sqlite", CLOVERLEAF), "SELECT count(*) FROM OSRT_API")[0][0] \
        == 1831
    path = damaged(tmp_path, "UPDATE OSRT_API SET returnValue = 'x' WHERE rowid = 1800",
                   "UPDATE OSRT_API SET start = 2.5 WHERE rowid = 1700", base=CLOVERLEAF)
    assert str(read_error(path, registry)).endswith(
        "table OSRT_API: column start: 1 value is not an integer (first: 2.5)")


def test_invalid_utf8_is_replaced_counted_and_written(tmp_path, registry):
    small = shared_path("nsys-sqlite", SMALL)
    [(name_id, name)] = sql(small, f"SELECT s.id, s.value FROM {KERNEL} k JOIN StringIds s ON "
                                   "s.id = k.demangledName GROUP BY s.id ORDER BY s.id LIMIT 1")
    uses = sql(small, f"SELECT count(*) FROM {KERNEL} WHERE demangledName = {name_id}")[0][0]
    path = damaged(tmp_path, f"UPDATE StringIds SET value = CAST(x'ff41' AS TEXT) || value "
                             f"WHERE id = {name_id}")
    trace = tracekit.read(path, registry=registry)
    kernels = trace.events.filter(pc.equal(trace.events["category"], "gpu.kernel"))
    assert kernels["name"].cast(pa.string()).to_pylist().count("\ufffdA" + name) == uses > 0
    assert notices(trace) == {
        ("StringIds", "warning: invalid UTF-8 in text, replaced with U+FFFD"): 1}
    for out in ("o.pftrace", "o.json", "o.folded"):
        tracekit.write(trace, tmp_path / out, registry=registry)
    events = json.loads((tmp_path / "o.json").read_text(encoding="utf-8"))["traceEvents"]
    assert sum(e.get("name") == "\ufffdA" + name and e.get("ph") == "X" for e in events) \
        == uses


def test_blob_and_invalid_utf8_in_nvtx_text(tmp_path, registry):
    nvtx = [(10, 20, 59, "ok", _gtid(1, 1), None), (30, 40, 59, None, _gtid(1, 1), None)]
    path = _export(tmp_path, nvtx=nvtx)
    with writable(path) as con:
        con.execute("UPDATE NVTX_EVENTS SET text = CAST(x'6162ff' AS TEXT) WHERE start = 10")
        con.execute("UPDATE NVTX_EVENTS SET text = x'ff' WHERE start = 30")
    trace = tracekit.read(path, registry=registry)
    assert sorted(trace.events["name"].cast(pa.string()).to_pylist()) == ["ab\ufffd", "\ufffd"]
    assert notices(trace) == {("NVTX_EVENTS",
                               "warning: invalid UTF-8 in text, replaced with U+FFFD"): 2}


@pytest.mark.parametrize("value", ["9223372036854775808", "1e300", "'abc'", "x'00'", "-5"])
def test_bad_session_start_is_left_out_with_a_warning(tmp_path, registry, value):
    path = damaged(tmp_path, f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {value}")
    trace = tracekit.read(path, registry=registry)
    meta = trace.metadata["sources"][path.name]
    assert "session_start_utc_epoch_ns" not in meta and meta["schema_version"] == "3.24.14"
    assert notices(trace) == {("TARGET_INFO_SESSION_START_TIME",
                               "warning: utcEpochNs is not a time in ns since 1970 (an "
                               "integer >= 0); session start left out"): 1}
    assert trace.events.num_rows == tracekit.read(shared_path("nsys-sqlite", SMALL),
                                                  registry=registry).events.num_rows


@pytest.mark.parametrize("value", ["'abc'", "x'ff'", "1e300", "'99999999999999999999.1'"])
def test_schema_version_not_understood_is_a_warning(tmp_path, registry, value):
    path = damaged(tmp_path, f"UPDATE META_DATA_EXPORT SET value = {value} "
                             "WHERE name = 'EXPORT_SCHEMA_VERSION'")
    trace = tracekit.read(path, registry=registry)
    assert notices(trace) == {("export schema", "warning: version not understood; reading the "
                               "tables and columns this reader recognises"): 1}


def test_bad_values_in_descriptive_tables_are_ignored_with_warnings(tmp_path, registry):
    small = shared_path("nsys-sqlite", SMALL)
    [(gpu, sm_count)] = sql(small, "SELECT id, smCount FROM TARGET_INFO_GPU")
    path = damaged(tmp_path, "UPDATE TARGET_INFO_GPU SET smCount = 1099511627776, "
                             "totalMemory = 'lots'",
                   "UPDATE TARGET_INFO_CUDA_DEVICE SET gpuId = 'x'",
                   "UPDATE PROCESSES SET pid = 'x'")
    trace = tracekit.read(path, registry=registry)
    [device] = trace.devices.to_pylist()
    assert (device["device"], device["sm_count"], device["memory_bytes"]) == (gpu, None, None)
    assert sm_count is not None
    rows = sql(small, "SELECT count(*) FROM TARGET_INFO_CUDA_DEVICE")[0][0]
    processes = sql(small, "SELECT count(*) FROM PROCESSES")[0][0]
    assert notices(trace) == {
        ("TARGET_INFO_GPU", "warning: value ignored: not of its column's type"): 1,
        ("TARGET_INFO_CUDA_DEVICE", "warning: row left out: its key is not an integer"): rows,
        ("PROCESSES", "warning: row left out: its key is not an integer"): processes}
    assert "cuda_ordinals" not in trace.metadata["sources"][path.name]
    assert trace.processes.num_rows == 0
    path = damaged(tmp_path, "UPDATE TARGET_INFO_GPU SET id = 'gpu0'")
    trace = tracekit.read(path, registry=registry)
    assert trace.devices.num_rows == 0
    assert notices(trace) == {("TARGET_INFO_GPU",
                               "warning: row left out: its key is not an integer"): 1}


def test_not_an_export_directory_text_and_missing_parts(tmp_path, registry):
    folder = tmp_path / "reports"
    folder.mkdir()
    assert str(read_error(folder, registry, format="nsys")) == (
        f"{folder}: is a directory, not an Nsight Systems SQLite export (make one with: "
        "nsys export --type sqlite REPORT.nsys-rep)")
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database\n")
    assert str(read_error(text, registry, format="nsys")) == (
        f"{text}: not an SQLite file, so not an Nsight Systems export (make one with: "
        "nsys export --type sqlite REPORT.nsys-rep)")
    only_strings = _export(tmp_path, "strings.sqlite", strings=[(1, "a")])
    assert str(read_error(only_strings, registry, format="nsys")).endswith(
        "not an Nsight Systems export: it has StringIds but none of the other tables nsys "
        "writes")
    no_start = damaged(tmp_path, f"ALTER TABLE {KERNEL} DROP COLUMN start")
    assert str(read_error(no_start, registry)) == (
        f"{no_start}: table {KERNEL}: column start is missing (not an nsys export this "
        "reader knows, or a damaged one)")
    no_value = damaged(tmp_path, "CREATE TABLE s2 AS SELECT id FROM StringIds",
                       "DROP TABLE StringIds", "ALTER TABLE s2 RENAME TO StringIds")
    assert str(read_error(no_value, registry)).endswith(
        "table StringIds: column value is missing (not an nsys export this reader knows, "
        "or a damaged one)")


@pytest.mark.parametrize("percent", [10, 50, 99])
def test_truncated_export_is_one_clear_line(tmp_path, registry, percent):
    data = shared_path("nsys-sqlite", SMALL).read_bytes()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[:len(data) * percent // 100])
    error = read_error(path, registry, format="nsys")
    assert str(error) == (f"{path}: not a readable SQLite database: database disk image is "
                          "malformed (the file is damaged or truncated)")


def test_missing_kernel_names_fall_back_then_get_a_placeholder(tmp_path, registry):
    small = shared_path("nsys-sqlite", SMALL)
    rows = sql(small, f"SELECT d.value, s.value, m.value FROM {KERNEL} k JOIN StringIds d ON "
                      "d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName JOIN "
                      "StringIds m ON m.id = k.mangledName ORDER BY k.rowid")
    path = damaged(tmp_path, f"UPDATE {KERNEL} SET demangledName = NULL WHERE rowid = 1",
                   f"UPDATE {KERNEL} SET demangledName = 987654, shortName = NULL "
                   "WHERE rowid = 2",
                   f"UPDATE {KERNEL} SET demangledName = NULL, shortName = NULL, "
                   "mangledName = 987654 WHERE rowid = 3", loosen=[KERNEL])
    trace = tracekit.read(path, registry=registry)
    kernels = trace.events.filter(pc.equal(trace.events["category"], "gpu.kernel"))
    got = sorted(zip(kernels["ts_ns"].to_pylist(), kernels["name"].cast(pa.string()).to_pylist(),
                     strict=True))
    starts = [r[0] for r in sql(path, f"SELECT start FROM {KERNEL} ORDER BY rowid")]
    assert [n for _, n in got] == [n for _, n in sorted(zip(starts, [
        rows[0][1], rows[1][2], "[unknown]", rows[3][0]], strict=True))]
    assert notices(trace) == {
        (KERNEL, "warning: demangledName missing (NULL or not in StringIds), named by "
                 "shortName"): 1,
        (KERNEL, "warning: demangledName missing (NULL or not in StringIds), named by "
                 "mangledName"): 1,
        (KERNEL, "warning: no name (NULL, not in StringIds or an unknown code), named "
                 "[unknown]"): 1}


def test_null_strings_in_string_ids_are_missing_names(tmp_path, registry):
    small = shared_path("nsys-sqlite", SMALL)
    calls = sql(small, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass "
                       "IS NOT 67 AND nameId = (SELECT min(nameId) FROM "
                       "CUPTI_ACTIVITY_KIND_RUNTIME)")[0][0]
    path = damaged(tmp_path, "UPDATE StringIds SET value = NULL WHERE id = "
                             "(SELECT min(nameId) FROM CUPTI_ACTIVITY_KIND_RUNTIME)",
                   loosen=["StringIds"])
    trace = tracekit.read(path, registry=registry)
    names = trace.events["name"].cast(pa.string()).to_pylist()
    assert names.count("[unknown]") == calls > 0
    assert notices(trace) == {("CUPTI_ACTIVITY_KIND_RUNTIME", "warning: no name (NULL, not in "
                               "StringIds or an unknown code), named [unknown]"): calls}
    tracekit.write(trace, tmp_path / "o.pftrace", registry=registry)


def test_missing_api_nvtx_and_frame_names_get_placeholders(tmp_path, registry):
    small = shared_path("nsys-sqlite", SMALL)
    calls = sql(small, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass "
                       "IS NOT 67 AND correlationId % 2 = 0")[0][0]
    position = sql(small, "SELECT count(*) FROM COMPOSITE_EVENTS WHERE id < "
                          "(SELECT min(id) FROM SAMPLING_CALLCHAINS)")[0][0]
    [(sym_rows, module)] = sql(small, "SELECT count(*), m.value FROM SAMPLING_CALLCHAINS c "
                                      "JOIN StringIds m ON m.id = c.module WHERE c.stackDepth "
                                      "= 0 AND c.id = (SELECT min(id) FROM SAMPLING_CALLCHAINS)")
    path = damaged(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 987654 WHERE "
                             "correlationId % 2 = 0",
                   "UPDATE SAMPLING_CALLCHAINS SET symbol = NULL WHERE stackDepth = 0 AND "
                   "id = (SELECT min(id) FROM SAMPLING_CALLCHAINS)",
                   loosen=["SAMPLING_CALLCHAINS"])
    trace = tracekit.read(path, registry=registry)
    api = trace.events.filter(pc.starts_with(trace.events["category"].cast(pa.string()), "api."))
    assert api["name"].cast(pa.string()).to_pylist().count("[unknown]") == calls > 0
    samples = trace.events.filter(pc.equal(trace.events["category"], "cpu.sample"))
    assert samples["name"].cast(pa.string()).to_pylist()[position] == frame_name(None, module)
    assert notices(trace) == {
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "warning: no name (NULL, not in StringIds or an "
                                        "unknown code), named [unknown]"): calls,
        ("SAMPLING_CALLCHAINS", "warning: frame symbol missing (NULL or not in StringIds)"):
            sym_rows}
    nvtx = [(10, 20, 59, None, _gtid(1, 1), 5), (30, 40, 59, None, _gtid(1, 1), None)]
    trace = tracekit.read(_export(tmp_path, "n.sqlite", nvtx=nvtx, strings=[(1, "x")]),
                          registry=registry)
    assert trace.events["name"].cast(pa.string()).to_pylist() == ["[unknown]"] * 2
    assert notices(trace) == {("NVTX_EVENTS", "warning: no name (NULL, not in StringIds or an "
                                              "unknown code), named [unknown]"): 2}
