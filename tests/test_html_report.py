"""The HTML report: its numbers, its escaping, its command, and the page in headless Chromium.

The browser tests open each page with Debian's ``chromium`` (``--headless --dump-dom`` after
the scripts ran, plus ``--screenshot``): no console message, every plot drawn (marks in its
SVG), and names made of markup shown as text. ``TRACEKIT_UPDATE_SCREENSHOTS=1`` copies the
screenshots to docs/images/.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest
import tracekit
from helpers import FIXTURES, ROOT, shared_path
from tracekit.errors import OptionError, OutputExistsError
from tracekit.plugins.html_report import (
    render_html,
    report_analyzers,
    report_table_csv,
    reports_table_csv,
)
from tracekit.plugins.html_report.distributions import histogram, kernel_durations, launch_delays
from tracekit.plugins.html_report.flame import flame_graph
from tracekit.plugins.html_report.markup import plot_text, script_json, text
from tracekit.plugins.html_report.strip import busy_strip

TORCH = ("torch-trace", "hta", "alexnet_a100_trace.json.gz")
NSYS = ("nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")
ROCPROF = ("rocprof-v3", "jimw_llamacpp_rocm7")
PERF = ("perf-script", "flamegraph", "perf-cycles-instructions-01.txt")
RANKS = (("torch-trace", "hta", "sampled_rank-0.json.gz"),
         ("torch-trace", "hta", "sampled_rank-1.json.gz"))
XSS = "<script>alert(1)</script>"
ODD = "say \"hi\" it's\n\x1b[31mred\x1b[0m"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SLOW_BROWSER = pytest.mark.slow  # Chromium takes 3-10 s a page on a busy 2-core machine


def _renamed(trace: tracekit.Trace, names: dict[str, str]) -> tracekit.Trace:
    """``trace`` with events (``name``) and frames renamed: the names a hostile or broken
    profiler could write."""
    column = trace.events["name"].combine_chunks()
    words = [names.get(w, w) for w in column.dictionary.to_pylist()]
    renamed = pa.DictionaryArray.from_arrays(column.indices, pa.array(words))
    events = trace.events.set_column(trace.events.schema.get_field_index("name"), "name",
                                     renamed)
    frames = trace.frames
    if frames.num_rows:
        frames = frames.set_column(frames.schema.get_field_index("name"), "name", pa.array(
            [names.get(n, n) for n in frames["name"].to_pylist()], pa.string()))
    return dataclasses.replace(trace, events=events, frames=frames)


def _page(registry, parts: tuple, rename: dict[str, str] | None = None,
          ) -> tuple[tracekit.Trace, list[tracekit.Report], bytes]:
    paths = [shared_path(*p) for p in parts] if isinstance(parts[0], tuple) \
        else [shared_path(*parts)]
    trace = tracekit.read(paths, registry=registry)
    if rename:
        trace = _renamed(trace, rename)
    reports = tracekit.analyze(trace, report_analyzers(trace, registry), registry=registry)
    return trace, reports, render_html(trace, reports, [str(p) for p in paths],
                                       registry=registry)


# --- escaping ---------------------------------------------------------------------------

def test_text_escapes_markup_and_shows_control_characters():
    assert text(XSS) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert text(ODD) == "say &quot;hi&quot; it&#x27;s\u240a\u241b[31mred\u241b[0m"
    assert plot_text('<b>x</b> "q"') == '&lt;b&gt;x&lt;/b&gt; "q"'


def test_json_in_a_script_element_cannot_close_it():
    out = script_json({"name": "</script><!-- & \u2028"})
    assert "<" not in out and ">" not in out and "&" not in out
    assert out == '{"name":"\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028"}'


def test_page_shows_hostile_kernel_names_as_text(registry):
    top, second = "ampere_sgemm_32x32_sliced1x4_tn", \
        "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1"
    _, _, page = _page(registry, TORCH, {top: XSS, second: ODD})
    html = page.decode()
    assert XSS not in html and "\x1b" not in html
    assert '<td class="txt" title="&lt;script&gt;alert(1)&lt;/script&gt;">' in html
    assert "say &quot;hi&quot; it&#x27;s\u240a\u241b[31mred\u241b[0m" in html
    # plotly.js, one script per plot's data, and the page's own script: nothing else.
    assert html.count("<script") == 2 + html.count('<div class="plot"')


# --- the numbers behind the plots ---------------------------------------------------------

def test_report_runs_what_the_page_needs(registry):
    torch = tracekit.read(shared_path(*TORCH), registry=registry)
    assert report_analyzers(torch, registry) == ["bottleneck", "breakdown", "gaps", "summary"]
    perf = tracekit.read(shared_path(*PERF), registry=registry)
    assert report_analyzers(perf, registry) == ["bottleneck", "cpu"]
    pair = tracekit.read([shared_path(*p) for p in RANKS], registry=registry)
    names = report_analyzers(pair, registry)  # the defaults first, whichever they are
    assert names[0] == "bottleneck"
    assert sorted(names) == ["bottleneck", "breakdown", "diff", "gaps", "ranks", "summary"]


def test_strip_bins_add_up_to_the_breakdown(registry):
    trace = tracekit.read(shared_path(*NSYS), registry=registry)
    breakdown, gaps = tracekit.analyze(trace, ["breakdown", "gaps"], registry=registry)
    strip = busy_strip(trace, gaps)
    assert (strip.bins, strip.devices, strip.shown) == (400, 1, 1)
    span = breakdown.tables["devices"]["span"][0].as_py()
    assert strip.bin_ns == pytest.approx(span / 400)
    compute = next(t for t in strip.figure["data"] if t["name"] == "compute")
    # Busy % per bin is rounded to 0.1, so the sum is within 0.05% of a bin per bin.
    assert sum(compute["y"]) * strip.bin_ns / 100 == pytest.approx(
        breakdown.tables["devices"]["compute"][0].as_py(), abs=400 * 0.0005 * strip.bin_ns)
    largest = gaps.tables["largest"]
    assert strip.marked["duration"].to_pylist() == largest["duration"].to_pylist()
    assert strip.marked["gap"].to_pylist() == list(range(1, largest.num_rows + 1))
    markers = next(t for t in strip.figure["data"] if t["name"] == "largest gaps")
    assert markers["text"] == [str(i) for i in range(1, largest.num_rows + 1)]


def test_histograms_count_every_kernel(registry):
    trace = tracekit.read(shared_path(*NSYS), registry=registry)
    [summary] = tracekit.analyze(trace, "summary", registry=registry)
    durations = kernel_durations(trace)
    assert len(durations) == sum(summary.tables["kernels"]["count"].to_pylist()) == 12
    table = histogram(durations, "kernel duration").table.to_pydict()
    assert sum(table["count"]) == 12
    assert [c for c in table["count"] if c] == [6, 3, 3]  # 3-6µs, 32-56µs, 1.8-3.2ms
    delays = histogram(launch_delays(trace), "launch delay").table.to_pydict()
    assert delays["count"][0] == 6 and delays["from"][0] == -8772  # kernel began first
    assert sum(delays["count"]) == 12


def test_flame_graph_weighs_like_the_cpu_report(registry):
    trace = tracekit.read(shared_path(*PERF), registry=registry)
    flame = flame_graph(trace)
    assert (flame.event, flame.unit, flame.nodes, flame.drawn) == ("cycles", "samples", 21, 21)
    icicle = flame.figure["data"][0]
    assert sum(icicle["values"]) == 102  # busy samples: 111 less 9 idle
    top = flame.table.slice(0, 1).to_pylist()[0]
    assert (top["function"], top["total"], top["self"], top["total_pct"]) == ("main", 68, 68,
                                                                              66.7)


def test_flame_graph_draws_only_the_heaviest_nodes(registry):
    trace = tracekit.read(shared_path(*PERF), registry=registry)
    icicle = flame_graph(trace, top=5).figure["data"][0]
    assert len(icicle["ids"]) == 6  # the root and 5 call sites
    assert set(icicle["parents"]) - {""} <= set(icicle["ids"])
    assert sum(icicle["values"]) == 102  # hidden descendants stay in their ancestors' size


def test_long_tables_lay_out_their_first_rows_and_hold_the_rest():
    from tracekit.plugins.html_report.markup import SHOWN_ROWS, table_html
    from tracekit.report import report_table

    def rows(n: int) -> str:
        return table_html(report_table([("n", "int", None, range(n))]), "test")

    short, long = rows(SHOWN_ROWS), rows(SHOWN_ROWS + 5)
    assert "<template>" not in short and "button" not in short
    shown, _, held = long.partition("<template>")
    assert shown.count("<tr>") == 1 + SHOWN_ROWS and held.count("<tr>") == 5
    assert f'data-v="{float(SHOWN_ROWS)}"' in held
    assert f'<button type="button" class="more">show all {SHOWN_ROWS + 5} rows</button>' in long


# --- CSV ------------------------------------------------------------------------------------

def test_csv_table_holds_raw_values_with_units_in_the_header(registry):
    trace = tracekit.read(shared_path(*NSYS), registry=registry)
    [summary] = tracekit.analyze(trace, "summary", registry=registry)
    rows = list(csv.reader(io.StringIO(report_table_csv(summary, "memops_size").decode())))
    assert rows[0] == ["size_pct", "total_bytes", "count", "mean_bytes", "median_bytes",
                       "min_bytes", "max_bytes", "stddev_bytes", "name"]
    assert rows[1][:3] == ["97.2", "21651120", "12"] and rows[1][-1] == "memset"
    kernels = list(csv.reader(io.StringIO(reports_table_csv([summary], "kernels").decode())))
    assert kernels[1][1] == "8419851" and kernels[1][-1].startswith("void probe_group_by_GPU2<")
    with pytest.raises(OptionError, match=r"no table 'kernel' \(tables: kernels, api, "):
        report_table_csv(summary, "kernel")
    with pytest.raises(OptionError, match="pick one with table_name= "):
        report_table_csv(summary)


# --- the command --------------------------------------------------------------------------

def test_report_command_writes_once_and_replaces_with_force(tmp_path, capsys):
    from tracekit.cli import main

    out = tmp_path / "report.html"
    assert main(["report", str(shared_path(*ROCPROF)), "-o", str(out)]) == 0
    first = out.read_bytes()
    assert first.startswith(b"<!DOCTYPE html>")
    assert b"Bottleneck: GPU-bound (kernels keep the GPU busy)" in first
    assert "wrote" in capsys.readouterr().err
    assert main(["report", str(shared_path(*ROCPROF)), "-o", str(out)]) == \
        OutputExistsError.exit_code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err
    assert main(["report", str(shared_path(*ROCPROF)), "-o", str(out), "-f", "-q",
                 "-O", "window=0ms:30ms"]) == 0
    windowed = out.read_bytes()
    assert b"analyzed: window 0ms:30ms" in windowed and windowed != first
    assert capsys.readouterr().err == ""


def test_report_command_refuses_an_option_no_analyzer_takes(tmp_path, capsys):
    from tracekit.cli import main

    out = tmp_path / "r.html"
    assert main(["report", str(shared_path(*PERF)), "-o", str(out), "-O",
                 "per_step=false"]) == 2
    assert "'per_step': no analyzer of this report takes it" in capsys.readouterr().err
    assert not out.exists()


# --- in the browser -------------------------------------------------------------------------

class _Dom(HTMLParser):
    """What the browser left in the page: per plot, its drawn marks and its text; the
    scripts; the text of every table cell; elements that must not be there."""

    def __init__(self) -> None:
        super().__init__()
        self.plots: dict[str, dict] = {}
        self.current: str | None = None
        self.scripts: list[str] = []
        self.in_script = False
        self.in_cell = False
        self.cells: list[str] = []
        self.images = 0
        self.g_class = ""
        self.body: dict[str, str | None] = {}

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "body":
            self.body = a
        if tag == "div" and "plot" in classes and a.get("id", "").startswith("plot-"):
            self.current = a["id"]
            self.plots[self.current] = {"svg": 0, "marks": 0, "text": []}
        elif tag in ("script", "figcaption"):
            self.current = None
        if tag == "script":
            self.in_script = True
            self.scripts.append("")
        if tag in ("img", "iframe", "object", "embed"):
            self.images += 1
        if tag == "td":
            self.in_cell = True
            self.cells.append("")
        if self.current is None:
            return
        plot = self.plots[self.current]
        if tag == "svg":
            plot["svg"] += 1
        if tag == "g":
            self.g_class = a.get("class") or ""
        # Bars sit in g.point, areas are path.js-fill, icicle slices path.surface, markers
        # path.point: the marks of data, not axes or grid lines.
        if tag == "path" and a.get("d") not in (None, "", "M0,0Z") and (
                {"point", "slice"} & set(self.g_class.split())
                or {"js-fill", "surface", "point"} & set(classes)):
            plot["marks"] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.in_script = False
        if tag == "td":
            self.in_cell = False

    def handle_data(self, data: str) -> None:
        if self.in_script:
            self.scripts[-1] += data
        if self.in_cell:
            self.cells[-1] += data
        if self.current is not None:
            self.plots[self.current]["text"].append(data)


def _open_in_chromium(page: Path, shot: Path, tmp: Path) -> tuple[_Dom, list[str]]:
    """Load ``page`` in headless Chromium; return its DOM after the scripts ran and every
    console message (any one is a failure: the page logs nothing)."""
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-background-networking", "--disable-component-update",
            "--hide-scrollbars", "--mute-audio", f"--user-data-dir={tmp / 'profile'}",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
            "--window-size=1000,1300", f"--screenshot={shot}", "--dump-dom", page.as_uri()]
    done = subprocess.run(args, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines()
               if ":CONSOLE" in line or "Uncaught" in line]
    dom = _Dom()
    dom.feed(done.stdout)
    return dom, console


BROWSER_CASES = {
    "torch": (TORCH, {"ampere_sgemm_32x32_sliced1x4_tn": XSS,
                      "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1": ODD}),
    "nsys": (NSYS, {}),
    "rocprof": (ROCPROF, {}),
    "perf": (PERF, {"main": XSS, "cksum": ODD}),
    "ranks": (RANKS, {}),
}


@SLOW_BROWSER
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: "
                    "apt-get install chromium): the page is checked in a browser only there")
@pytest.mark.parametrize("case", list(BROWSER_CASES))
def test_page_draws_in_chromium(case, registry, tmp_path):
    parts, rename = BROWSER_CASES[case]
    _, _, data = _page(registry, parts, rename)
    page, shot = tmp_path / f"{case}.html", tmp_path / f"report-{case}.png"
    page.write_bytes(data)
    dom, console = _open_in_chromium(page, shot, tmp_path)
    assert console == []
    assert "data-rendered-ms" in dom.body  # every Plotly.newPlot promise resolved
    assert len(dom.plots) == data.decode().count('<div class="plot"') >= 1
    for pid, plot in dom.plots.items():
        assert plot["svg"] and plot["marks"], f"{case}: {pid} drew nothing"
    assert dom.images == 0
    # plotly.js, the plots' data and the page's script; no script element made of a name.
    assert len(dom.scripts) == 2 + len(dom.plots)
    assert "alert(1)" not in [s.strip() for s in dom.scripts]
    if rename:
        shown = [XSS, ODD.translate({0x0A: 0x240A, 0x1B: 0x241B})]
        assert all(any(name in cell for cell in dom.cells) for name in shown)
    if case == "perf":  # the flame graph draws the names as SVG text
        icicle = next(p for p in dom.plots.values() if p["text"] and XSS in "".join(p["text"]))
        assert icicle["marks"] >= 10
    assert shot.stat().st_size > 10_000
    if os.environ.get("TRACEKIT_UPDATE_SCREENSHOTS") == "1" and not rename:
        shutil.copy(shot, ROOT / "docs" / "images" / shot.name)


def test_sources_of_plots_are_named(registry):
    _, _, page = _page(registry, NSYS)
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page.decode())
    assert len(captions) == page.decode().count('<div class="plot"') == 6
    assert [c.split(":")[0].split(",")[0] for c in captions] == [
        "Where the GPU timeline went", "GPU time per device", "Busy share per bin",
        "Launch delay", "Kernel duration",
        "Flame graph of the samples (root at the top; click a frame to zoom)"]
    assert all("analyzer" in c or "from the events" in c for c in captions)


def test_many_steps_are_drawn_as_areas_not_a_bar_each():
    from tracekit.plugins.html_report.figures import MAX_BARS, steps_figure
    from tracekit.report import report_table

    def steps(n: int) -> pa.Table:
        return report_table([
            ("step", "int", None, range(n)), ("device", "str", None, ["GPU 0"] * n),
            ("duration", "int", "ns", [2_000_000] * n)] + [
            (c, "float", "%", [25.0] * n) for c in ("compute_pct", "comm_pct", "mem_pct",
                                                    "idle_pct")])

    few, many = steps_figure(steps(MAX_BARS)), steps_figure(steps(MAX_BARS + 1))
    assert [t["type"] for t in few["data"]] == ["bar"] * 4
    assert [t.get("stackgroup") for t in many["data"]] == ["steps"] * 4
    assert many["data"][0]["x"][:2] == [0, 1] and many["data"][0]["customdata"][0] == ["#0", 2.0]


def test_repeated_step_numbers_stay_apart():
    from tracekit.plugins.html_report.figures import steps_figure
    from tracekit.report import report_table

    table = report_table([("step", "int", None, [4, 5, 4]), ("device", "str", None, ["G"] * 3),
                          ("duration", "int", "ns", [1, 2, 3])] + [
        (c, "float", "%", [10.0, 20.0, 30.0]) for c in ("compute_pct", "comm_pct", "mem_pct",
                                                        "idle_pct")])
    compute = steps_figure(table)["data"][0]
    assert compute["x"] == [0, 1, 2] and compute["y"] == [10.0, 20.0, 30.0]
    assert steps_figure(table)["layout"]["xaxis"]["ticktext"] == ["#4", "#5", "#4"]


def test_without_plotly_the_command_says_what_to_install(tmp_path, capsys, monkeypatch):
    from tracekit.cli import main
    from tracekit.plugins.html_report import assets

    monkeypatch.setattr(assets, "_plotly_js_path", lambda: None)
    out = tmp_path / "r.html"
    for command in (["report"], ["analyze", "--format", "html"]):
        assert main([*command, str(shared_path(*PERF)), "-o", str(out)]) == 1
        assert capsys.readouterr().err == \
            "error: the HTML report needs plotly: pip install 'tracekit[html]'\n"
        assert not out.exists()


@pytest.mark.parametrize(("parts", "sections"), [
    (RANKS, ["verdict", "breakdown", "timeline", "distributions", "summary", "ranks", "diff"]),
    (PERF, ["verdict", "cpu"]),
])
def test_page_sections(parts, sections, registry):
    _, reports, page = _page(registry, parts)
    html = page.decode()
    assert re.findall(r'<section id="([a-z-]+)">', html) == sections
    titles = [f.title for r in reports for f in r.findings]
    shown = [html.count(f"</span> {text(t)}</p>") + html.count(f'"program">{text(t)}</p>')
             for t in titles]  # a card, or the program class under the verdict
    assert titles and shown == [1] * len(titles)


# --- analyze --format html ------------------------------------------------------------------

@pytest.mark.slow
def test_analyze_format_html_writes_the_report_page(tmp_path, capsys):
    from tracekit.cli import main

    path = str(shared_path(*ROCPROF))
    report, analyzed = tmp_path / "report.html", tmp_path / "analyze.html"
    assert main(["report", path, "-o", str(report), "-q"]) == 0
    assert main(["analyze", path, "--format", "html", "-o", str(analyzed)]) == 0
    assert capsys.readouterr().err == f"wrote {analyzed}\n"
    assert analyzed.read_bytes() == report.read_bytes()
    # With -a, the page of exactly the analyzers asked for.
    assert main(["analyze", path, "--format", "html", "-a", "summary", "-o", str(analyzed),
                 "-f", "-q"]) == 0
    html = analyzed.read_text()
    assert re.findall(r'<section id="([a-z-]+)">', html) == [
        "verdict", "timeline", "distributions", "summary"]
    assert "Bottleneck: GPU-bound (kernels keep the GPU busy)" not in html
    assert "<h3>GPU kernels (" in html


def test_page_without_the_events_leaves_out_their_plots(registry):
    trace = tracekit.read(FIXTURES / "scenarios" / "matmul_loop.pt.trace.json.gz",
                          registry=registry)
    reports = tracekit.analyze(trace, ["bottleneck", "summary"], registry=registry)
    html = render_html(None, reports, ["rank0.json", "rank1.json"], registry=registry).decode()
    assert re.findall(r'<section id="([a-z-]+)">', html) == ["verdict", "summary"]
    assert "2 inputs, each analyzed where it was read; tracekit" in html
    assert html.count('<div class="plot"') == 1  # time per cause, beside the findings


ANALYZE_CASES = {"plain": ([NSYS], []), "engine": (list(RANKS), ["--engine", "local"])}


@SLOW_BROWSER
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (Debian: "
                    "apt-get install chromium): the page is checked in a browser only there")
@pytest.mark.parametrize("case", list(ANALYZE_CASES))
def test_analyze_page_draws_in_chromium(case, tmp_path):
    from tracekit.cli import main

    parts, args = ANALYZE_CASES[case]
    page, shot = tmp_path / f"{case}.html", tmp_path / f"analyze-{case}.png"
    assert main(["analyze", *[str(shared_path(*p)) for p in parts], *args, "--format", "html",
                 "-o", str(page), "-q"]) == 0
    data = page.read_text()
    sections = re.findall(r'<section id="([a-z-]+)">', data)
    assert sections == {"plain": ["verdict", "breakdown", "timeline", "distributions",
                                  "summary", "cpu"],
                        "engine": ["verdict", "ranks"]}[case]
    dom, console = _open_in_chromium(page, shot, tmp_path)
    assert console == []
    assert "data-rendered-ms" in dom.body
    assert len(dom.plots) == data.count('<div class="plot"') >= 2
    for pid, plot in dom.plots.items():
        assert plot["svg"] and plot["marks"], f"{case}: {pid} drew nothing"
    assert len(dom.scripts) == 2 + len(dom.plots)


def test_the_summary_section_is_titled_after_what_it_holds(registry):
    """A GPU trace's summary lists kernels, API calls and memory operations; a CPU-only
    trace's holds its annotation ranges alone and says so."""
    _, _, gpu = _page(registry, TORCH)
    path = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
    trace = tracekit.read(path, registry=registry)
    reports = tracekit.analyze(trace, report_analyzers(trace, registry), registry=registry)
    cpu = render_html(trace, reports, [str(path)], registry=registry)
    assert b"<h2>Top kernels, API calls and memory operations" in gpu
    assert b"Top kernels" not in cpu and b"<h2>Summary: annotation ranges" in cpu
