"""MPI calls traced by ``nsys profile --trace=mpi`` (the MPI_* tables of nsys 2023+), on copies
of a real export with the tables added as NVIDIA's SQLite schema reference defines them: host.op
slices on the calling thread, and MPI_RANKS as each process's rank."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import shared_path
from test_nsys import category_counts, sql
from tracekit.ranks import DISTRIBUTED, INPUT_ORDER, input_ranks

SAXPY = "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite"
GTID = 302119224788637  # the thread of the export's CUDA calls
PID = TID = 1230493
MPI_TABLES = ("MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_START_WAIT_EVENTS",
              "MPI_OTHER_EVENTS", "MPI_RANKS")

# As NVIDIA's SQLite schema reference (Nsight Systems user guide) writes them.
SCHEMA = [
    "CREATE TABLE MPI_RANKS (globalTid INTEGER NOT NULL, rank INTEGER NOT NULL)",
    "CREATE TABLE MPI_P2P_EVENTS (start INTEGER NOT NULL, end INTEGER, globalTid INTEGER, "
    "textId INTEGER, commHandle INTEGER, tag INTEGER, remoteRank INTEGER, size INTEGER, "
    "requestHandle INTEGER)",
    "CREATE TABLE MPI_COLLECTIVES_EVENTS (start INTEGER NOT NULL, end INTEGER, "
    "globalTid INTEGER, textId INTEGER, commHandle INTEGER, rootRank INTEGER, size INTEGER, "
    "recvSize INTEGER, requestHandle INTEGER)",
    "CREATE TABLE MPI_START_WAIT_EVENTS (start INTEGER NOT NULL, end INTEGER, "
    "globalTid INTEGER, textId INTEGER, requestHandle INTEGER)",
    "CREATE TABLE MPI_OTHER_EVENTS (start INTEGER NOT NULL, end INTEGER, globalTid INTEGER, "
    "textId INTEGER)",
]
NAMES = {9101: "MPI_Isend", 9102: "MPI_Irecv", 9103: "MPI_Allreduce", 9104: "MPI_Bcast",
         9105: "MPI_Wait", 9106: "MPI_Barrier"}
# One call of each kind in the GPU's idle gap 1233.54-1411.86 ms (after the second DtoH copy);
# the MPI_Irecv has no end (a call nsys did not see return).
ROWS = [
    f"INSERT INTO MPI_P2P_EVENTS VALUES (1234000000, 1234100000, {GTID}, 9101, 1140850688, 7, "
    f"1, 4096, 94000), (1234150000, NULL, {GTID}, 9102, 1140850688, 8, 1, 512, 94001)",
    f"INSERT INTO MPI_START_WAIT_EVENTS VALUES (1234200000, 1300000000, {GTID}, 9105, 94000)",
    f"INSERT INTO MPI_COLLECTIVES_EVENTS VALUES (1321000000, 1388000000, {GTID}, 9103, "
    f"1140850688, NULL, 8192, 16384, NULL), (1389000000, 1389500000, {GTID}, 9104, "
    f"1140850688, 0, 64, 64, NULL)",
    f"INSERT INTO MPI_OTHER_EVENTS VALUES (2090000000, 2091000000, {GTID}, 9106)",
]


def with_mpi(tmp_path, name: str = "report.sqlite", rank: int | None = 3, rows=ROWS,
             extra=()):
    """A copy of the 2022.2 MPI + CUDA export with the MPI tables and ``rows`` added."""
    path = tmp_path / name
    shutil.copyfile(shared_path("nsys-sqlite", SAXPY), path)
    path.chmod(0o644)
    con = sqlite3.connect(path)
    try:
        for statement in SCHEMA:
            con.execute(statement)
        con.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)", NAMES.items())
        if rank is not None:
            con.execute("INSERT INTO MPI_RANKS VALUES (?, ?)", (GTID, rank))
        for statement in (*rows, *extra):
            con.execute(statement)
        con.commit()
    finally:
        con.close()
    return path


def log(trace) -> dict[tuple[str, str], int]:
    return {(kind, outcome): n for (_, kind, outcome), n in trace.log.outcomes.items()}


def test_mpi_calls_are_host_ops_on_their_thread(tmp_path, registry):
    real = shared_path("nsys-sqlite", SAXPY)
    assert not set(MPI_TABLES) & {r[0] for r in sql(real, "SELECT name FROM sqlite_master")}
    assert sql(real, f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = "
                     f"{GTID}") == [(95,)]
    trace = tracekit.read(with_mpi(tmp_path), registry=registry)
    ops = trace.events.filter(pc.equal(trace.events["category"].cast(pa.string()), "host.op"))
    rows = sorted((r["ts_ns"], r["dur_ns"], r["name"], r["kind"], r["pid"], r["tid"],
                   r["bytes"], r["args"]) for r in ops.to_pylist())
    comm = '"commHandle":1140850688'
    assert rows == [
        (1234000000, 100000, "MPI_Isend", "slice", PID, TID, 4096,
         '{' + comm + ',"tag":7,"remoteRank":1,"requestHandle":94000}'),
        (1234200000, 65800000, "MPI_Wait", "slice", PID, TID, None, '{"requestHandle":94000}'),
        (1321000000, 67000000, "MPI_Allreduce", "slice", PID, TID, 8192,
         '{' + comm + ',"recvSize":16384}'),
        (1389000000, 500000, "MPI_Bcast", "slice", PID, TID, 64,
         '{' + comm + ',"rootRank":0,"recvSize":64}'),
        (2090000000, 1000000, "MPI_Barrier", "slice", PID, TID, None, None)]
    got = log(trace)
    assert {k: v for k, v in got.items() if k[0].startswith("MPI_")} == {
        ("MPI_P2P_EVENTS", "events"): 1,
        ("MPI_P2P_EVENTS", "skipped: call without an end"): 1,
        ("MPI_START_WAIT_EVENTS", "events"): 1,
        ("MPI_COLLECTIVES_EVENTS", "events"): 2,
        ("MPI_OTHER_EVENTS", "events"): 1,
        ("MPI_RANKS", "ranks of the processes (threads' rows)"): 1}
    before = tracekit.read(real, registry=registry)
    assert category_counts(trace) - category_counts(before) == Counter({"host.op": 5})
    assert category_counts(before) - category_counts(trace) == Counter()
    assert trace.processes.filter(pc.equal(trace.processes["pid"], PID))["rank"].to_pylist() \
        == [3]
    assert before.processes["rank"].null_count == before.processes.num_rows
    tracekit.write(trace, tmp_path / "o.pftrace", registry=registry)


@pytest.mark.slow
def test_mpi_ranks_number_the_inputs_of_a_run(tmp_path, registry):
    # nsys's usual per-rank output names (report.%q{OMPI_COMM_WORLD_RANK}) say no "rank N":
    # without MPI_RANKS they are numbered by input order.
    two = with_mpi(tmp_path, "report.2.sqlite", rank=2)
    ten = with_mpi(tmp_path, "report.10.sqlite", rank=10)
    run = tracekit.read([two, ten], registry=registry)
    assert [(r.rank, r.rule) for r in input_ranks(run)] == [(2, DISTRIBUTED), (10, DISTRIBUTED)]
    done = subprocess.run([sys.executable, "-m", "tracekit", "analyze", "-a", "ranks",
                           str(two), str(ten)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ranks = [line.split()[:2] for line in done.stdout.splitlines()
             if line.split()[1:2] in (["report.2.sqlite"], ["report.10.sqlite"])]
    assert ranks == [["2", "report.2.sqlite"], ["10", "report.10.sqlite"]]
    (tmp_path / "unranked").mkdir()
    unranked = [with_mpi(tmp_path / "unranked", f"report.{n}.sqlite", rank=None)
                for n in (2, 10)]
    assert [(r.rank, r.rule) for r in input_ranks(tracekit.read(unranked, registry=registry))] \
        == [(0, INPUT_ORDER), (1, INPUT_ORDER)]


def test_mpi_ranks_rows_that_give_no_single_rank_are_counted(tmp_path, registry):
    other = GTID + 1  # another thread of the same process
    path = with_mpi(tmp_path, rank=3, extra=[
        f"INSERT INTO MPI_RANKS VALUES ({other}, 4)",
        "INSERT INTO MPI_RANKS VALUES (77, -1)"])
    trace = tracekit.read(path, registry=registry)
    assert trace.processes.filter(pc.equal(trace.processes["pid"], PID))["rank"].to_pylist() \
        == [None]
    got = log(trace)
    assert got[("MPI_RANKS", "warning: row left out: globalTid or rank not an integer >= 0, "
                "or the process given two ranks")] == 3
    assert ("MPI_RANKS", "ranks of the processes (threads' rows)") not in got


def test_mpi_table_without_a_needed_column_is_skipped(tmp_path, registry):
    path = with_mpi(tmp_path, extra=["ALTER TABLE MPI_COLLECTIVES_EVENTS DROP COLUMN textId",
                                     "ALTER TABLE MPI_RANKS DROP COLUMN rank"])
    trace = tracekit.read(path, registry=registry)
    got = log(trace)
    assert got[("MPI_COLLECTIVES_EVENTS", "skipped: column textId is missing")] == 2
    assert got[("MPI_RANKS", "skipped: column rank is missing")] == 1
    assert got[("MPI_P2P_EVENTS", "events")] == 1
    assert category_counts(trace)["host.op"] == 3


def test_an_export_with_empty_mpi_tables_reads_as_one_without(tmp_path, registry):
    real = shared_path("nsys-sqlite", SAXPY)
    path = with_mpi(tmp_path, rank=None, rows=())
    trace, before = (tracekit.read(p, registry=registry) for p in (path, real))
    drop = ["source"]
    assert trace.events.drop_columns(drop).equals(before.events.drop_columns(drop))
    assert trace.processes.drop_columns(drop).equals(before.processes.drop_columns(drop))
    assert log(trace) == log(before)


@pytest.mark.parametrize("name", ["testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite", SAXPY])
def test_exports_without_mpi_tables_say_nothing_of_them(name, registry):
    trace = tracekit.read(shared_path("nsys-sqlite", name), registry=registry)
    assert not [k for k in log(trace) if k[0].startswith("MPI_")]
    assert "host.op" not in category_counts(trace)


def test_the_diagnosis_sees_the_mpi_calls_in_a_gpu_gap(tmp_path, registry):
    from tracekit.plugins.diagnosis.gaps import all_gaps, host_context
    from tracekit.plugins.diagnosis.program import classify

    # This 2022.2 export holds its MPI calls as NVTX ranges (domain "MPI": MPI_Send,
    # MPI_Recv ...); without them, only the MPI tables show MPI.
    no_nvtx = "DELETE FROM NVTX_EVENTS"
    (tmp_path / "without").mkdir()
    without = with_mpi(tmp_path / "without", rank=None, rows=(), extra=[no_nvtx])
    assert not classify(tracekit.read(without, registry=registry)).mpi
    trace = tracekit.read(with_mpi(tmp_path, extra=[no_nvtx]), registry=registry)
    program = classify(trace)
    assert program.mpi and program.evidence["mpi"] in NAMES.values()
    [gaps] = all_gaps(trace, 50.0)
    # The 178 ms gap after the second DtoH copy holds MPI_Wait (65.8 ms) and MPI_Allreduce
    # (67 ms): its host context names the larger of them.
    [index] = [i for i in range(len(gaps.lo)) if gaps.lo[i] < 1321000000 < gaps.hi[i]]
    assert (int(gaps.lo[index]), int(gaps.hi[index])) == (1233536281, 1411862588)
    assert host_context(trace, gaps, index).startswith(
        "MPI_Allreduce (38% of the gap, in a 67ms call)")


def test_untraced_host_time_names_the_ranges_around_its_longest_stretch(registry):
    """saxpy's largest gap (196 ms between two copies) is 70 % in no recorded range; the
    longest stretch of it runs from the end of MPI_Recv to the start of MPI_Send (NVTX
    ranges of the export, by SQL), where the host computes between the two calls."""
    from tracekit.plugins.diagnosis.gaps import all_gaps, host_context
    from tracekit.toolkit import format_ns

    path = shared_path("nsys-sqlite", "pipit_saxpy-mpi-cuda_nsys2022.2.1_a100.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        copies = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                            "WHERE start BETWEEN 900000000 AND 1200000000 ORDER BY start")
        (_, _), (_, gap_lo), (gap_hi, _), _ = copies.fetchall()
        ranges = db.execute("SELECT n.start, n.end, s.value FROM NVTX_EVENTS n JOIN StringIds "
                            "s ON s.id = n.textId WHERE n.start BETWEEN ? AND ? ORDER BY "
                            "n.start", (gap_lo, gap_hi)).fetchall()
    (_, recv_end, recv), (send_start, _, send), _ = ranges
    assert (recv, send) == ("MPI_Recv", "MPI_Send")
    trace = tracekit.read(path, registry=registry)
    [gaps] = all_gaps(trace, 50.0)
    [index] = [i for i in range(len(gaps.lo)) if gaps.lo[i] == gap_lo]
    assert int(gaps.hi[index]) == gap_hi
    assert host_context(trace, gaps, index) == (
        "untraced host time (70% of the gap in no recorded op; the longest stretch "
        f"{format_ns(send_start - recv_end)}, after MPI_Recv, before MPI_Send)")
    assert format_ns(send_start - recv_end) == "68.8ms"
