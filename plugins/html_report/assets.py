"""The page's own style sheet and script (plotly.js comes from the plotly package)."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from tracekit import TracekitError

CSS = """
:root { --fg: #1d1d1f; --muted: #6e6e73; --line: #e3e3e8; --bg: #fafafa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: var(--bg); }
header, main, footer { max-width: 1180px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-top: 8px; border-top: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; }
nav { margin: 10px 0 0; display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 13px; }
nav a { color: #2f5f9e; text-decoration: none; }
.inputs, .source, .note, figcaption, .meta { color: var(--muted); font-size: 12.5px; }
.inputs { margin: 2px 0; overflow-wrap: anywhere; }
.verdict { font-size: 20px; font-weight: 600; margin: 6px 0 2px; }
.program { margin: 0 0 10px; color: var(--muted); }
.finding { background: white; border: 1px solid var(--line); border-left: 4px solid #8e8e93;
           border-radius: 4px; padding: 8px 12px; margin: 8px 0; }
.finding.warning { border-left-color: #f0a020; }
.finding.critical { border-left-color: #d62728; }
.finding .title { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
.sev { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted);
       margin-right: 6px; }
.evidence { margin: 4px 0 0; padding: 0; list-style: none; display: flex; flex-wrap: wrap;
            gap: 2px 14px; font-size: 12.5px; overflow-wrap: anywhere; }
.evidence .key { color: var(--muted); }
.fix { margin: 6px 0 0; overflow-wrap: anywhere; }
figure { margin: 8px 0 4px; background: white; border: 1px solid var(--line);
         border-radius: 4px; padding: 6px; }
figcaption { padding: 2px 4px; }
.table-wrap { overflow-x: auto; max-height: 520px; overflow-y: auto; background: white;
              border: 1px solid var(--line); border-radius: 4px; margin-top: 6px; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { position: sticky; top: 0; background: #f2f2f5; cursor: pointer; user-select: none;
     text-align: left; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.txt { max-width: 640px; overflow: hidden; text-overflow: ellipsis; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
footer { padding-bottom: 30px; }
button.more { font: inherit; font-size: 12px; padding: 0 6px; margin-right: 6px;
              cursor: pointer; }
.beside { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 14px;
          align-items: start; }
@media (max-width: 900px) { .beside { grid-template-columns: minmax(0, 1fr); } }
"""

JS = """
(function () {
  "use strict";
  // How long the page takes to open (ms since navigation): plotly.js parsed (script), the
  // plots on the first screen drawn (first), every plot drawn (rendered).
  function mark(name) {
    document.body.setAttribute("data-" + name + "-ms", String(Math.round(performance.now())));
  }
  mark("script");
  var config = {displaylogo: false, responsive: true};
  var divs = Array.prototype.slice.call(document.querySelectorAll("div.plot"));
  var drawn = [];
  function draw(div) {
    var spec = JSON.parse(document.getElementById(div.id + "-data").textContent);
    drawn.push(Plotly.newPlot(div, spec.data, spec.layout, config));
  }
  // The first screen now; the others one at a time after it, so that the page shows and
  // answers while they draw.
  var later = divs.filter(function (div) {
    if (div.getBoundingClientRect().top < window.innerHeight) { draw(div); return false; }
    return true;
  });
  mark("first");
  function next() {
    if (later.length) {
      draw(later.shift());
      setTimeout(next, 0);
      return;
    }
    Promise.all(drawn).then(function () { mark("rendered"); });
  }
  setTimeout(next, 0);
  function key(cell, numeric) {
    if (!numeric) { return cell.textContent; }
    var v = parseFloat(cell.getAttribute("data-v"));
    return isNaN(v) ? -Infinity : v;
  }
  // Rows past the first few wait in a <template>: laid out only when asked for.
  function showAll(table) {
    var held = table.tBodies[0].querySelector("template");
    if (held) { table.tBodies[0].appendChild(held.content); held.remove(); }
    var button = table.parentNode.nextElementSibling.querySelector("button.more");
    if (button) { button.remove(); }
  }
  document.querySelectorAll("button.more").forEach(function (button) {
    button.addEventListener("click", function () {
      showAll(button.parentNode.previousElementSibling.querySelector("table"));
    });
  });
  function sortBy(th) {
    var row = th.parentNode, table = th.closest("table"), body = table.tBodies[0];
    showAll(table);
    var col = Array.prototype.indexOf.call(row.children, th);
    var numeric = th.classList.contains("num");
    var now = th.getAttribute("aria-sort");
    var down = now ? now === "ascending" : numeric;
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col], numeric), y = key(b.cells[col], numeric);
      var c = numeric ? (x < y ? -1 : x > y ? 1 : 0) : String(x).localeCompare(String(y));
      return down ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(row.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", down ? "descending" : "ascending");
  }
  document.querySelectorAll("table.sortable th").forEach(function (th) {
    th.addEventListener("click", function () { sortBy(th); });
  });
})();
"""


MISSING = "the HTML report needs plotly: pip install 'tracekit[html]'"


def _plotly_js_path() -> Path | None:
    """Where the installed plotly package keeps plotly.min.js (found without importing it)."""
    spec = importlib.util.find_spec("plotly")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path
    return None


def check_plotly() -> None:
    """Raise a one-line TracekitError when plotly is not installed."""
    if _plotly_js_path() is None:
        raise TracekitError(MISSING)


@functools.cache
def plotly_js() -> str:
    """plotly.js as the plotly package ships it (minified), to inline in the page."""
    path = _plotly_js_path()
    if path is None:
        raise TracekitError(MISSING)
    js = path.read_text(encoding="utf-8")
    # Inlined, "</script" would end the element early (the shipped build has none; "<\/"
    # means the same inside a JavaScript string or regular expression).
    return re.sub(r"(?i)</(script)", r"<\\/\1", js).replace("<!--", "<\\!--")
