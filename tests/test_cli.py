"""The command line: exit codes, one-line errors, no partial outputs, and the commands."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from helpers import FIXTURES, shared_path
from independent import load
from tracekit.errors import UnknownFormatError
from tracekit.schemas import report_schema

CPU_TRACE = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes(CPU_TRACE.read_bytes()[:4000])
    png = tmp_path / "picture.json"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    nsys_gz = tmp_path / "report.sqlite.gz"
    nsys_gz.write_bytes(gzip.compress(shared_path(
        "nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite").read_bytes()))
    csv_gz = tmp_path / "kernel_trace.csv.gz"
    csv_gz.write_bytes(gzip.compress(shared_path(
        "rocprof-v3", "rocprofiler-sdk-docs", "kernel_trace_2024-07.csv").read_bytes()))
    return {"missing": tmp_path / "nope.json", "empty": empty, "truncated": truncated,
            "png": png, "nsys_gz": nsys_gz, "csv_gz": csv_gz}


@pytest.mark.slow
@pytest.mark.parametrize("case,message", [
    ("missing", "no such file"), ("empty", "file is empty"),
    ("truncated", "truncated"), ("png", "no reader recognises this file"),
    ("nsys_gz", "gzip-compressed: an Nsight Systems export is read in place, so uncompress it "
                "first (gunzip)"),
    ("csv_gz", "gzip-compressed: a rocprof CSV is read in place, with the other files of its "
               "run, so uncompress it first (gunzip)"),
])
def test_bad_input_exits_1_with_one_line_and_no_output(tmp_path, case, message):
    path = _bad_inputs(tmp_path)[case]
    out = tmp_path / "out.pftrace"
    proc = run("convert", str(path), "-o", str(out))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}")
    assert message in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists() and list(tmp_path.glob(".out.pftrace*")) == []


@pytest.mark.slow
def test_debug_shows_the_traceback(tmp_path):
    proc = run("--debug", "convert", str(tmp_path / "nope.json"), "-o", str(tmp_path / "o.pftrace"))
    assert proc.returncode == 1 and "Traceback" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args,message", [
    (["convert", "IN", "-o", "out.xyz"], "cannot tell the output format"),
    (["convert", "IN", "-o", "out.pftrace", "-O", "bogus=1"],
     "error: unknown option 'bogus': no reader takes it, nor writer perfetto (valid: "
     "perfetto.align, perfetto.args, perfetto.flows; readers': 'tracekit formats')"),
    (["analyze", "IN", "-a", "summary", "-O", "bogus=1"],
     "error: unknown option 'bogus': no reader takes it, nor analyzer summary (valid: "
     "summary.limit; readers': 'tracekit formats')"),
    (["analyze", "IN", "-O", "noequals"], "error: option 'noequals' is not of the form "
                                          "key=value"),
    (["analyze", "IN", "-O", "min_share_pct=-5"], "error: analyzer 'bottleneck': option "
     "'min_share_pct=-5': expected a number of at least 0"),
    (["analyze", "IN", "-O", "top=2.5"], "option 'top=2.5': expected a whole number"),
    (["convert", "IN", "-o", "out.parquet", "-O", "row_group_size=0"], "error: writer "
     "'parquet': option 'row_group_size=0': expected a number of at least 1"),
    (["convert", "IN", "-o", "out.pftrace", "--to", "nope"], "no writer named 'nope'"),
    (["analyze", "IN", "-a", "nope"], "no analyzer named 'nope'"),
    (["analyze", "IN", "-f", "json"], "json: no such file; -f is --force (replace an output): "
     "for the report format pass --format json"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    args = [str(CPU_TRACE) if a == "IN" else a for a in args]
    proc = run(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_convert_and_info(tmp_path):
    out = tmp_path / "mlp.pftrace"
    proc = run("convert", str(CPU_TRACE), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "340 slices" in proc.stderr and out.stat().st_size > 0
    info = run("info", str(CPU_TRACE))
    assert info.returncode == 0
    assert "format kineto" in " ".join(info.stdout.split()) and "host.op" in info.stdout


@pytest.mark.slow
def test_analyze_json_validates_and_kernel_total_is_independent(tmp_path):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    out = tmp_path / "report.json"
    proc = run("analyze", str(path), "-a", "summary", "--format", "json", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, report_schema())
    kernels = report["reports"][0]["tables"]["kernels"]
    cols = [c["name"] for c in kernels["columns"]]
    total = sum(row[cols.index("total")] for row in kernels["rows"])
    _, events = load(path)
    from decimal import Decimal
    expected = sum(int(Decimal(e["dur"]) * 1000) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "kernel")
    assert total == expected
    assert sum(row[cols.index("count")] for row in kernels["rows"]) == 2700


@pytest.mark.slow
def test_analyze_text_output():
    proc = run("analyze", str(CPU_TRACE))
    assert proc.returncode == 0
    assert "\nCPU profile\n" in proc.stdout and "aten::addmm" in proc.stdout
    proc = run("analyze", str(CPU_TRACE), "-a", "summary")
    assert "Annotation ranges" in proc.stdout and "forward" in proc.stdout


def test_info_on_a_run_folder_describes_each_trace(tmp_path, capsys):
    from tracekit.cli import main

    for rank in (0, 1):
        (tmp_path / f"rank-{rank}.json.gz").write_bytes(CPU_TRACE.read_bytes())
    (tmp_path / "notes.txt").write_text("not a trace\n")
    assert main(["info", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    described = [line for line in captured.out.splitlines() if line.startswith(str(tmp_path))]
    assert described == [str(tmp_path / f"rank-{rank}.json.gz") for rank in (0, 1)]
    assert " ".join(captured.out.split()).count("format kineto (confidence 1.00)") == 2
    assert "1 file not read: notes.txt" in captured.err


def test_analyze_says_what_the_reader_skipped(capsys):
    """A folder of several rocprof runs: the report is of one, and stderr names every file
    left out and why (nothing dropped silently); -q keeps stderr quiet."""
    from tracekit.cli import main

    folder = shared_path("rocprof-v3", "rocprofiler-sdk-docs")
    assert main(["analyze", str(folder)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Bottleneck: ")
    skipped = [line for line in captured.err.splitlines() if "another run" in line]
    assert len(skipped) == 6
    assert ("warning: rocprofiler-sdk-docs: 8 hip_runtime_trace.csv records skipped: another "
            "run (process 238; 7,627,414 s (88 days) before the run read); -O "
            "run=hip_runtime_trace.csv reads it") in skipped
    assert main(["analyze", str(folder), "-q"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_formats_and_plugins():
    formats = run("formats")
    assert "reader    kineto" in formats.stdout and "writer    perfetto" in formats.stdout
    plugins = run("plugins", "--all", "--json")
    names = {p["name"]: p for p in json.loads(plugins.stdout)}
    assert names["kineto"]["status"] == "ok" and names["kineto"]["distribution"] == "tracekit"


@pytest.mark.slow
def test_gzip_detected_by_magic_not_name(tmp_path):
    path = tmp_path / "trace.bin"
    path.write_bytes(gzip.compress(gzip.decompress(CPU_TRACE.read_bytes())))
    proc = run("info", str(path))
    assert proc.returncode == 0 and "kineto" in proc.stdout


@pytest.mark.slow
def test_reader_and_writer_options_are_routed(tmp_path):
    out = tmp_path / "o.pftrace"
    proc = run("convert", str(CPU_TRACE), "-o", str(out), "-O", "memory_counters=false",
               "-O", "args=false")
    assert proc.returncode == 0, proc.stderr
    assert "0 counter values" in proc.stderr


def test_a_format_that_disagrees_with_the_outputs_name_is_said(tmp_path):
    out = tmp_path / "x.json"
    proc = run("convert", str(CPU_TRACE), "-o", str(out), "--to", "perfetto")
    assert proc.returncode == 0 and out.read_bytes()[:1] != b"{"
    assert proc.stderr.splitlines()[-1] == (f"warning: {out}: written as perfetto (--to), "
                                            "though its name says chrome-json")
    agree = run("convert", str(CPU_TRACE), "-o", str(tmp_path / "x.pftrace"), "--to",
                "perfetto")
    assert agree.returncode == 0 and "warning" not in agree.stderr


def test_an_unknown_parquet_codec_is_refused_before_reading(tmp_path):
    out = tmp_path / "o.parquet"
    proc = run("convert", str(CPU_TRACE), "-o", str(out), "-O", "compression=foo")
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip() == ("error: writer 'parquet': compression must be one of zstd, "
                                   "snappy, gzip, brotli, lz4, none, not 'foo'")


@pytest.mark.slow
def test_quiet_prints_nothing(tmp_path):
    proc = run("convert", str(CPU_TRACE), "-o", str(tmp_path / "o.pftrace"), "--quiet")
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize("key", ["reader.memory_counters", "kineto.memory_counters"])
def test_prefixed_reader_option_with_a_detected_reader(tmp_path, key):
    """The documented reader.key=value form works when the reader is found by sniffing."""
    proc = run("convert", str(CPU_TRACE), "-o", str(tmp_path / "o.pftrace"), "-O",
               f"{key}=false", "-O", "writer.args=false")
    assert proc.returncode == 0, proc.stderr
    assert "0 counter values" in proc.stderr


def test_inputs_with_the_same_file_name_are_told_apart_by_their_folder(tmp_path, registry):
    import tracekit

    for rank in ("rank0", "rank1"):
        (tmp_path / rank).mkdir()
        (tmp_path / rank / "trace.json.gz").write_bytes(CPU_TRACE.read_bytes())
    paths = [tmp_path / "rank0" / "trace.json.gz", tmp_path / "rank1" / "trace.json.gz"]
    trace = tracekit.read(paths, registry=registry)
    one = tracekit.read(CPU_TRACE, registry=registry).events.num_rows
    assert trace.sources == ["rank0/trace.json.gz", "rank1/trace.json.gz"]
    assert trace.events.num_rows == 2 * one
    with pytest.raises(tracekit.UsageError, match="are the same input"):
        tracekit.read([paths[0], tmp_path / "rank0" / ".." / "rank0" / "trace.json.gz"],
                      registry=registry)


@pytest.mark.slow
def test_analyze_passes_reader_options_to_the_reader(tmp_path):
    path = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    long = run("analyze", str(path), "-a", "summary", "--format", "json")
    short = run("analyze", str(path), "-a", "summary", "--format", "json", "-O", "short_names=true")
    assert long.returncode == short.returncode == 0, short.stderr

    def kernels(proc):
        doc = json.loads(proc.stdout)
        table = doc["reports"][0]["tables"]["kernels"]
        column = [c["name"] for c in table["columns"]].index("name")
        return sorted(r[column] for r in table["rows"])
    assert kernels(long) != kernels(short)
    assert all("(" not in name for name in kernels(short))


@pytest.mark.slow
def test_ambiguous_option_suggests_spellings_that_work(tmp_path):
    proc = run("analyze", str(CPU_TRACE), "-a", "gaps", "-a", "launch", "-O", "top=3")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: option 'top' is ambiguous; write gaps.top or "
                                   "launch.top")
    proc = run("analyze", str(CPU_TRACE), "-a", "gaps", "-a", "launch", "-O", "gaps.top=3")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_symlink_loop_input_is_named_as_such(tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    proc = run("analyze", str(loop))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"error: {loop}: symlink loop (a link that points back to "
                                   "itself)")


@pytest.mark.slow
@pytest.mark.parametrize("rel", ["perf-script/flamegraph/perf-funcab-cmd-01.txt",
                                 "vtune-csv/vtune-plot/advanced-hotspots.csv"])
def test_default_analyze_of_a_cpu_profile_is_a_cpu_report(rel):
    proc = run("analyze", str(shared_path(*rel.split("/"))), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["analyzer"] for r in doc["reports"]] == ["bottleneck", "cpu"]
    assert doc["reports"][1]["findings"][0]["evidence"]["verdict"] == "cpu-profile"
    text = json.dumps(doc)
    assert "record with" not in text and "nsys --trace=cuda" not in text


@pytest.mark.slow
def test_default_analyze_of_aggregates_only_gives_the_summary():
    path = shared_path("rocprof-v1", "gunrock_mi300_gfx942", "results.stats.csv")
    proc = run("analyze", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["analyzer"] for r in doc["reports"]] == ["bottleneck", "summary"]
    assert doc["reports"][0]["findings"][0]["title"] == (
        "no GPU timeline: 8 GPU rows without timestamps (aggregate totals)")


# --- report formats: core's and those plugins declare --------------------------------------

GPU_TRACE = FIXTURES / "scenarios" / "matmul_loop.pt.trace.json.gz"


class _MarkdownFormat:
    """A third-party plugin's report format: one Markdown line per finding."""

    @staticmethod
    def make() -> type:
        import tracekit

        class Markdown(tracekit.ReportFormat):
            name = "markdown"
            extensions = (".md",)
            media_type = "text/markdown"

            def render(self, reports, inputs, *, trace=None, analyzer_options=()):
                events = "-" if trace is None else f"{trace.events.num_rows}"
                lines = [f"# {', '.join(inputs)} ({events} events)"]
                lines += [f"- {r.analyzer}: {f.title}" for r in reports for f in r.findings]
                return "\n".join(lines).encode() + b"\n"

        return Markdown


