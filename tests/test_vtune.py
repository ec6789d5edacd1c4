"""The VTune CSV reader against Python's csv module, and one test per VTune pitfall."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import pyarrow.compute as pc
import pytest
import tracekit
from helpers import SHARED, read_text, shared_path
from tracekit.cli import main


def vtune_files() -> list[str]:
    base = SHARED / "vtune-csv"
    if not base.exists():
        return ["<missing>"]
    return sorted(str(p.relative_to(SHARED)) for p in base.rglob("*.csv"))


@pytest.mark.parametrize("rel", vtune_files())
def test_every_vtune_file_reads_one_row_per_report_row(rel, registry, tmp_path):
    path = shared_path(*rel.split("/"))
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["reader"] == "vtune"
    assert trace.events.num_rows == len(lines) - 1
    assert trace.events["ts_ns"].null_count == trace.events.num_rows  # untimed aggregates
    # Writers that need a timeline count the rows as skipped, never drop them silently.
    result = tracekit.write(trace, tmp_path / "out.pftrace", registry=registry)
    assert sum(result.skipped.values()) == trace.events.num_rows


def test_hotspots_by_function_equal_csv_sums(registry):
    path = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hotspots-fn.csv")
    rows = list(csv.DictReader(path.open()))
    want: Counter = Counter()
    for r in rows:
        want[(r["Function"], r["Module"])] += float(r["CPU Time"])
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "hotspots",
                                options=["top=0"], registry=registry)
    got = {(r["function"], r["module"]): r["self"] for r in report.tables["functions"].to_pylist()}
    assert set(got) == set(want)
    for key, seconds in want.items():
        assert got[key] == pytest.approx(seconds * 1e9, abs=1)
    modules = {r["module"]: r["self"] for r in report.tables["modules"].to_pylist()}
    by_module: Counter = Counter()
    for r in rows:
        by_module[r["Module"]] += float(r["CPU Time"])
    assert modules["driverForGraphClustering"] == pytest.approx(
        by_module["driverForGraphClustering"] * 1e9, abs=len(rows))


def test_top_down_tree_depth_from_spaces_and_quoted_names(registry):
    """Depth is the indentation, and a quote after the indentation still quotes the name
    (a strict CSV reader splits those rows): self and total per function from the lines."""
    path = shared_path("vtune-csv", "inferno", "vtune-topdown.csv")
    lines = path.read_text().splitlines()[1:]
    stack: list[str] = []
    self_w: Counter = Counter()
    total_w: Counter = Counter()
    for line in lines:
        depth = len(line) - len(line.lstrip(" "))
        name, seconds, _module = line.strip().rsplit(",", 2)
        name = name.strip('"')
        if depth == 0:  # the Total row
            continue
        del stack[depth - 1:]
        stack.append(name)
        self_w[name] += float(seconds)
        for f in set(stack):
            total_w[f] += float(seconds)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "hotspots",
                                options=["top=0"], registry=registry)
    funcs = {r["function"]: r for r in report.tables["functions"].to_pylist()}
    for name, seconds in self_w.items():
        assert funcs[name]["self"] == pytest.approx(seconds * 1e9, abs=1), name
    assert funcs["RtlUserThreadStart"]["total"] == pytest.approx(
        total_w["RtlUserThreadStart"] * 1e9, abs=1)
    names = {r["name"] for r in tracekit.read(path, registry=registry).frames.to_pylist()}
    assert "std::rt::lang_start<core::result::Result<(), std::io::error::Error>>" in names


# --- pitfalls 16 to 20 ---------------------------------------------------------------------

def read_csv(tmp_path, registry, text, name="r.csv"):
    return read_text(tmp_path, registry, text, name, "vtune")


def values_of(trace):
    return [json.loads(a)["values"] for a in trace.events["args"].to_pylist()]


def test_pitfall_16_commas_in_headers_grouping_separators_and_delimiters(tmp_path, registry):
    comma = ('Computing Task,Computing Task:Total Time,"GPU Memory Bandwidth, GB/sec:Read"\n'
             'gemm,"1,234.5",12.5\n')
    trace = read_csv(tmp_path, registry, comma)
    [v] = values_of(trace)
    assert v == {"Computing Task:Total Time": 1234.5, "GPU Memory Bandwidth, GB/sec:Read": 12.5}
    tab = "Function\tCPU Time\tInstructions Retired\tModule\nf\t6.181s\t4,038,700,000\tm\n"
    [v] = values_of(read_csv(tmp_path, registry, tab, "t.csv"))
    assert v == {"CPU Time": 6.181, "Instructions Retired": 4038700000.0}
    semi = "Function;CPU Time;Module\nf;2.5;m\ng;1.5;m\n"
    trace = read_csv(tmp_path, registry, semi, "s.csv")
    assert trace.events["value"].to_pylist() == [2.5, 1.5]
    assert trace.metadata["sources"]["s.csv"]["delimiter"] == "semicolon"


def test_pitfall_17_units_pseudo_values_depth_and_blank_lines(tmp_path, registry):
    text = ("Function,CPU Time,Effective %,Frequency,Memory,Module\n"
            "a,6.181s,94.7%,3.6 GHz,2.0 GB ,m\n\n"
            "[Unknown],N/A*,,N/A with HT on,,[Unknown]\n"
            "[Others],250ms,1.5%,3.6 GHz,1.0 MB,[Others]\n")
    trace = read_csv(tmp_path, registry, text)
    v = values_of(trace)
    assert v[0] == {"CPU Time": 6.181, "Effective %": 94.7, "Frequency": 3.6, "Memory": 2.0}
    assert v[1] == {"CPU Time": None, "Effective %": None, "Frequency": None, "Memory": None}
    assert v[2]["CPU Time"] == 0.25
    raw = json.loads(trace.events["args"].to_pylist()[0])["raw"]
    assert raw["CPU Time"] == "6.181s" and raw["Memory"] == "2.0 GB "
    assert trace.events["dur_ns"].to_pylist() == [6_181_000_000, None, 250_000_000]
    tree = ("Function Stack,CPU Time:Self,Module\nTotal,0.0,[Unknown]\n main,0.5,a\n\n"
            "  f,1.0,a\n  g,2.0,a\n   h,4.0,b\n")
    trace = read_csv(tmp_path, registry, tree, "tree.csv")
    [report] = tracekit.analyze(trace, "hotspots", registry=registry)
    totals = {r["function"]: r["total"] for r in report.tables["functions"].to_pylist()}
    assert totals == {"main": 7.5e9, "g": 6e9, "h": 4e9, "f": 1e9}


def test_pitfall_18_summary_and_progress_lines(tmp_path, registry, capsys):
    text = ("vtune: Using result path `/tmp/r000hs'\n"
            "vtune: Executing actions 75 % Generating a report\n"
            "Hierarchy Level,Metric Name,Metric Value\n"
            "0,Elapsed Time,149.771137\n"
            "1,CPI Rate,0.665470\n"
            "1,DRAM Bound,N/A with HT on\n"
            '1,Bandwidth Domain,Platform Maximum,Observed Maximum,Average\n'
            '1,"DRAM, GB/sec",118.0,95.3,20.1\n'
            "0,Collection and Platform Info,\n"
            "1,Computer Name,node17\n")
    trace = read_csv(tmp_path, registry, text)
    summary = trace.metadata["sources"]["r.csv"]["summary"]
    assert summary[0] == {"level": 0, "metric": "Elapsed Time", "values": ["149.771137"]}
    assert summary[4] == {"level": 1, "metric": "DRAM, GB/sec",
                          "values": ["118.0", "95.3", "20.1"]}
    assert summary[-1]["values"] == ["node17"]
    log = {k[1]: (k[2], v) for k, v in trace.log.outcomes.items()}
    assert log["vtune progress lines"] == ("skipped: progress output, not report data", 2)
    assert trace.events.num_rows == 0


def test_pitfall_19_timeline_bins_are_counters_not_events(tmp_path, registry):
    text = ("timeBin,Bin Start Time,Bin End Time,CPU Time\n"
            "0,0.000000,0.500000,1.25\n1,0.500000,1.000000,0.75\n")
    trace = read_csv(tmp_path, registry, text)
    rows = trace.events.to_pylist()
    assert [(r["kind"], r["category"], r["ts_ns"], r["value"]) for r in rows] == [
        ("counter", "counter.vtune", 0, 1.25), ("counter", "counter.vtune", 500_000_000, 0.75)]


def test_pitfall_20_decimal_comma_is_kept_raw(tmp_path, registry):
    text = "Function\tCPU Time\tModule\nf\t6,181\tm\n"  # a localized decimal comma
    trace = read_csv(tmp_path, registry, text)
    args = json.loads(trace.events["args"].to_pylist()[0])
    assert args["raw"]["CPU Time"] == "6,181"
    assert "CPU Time" not in args["values"]


# --- bad input ------------------------------------------------------------------------------

def test_broken_header_and_short_rows_give_one_line_errors(tmp_path, capsys):
    broken = tmp_path / "broken.csv"
    broken.write_text("this is not,a vtune,header\n1,2,3\n")
    assert main(["convert", str(broken), "--from", "vtune", "-o",
                 str(tmp_path / "o.pftrace"), "-q"]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert str(broken) in err and "line 1: not a VTune CSV report header" in err
    short = tmp_path / "short.csv"
    short.write_text("Function,CPU Time,Module\nf,1.0,m\ng,2.0\n")
    assert main(["analyze", str(short), "-a", "hotspots", "-q"]) == 1
    [err] = capsys.readouterr().err.strip().splitlines()
    assert str(short) in err and "line 3: 2 fields where the header has 3" in err
    assert not (tmp_path / "o.pftrace").exists()


def test_sniffing_tells_vtune_from_other_csv(tmp_path, registry):
    other = tmp_path / "other.csv"
    other.write_text("a,b,c\n1,2,3\n")
    from tracekit.inputs import Source
    from tracekit.plugins.vtune import VtuneCsvReader

    assert VtuneCsvReader.sniff(Source(other)) == 0.0
    path = shared_path("vtune-csv", "vtune-plot", "advanced-hotspots.csv")
    assert tracekit.detect_format(Source(path), registry).name == "vtune"
    values = pc.sum(tracekit.read(path, registry=registry).events["value"]).as_py()
    want = sum(float(r["CPU Time"]) for r in csv.DictReader(io.StringIO(path.read_text())))
    assert values == pytest.approx(want)
