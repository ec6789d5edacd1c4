"""Files of one process captured at different times (a profiler schedule with ``repeat=2``
and ``tensorboard_trace_handler``) read as that one process, checked against a plain reading
of the JSON; real ranks (other pids, other ranks, overlapping windows) stay ranks."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import tracekit
from helpers import FIXTURES
from tracekit.captures import find_captures, untraced_gaps, untraced_ns
from tracekit.overview import read_notice_lines
from tracekit.toolkit import input_ranks

CYCLES = [FIXTURES / "torch-cpu" / f"sched_cycle{i}.pt.trace.json.gz" for i in (1, 2)]


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)


def _window(doc: dict[str, Any]) -> tuple[int, int]:
    """First start and last end (ns, baseTimeNanoseconds + µs) of the timed events."""
    base = doc["baseTimeNanoseconds"]
    timed = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i")]
    start = min(Decimal(e["ts"]) for e in timed)
    end = max(Decimal(e["ts"]) + Decimal(e.get("dur", 0)) for e in timed)
    return base + int(start * 1000), base + int(end * 1000)


def _program_window(doc: dict[str, Any]) -> tuple[int, int]:
    """The same over the program's ops and ranges (cpu_op, user_annotation), which the CPU
    report measures its span by (not the profiler's own span and markers)."""
    base = doc["baseTimeNanoseconds"]
    timed = [e for e in doc["traceEvents"] if e.get("ph") == "X"
             and e.get("cat") in ("cpu_op", "user_annotation", "python_function")]
    start = min(Decimal(e["ts"]) for e in timed)
    end = max(Decimal(e["ts"]) + Decimal(e.get("dur", 0)) for e in timed)
    return base + int(start * 1000), base + int(end * 1000)


def _real_pids(doc: dict[str, Any]) -> set[int]:
    return {e["pid"] for e in doc["traceEvents"] if isinstance(e.get("pid"), int)}


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    docs = [_doc(p) for p in CYCLES]
    (s1, e1), (s2, e2) = (_window(d) for d in docs)
    (pid,) = _real_pids(docs[0])
    assert _real_pids(docs[1]) == {pid} and docs[0]["host_name"] == docs[1]["host_name"]
    flows = sum(len({e["id"] for e in d["traceEvents"] if e.get("ph") in ("s", "f")})
                for d in docs)
    (p1, _), (_, p2) = (_program_window(d) for d in docs)
    return {"pid": pid, "host": docs[0]["host_name"], "gap": (e1, s2), "span": e2 - s1,
            "program_span": p2 - p1, "flows": flows}


@pytest.mark.parametrize("order", [CYCLES, CYCLES[::-1]])
def test_captures_read_as_one_process(registry, expected, order):
    trace = tracekit.read(order, registry=registry)
    first = CYCLES[0].name
    assert trace.sources == [first]
    real = [r for r in trace.processes.to_pylist() if r["pid"] >= 0]
    assert [(r["source"], r["pid"], r["name"]) for r in real] == [(first, expected["pid"],
                                                                    "python")]
    assert trace.processes.num_rows == 4  # python and the three synthetic tracks, once each
    assert set(trace.events["source"].cast("string").to_pylist()) == {first}
    assert len(input_ranks(trace)) == 1
    gap = expected["gap"]
    assert untraced_gaps(trace) == [gap]
    assert untraced_ns(trace, gap[0] - 5, gap[1] + 5) == gap[1] - gap[0]
    assert read_notice_lines(trace) == [
        f"warning: {first}: 2 captures of process {expected['pid']} (python, host "
        f"{expected['host']}) at different times ({first}, {CYCLES[1].name}): read as one "
        f"process; the time between captures was not traced ({gap[1] - gap[0]:,} ns in 1 gap)"]
    flows = trace.events["flow_id"].drop_null().to_pylist()
    assert len(set(flows)) == expected["flows"]  # the second capture's ids moved past the first's
    captured = trace.metadata["sources"][first]["captures"]
    assert [c["source"] for c in captured] == [p.name for p in CYCLES]


def test_reports_state_the_untraced_time(registry, expected):
    trace = tracekit.read(CYCLES, registry=registry)
    reports = tracekit.analyze(trace, registry=registry)
    gap = expected["gap"][1] - expected["gap"][0]
    note = (f"this trace joins captures of one process at different times: its span, "
            f"{expected['span']:,} ns from the first event to the last, includes {gap:,} ns "
            f"between captures that were not traced (untraced_ns: {gap}; traced: "
            f"{expected['span'] - gap:,} ns); a share of the span counts that time as idle "
            f"unless the report leaves it out (untraced_ns in its evidence)")
    assert [r.analyzer for r in reports] == ["bottleneck", "cpu"]
    assert note in reports[0].notes and note not in reports[1].notes  # said once
    cpu = reports[1].findings[0].evidence  # the CPU report's span leaves the gap out
    assert (cpu["span_ns"], cpu["untraced_ns"]) == (expected["program_span"] - gap, gap)


def test_perfetto_shows_one_process(registry, expected, tmp_path):
    trace = tracekit.read(CYCLES, registry=registry)
    out = tmp_path / "x.pftrace"
    tracekit.write(trace, out, registry=registry)
    back = tracekit.read(out, registry=registry)
    real = [(r["pid"], r["name"]) for r in back.processes.to_pylist() if r["pid"] >= 0]
    assert real == [(expected["pid"], "python")]


def _variant(tmp_path: Path, name: str, doc: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, default=str))
    return path


def test_other_pids_ranks_or_overlap_stay_ranks(registry, tmp_path):
    one, two = (_doc(p) for p in CYCLES)
    other_pid = json.loads(json.dumps(two, default=str))
    for e in other_pid["traceEvents"]:
        if isinstance(e.get("pid"), int):
            e["pid"] += 1
            e["tid"] = e["tid"] + 1 if isinstance(e.get("tid"), int) else e.get("tid")
    overlapping = json.loads(json.dumps(one, default=str))
    for e in overlapping["traceEvents"]:
        if "ts" in e:
            e["ts"] = str(Decimal(e["ts"]) + 1)  # 1 µs later: the windows overlap
    ranked = [json.loads(json.dumps(d, default=str)) for d in (one, two)]
    for rank, d in enumerate(ranked):
        d["distributedInfo"] = {"rank": rank, "world_size": 2}
    cases = [(one, other_pid), (one, overlapping), tuple(ranked)]
    for i, (a, b) in enumerate(cases):
        paths = [_variant(tmp_path, f"c{i}_a.json", a), _variant(tmp_path, f"c{i}_b.json", b)]
        trace = tracekit.read(paths, registry=registry)
        assert not find_captures(trace) and not untraced_gaps(trace), i
        assert len(trace.sources) == 2 and len(input_ranks(trace)) == 2, i
        assert not any("captures" in line for line in read_notice_lines(trace)), i
