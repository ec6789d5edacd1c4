"""How fast an HTML report opens in headless Chromium, beside a page of plotly.js alone.

    python bench/report_load.py report.html [other.html ...] [--rounds 7] [--window 1200,1000]

Loads the report (or several, to compare them) and a baseline page (the same plotly.js
inlined the usual way, in a ``<script>`` element, and one bar chart) in turns, each in a
fresh headless Chromium driven over the DevTools protocol (``--remote-debugging-pipe``: no
extra package), and reads the times the pages record on ``<body>`` (milliseconds since
navigation started, wall clock):

- ``paint``: first contentful paint (the browser's own entry): the header, verdict and
  findings are on the screen;
- ``script``: plotly.js has been parsed and run;
- ``first``: the plots on the first screen are drawn;
- ``rendered``: every plot is drawn;

and, from the DevTools Performance metrics, the main thread's time until then in scripts
(``js``: plotly.js and the page's own), layout, style and all tasks.

The baseline records the same marks (``paint`` is its bar chart's). Both are loaded in the
same run, in turns (each round in another order), so that a busy machine slows both alike;
the median over the rounds of the page's time over the baseline's of the same round says
what the page costs beyond plotly.js itself. Also prints each page's size with and without
plotly.js.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MARKS = ("paint", "script", "first", "rendered")
#: Where the browser's main thread spent its time until then (DevTools Performance metrics).
WORK = {"js": "ScriptDuration", "layout": "LayoutDuration", "style": "RecalcStyleDuration",
        "tasks": "TaskDuration"}

#: The baseline's own marks, as the report's script records them.
BASELINE_JS = """
document.body.setAttribute("data-script-ms", String(Math.round(performance.now())));
Plotly.newPlot("p", [{type: "bar", x: ["compute", "idle"], y: [3, 1]}], {height: 300})
  .then(function () {
    var now = String(Math.round(performance.now()));
    document.body.setAttribute("data-first-ms", now);
    document.body.setAttribute("data-rendered-ms", now);
  });
"""

#: Run in the page once it is drawn: the marks, and the first contentful paint.
READ_MARKS = """
(function () {
  var d = document.body ? document.body.dataset : {};
  if (!d.renderedMs) { return null; }
  var fcp = performance.getEntriesByName("first-contentful-paint")[0];
  if (!fcp && performance.now() < +d.renderedMs + 2000) { return null; }  // paint is logged late
  return JSON.stringify({paint: fcp ? Math.round(fcp.startTime) : null,
                         script: +d.scriptMs, first: +d.firstMs, rendered: +d.renderedMs});
})()
"""


def plotly_of(page: str) -> str:
    """The plotly.js inlined in a report, as the report holds it."""
    from tracekit.plugins.html_report.assets import plotly_js

    js = plotly_js()
    if js not in page:
        sys.exit("the page does not hold the installed plotly.js: make it again")
    return js


def baseline(js: str) -> str:
    """A page of plotly.js, inlined the usual way, and one bar chart."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>plotly.js'
            '</title></head><body><div id="p" style="height:300px"></div>'
            f"<script>{js}</script><script>{BASELINE_JS}</script></body></html>\n")


