"""VTune report shapes that no real fixture has, from hand-written reports of documented shape
(fixtures/vtune/README.md): GPU computing-task reports, top-down trees with an inclusive column
only, and delimiters other than comma, tab and semicolon. Every expected number is computed
here from the CSV itself."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pytest
import tracekit
from helpers import FIXTURES, event_rows
from tracekit.cli import main
from tracekit.errors import ReaderCrashError, TraceReadError
from tracekit.inputs import Source

VT = FIXTURES / "vtune"


def _rows(name: str, delimiter: str = ",") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((VT / name).read_text()), delimiter=delimiter))


def _error(path, registry) -> TraceReadError:
    with pytest.raises(TraceReadError) as info:
        tracekit.read(path, registry=registry)
    assert not isinstance(info.value, ReaderCrashError), info.value
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    return info.value


# --- GPU computing tasks (formats.md 3.2) ----------------------------------------------------

@pytest.mark.parametrize("name,delimiter", [("gpu_tasks.csv", ","), ("gpu_tasks_tab.csv", "\t")])
def test_gpu_tasks_are_gpu_time_per_task_not_cpu_samples(registry, name, delimiter):
    rows = _rows(name, delimiter)
    tasks = [r for r in rows if not r["Computing Task"].startswith("[")]
    pseudo = [r for r in rows if r["Computing Task"].startswith("[")]
    trace = tracekit.read(VT / name, registry=registry)
    assert trace.metadata["sources"][name]["reader"] == "vtune"  # detected, not forced
    got = event_rows(trace)
    assert len(got) == len(rows) == 5 - 1
    assert [e["name"] for e in got] == [r["Computing Task"] for r in rows]
    assert all(e["kind"] == "slice" and e["ts_ns"] is None for e in got)
    kernels = [e for e in got if e["category"] == "gpu.kernel"]
    assert [e["name"] for e in kernels] == [r["Computing Task"] for r in tasks]
    assert "softmax_kernel<float, 4>" in [e["name"] for e in kernels]
    for e, r in zip(kernels, tasks, strict=True):
        assert e["dur_ns"] == round(float(r["Computing Task:Total Time"]) * 1e9)
        assert e["count"] == int(r["Computing Task:Instance Count"])
        assert e["value"] is None and e["stack_id"] is None
        assert e["args"]["raw"]["Work Size:Global"] == r["Work Size:Global"]
        assert e["args"]["values"]["GPU Memory Bandwidth, GB/sec:Read"] == float(
            r["GPU Memory Bandwidth, GB/sec:Read"])
    [other] = [e for e in got if e["category"] == "other"]
    assert other["name"] == pseudo[0]["Computing Task"] == "[Outside any task]"
    assert other["count"] is None
    meta = trace.metadata["sources"][name]
    assert meta["format"] == "VTune CSV (GPU computing tasks)"
    assert meta["metric"] == "Computing Task:Total Time"
    assert trace.log.notices() == {}
    # The summary's kernel table totals the tasks' GPU time, not their work sizes.
    [report] = tracekit.analyze(trace, "summary", registry=registry)
    table = {r["name"]: r for r in report.tables["kernels"].to_pylist()}
    assert set(table) == {r["Computing Task"] for r in tasks}
    for r in tasks:
        assert table[r["Computing Task"]]["total"] == round(
            float(r["Computing Task:Total Time"]) * 1e9)
        assert table[r["Computing Task"]]["count"] == int(r["Computing Task:Instance Count"])
    assert sum(t["total"] for t in table.values()) == sum(
        round(float(r["Computing Task:Total Time"]) * 1e9) for r in tasks)


def test_gpu_tasks_are_no_cpu_profile(capsys):
    assert main(["analyze", str(VT / "gpu_tasks.csv")]) == 0
    out = capsys.readouterr().out
    assert "CPU profile" not in out and "Global" not in out
    assert "gemm_kernel" in out and "850ms" in out


def test_gpu_task_cells_that_are_no_time_or_count_are_counted(tmp_path, registry):
    path = tmp_path / "t.csv"
    path.write_text("Computing Task,Computing Task:Total Time,Computing Task:Instance Count\n"
                    "a,0.5,10\nb,-1,2.5\nc,1e400,3\nd,N/A,4\n")
    got = event_rows(tracekit.read(path, registry=registry))
    assert [(e["dur_ns"], e["count"]) for e in got] == [
        (500_000_000, 10), (None, None), (None, 3), (None, 4)]
    notices = {k[2]: v for k, v in tracekit.read(path, registry=registry).log.notices().items()}
    assert notices == {
        "warning: Computing Task:Total Time is negative or too large for a duration "
        "(dur_ns null)": 1,
        "warning: Computing Task:Instance Count is no whole number (count null)": 1,
        "warning: a number out of range (first at line 4, Computing Task:Total Time): null in "
        "args.values, the text stays in args.raw": 1}
    no_time = tmp_path / "n.csv"
    no_time.write_text("Computing Task,Work Size:Global,Computing Task:Instance Count\n"
                       "a,1048576,10\n")
    trace = tracekit.read(no_time, registry=registry)
    [e] = event_rows(trace)
    assert (e["category"], e["dur_ns"], e["count"]) == ("gpu.kernel", None, 10)
    assert {k[2]: v for k, v in trace.log.notices().items()} == {
        "warning: no Computing Task:Total Time column: the tasks have no GPU time "
        "(dur_ns null)": 1}


def test_unquoted_comma_in_a_header_name_is_named_as_the_cause(registry):
    path = VT / "gpu_tasks_unquoted_header.csv"
    header = path.read_text().splitlines()[0].split(",")
    split_names = [h for h in header if h.startswith(" ")]
    err = _error(path, registry)
    assert err.location == "line 2"
    assert err.message.startswith(f"{len(header) - len(split_names)} fields where the header "
                                  f"has {len(header)}: {len(split_names)} header names begin "
                                  "with a space after a comma ('GPU Memory Bandwidth, "
                                  "GB/sec:Read')")
    assert "-csv-delimiter tab" in err.message


# --- top-down with an inclusive column only ---------------------------------------------------

def _self_from_lines(path) -> tuple[Counter, float]:
    """Self time per function from a tree of totals: total minus the children's totals, with
    the nesting taken from the indentation; and the Total row's total."""
    lines = path.read_text().splitlines()[1:]
    parsed = []
    for line in lines:
        depth = len(line) - len(line.lstrip(" "))
        name, seconds, _module = line.strip().rsplit(",", 2)
        parsed.append((depth, name, float(seconds)))
    self_w: Counter = Counter()
    for i, (depth, name, total) in enumerate(parsed):
        children = 0.0
        for d, _, t in parsed[i + 1:]:
            if d <= depth:
                break
            if d == depth + 1:
                children += t
        if name != "Total":
            self_w[name] += total - children
    return self_w, parsed[0][2]


