"""The nsys stats CSV reader (nvtx_pushpop_trace) against Python's csv module, the CPU report
of its ranges, and its one-line errors on damaged reports."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections import Counter
from pathlib import Path

import pytest
import tracekit
from helpers import read_through_fifo, shared_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from perfetto_check import decode_and_check
from tracekit.cli import main
from tracekit.errors import TraceReadError
from tracekit.inputs import Source
from tracekit.plugins.nsys_stats import NsysStatsReader

FIXTURE = ("bonus", "nsys-stats-csv", "pipit_nbody_nvtxpptrace.csv")
HEADER = ("Start (ns),End (ns),Duration (ns),DurChild (ns),DurNonChild (ns),Name,PID,TID,Lvl,"
          "NumChild,RangeId,ParentId,RangeStack,NameTree")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _args(trace: tracekit.Trace) -> list[dict]:
    return [json.loads(a) for a in trace.events["args"].to_pylist()]


def _depths(rows: list[dict[str, str]]) -> tuple[list[int], list[str]]:
    """Per range, how many ranges of its thread enclose it, and the RangeId of the tightest
    one (the times alone, compared pairwise)."""
    spans = [(int(r["Start (ns)"]), int(r["End (ns)"]), r["PID"], r["TID"], r["RangeId"])
             for r in rows]
    depths, parents = [], []
    for i, (s, e, pid, tid, _) in enumerate(spans):
        around = [(e2 - s2, rid) for j, (s2, e2, p2, t2, rid) in enumerate(spans)
                  if j != i and (p2, t2) == (pid, tid) and s2 <= s and e <= e2]
        depths.append(len(around))
        parents.append(min(around)[1] if around else "")
    return depths, parents


# --- the real report ------------------------------------------------------------------------

def test_every_range_against_the_csv(registry):
    path = shared_path(*FIXTURE)
    rows = _rows(path)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    assert trace.metadata["sources"][path.name]["reader"] == "nsys-stats"
    assert ev.num_rows == len(rows) == 131
    assert set(ev["kind"].to_pylist()) == {"slice"}
    assert set(ev["category"].to_pylist()) == {"host.annotation"}
    assert ev["name"].to_pylist() == [r["Name"] for r in rows]
    assert ev["ts_ns"].to_pylist() == [int(r["Start (ns)"]) for r in rows]
    assert ev["dur_ns"].to_pylist() == [int(r["Duration (ns)"]) for r in rows]
    assert ev["ts_ns"][0].as_py() == 982845927 and ev["ts_ns"][130].as_py() == 1987254747
    assert {(p, t) for p, t in zip(ev["pid"].to_pylist(), ev["tid"].to_pylist(),
                                   strict=True)} == {(3086332, 3086332)}
    assert trace.threads.select(["pid", "tid"]).to_pylist() == [{"pid": 3086332,
                                                                 "tid": 3086332}]
    args = _args(trace)
    assert [a["RangeId"] for a in args] == [int(r["RangeId"]) for r in rows]
    assert [a.get("ParentId") for a in args] == [int(r["ParentId"]) if r["ParentId"] else None
                                                 for r in rows]
    assert [a["RangeStack"] for a in args] == [r["RangeStack"] for r in rows]
    assert [a["DurNonChild"] for a in args] == [int(r["DurNonChild (ns)"]) for r in rows]
    assert not any("NameTree" in a or "domain" in a for a in args)  # NameTree is derived
    assert Counter(ev["name"].to_pylist()) == Counter(
        {"cudaDeviceSynchronize": 40, "bodyForce": 20, "cudaGetLastError": 20,
         "integratePositions": 20, "computeNBody11": 10, "computeNBody15": 10,
         "cudaMemPrefechAsync": 4, "cudaMallocManaged": 2, "read_values_from_file": 2,
         "write_values_to_file": 2, "main": 1})
    assert trace.log.notices() == {}
    assert trace.log.outcomes[(path.name, "ranges", "events")] == 131


def test_nesting_from_the_times_is_the_reports_stack(registry):
    """The event model keeps nesting in the times: the ranges of a thread that enclose each
    one are as many as its Lvl, and the tightest is its ParentId."""
    path = shared_path(*FIXTURE)
    rows = _rows(path)
    trace = tracekit.read(path, registry=registry)
    ev = trace.events
    spans = [{"Start (ns)": s, "End (ns)": s + d, "PID": str(p), "TID": str(t),
              "RangeId": str(a["RangeId"])}
             for s, d, p, t, a in zip(ev["ts_ns"].to_pylist(), ev["dur_ns"].to_pylist(),
                                      ev["pid"].to_pylist(), ev["tid"].to_pylist(),
                                      _args(trace), strict=True)]
    depths, parents = _depths(spans)
    assert depths == [int(r["Lvl"]) for r in rows]
    assert parents == [r["ParentId"] for r in rows]
    assert Counter(depths) == {0: 1, 1: 30, 2: 100}


def test_cpu_report_ranks_ranges_by_self_time_equal_to_durnonchild(registry):
    path = shared_path(*FIXTURE)
    rows = _rows(path)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "cpu",
                                options=["top=0"], registry=registry)
    finding, gpu_calls = report.findings
    assert finding.evidence["verdict"] == "none"
    assert finding.evidence["ranges"] == 131 and finding.evidence["threads"] == 1
    assert finding.evidence["top_range"] == "main"
    self_ns, total, calls = Counter(), Counter(), Counter()
    for r in rows:
        self_ns[r["Name"]] += int(r["DurNonChild (ns)"])
        total[r["Name"]] += int(r["Duration (ns)"])
        calls[r["Name"]] += 1
    table = {r["range"]: r for r in report.tables["ranges"].to_pylist()}
    assert set(table) == set(self_ns)
    for name, row in table.items():
        assert (row["self"], row["total"], row["calls"]) == (
            self_ns[name], total[name], calls[name]), name
    # The self times of all ranges are the time under the root range, each ns counted once.
    assert finding.evidence["range_self_ns"] == sum(self_ns.values()) == 1005098329
    assert [r["range"] for r in report.tables["ranges"].to_pylist()[:3]] == [
        "main", "cudaMallocManaged", "cudaDeviceSynchronize"]
    # Ranges named after CUDA calls: the host blocked in cudaDeviceSynchronize, and the first
    # cudaMallocManaged (205 ms) created the context.
    first_alloc = min((r for r in rows if r["Name"] == "cudaMallocManaged"),
                      key=lambda r: int(r["Start (ns)"]))
    assert gpu_calls.evidence == {
        "sync_ns": self_ns["cudaDeviceSynchronize"],
        "sync_pct": round(100 * self_ns["cudaDeviceSynchronize"] / 1005098329, 1),
        "startup_alloc_ns": int(first_alloc["DurNonChild (ns)"])}
    assert gpu_calls.evidence["startup_alloc_ns"] == 204836296
    assert "nsys profile --trace=cuda,nvtx" in gpu_calls.suggestion


def test_analyze_gives_no_verdict_and_the_ranges(tmp_path):
    path = shared_path(*FIXTURE)
    out = tmp_path / "report.json"
    assert main(["analyze", str(path), "--format", "json", "-o", str(out), "-q"]) == 0
    reports = {r["analyzer"]: r for r in json.loads(out.read_text())["reports"]}
    assert list(reports) == ["bottleneck", "cpu"]
    assert [f["evidence"]["verdict"] for f in reports["bottleneck"]["findings"]] == ["none"]
    ranges = reports["cpu"]["tables"]["ranges"]
    assert ranges["rows"][0][1:4] == [607267096, 1005098329, 1]


def test_perfetto_output_nests_the_ranges_on_their_thread(registry, tmp_path):
    path = shared_path(*FIXTURE)
    rows = _rows(path)
    out = tmp_path / "ranges.pftrace"
    tracekit.write(tracekit.read(path, registry=registry), out, format="perfetto",
                   registry=registry)
    decoded = decode_and_check(out)
    assert decoded.violations == []
    assert sorted((s.start, s.end, s.name) for s in decoded.slices) == sorted(
        (int(r["Start (ns)"]), int(r["End (ns)"]), r["Name"]) for r in rows)
    assert len({s.track for s in decoded.slices}) == 1


def test_summary_counts_ranges_like_nsys_nvtx_sum(registry):
    path = shared_path(*FIXTURE)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "summary",
                                registry=registry)
    [table] = [t for t in report.tables.values() if "cudaGetLastError" in
               t.column("name").to_pylist()]
    rows = {r["name"]: r for r in table.to_pylist()}
    assert rows["cudaDeviceSynchronize"]["count"] == 40
    assert rows["computeNBody15"]["total"] == sum(
        int(r["Duration (ns)"]) for r in _rows(path) if r["Name"] == "computeNBody15")


# --- the shapes nsys writes -----------------------------------------------------------------

def test_stdout_capture_gzip_and_a_stream_read_alike(registry, tmp_path):
    path = shared_path(*FIXTURE)
    data = path.read_bytes()
    direct = tracekit.read(path, registry=registry).events.drop_columns(["source"])
    captured = tmp_path / "stats.txt"
    captured.write_bytes(b"Generating SQLite file r.sqlite from r.nsys-rep\n"
                         b"Processing [r.sqlite] with [/opt/reports/nvtx_pushpop_trace.py]... \n"
                         b"\n ** NVTX Push/Pop Range Trace (nvtx_pushpop_trace):\n\n" + data)
    assert NsysStatsReader.sniff(Source(captured)) == 0.95
    trace = tracekit.read(captured, registry=registry)
    assert trace.events.drop_columns(["source"]).equals(direct)
    assert trace.log.notices() == {
        (captured.name, "nsys output before the header", "skipped: not report data"): 5}
    packed = tmp_path / "r.csv.gz"
    packed.write_bytes(gzip.compress(data))
    assert tracekit.read(packed, registry=registry).events.drop_columns(
        ["source"]).equals(direct)
    piped = read_through_fifo(data, tmp_path, registry)
    assert piped.events.drop_columns(["source"]).equals(direct)


def test_newer_nsys_domain_prefixed_names(registry, tmp_path):
    """nsys 2025 and later write ``domain:name`` (``:name`` in the default domain)."""
    path = tmp_path / "new.csv"
    path.write_text(HEADER + "\n"
                    "100,900,800,300,500,:step,7,8,0,1,1,,:1,:step\n"
                    "200,500,300,0,300,Torch:fwd:x,7,8,1,0,2,1,:1:2,--Torch:fwd:x\n")
    trace = tracekit.read(path, registry=registry)
    assert trace.events["name"].to_pylist() == ["step", "fwd:x"]
    assert [a["domain"] for a in _args(trace)] == ["", "Torch"]
    assert trace.metadata["sources"]["new.csv"]["names"].startswith("domain-qualified")
    old = tmp_path / "old.csv"  # older nsys: names as they are, colons and all
    old.write_text(HEADER + "\n100,900,800,0,800,a:b,7,8,0,0,1,,:1,a:b\n")
    assert tracekit.read(old, registry=registry).events["name"].to_pylist() == ["a:b"]


def test_quoted_names_and_a_name_tree_that_is_not_derived(registry, tmp_path):
    path = tmp_path / "q.csv"
    path.write_bytes((HEADER + "\r\n"
                      '10,20,10,0,10,"a, b",1,1,0,0,1,,:1,"a, b"\r\n'
                      '30,40,10,0,10,"two\nlines",1,1,0,0,2,,:2,"two\nlines"\r\n'
                      '50,60,10,0,10,"say ""hi"" \\ o",1,1,0,0,3,,:3,other\r\n').encode())
    trace = tracekit.read(path, registry=registry)
    assert trace.events["name"].to_pylist() == ["a, b", "two\nlines", 'say "hi" \\ o']
    assert [a.get("NameTree") for a in _args(trace)] == [None, None, "other"]


def test_header_alone_and_no_final_line_break(registry, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text(HEADER + "\n")
    trace = tracekit.read(empty, registry=registry)
    assert trace.events.num_rows == 0 and trace.log.notices() == {}
    cut = tmp_path / "cut.csv"
    cut.write_text(HEADER + "\n1,3,2,0,2,a,1,1,0,0,1,,:1,a")
    trace = tracekit.read(cut, registry=registry)
    assert trace.events["dur_ns"].to_pylist() == [2]
    assert list(trace.log.notices().values()) == [1]


def test_whole_reals_are_integers_and_an_end_off_its_duration_is_counted(registry, tmp_path):
    path = tmp_path / "real.csv"
    path.write_text(HEADER + "\n10,20,10.0,0,10.00,a,1,1,0,0,1,,:1,a\n"
                    "30,45,10,0,10,b,1,1,0,0,2,,:2,b\n")
    trace = tracekit.read(path, registry=registry)
    assert trace.events["dur_ns"].to_pylist() == [10, 10]
    assert _args(trace)[0]["DurNonChild"] == 10
    assert trace.log.notices() == {(path.name, "ranges", "warning: End is not Start + Duration "
                                    "(dur_ns is Duration)"): 1}


def test_invalid_utf8_is_replaced_and_counted(registry, tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(HEADER.encode() + b"\n1,3,2,0,2,caf\xe9,1,1,0,0,1,,:1,caf\xe9\n")
    trace = tracekit.read(path, registry=registry)
    assert trace.events["name"].to_pylist() == ["caf\ufffd"]
    assert trace.log.notices() == {(path.name, "report lines",
                                    "warning: not valid UTF-8 (bad bytes read as U+FFFD)"): 1}


def test_sniffing_by_the_exact_header(tmp_path):
    def weight(text: str) -> float:
        path = tmp_path / "s.csv"
        path.write_text(text)
        return NsysStatsReader.sniff(Source(path))

    assert weight(HEADER + "\n") == 1.0
    assert weight("\ufeff" + HEADER + "\n") == 1.0
    assert weight(HEADER.replace("(ns)", "(us)") + "\n") == 0.0
    assert weight(HEADER.replace(",NameTree", "") + "\n") == 0.0
    assert weight("Start (ns),Duration (ns),Name,Result,CorrID,Pid,Tid,T-Pri,Thread Name\n"
                  ) == 0.0  # cuda_api_trace: not read (docs/formats/nsys-stats.md)
    assert weight("x\n" * 20 + HEADER + "\n") == 0.0  # too far down for a preamble


# --- bad input ------------------------------------------------------------------------------

GOOD = "10,20,10,0,10,a,1,1,0,0,1,,:1,a\n"
BAD = [
    ("wrong-header.csv", "a,b,c\n1,2,3\n",
     "line 1: not an nsys stats nvtx_pushpop_trace CSV"),
    ("microseconds.csv", HEADER.replace("(ns)", "(us)") + "\n" + GOOD,
     "line 1: header column 1 is 'Start (us)' where an nsys stats nvtx_pushpop_trace has "
     "'Start (ns)'"),
    ("truncated.csv", HEADER + "\n" + GOOD + "30,40,10,0,10,b,1,1\n",
     "line 3: 8 fields where the header has 14"),
    ("text-time.csv", HEADER + "\n" + GOOD + "3O,40,10,0,10,b,1,1,0,0,2,,:2,b\n",
     "line 3: Start (ns) is not an integer: '3O'"),
    ("fraction.csv", HEADER + "\n" + GOOD.replace("10,20,10", "10,20,10.5"),
     "line 2: Duration (ns) is not an integer: '10.5'"),
    ("negative.csv", HEADER + "\n" + GOOD.replace("10,20,10", "10,20,-10"),
     "line 2: Duration (ns) is negative: '-10'"),
    ("huge.csv", HEADER + "\n" + GOOD.replace("10,20", "10,99999999999999999999"),
     "line 2: End (ns) is out of the 64-bit integer range"),
    ("parent.csv", HEADER + "\n" + GOOD.replace(",,:1", ",x,:1"),
     "line 2: ParentId is not an integer: 'x'"),
    ("two-reports.csv", HEADER + "\n" + GOOD + "\nProcessing [r.sqlite] with [x.py]...\n"
     "Start (ns),Duration (ns),Name\n1,2,x\n", "line 4: 1 fields where the header has 14"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_damaged_reports_give_one_line_naming_file_and_line(tmp_path, registry, name, text,
                                                            message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceReadError) as info:
        tracekit.read(path, format="nsys-stats", registry=registry)
    assert str(info.value).startswith(f"{path}: {message}")
    assert "\n" not in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_damaged_reports_in_the_harness(tmp_path, name, text, message):
    """The bad-input harness: refused cleanly (no catch-all, no traceback), detected or
    forced, the input untouched and nothing left beside it."""
    from badinput import check

    path = tmp_path / name
    path.write_text(text)
    for fmt in ("nsys-stats", None):
        if fmt is None and name in ("wrong-header.csv", "microseconds.csv"):
            continue  # not sniffed as this format: detection refuses it (tested elsewhere)
        _, found = check(path, fmt, expect="error", mentions=[message.split(": ")[0]])
        assert not found, found


def test_the_command_line_exits_1_with_one_line(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + "\n" + GOOD + "3O,40,10,0,10,b,1,1,0,0,2,,:2,b\n")
    assert main(["convert", str(path), "-o", str(tmp_path / "o.json"), "-q"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {path}: line 3: Start (ns) is not an integer: '3O'"]
    assert not (tmp_path / "o.json").exists()


# --- any names, any times -------------------------------------------------------------------

_NAMES = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=20).filter(
    lambda s: not s.startswith(":"))


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_NAMES, st.integers(0, 2**62), st.integers(0, 2**40)),
                min_size=1, max_size=8))
def test_any_names_and_times_read_back(tmp_path, registry, ranges):
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)  # CRLF: a name with a lone CR or LF is quoted
    writer.writerow(HEADER.split(","))
    for i, (name, start, dur) in enumerate(ranges, 1):
        writer.writerow([start, start + dur, dur, 0, dur, name, 5, 6, 0, 0, i, "", f":{i}",
                         name])
    path = tmp_path / "any.csv"
    path.write_text(buf.getvalue(), newline="")
    trace = tracekit.read(path, registry=registry)
    assert trace.events["name"].to_pylist() == [r[0] for r in ranges]
    assert trace.events["ts_ns"].to_pylist() == [r[1] for r in ranges]
    assert trace.events["dur_ns"].to_pylist() == [r[2] for r in ranges]
    assert [a["RangeId"] for a in _args(trace)] == list(range(1, len(ranges) + 1))