def _plugin(*formats: type) -> object:
    import types

    import tracekit

    module = types.ModuleType("md_plugin")

    @tracekit.hookimpl
    def register_report_formats(register):
        for cls in formats:
            register(cls)

    module.register_report_formats = register_report_formats  # type: ignore[attr-defined]
    return module


@pytest.mark.slow
def test_a_plugin_adds_a_report_format(tmp_path):
    from tracekit.frontend import analyze_report
    from tracekit.registry import load_registry
    from tracekit.report import report_formats

    registry = load_registry(dists={"tracekit"}, environ={},
                             extra=[_plugin(_MarkdownFormat.make())])
    assert list(report_formats(registry)) == ["text", "json", "csv", "html", "markdown"]
    out = tmp_path / "r.md"
    done = analyze_report([GPU_TRACE], format="markdown", output=out, registry=registry)
    assert done.write(out) == [f"wrote {out}"]
    assert done.trace is not None and done.trace.events.num_rows == 305
    lines = out.read_text().splitlines()
    assert [r.analyzer for r in done.reports] == ["bottleneck"]
    assert lines[:3] == [f"# {GPU_TRACE} (305 events)",
                         "- bottleneck: verdict: compute, 100.0% of the GPU timeline",
                         "- bottleneck: program: PyTorch inference (eager)"]
    # verdict, program, compute (no "grid too small": 128 blocks on 132 SMs leave 3% idle)
    assert len(lines) == 1 + len(done.reports[0].findings) == 4
    with pytest.raises(UnknownFormatError, match=(
            r"^no report format 'xml' \(formats: text, json, csv, html, markdown\)$")):
        analyze_report([GPU_TRACE], format="xml", registry=registry)


