"""rocprof's SQLite outputs (rocpd databases and v1 results.db) against sqlite3 queries."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections import defaultdict

import pyarrow.compute as pc
import pytest
import tracekit
from helpers import shared_path
from perfetto_check import decode_and_check
from tracekit.cli import main
from tracekit.errors import ReaderCrashError, TraceReadError

ROCPD = ("bonus", "rocpd-sqlite", "hgliu_15_results.db")
V1_DB = ("rocprof-v1", "kokkos_2021_gfx906", "results.db")


def query(path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
        return con.execute(sql).fetchall()


def outcomes(trace) -> dict[tuple[str, str], int]:
    return {(k[1], k[2]): v for k, v in trace.log.outcomes.items()}


# --- rocpd ------------------------------------------------------------------------------

def test_rocpd_one_event_per_row_and_untouched_file(registry, tmp_path):
    path = shared_path(*ROCPD)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["reader"] == "rocprof-db"
    log = outcomes(trace)
    [(regions,)] = query(path, "SELECT count(*) FROM rocpd_region")
    [(kernels,)] = query(path, "SELECT count(*) FROM rocpd_kernel_dispatch")
    assert (regions, kernels) == (623, 301)
    assert log[("regions", "events")] == regions
    assert log[("kernels", "events")] == kernels
    assert trace.events.num_rows == regions + kernels
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    # Processes, threads and GPU agents come from the info tables.
    assert trace.processes.to_pylist()[0]["name"] == "./batched_gemm"
    gpus = query(path, "SELECT absolute_index, product_name, name FROM rocpd_info_agent "
                       "WHERE type = 'GPU'")
    got = {d["device"]: (d["name"], d["compute_capability"])
           for d in trace.devices.to_pylist()}
    assert got == {i: (product, arch) for i, product, arch in gpus}


def test_rocpd_kernel_totals_equal_sql_and_grids_count_workgroups(registry):
    path = shared_path(*ROCPD)
    want = {name: [n, total] for name, n, total in query(path, """
        SELECT s.display_name, count(*), sum(k."end" - k.start)
        FROM rocpd_kernel_dispatch k JOIN rocpd_info_kernel_symbol s ON s.id = k.kernel_id
        GROUP BY s.display_name""")}
    trace = tracekit.read(path, registry=registry)
    [report] = tracekit.analyze(trace, "summary", registry=registry)
    got = {r["name"]: [r["count"], r["total"]] for r in report.tables["kernels"].to_pylist()}
    assert got == want
    # rocpd's grid sizes are work-items; the model counts workgroups (ceil division).
    grid = query(path, "SELECT grid_size_x, workgroup_size_x FROM rocpd_kernel_dispatch "
                       "ORDER BY start")
    kernels = trace.events.filter(pc.equal(trace.events["category"], "gpu.kernel")).sort_by("ts_ns")
    assert kernels["grid_x"].to_pylist() == [-(-g // w) for g, w in grid]
    assert kernels["block_x"].to_pylist() == [w for _, w in grid]


def test_rocpd_launch_calls_link_to_their_kernels(registry, tmp_path):
    """The internal correlation id is the event's stack_id: each kernel links to the
    hipLaunchKernel or hipMemset that enqueued it."""
    path = shared_path(*ROCPD)
    want = defaultdict(int)
    for (name,) in query(path, """
            SELECT r.name FROM kernels k JOIN regions r ON r.stack_id = k.stack_id"""):
        want[name] += 1
    assert dict(want) == {"hipLaunchKernel": 150, "hipMemset": 151}
    trace = tracekit.read(path, registry=registry)
    out = tmp_path / "out.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    linked = [s for s in decoded.slices if s.category == "gpu.kernel" and s.flows]
    assert len(linked) == 301
    calls = {f: s.name for s in decoded.slices if s.category == "api.runtime"
             for f in s.flows}
    got = defaultdict(int)
    for s in linked:
        got[calls[s.flows[0]]] += 1
    assert got == want


def _rocpd_with_copies_and_allocations(tmp_path):
    """A copy of the real database with rows added to its (empty) memory-copy and
    allocation tables, written with the columns of its own schema."""
    src = shared_path(*ROCPD)
    path = tmp_path / "with_memory.db"
    shutil.copy(src, path)
    with sqlite3.connect(path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        suffix = next(t for t in tables if t.startswith("rocpd_memory_copy_"))[
            len("rocpd_memory_copy"):]
        [(name_id,)] = con.execute(f"SELECT id FROM rocpd_string{suffix} WHERE string = "
                                   "'MEMORY_COPY_HOST_TO_DEVICE'").fetchall()
        event = con.execute("SELECT id, stack_id FROM rocpd_event ORDER BY id LIMIT 1")
        event_id, _ = event.fetchone()
        nid, pid, tid = con.execute("SELECT nid, pid, tid FROM rocpd_region LIMIT 1").fetchone()
        # agent 0 is a CPU, agent 2 the first GPU
        con.execute(f"""INSERT INTO rocpd_memory_copy{suffix} (nid, pid, tid, start, "end",
            name_id, dst_agent_id, src_agent_id, size, queue_id, stream_id, event_id)
            VALUES (?, ?, ?, 1000, 3000, ?, 2, 0, 4096, 0, 0, ?)""",
                    (nid, pid, tid, name_id, event_id))
        for kind, level, size, start in (("ALLOC", "REAL", 1 << 20, 5000),
                                         ("FREE", "REAL", 1 << 20, 9000),
                                         ("ALLOC", "SCRATCH", 512, 7000)):
            con.execute(f"""INSERT INTO rocpd_memory_allocate{suffix} (nid, pid, tid,
                agent_id, type, level, start, "end", address, size, event_id)
                VALUES (?, ?, ?, 2, ?, ?, ?, ?, 4096, ?, ?)""",
                        (nid, pid, tid, kind, level, start, start + 100, size, event_id))
    return path


def test_rocpd_memory_copies_and_allocations(registry, tmp_path):
    path = _rocpd_with_copies_and_allocations(tmp_path)
    trace = tracekit.read(path, registry=registry)
    log = outcomes(trace)
    assert (log[("memory_copies", "events")], log[("memory_allocations", "events")]) == (1, 3)
    [copy] = trace.events.filter(pc.equal(trace.events["category"], "gpu.memcpy")).to_pylist()
    assert (copy["name"], copy["copy_kind"], copy["device"], copy["bytes"], copy["ts_ns"],
            copy["dur_ns"]) == ("MEMORY_COPY_HOST_TO_DEVICE", "HtoD", 2, 4096, 1000, 2000)
    memory = trace.events.filter(pc.equal(trace.events["category"], "host.memory")).sort_by("ts_ns")
    assert [(r["name"], r["bytes"]) for r in memory.to_pylist()] == [
        ("REAL ALLOC", 1 << 20), ("SCRATCH ALLOC", 512), ("REAL FREE", -(1 << 20))]


# --- rocprof v1 results.db ---------------------------------------------------------------

def test_v1_db_one_event_per_row(registry, tmp_path):
    path = shared_path(*V1_DB)
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["reader"] == "rocprof-db"
    log = outcomes(trace)
    for table in ("HIP", "OPS", "COPY", "rocTX"):
        [(rows,)] = query(path, f'SELECT count(*) FROM "{table}"')
        assert log[(table, "events")] == rows
    assert trace.events.num_rows == 104 + 14 + 30 + 9
    out = tmp_path / "out.pftrace"
    tracekit.write(trace, out, registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    # Index is the correlation id: every op and copy links to the HIP call with its Index.
    [(linked,)] = query(path, 'SELECT count(*) FROM (SELECT "Index" FROM OPS UNION ALL '
                              'SELECT "Index" FROM COPY) w WHERE w."Index" IN '
                              '(SELECT "Index" FROM HIP)')
    assert linked == 44
    assert len([s for s in decoded.slices if s.category.startswith("gpu.") and s.flows]) == 44


def test_v1_db_sizes_come_from_the_calls_and_processes_from_the_ops(registry):
    path = shared_path(*V1_DB)
    trace = tracekit.read(path, registry=registry)
    rows = trace.events.to_pylist()
    assert {r["pid"] for r in rows} == {p for (p,) in query(path,
                                                            'SELECT DISTINCT "proc-id" FROM OPS')}
    # Each copy or fill carries its call's sizeBytes; a call done as two fills gives it to
    # the first only.
    want = 0
    for (args,) in query(path, 'SELECT args FROM HIP WHERE "Index" IN '
                               '(SELECT "Index" FROM COPY)'):
        want += int(re.search(r"sizeBytes\((\d+)\)", args).group(1))
    moved = [r for r in rows if r["category"] in ("gpu.memcpy", "gpu.memset")]
    assert len(moved) == 30
    assert sum(r["bytes"] or 0 for r in moved) == want
    # Zero-length "Unknown command type" ops are the barriers of synchronize calls.
    syncs = [r for r in rows if r["category"] == "gpu.sync"]
    [(barriers,)] = query(path, "SELECT count(*) FROM OPS WHERE Name = 'Unknown command type'"
                                " AND EndNs = BeginNs")
    assert len(syncs) == barriers == 6


def test_v1_db_and_results_json_of_one_run_agree(registry):
    """results.db and results.json hold the same run: the same events, except that the
    JSON links one of the two fills of a two-fill memset only."""
    db = tracekit.read(shared_path(*V1_DB), registry=registry)
    js = tracekit.read(shared_path("rocprof-v1", "kokkos_2021_gfx906", "results.json"),
                       registry=registry)
    cols = ["kind", "category", "name", "ts_ns", "dur_ns", "device", "stream", "pid", "tid",
            "copy_kind"]
    def rows(trace):
        return sorted(tuple(r.values()) for r in trace.events.select(cols).to_pylist())

    assert len(rows(db)) == 157
    assert rows(db) == rows(js)

    def links(trace):
        rows = trace.events.to_pylist()
        calls = {r["correlation"]: r["name"] for r in rows
                 if r["device"] is None and r["correlation"] is not None}
        return {(calls[r["correlation"]], r["name"], r["ts_ns"]) for r in rows
                if r["device"] is not None and r["correlation"] is not None}

    only_db = links(db) - links(js)
    assert links(js) < links(db)
    assert sorted(n for n, _, _ in only_db) == ["hipMemset", "hipMemset"]


# --- bad input ---------------------------------------------------------------------------

def test_unrelated_sqlite_names_what_it_is_not(tmp_path, capsys):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (x)")
    out = tmp_path / "out.pftrace"
    assert main(["convert", str(path), "--from", "rocprof-db", "-o", str(out)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a rocprof database" in err and str(path) in err
    assert not out.exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupt_rocpd_gives_one_line(damage, tmp_path, capsys):
    src = shared_path(*ROCPD)
    path = tmp_path / "broken.db"
    data = src.read_bytes()
    path.write_bytes(data[:8192] if damage == "truncate" else data[:100] + b"\xff" * 8000)
    out = tmp_path / "out.pftrace"
    code = main(["convert", str(path), "--from", "rocprof-db", "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and err.count("\n") == 0 and str(path) in err
    assert "Traceback" not in err and not out.exists()


# --- damaged cells and device names (issue 13) ------------------------------------------

def _damaged_copy(src, tmp_path, *statements: str):
    path = tmp_path / src.name
    shutil.copyfile(src, path)
    with sqlite3.connect(path) as con:
        for sql in statements:
            con.execute(sql)
    return path


def _guid_table(path, prefix: str) -> str:
    [(name,)] = query(path, f"SELECT name FROM sqlite_master WHERE type = 'table' "
                            f"AND name LIKE '{prefix}%'")
    return name


def test_v1_db_null_cells_are_read_with_warnings(registry, tmp_path):
    """A NULL marker time and a NULL op name: the rows stay (an untimed range, a name
    filled in), and the name is counted."""
    path = _damaged_copy(shared_path(*V1_DB), tmp_path,
                         'UPDATE rocTX SET BeginNs = NULL WHERE rowid = 1',
                         'UPDATE OPS SET Name = NULL WHERE rowid = 1')
    trace = tracekit.read(path, registry=registry)
    assert trace.events.num_rows == 157
    assert trace.events["ts_ns"].null_count == 1
    assert trace.events["name"].to_pylist().count("<unnamed>") == 1
    assert outcomes(trace)[("OPS", "warning: rows without a name (named <unnamed>)")] == 1


def test_rocpd_value_too_large_for_the_model_names_view_and_row(registry, tmp_path):
    src = shared_path(*ROCPD)
    table = _guid_table(src, "rocpd_kernel_dispatch_")
    path = _damaged_copy(src, tmp_path, f'UPDATE "{table}" SET grid_size_y = {1 << 40}, '
                                        f'workgroup_size_y = 1')
    with pytest.raises(TraceReadError) as caught:
        tracekit.read(path, registry=registry)
    exc = caught.value
    assert not isinstance(exc, ReaderCrashError)
    assert (exc.path, exc.location, exc.message) == (
        str(path), "view kernels, row 1", "grid_y 1099511627776 does not fit 32 bits")


def test_rocpd_agent_extdata_that_is_not_json_loses_only_the_cu_count(registry, tmp_path):
    src = shared_path(*ROCPD)
    table = _guid_table(src, "rocpd_info_agent_")
    path = _damaged_copy(src, tmp_path, f"UPDATE \"{table}\" SET extdata = '{{not json' "
                                        "WHERE absolute_index = 2")
    trace = tracekit.read(path, registry=registry)
    got = {d["device"]: (d["name"], d["sm_count"]) for d in trace.devices.to_pylist()}
    assert got == {i: ("AMD Instinct MI300X", None if i == 2 else 304) for i in range(2, 10)}


def test_v1_db_devices_named_by_the_results_json_beside_it(registry):
    """results.db holds no rocminfo; the results.json of the same run (beside it) does:
    Vega 20 (gfx906, 64 CUs), numbered by position as ROCm 4 numbered them."""
    path = shared_path(*V1_DB)
    other = json.loads((path.parent / "results.json").read_text())["otherData"]
    gpus = sorted(int(k.split(".")[0][5:]) for k, v in other.items()
                  if k.endswith(".DeviceType") and v == "GPU")
    trace = tracekit.read(path, registry=registry)
    assert trace.devices.select(["device", "name", "compute_capability", "sm_count"]) \
        .to_pylist() == [{"device": i, "name": "Vega 20",
                          "compute_capability": other[f"Agent{a}.Name"],
                          "sm_count": int(other[f"Agent{a}.ComputeUnit"])}
                         for i, a in enumerate(gpus)]
    assert set(trace.events["device"].to_pylist()) - {None} == {0}


def test_rocpd_fill_kernels_take_the_size_of_the_call_that_launched_them(registry):
    """hgliu_15's 151 hipMemset calls each launch one __amd_rocclr_fillBufferAligned kernel
    (the same stack id); the call's sizeBytes argument, by SQL over rocpd_arg, is each
    kernel's bytes, and the GEMM kernels, launched by calls without one, have none."""
    path = shared_path(*ROCPD)
    sizes = dict(query(path, "SELECT E.stack_id, CAST(A.value AS INTEGER) FROM rocpd_arg A "
                             "JOIN rocpd_event E ON E.id = A.event_id AND E.guid = A.guid "
                             "WHERE A.name = 'sizeBytes'"))
    fills = query(path, "SELECT stack_id FROM kernels WHERE name LIKE '%fillBuffer%'")
    assert len(fills) == 151 and all(stack in sizes for stack, in fills)
    want = sum(sizes[stack] for stack, in fills)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    kernels = ev.filter(pc.equal(ev["category"], "gpu.kernel"))
    fill = pc.match_substring(kernels["name"].cast("string"), "fillBuffer")
    assert pc.sum(kernels.filter(fill)["bytes"]).as_py() == want == 151 * 16_777_216
    assert kernels.filter(pc.invert(fill))["bytes"].null_count == 150


def test_copy_calls_without_copy_records_are_said_to_be_unrecorded():
    """hgliu's rocpd database: three hipMemcpy calls, and its memory-copy table is empty
    (recorded without --memory-copy-trace), by SQL: the verdict says the copies were not
    recorded instead of leaving their time as start-up or idle."""
    path = shared_path("bonus", "rocpd-sqlite", "hgliu_15_results.db")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        copies = db.execute("SELECT COUNT(*) FROM memory_copies").fetchone()[0]
        calls = db.execute("SELECT COUNT(*), SUM(end - start) FROM regions "
                           "WHERE name LIKE 'hipMemcpy%'").fetchone()
    assert copies == 0 and calls[0] == 3
    [report] = tracekit.analyze(tracekit.read(path), "bottleneck")
    [finding] = [f for f in report.findings if f.title.startswith("copies not recorded")]
    assert finding.severity == "warning"
    assert finding.evidence == {"copy_calls": 3, "copy_call_ns": calls[1]}
    assert finding.suggestion.startswith("record the copies too (rocprofv3 --memory-copy-trace")
