"""The VTune CSV reader against Python's csv module, and one test per VTune pitfall."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import SHARED, read_text, read_through_fifo, shared_path
from tracekit.cli import main
from tracekit.errors import ReaderCrashError, TraceReadError


def vtune_files() -> list[str]:
    base = SHARED / "vtune-csv"
    if not base.exists():
        return ["<missing>"]
    return sorted(str(p.relative_to(SHARED)) for p in base.rglob("*.csv"))


@pytest.mark.parametrize("rel", vtune_files())
def test_every_vtune_file_reads_one_row_per_report_row(rel, registry):
    path = shared_path(*rel.split("/"))
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"][path.name]["reader"] == "vtune"
    assert trace.events.num_rows == len(lines) - 1
    assert trace.events["ts_ns"].null_count == trace.events.num_rows  # untimed aggregates
    # Every row accounted for, and nothing to warn about in a real report.
    assert trace.log.notices() == {}


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
    # A row per function has no callers: no paths table to repeat the functions in.
    assert "paths" not in report.tables
    for key, seconds in want.items():
        assert got[key] == pytest.approx(seconds * 1e9, abs=1)
    modules = {r["module"]: r["self"] for r in report.tables["modules"].to_pylist()}
    by_module: Counter = Counter()
    for r in rows:
        by_module[r["Module"]] += float(r["CPU Time"])
    assert modules["driverForGraphClustering"] == pytest.approx(
        by_module["driverForGraphClustering"] * 1e9, abs=len(rows))


def test_a_hardware_event_report_folds_by_its_event_count(registry, tmp_path):
    """A report row is a function's total, not a sample: without CPU time, its folded line
    weighs the report's cycles (an expert's re-read found every line weighing 1)."""
    path = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hw-events-fn.csv")
    want: Counter = Counter()
    for r in csv.DictReader(path.open()):
        want[r["Function"].replace(";", ":")] += int(
            r["Hardware Event Count:CPU_CLK_UNHALTED.THREAD"])
    out = tmp_path / "hw.folded"
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    got: Counter = Counter()
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        got[stack] += int(n)
    assert got == +want
    assert got["buildLocalMapCounter"] == 100218524115780


@pytest.mark.parametrize("folder, profile, others", [
    ("utools", "grappolo-friendster-t192-dram-hotspots-fn.csv",
     ["grappolo-friendster-t192-dram-hotspots-pkg.csv (CPU time by Package)",
      "grappolo-friendster-t192-dram-hw-events-fn.csv (event counts by Function)"]),
    ("vtune-plot", "advanced-hotspots.csv", ["progression_1696.csv (CPU time by Function)"]),
])
def test_reports_read_together_are_not_added(folder, profile, others, registry):
    """A folder of reports: one run by function and by package (the same CPU time twice)
    with its hardware event counts (cycles, not seconds), or two runs by function. The
    profile is the CPU time by function of one report, never a sum across reports."""
    path = shared_path("vtune-csv", folder)
    rows = list(csv.DictReader((path / profile).open()))
    cpu = sum(float(r["CPU Time"]) for r in rows)
    top = max(rows, key=lambda r: float(r["CPU Time"]))
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "cpu",
                                registry=registry)
    verdict = report.findings[0].evidence
    assert verdict["weight_unit"] == "CPU seconds"
    assert verdict["top_function"] == top["Function"]
    assert verdict["top_function_pct"] == round(100 * float(top["CPU Time"]) / cpu, 1)
    [reports] = [f for f in report.findings if f.title.startswith(f"{len(others) + 1} reports")]
    assert reports.evidence["report"] == profile
    assert reports.evidence["reports_not_added"] == others
    bound = [f for f in report.findings if f.title.startswith("Memory bound")]
    if folder == "utools":  # CPU-time weighted over the function report alone
        have = [r for r in rows if r["Memory Bound(%)"]]
        weighted = sum(float(r["CPU Time"]) * float(r["Memory Bound(%)"]) for r in have) / \
            sum(float(r["CPU Time"]) for r in have)
        assert bound[0].evidence["memory_bound_pct"] == round(weighted, 1)
        assert verdict["ipc"] == 0.59  # from the hardware event counts by function


@pytest.mark.parametrize("rel", ["utools", "utools/grappolo-friendster-t192-dram-hotspots-pkg.csv"])
def test_cpu_time_uneven_across_packages_is_named(rel, registry):
    """grappolo on a 4-socket machine: two packages did most of the work, by the package
    report's CPU Time column; alone or read with the run's other reports."""
    pkg = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hotspots-pkg.csv")
    rows = list(csv.DictReader(pkg.open()))
    cpu = {r["Package"]: float(r["CPU Time"]) for r in rows}
    total = sum(cpu.values())
    low = [p for p, t in cpu.items() if t < 0.5 * total / len(cpu)]
    assert low == ["package_2", "package_3"]
    [report] = tracekit.analyze(tracekit.read(shared_path("vtune-csv", *rel.split("/")),
                                              registry=registry), "cpu", registry=registry)
    [uneven] = [f for f in report.findings if f.title.startswith("CPU time is uneven")]
    shares = ", ".join(f"{p} {round(100 * t / total, 1)}%"
                       for p, t in sorted(cpu.items(), key=lambda kv: -kv[1]))
    assert uneven.evidence == {"packages": 4, "package_shares": shares,
                               "little_used": "package_2, package_3"}
    assert "OMP_PROC_BIND=spread" in uneven.suggestion
    assert not any(f.title.startswith("CPU time is uneven") for f in tracekit.analyze(
        tracekit.read(shared_path("vtune-csv", "vtune-plot"), registry=registry), "cpu",
        registry=registry)[0].findings)


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


# --- damaged reports: a real report with one kind of damage at a time (issue 13) ------------

ADVANCED = ("vtune-csv", "vtune-plot", "advanced-hotspots.csv")


def _real_lines() -> list[str]:
    return shared_path(*ADVANCED).read_text().splitlines(keepends=True)


def _with_cell(lines: list[str], row: int, column: str, text: str) -> list[str]:
    """``lines`` with the cell of report row ``row`` (1 = first after the header) replaced."""
    header = next(csv.reader([lines[0]]))
    cells = next(csv.reader([lines[row]]))
    cells[header.index(column)] = text
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    return [*lines[:row], buf.getvalue(), *lines[row + 1:]]


def _notices(trace):
    return {(kind, outcome): n for (_, kind, outcome), n in trace.log.notices().items()}


def _vtune_error(path, registry) -> TraceReadError:
    with pytest.raises(TraceReadError) as info:
        tracekit.read(path, format="vtune", registry=registry)
    assert not isinstance(info.value, ReaderCrashError), info.value
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    return info.value


def test_out_of_range_negative_and_text_cells_are_counted(tmp_path, registry):
    lines = _real_lines()
    for row, text in ((1, "1e400"), (2, "1e300"), (3, "-7"), (4, "e5")):
        lines = _with_cell(lines, row, "CPU Time", text)
    path = tmp_path / "r.csv"
    path.write_text("".join(lines))
    trace = tracekit.read(path, registry=registry)
    assert trace.metadata["sources"]["r.csv"]["metric"] == "CPU Time"  # still the metric
    want = [float(r["CPU Time"]) for r in csv.DictReader(io.StringIO("".join(_real_lines())))]
    values = trace.events["value"].to_pylist()
    assert values[:4] == [None, 1e300, -7.0, None] and values[4:] == want[4:]
    durations = trace.events["dur_ns"].to_pylist()
    assert durations[:4] == [None] * 4
    assert durations[4:] == [round(v * 1e9) for v in want[4:]]
    assert _notices(trace) == {
        ("report cells", "warning: a number out of range (first at line 2, CPU Time): null in "
         "args.values, the text stays in args.raw"): 1,
        ("report cells", "warning: text in a numeric column (first at line 5, CPU Time): null "
         "in args.values, the text stays in args.raw"): 1,
        ("report rows", "warning: CPU Time is negative or too large for a duration "
         "(dur_ns null)"): 2,
    }
    raw = [json.loads(a)["raw"]["CPU Time"] for a in trace.events["args"].to_pylist()[:4]]
    assert raw == ["1e400", "1e300", "-7", "e5"]


@pytest.mark.parametrize("start,message", [
    ("NaN", "Bin Start Time is out of range"), ("Infinity", "Bin Start Time is out of range"),
    ("1e400", "Bin Start Time is out of range"), ("1e999999", "Bin Start Time is out of range"),
    ("9300000000", "Bin Start Time is out of range"),
    ("noon", "Bin Start Time is not a number of seconds"),
])
def test_timeline_bin_start_that_is_no_time_names_the_line(tmp_path, registry, start, message):
    path = tmp_path / "tl.csv"
    path.write_text("timeBin,Bin Start Time,Bin End Time,CPU Time\n0,0.000000,0.500000,1.25\n"
                    f"1,{start},1.000000,0.75\n")
    err = _vtune_error(path, registry)
    assert err.location == "line 3" and err.message.startswith(message)


def test_timeline_values_out_of_range_are_counted(tmp_path, registry):
    path = tmp_path / "tl.csv"
    path.write_text("timeBin,Bin Start Time,Bin End Time,CPU Time\n0,0.000000,0.500000,1e400\n"
                    "1,0.5,1.000000,0.75\n")
    trace = tracekit.read(path, registry=registry)
    assert trace.events["value"].to_pylist() == [None, 0.75]
    assert trace.events["ts_ns"].to_pylist() == [0, 500_000_000]
    assert _notices(trace) == {("report cells", "warning: a number out of range (first at line "
                                "2, CPU Time): null in value"): 1}


def test_unsplittable_and_binary_lines_name_the_line(tmp_path, registry):
    lines = _real_lines()
    huge = _with_cell(lines, 3, "Function", "f" * 200_000)
    path = tmp_path / "huge.csv"
    path.write_text("".join(huge))
    err = _vtune_error(path, registry)
    assert (err.location, err.message) == ("line 4", "not a CSV line (field larger than field "
                                                     "limit (131072))")
    binary = tmp_path / "nul.csv"
    binary.write_bytes("".join(lines[:50]).encode() + b"\x00\x01\x02" + "".join(
        lines[50:]).encode())
    err = _vtune_error(binary, registry)
    assert (err.location, err.message) == ("line 51", "binary data (a NUL byte), not a VTune "
                                                      "CSV report")
    cut = tmp_path / "cut.csv"
    cut.write_text("".join(lines[:10]) + lines[10][:40])
    err = _vtune_error(cut, registry)
    assert err.location == "line 11" and err.message.endswith("fields where the header has 17")


def test_encodings_and_line_ends_read_alike(tmp_path, registry):
    text = "".join(_real_lines())
    direct = tracekit.read(shared_path(*ADVANCED), registry=registry).events
    variants = {"utf16.csv": text.encode("utf-16"), "bom.csv": b"\xef\xbb\xbf" + text.encode(),
                "crlf.csv": text.replace("\n", "\r\n").encode(),
                "cr.csv": text.replace("\n", "\r").encode()}
    for name, data in variants.items():
        path = tmp_path / name
        path.write_bytes(data)
        trace = tracekit.read(path, registry=registry)  # detected, not only read
        assert trace.events.drop_columns(["source"]).equals(direct.drop_columns(["source"]))
        assert _notices(trace) == {}, name


def test_invalid_utf8_and_line_separators_inside_names(tmp_path, registry):
    lines = _real_lines()
    lines = _with_cell(lines, 1, "Function", "caf\udce9")  # a Latin-1 byte, as surrogateescape
    lines = _with_cell(lines, 2, "Function", "a\x85b\u2028c")  # not line ends in a CSV line
    path = tmp_path / "r.csv"
    path.write_bytes("".join(lines).encode("utf-8", "surrogateescape"))
    trace = tracekit.read(path, registry=registry)
    assert trace.events.num_rows == len(lines) - 1
    assert trace.events["name"].cast(pa.string()).to_pylist()[:2] == ["caf\ufffd",
                                                                       "a\x85b\u2028c"]
    assert _notices(trace) == {
        ("report lines", "warning: not valid UTF-8 (bad bytes read as U+FFFD)"): 1}


def test_last_line_without_line_break_is_read_with_a_warning(tmp_path, registry):
    lines = _real_lines()
    path = tmp_path / "r.csv"
    path.write_text("".join(lines)[:-4])  # cut inside the last Start Address
    trace = tracekit.read(path, registry=registry)
    assert trace.events.num_rows == len(lines) - 1
    assert _notices(trace) == {("report lines", "warning: the last line has no line break "
                                "(the file may be cut short)"): 1}


def test_reads_a_stream_once(registry, tmp_path):
    """Content only through the Source, once; and a FIFO through the real Source."""
    from tracekit.builder import TraceBuilder
    from tracekit.plugins.vtune import VtuneCsvReader

    path = shared_path(*ADVANCED)
    data = path.read_bytes()

    class OnceSource:
        name, head, is_stream, is_dir = "stdin", data[:65536], True, False
        path = Path("<stdin>")

        def __init__(self):
            self.left = [data]

        def read_bytes(self, progress=None):
            return self.left.pop()

        def open(self):
            raise AssertionError("the reader must not open the source again")

    assert VtuneCsvReader.reads_streams
    out = TraceBuilder(path.name, "vtune")
    VtuneCsvReader().read(OnceSource(), out)
    direct = tracekit.read(path, registry=registry)
    assert out.build().events.equals(direct.events)
    piped = read_through_fifo(data, tmp_path, registry)
    assert piped.events.drop_columns(["source"]).equals(direct.events.drop_columns(["source"]))


def test_a_report_by_package_is_not_called_functions(registry):
    """grappolo's per-package report: its rows are the four packages' CPU time, no function
    and no module (an expert re-read found them under 'Busy functions' and a modules table of
    '(none) 100%')."""
    path = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hotspots-pkg.csv")
    packages = [r["Package"] for r in csv.DictReader(path.open())]
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "cpu",
                                registry=registry)
    assert report.table_titles["functions"] == "Busy packages by self time (idle left out)"
    assert sorted(r["function"] for r in report.tables["functions"].to_pylist()) == \
        sorted(packages) == ["package_0", "package_1", "package_2", "package_3"]
    assert "modules" not in report.tables


def test_a_hotspots_report_with_cpi_gives_ipc(registry):
    """advanced-hotspots has Instructions Retired and CPI Rate per function: its cycles are
    their product, so IPC is 1/CPI per function and instructions over cycles in all."""
    path = shared_path("vtune-csv", "vtune-plot", "advanced-hotspots.csv")
    rows = [r for r in csv.DictReader(path.open()) if r["Instructions Retired"] and r["CPI Rate"]]
    instructions = sum(float(r["Instructions Retired"]) for r in rows)
    cycles = sum(float(r["Instructions Retired"]) * float(r["CPI Rate"]) for r in rows)
    [report] = tracekit.analyze(tracekit.read(path, registry=registry), "cpu",
                                registry=registry)
    assert report.findings[0].evidence["ipc"] == round(instructions / cycles, 2) == 2.22
    top = max(rows, key=lambda r: float(r["CPU Time"]))
    [row] = [r for r in report.tables["functions"].to_pylist()
             if r["function"] == top["Function"]]
    assert row["ipc"] == round(1 / float(top["CPI Rate"]), 2) == 2.42