def test_total_only_tree_gets_self_time_from_the_nesting(registry):
    path = VT / "topdown_total_only.csv"
    want, grand_total = _self_from_lines(path)
    trace = tracekit.read(path, registry=registry)
    [report] = tracekit.analyze(trace, "hotspots", options=["top=0"], registry=registry)
    funcs = {r["function"]: r for r in report.tables["functions"].to_pylist()}
    assert set(funcs) == set(want)
    for name, seconds in want.items():
        assert funcs[name]["self"] == pytest.approx(seconds * 1e9, abs=1), name
    # Busy time is the Total row's total, not the sum of every level's totals.
    assert sum(r["self"] for r in funcs.values()) == pytest.approx(grand_total * 1e9, abs=1)
    assert sum(float(x) for x in [ln.rsplit(",", 2)[1] for ln in
                                  path.read_text().splitlines()[1:]]) > grand_total * 2
    assert funcs["main"]["total"] == pytest.approx(3.0e9, abs=1)
    values = [json.loads(a)["values"] for a in trace.events["args"].to_pylist()]
    assert [v["CPU Time: Total"] for v in values][:3] == [3.125, 3.0, 1.25]  # the file's
    outcomes = {k[2]: v for k, v in trace.log.outcomes.items()}
    assert outcomes["self derived: CPU Time: Total minus the children's CPU Time: Total (the "
                    "report has no Self column)"] == 6
    assert trace.log.notices() == {}