class Browser:
    """One headless Chromium, driven over the DevTools protocol on a pipe (fds 3 and 4)."""

    def __init__(self, chromium: str, window: str, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # in the child: its fd 3 reads commands, fd 4 writes replies
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update",
             "--mute-audio", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--window-size={window}", "--remote-debugging-pipe", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=fds,
            pass_fds=(3, 4), start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._id = 0
        self.session: str | None = None

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: bool = True) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._next()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _next(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium exited")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def open(self, url: str, timeout: float = 120) -> dict[str, int | None]:
        """Load ``url`` in a new tab; return its marks once every plot is drawn."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        self.session = self.call("Target.attachToTarget", {
            "targetId": target["targetId"], "flatten": True}, session=False)["sessionId"]
        self.call("Page.enable")
        self.call("Performance.enable")
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.call("Runtime.evaluate", {"expression": READ_MARKS,
                                                   "returnByValue": True})
            found = value.get("result", {}).get("value")
            if found:
                marks = json.loads(found)
                metrics = {m["name"]: m["value"] for m in
                           self.call("Performance.getMetrics")["metrics"]}
                # Main-thread time by activity, in ms (seconds in the protocol).
                marks.update({name: round(metrics.get(key, 0.0) * 1000) for name, key in
                              WORK.items()})
                return marks
            time.sleep(0.05)
        raise RuntimeError(f"{url}: not drawn in {timeout:.0f} s")

    def close(self) -> None:
        """Stop this browser and the processes it started (its own process group)."""
        try:
            self.call("Browser.close", session=False)
            self.proc.wait(timeout=10)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def load(chromium: str, page: Path, window: str) -> dict[str, int | None]:
    """Open ``page`` in a fresh browser (nothing cached); return its marks."""
    with tempfile.TemporaryDirectory(prefix="tracekit-load-",
                                     ignore_cleanup_errors=True) as profile:
        browser = Browser(chromium, window, Path(profile))
        try:
            return browser.open(page.resolve().as_uri())
        finally:
            browser.close()


def summary(rows: list[dict[str, int | None]]) -> dict[str, tuple[float, float]]:
    """(best, median) per mark and per kind of work, in ms."""
    out = {}
    for mark in (*MARKS, *WORK):
        values = [r[mark] for r in rows if r.get(mark) is not None]
        if values:
            out[mark] = (float(min(values)), float(statistics.median(values)))
    return out


def describe(page: Path) -> str:
    """The page's size, with and without plotly.js, its plots and table rows."""
    text = page.read_text(encoding="utf-8")
    size, plotly_size = len(text.encode()), len(plotly_of(text).encode())
    held = sum(t.count("<tr>") for t in re.findall(r"<template>(.*?)</template>", text, re.S))
    rows = len(re.findall(r"<tr[ >]", text))
    return (f"{page.name}: {size:,} bytes, plotly.js {plotly_size:,}, the rest "
            f"{size - plotly_size:,}; {len(re.findall(r'<div class=.plot.', text))} plots, "
            f"{rows} table rows of which {rows - held} laid out at load")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pages", type=Path, nargs="+",
                        help="HTML reports (tracekit report ... -o PAGE); several are compared")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--window", default="1200,1000", help="browser window WIDTH,HEIGHT")
    parser.add_argument("--chromium", default=shutil.which("chromium")
                        or shutil.which("chromium-browser"))
    parser.add_argument("--json", action="store_true", help="print every load as JSON too")
    args = parser.parse_args()
    if not args.chromium:
        sys.exit("no chromium found (Debian: apt-get install chromium)")
    for page in args.pages:
        print(describe(page))
    js = plotly_of(args.pages[0].read_text(encoding="utf-8"))
    load_avg = os.getloadavg()[0]
    runs: dict[str, list[dict[str, int | None]]] = {p.name: [] for p in args.pages}
    runs["plotly.js"] = []
    with tempfile.TemporaryDirectory(prefix="tracekit-base-") as folder:
        base_page = Path(folder) / "plotly.html"
        base_page.write_text(baseline(js), encoding="utf-8")
        pages = [*args.pages, base_page]
        for i in range(args.rounds):
            # Each round loads every page once, starting one further on each time: a load
            # right after another pays for the previous browser's exit.
            for page in pages[i % len(pages):] + pages[:i % len(pages)]:
                name = "plotly.js" if page is base_page else page.name
                runs[name].append(load(args.chromium, page, args.window))
                time.sleep(1)
            load_avg = max(load_avg, os.getloadavg()[0])
    print(f"{args.rounds} rounds; window {args.window}; load average up to {load_avg:.1f}")
    base = runs["plotly.js"]
    for title, columns in (("ms since navigation", MARKS), ("main-thread ms", tuple(WORK))):
        print(f"{title:<24}" + "".join(f"{m:>15}" for m in columns))
        for name, rows in runs.items():
            sums = summary(rows)
            cells = [f"{sums[m][0]:.0f} / {sums[m][1]:.0f}" if m in sums else "-"
                     for m in columns]
            print(f"{name[:14] + ' best/median':<24}" + "".join(f"{c:>15}" for c in cells))
            if name == "plotly.js":
                continue
            # The page over the baseline loaded right after it: a busy machine slows both.
            ratios = [statistics.median(r[m] / b[m] for r, b in zip(rows, base, strict=True)
                                        if r.get(m) and b.get(m)) if any(
                r.get(m) and b.get(m) for r, b in zip(rows, base, strict=True)) else None
                for m in columns]
            print(f"{'  / plotly.js, median':<24}"
                  + "".join(f"{r:>15.2f}" if r is not None else f"{'-':>15}" for r in ratios))
    if args.json:
        print(json.dumps(runs))


if __name__ == "__main__":
    main()
