"""GPU idle time while the host waits in an exchange between ranks (MPI's blocking calls,
collective ranges) is communication, not host work: the gap cause ``communication`` and the
verdict's fixes. Cases: copies of the real MPI + CUDA nsys export with MPI calls added where
its GPU sits idle (the MPI tables as NVIDIA's schema reference defines them)."""

from __future__ import annotations

import sqlite3

import tracekit
from helpers import shared_path
from test_nsys_mpi import GTID, SAXPY, with_mpi

WAIT, ALLREDUCE = 9105, 9103  # StringIds of MPI_Wait, MPI_Allreduce (test_nsys_mpi.NAMES)


def _gpu_gaps(min_ns: int) -> list[tuple[int, int]]:
    """Independently, by SQL: the holes of at least ``min_ns`` in the union of the export's
    kernels, copies and memsets."""
    con = sqlite3.connect(f"file:{shared_path('nsys-sqlite', SAXPY)}?mode=ro", uri=True)
    spans = sorted(con.execute(
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
        "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall())
    con.close()
    gaps, end = [], spans[0][1]
    for lo, hi in spans[1:]:
        if lo - end >= min_ns:
            gaps.append((end, lo))
        end = max(end, hi)
    return gaps


def _waiting(tmp_path, share: float) -> tuple[tracekit.Trace, list[tuple[int, int]]]:
    """The export with an MPI_Wait then an MPI_Allreduce covering ``share`` of each GPU gap of
    10 ms or more, on the thread that launches the GPU work."""
    gaps = _gpu_gaps(10_000_000)
    rows = []
    for lo, hi in gaps:
        end = lo + int((hi - lo) * share)
        mid = lo + (end - lo) // 2
        rows.append(f"INSERT INTO MPI_START_WAIT_EVENTS VALUES ({lo}, {mid}, {GTID}, {WAIT}, 1)")
        rows.append(f"INSERT INTO MPI_COLLECTIVES_EVENTS VALUES ({mid}, {end}, {GTID}, "
                    f"{ALLREDUCE}, 1140850688, NULL, 8, 8, NULL)")
    return tracekit.read(with_mpi(tmp_path, rows=rows)), gaps


def test_gpu_idle_in_mpi_waits_is_communication(tmp_path):
    trace, gaps = _waiting(tmp_path, 0.96)
    assert len(gaps) == 4
    [gap_report, bottleneck] = tracekit.analyze(trace, ["gaps", "bottleneck"])
    causes = {r["cause"]: (r["count"], r["total"])
              for r in gap_report.tables["causes"].to_pylist()}
    assert causes["communication"] == (4, sum(hi - lo for lo, hi in gaps))
    assert "cpu" not in causes
    verdict = bottleneck.findings[0]
    assert verdict.evidence["verdict"] == "communication"
    assert verdict.suggestion.startswith(
        "overlap the exchange with GPU work: post non-blocking MPI_Isend/MPI_Irecv")
    assert "MPI_Allreduce, MPI_Wait" in verdict.suggestion or \
        "MPI_Wait, MPI_Allreduce" in verdict.suggestion
    assert "check for load imbalance" in verdict.suggestion


def test_the_real_export_keeps_host_work_where_mpi_covers_under_half_a_gap():
    """The export's own MPI calls (NVTX ranges of its MPI wrapper) cover 21-30 % of each large
    GPU gap: under half, so the gaps stay host work (cpu), as before this rule."""
    con = sqlite3.connect(f"file:{shared_path('nsys-sqlite', SAXPY)}?mode=ro", uri=True)
    ranges = con.execute(
        "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE e.end IS NOT NULL AND coalesce(e.text, s.value) IN ('MPI_Send', 'MPI_Recv')"
    ).fetchall()
    con.close()
    gaps = _gpu_gaps(10_000_000)
    shares = [sum(max(0, min(b, hi) - max(a, lo)) for a, b in ranges) / (hi - lo)
              for lo, hi in gaps]
    assert len(gaps) == 4 and all(0.2 < x < 0.5 for x in shares)
    [gap_report] = tracekit.analyze(tracekit.read(shared_path("nsys-sqlite", SAXPY)), ["gaps"])
    causes = {r["cause"]: r["count"] for r in gap_report.tables["causes"].to_pylist()}
    assert causes.get("communication") is None and causes["cpu"] == 4