def test_total_only_tree_reads_as_the_same_tree_with_its_self_column(tmp_path, registry):
    path = VT / "topdown_total_only.csv"
    want, _ = _self_from_lines(path)
    lines = path.read_text().splitlines()
    rows = ["Function Stack,CPU Time: Total,CPU Time: Self,Module"]
    for line in lines[1:]:
        name, total, module = line.rsplit(",", 2)
        rows.append(f"{name},{total},{want.get(name.strip(), 0.0)!r},{module}")
    both = tmp_path / "both.csv"
    both.write_text("\n".join(rows) + "\n")
    a = tracekit.read(path, registry=registry).events
    b = tracekit.read(both, registry=registry).events
    assert a["dur_ns"].to_pylist() == b["dur_ns"].to_pylist()
    assert a["stack_id"].to_pylist() == b["stack_id"].to_pylist()


def test_total_only_tree_edge_cases_are_counted(tmp_path, registry):
    path = tmp_path / "t.csv"
    path.write_text("Function Stack,CPU Time:Total,Module\nTotal,1.0,[Unknown]\n"
                    " main,1.0,a\n  f,0.7,a\n  g,0.4,a\n h,N/A,b\n")
    trace = tracekit.read(path, registry=registry)
    assert trace.events["value"].to_pylist() == [None, 0.0, 0.7, 0.4, None]
    assert {k[2]: v for k, v in trace.log.notices().items()} == {
        "warning: a child's CPU Time:Total is no number: no self value (value null)": 1,
        "warning: the children's CPU Time:Total exceeds the row's: self 0": 1}


# --- other delimiters (formats.md 3.1: -csv-delimiter takes any character) -------------------

@pytest.mark.parametrize("name,delimiter,word", [("hotspots_colon.csv", ":", "colon"),
                                                 ("hotspots_pipe.csv", "|", "pipe")])
def test_colon_and_pipe_delimiters_read_when_unambiguous(registry, name, delimiter, word):
    rows = _rows(name, delimiter)
    trace = tracekit.read(VT / name, registry=registry)  # detected, not forced
    meta = trace.metadata["sources"][name]
    assert (meta["reader"], meta["delimiter"], meta["metric"]) == ("vtune", word, "CPU Time")
    assert meta["columns"] == list(rows[0])
    assert trace.events["name"].to_pylist() == [r["Function"] for r in rows]
    assert trace.events["value"].to_pylist() == [float(r["CPU Time"]) for r in rows]
    values = [json.loads(a)["values"] for a in trace.events["args"].to_pylist()]
    assert [v["CPU Time:Effective Time"] for v in values] == [
        float(r["CPU Time:Effective Time"]) for r in rows]
    [report] = tracekit.analyze(trace, "hotspots", options=["top=0"], registry=registry)
    modules = {r["module"]: r["self"] for r in report.tables["modules"].to_pylist()}
    want: Counter = Counter()
    for r in rows:
        want[r["Module"]] += float(r["CPU Time"]) * 1e9
    assert modules == pytest.approx(dict(want))
    assert trace.log.notices() == {}


def test_unreadable_or_ambiguous_delimiters_name_the_cause(tmp_path, registry):
    err = _error(VT / "hotspots_colon_unquoted.csv", registry)
    assert (err.location, err.message) == (
        "line 1", "header read with the colon delimiter, but line 2 has 4 fields where it has "
        "5 (an unquoted colon in a name or cell?); export with -csv-delimiter tab")
    ambiguous = tmp_path / "a.csv"
    ambiguous.write_text("Function|Module^CPU Time|x\na|b^1|2\n")
    assert tracekit.detect_format(Source(ambiguous), registry).name == "vtune"
    err = _error(ambiguous, registry)
    assert (err.location, err.message) == (
        "line 1", "the header reads as a VTune report with more than one delimiter ('^', "
        "pipe); export with -csv-delimiter tab")
    other = tmp_path / "o.csv"
    other.write_text("a|b|c\n1|2|3\n")
    from tracekit.plugins.vtune import VtuneCsvReader

    assert VtuneCsvReader.sniff(Source(other)) == 0.0