def test_a_report_format_may_not_take_a_name_of_core():
    import tracekit
    from tracekit.registry import load_registry

    class Json(tracekit.ReportFormat):
        name = "json"

        def render(self, reports, inputs, *, trace=None, analyzer_options=()):
            return b""

    registry = load_registry(dists=(), environ={}, extra=[_plugin(Json)])  # this plugin alone
    [info] = registry.plugins
    assert info.error == "plugin 'md_plugin': report format 'json' is one of tracekit's own; " \
        "pick another name"
    assert "json" not in registry.report_formats


@pytest.mark.slow
def test_unknown_report_format_is_one_line_listing_the_valid_ones(tmp_path, capsys):
    from tracekit.cli import main

    assert main(["analyze", str(GPU_TRACE), "--format", "xml"]) == 2
    assert capsys.readouterr().err == ("error: no report format 'xml' (formats: text, json, "
                                       "csv, html)\n")
    assert main(["analyze", str(GPU_TRACE), "--format", "json", "--table", "kernels"]) == 2
    assert capsys.readouterr().err == ("error: --table picks the table of a format that writes "
                                       "one; the json format writes every table\n")


def test_the_report_format_follows_the_output_name(tmp_path):
    """-o report.json writes JSON, report.csv CSV (with --table), report.html the HTML
    report, any other name text; --format still decides where given."""
    from tracekit.cli import main

    trace = FIXTURES / "torch-cpu" / "adamw_cpu.pt.trace.json.gz"
    out = tmp_path / "report.json"
    assert main(["analyze", str(trace), "-o", str(out), "-q"]) == 0
    assert json.loads(out.read_text())["tracekit_report"] == 1
    out = tmp_path / "kernels.CSV"
    assert main(["analyze", str(trace), "-a", "summary", "--table", "ranges", "-o", str(out),
                 "-q"]) == 0
    assert out.read_text().splitlines()[0].startswith('"')
    out = tmp_path / "report.html"
    assert main(["analyze", str(trace), "-o", str(out), "-q"]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    out = tmp_path / "report.out"
    assert main(["analyze", str(trace), "-o", str(out), "-q"]) == 0
    assert out.read_text().startswith("Bottleneck: ")
    out = tmp_path / "forced.json"
    assert main(["analyze", str(trace), "--format", "text", "-o", str(out), "-q"]) == 0
    assert out.read_text().startswith("Bottleneck: ")


@pytest.mark.slow
def test_analyze_help_names_the_formats_without_loading_plugins():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tracekit", "analyze",
                           "--help"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Report format: text, json, csv (one table), or one a plugin adds ('tracekit " \
        "formats' lists them); default: the one -o's extension names (.json, .csv, .html), " \
        "else text." in " ".join(proc.stdout.split())
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "tracekit.cli" in imported
    assert not {m for m in imported if m.split(".")[0] in ("pyarrow", "pluggy")
                or m.startswith(("tracekit.plugins", "tracekit.registry", "tracekit.report"))}


def test_info_shows_no_made_up_pid_for_a_process_the_trace_names_only():
    """alexnet's Kineto metadata names processes 'Traces' and 'Spans' with no numeric pid;
    the reader gives them synthetic ids, which info does not print as pids."""
    from tracekit.overview import describe

    lines = describe(shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")).lines()
    processes = [line.strip() for line in lines if line.startswith("  process ")]
    assert processes == ["process without a pid rank 0",
                         "process Traces (no pid in the trace) rank 0",
                         "process Spans (no pid in the trace) rank 0",
                         "process 2869224: python3.10 rank 0"]


def test_an_empty_folder_and_a_folder_as_output_are_named_so(tmp_path, capsys):
    from tracekit.cli import main

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", str(empty)]) == 1
    assert capsys.readouterr().err == f"error: {empty}: the directory holds no files\n"
    out = tmp_path / "out"
    out.mkdir()
    assert main(["convert", str(CPU_TRACE), "-o", str(out)]) == 2
    assert capsys.readouterr().err.startswith(
        "error: cannot tell the output format from 'out' (an existing directory); name the "
        "file with an extension or pass --to FORMAT (known: chrome-json (.json, .json.gz), ")
    assert list(out.iterdir()) == []


def test_a_long_table_says_how_to_get_every_row():
    """The text report shows 50 rows of a table; the line after says how to get them all,
    naming the table for --format csv."""
    import pyarrow as pa
    from tracekit.report import render_table

    table = pa.table({"count": list(range(60)), "name": [f"k{i}" for i in range(60)]})
    lines = render_table(table, table_name="kernels").splitlines()
    assert len(lines) == 1 + 50 + 1  # the header, 50 rows, the line
    assert lines[-1] == "  ... 10 more rows (--format csv --table kernels or --format json for all)"
