"""The ``diff`` analyzer: two traces side by side, per kernel, framework op and user range.

``tracekit analyze BASELINE CANDIDATE -a diff``: the first input is the baseline. Like HTA's
TraceDiff (peers.md section 1) it compares counts and total durations of CPU ops and GPU
kernels by name and says which names are new or gone; it also compares the totals that
decide the verdict (GPU kernel, copy and idle time). Inputs may come from different readers
and vendors: kernel names then differ, while framework op names (``aten::mm``) still match.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import AnalysisError, Finding, Report, Trace
from tracekit.plugins.diagnosis.program import RANGE_COUNTERS  # per-call range suffixes
from tracekit.plugins.diagnosis.timeline import device_timelines
from tracekit.toolkit import (
    COLLECTIVE_RANGE,
    DATA_LOADING_RANGE,
    STEP_RANGE,
    equals,
    format_ns,
    matches,
    percent,
    report_table,
    short_name,
    step_ranges,
    time_span,
)
from tracekit.toolkit import intervals as iv

# The profiler's own records: its span (Kineto's "PyTorch Profiler (0)") and Kineto's
# instant markers; they run past the program, by the profiler's shut-down.
PROFILER_SPANS = "host.profiler"
PROFILER_MARKERS = r"^(Iteration Start: PyTorch Profiler|Record Window End)$"


class DiffAnalyzer(tracekit.Analyzer):
    """Count and time deltas per kernel and op between two inputs; new and gone names."""

    name = "diff"
    description = "two inputs: count and time deltas per kernel and op, new and gone names"
    compares_inputs = True  # two captures of one process stay two inputs

    @dataclass(frozen=True)
    class Options:
        top: int = field(default=20, metadata={"help": "rows per table (0 = all)"})

    def analyze(self, trace: Trace) -> Report:
        sources = trace.sources
        if len(sources) != 2:
            raise AnalysisError(f"diff compares two inputs, got {len(sources)}: "
                                "tracekit analyze BASELINE CANDIDATE -a diff")
        a, b = sources
        report = Report(analyzer=self.name, title=f"Diff: {a} → {b}")
        report.tables["totals"] = _totals(trace, a, b)
        report.table_titles["totals"] = "Totals (baseline, candidate, change)"
        shared: dict[str, pa.Table] = {}
        for key, category, title in (("kernels", "gpu.kernel", "GPU kernels"),
                                     ("ops", "host.op", "Framework ops (host time)"),
                                     ("ranges", "host.annotation", "User ranges (host time)")):
            per_name = _per_name(trace, category, a, b, RANGE_COUNTERS if key == "ranges"
                                 else None)
            if key == "ranges":  # step ranges are numbered: each run's would be new or gone
                per_name = per_name.filter(pc.invert(matches(per_name["name"], STEP_RANGE)))
                if not per_name.num_rows:
                    continue
            report.tables[key] = per_name.slice(0, self.options.top or None)
            report.table_titles[key] = f"{title}, largest time change first"
            report.findings.extend(_name_findings(per_name, title.split(" (")[0]))
            shared[key] = per_name
        extra = [f for f in (_step_finding(trace, a, b), _settings_finding(trace, a, b),
                             _vendor_finding(trace, a, b)) if f]
        different = _different_programs(shared)
        totals = _total_findings(report.tables["totals"])
        if different:
            for finding in totals:
                finding.suggestion = ""  # not a regression of one program to look into
        report.findings[:0] = ([different] if different else []) + totals + extra
        return report


def _busy_and_span(trace: Trace, source: str) -> tuple[int, int]:
    timelines = [t for t in device_timelines(trace) if t.work.source == source]
    return (sum(iv.total(t.busy) for t in timelines), sum(t.span for t in timelines))


def _totals(trace: Trace, a: str, b: str) -> pa.Table:
    ev = trace.events.filter(pc.equal(trace.events["kind"].cast(pa.string()), "slice"))
    source = ev["source"].cast(pa.string())
    category = ev["category"].cast(pa.string())
    metrics: list[tuple[str, str, list[int]]] = []  # (name, unit, [baseline, candidate])
    for label, cat in (("kernel time", "gpu.kernel"), ("memcpy time", "gpu.memcpy"),
                       ("memset time", "gpu.memset")):
        values = []
        for s in (a, b):
            rows = ev.filter(pc.and_(pc.equal(source, s), pc.equal(category, cat)))
            values.append(int(pc.sum(rows["dur_ns"]).as_py() or 0))
        metrics.append((label, "ns", values))
    busy_span = [_busy_and_span(trace, s) for s in (a, b)]
    metrics.append(("GPU active span", "ns", [s for _, s in busy_span]))
    metrics.append(("GPU idle in span", "ns", [s - busy for busy, s in busy_span]))
    if not any(v for _, _, values in metrics for v in values):
        metrics = []  # neither input ran GPU work: no rows of zeros
    metrics.append(("traced span", "ns", [_traced_span(trace.events, s) for s in (a, b)]))
    # Where a span's change lies: in framework ops (their union over threads) or outside.
    host_ops = [_range_time(ev, source, category, s, None, "host.op") for s in (a, b)]
    if any(host_ops):
        metrics.append(("host op time", "ns", host_ops))
    for label, pattern in (("host time in data loading", DATA_LOADING_RANGE),
                           ("host time in collectives", COLLECTIVE_RANGE)):
        values = [_range_time(ev, source, category, s, pattern) for s in (a, b)]
        if any(values):  # only where a range of the kind is there
            metrics.append((label, "ns", values))
    return report_table([
               ("metric", "str", None, [m for m, _, _ in metrics]),
               ("baseline", "int", "ns", [v[0] for _, _, v in metrics]),
               ("candidate", "int", "ns", [v[1] for _, _, v in metrics]),
               ("change", "int", "ns", [v[1] - v[0] for _, _, v in metrics]),
               ("change_pct", "float", "%", [percent(v[1] - v[0], v[0]) if v[0] else None
                                             for _, _, v in metrics])])


def _traced_span(events: pa.Table, source: str) -> int:
    """From the input's first timed event to the end of its last (wall-clock time), the
    profiler's own span and markers left out (``PROFILER_SPANS``, ``PROFILER_MARKERS``)."""
    own = pc.or_(equals(events["category"], PROFILER_SPANS), pc.and_(
        equals(events["category"], "host.instant"), matches(events["name"], PROFILER_MARKERS)))
    span = time_span(events.filter(pc.and_(pc.equal(events["source"].cast(pa.string()), source),
                                           pc.invert(own))))
    return span[1] - span[0] if span else 0


def _settings_finding(trace: Trace, a: str, b: str) -> Finding | None:
    """One input recorded with Python frames (the PyTorch profiler's with_stack) and the other
    without: recording them adds host time, so host times do not compare as they are."""
    python = trace.events.filter(equals(trace.events["category"], "host.python"))
    have = set(pc.unique(python["source"].cast(pa.string())).to_pylist()) if \
        python.num_rows else set()
    if len(have & {a, b}) != 1:
        return None
    (with_frames,) = have & {a, b}
    return Finding(
        "warning", f"Only {with_frames} has Python frames (recorded with with_stack=True): "
        "the two were recorded with different settings",
        {"with_python_frames": with_frames},
        "recording Python frames adds host time to every call: record both runs with the "
        "same profiler settings before comparing host times")


def _matched(per_name: pa.Table | None) -> tuple[int, int]:
    """Names in both inputs, and names in all."""
    if per_name is None or not per_name.num_rows:
        return 0, 0
    status = per_name["status"].to_numpy(zero_copy_only=False)
    return int(((status != "new") & (status != "gone")).sum()), len(status)


def _different_programs(per_name: dict[str, pa.Table]) -> Finding | None:
    """Two inputs that share under a quarter of their kernel names and under half of their
    framework op names run different programs: their differences are no regression."""
    kernels, ops = _matched(per_name.get("kernels")), _matched(per_name.get("ops"))
    if not kernels[1] or kernels[0] * 4 >= kernels[1] or (ops[1] and ops[0] * 2 >= ops[1]):
        return None
    return Finding(
        "warning", f"The inputs run different programs: {kernels[0]} of {kernels[1]} kernel "
        "names are in both" + (f", {ops[0]} of {ops[1]} framework op names" if ops[1] else ""),
        {"kernels_in_both": kernels[0], "kernel_names": kernels[1],
         "ops_in_both": ops[0], "op_names": ops[1]},
        "the changes below compare different work, not one program before and after a "
        "change: diff two runs of the same model and settings")


def _vendor_finding(trace: Trace, a: str, b: str) -> Finding | None:
    """The inputs ran on GPUs of different vendors: kernel names are each vendor's
    libraries', so kernels compare poorly; framework ops compare."""
    devices = trace.devices
    if not devices.num_rows or "vendor" not in devices.column_names:
        return None
    rows = devices.to_pylist()
    vendors = {src: {r["vendor"] for r in rows if r["source"] == src and r["vendor"]}
               for src in (a, b)}
    if not vendors[a] or not vendors[b] or vendors[a] & vendors[b]:
        return None
    named = {src: next((r["name"] for r in rows if r["source"] == src and r["name"]
                        and not r["name"].startswith("GPU ")), ", ".join(sorted(vendors[src])))
             for src in (a, b)}
    return Finding(
        "info", f"The inputs ran on GPUs of different vendors ({named[a]} → {named[b]})",
        {"baseline_gpu": named[a], "candidate_gpu": named[b]},
        "kernel names are each vendor's libraries' (hipBLASLt against cuBLAS, template "
        "arguments that differ): compare the framework ops and the totals, not kernels by name")


def _step_finding(trace: Trace, a: str, b: str) -> Finding | None:
    """Inputs holding different numbers of ``ProfilerStep`` ranges (distinct step numbers:
    the ranks of a run each record the same steps): their totals are not comparable, their
    mean steps are."""
    steps = step_ranges(trace)
    counts, means = [], []
    for s in (a, b):
        mine = steps.filter(pc.equal(steps["source"], s))
        dur = pc.subtract(mine["end"], mine["start"]).to_numpy(zero_copy_only=False)
        counts.append(len(pc.unique(mine["step"])))
        means.append(int(dur.mean()) if len(dur) else 0)
    if not all(counts) or counts[0] == counts[1]:
        return None
    change = means[1] - means[0]
    sign = "+" if change > 0 else ""
    return Finding(
        "warning", f"The inputs hold {counts[0]} and {counts[1]} profiler steps: compare per "
        f"step (mean step {format_ns(means[0])} → {format_ns(means[1])}, {sign}"
        f"{percent(change, means[0])}%), not the totals",
        {"steps_a": counts[0], "steps_b": counts[1], "mean_step_a_ns": means[0],
         "mean_step_b_ns": means[1]},
        "record the same number of steps (torch.profiler.schedule(active=N)) for totals that "
        "compare; per name, divide each time by its count")


def _range_time(slices: pa.Table, source: pa.ChunkedArray, category: pa.ChunkedArray,
                which: str, pattern: str | None, prefix: str = "host.") -> int:
    """Host time the input spent in ranges named as ``pattern`` (None: any) whose category
    starts with ``prefix`` (their union: nested ranges and ranges of several threads at once
    count once)."""
    keep = pc.and_(pc.and_(pc.equal(source, which), pc.starts_with(category, prefix)),
                   pc.is_valid(slices["ts_ns"]))
    if pattern is not None:
        keep = pc.and_(keep, matches(slices["name"], pattern))
    rows = slices.filter(keep)
    start = rows["ts_ns"].to_numpy()
    return iv.total(iv.union(start, start + rows["dur_ns"].fill_null(0).to_numpy()))


def _per_name(trace: Trace, category: str, a: str, b: str,
              strip: str | None = None) -> pa.Table:
    """Per name (without what matches ``strip``): count and total time in each input, the
    change, and new/gone/changed."""
    ev = trace.events
    rows = ev.filter(pc.and_(pc.equal(ev["category"].cast(pa.string()), category),
                             pc.equal(ev["kind"].cast(pa.string()), "slice")))
    names = rows["name"].cast(pa.string())
    if strip:
        names = pc.replace_substring_regex(names, strip, "")
    grouped = pa.table({"source": rows["source"].cast(pa.string()),
                        "name": names,
                        "dur": rows["dur_ns"].fill_null(0)}) \
        .group_by(["source", "name"], use_threads=False) \
        .aggregate([("dur", "sum"), ("dur", "count")])
    sides = []
    for s, tag in ((a, "a"), (b, "b")):
        side = grouped.filter(pc.equal(grouped["source"], s))
        sides.append(pa.table({"name": side["name"], f"count_{tag}": side["dur_count"],
                               f"time_{tag}": side["dur_sum"]}))
    joined = sides[0].join(sides[1], "name", join_type="full outer", use_threads=False)
    count_a = joined["count_a"].fill_null(0).to_numpy()
    count_b = joined["count_b"].fill_null(0).to_numpy()
    time_a = joined["time_a"].fill_null(0).to_numpy()
    time_b = joined["time_b"].fill_null(0).to_numpy()
    status = np.select([count_a == 0, count_b == 0, (count_a == count_b) & (time_a == time_b)],
                       ["new", "gone", "same"], "changed")
    delta = time_b - time_a
    order = np.lexsort((joined["name"].to_numpy(zero_copy_only=False), -np.abs(delta)))
    return report_table([
               ("status", "str", None, status[order]),
               ("count_a", "int", None, count_a[order]), ("count_b", "int", None, count_b[order]),
               ("time_a", "int", "ns", time_a[order]), ("time_b", "int", "ns", time_b[order]),
               ("change", "int", "ns", delta[order]),
               ("name", "str", None, joined["name"].to_numpy(zero_copy_only=False)[order])])


def _total_findings(totals: pa.Table) -> list[Finding]:
    rows = {r["metric"]: r for r in totals.to_pylist()}
    kernel = rows.get("kernel time")
    if kernel is None or not (kernel["baseline"] or kernel["candidate"]):
        return _host_findings(rows)
    change = kernel["change"]
    span = rows.get("GPU active span")
    # More kernel time in a much shorter run is no regression: the kernels ran closer
    # together (graphs, fewer gaps), or the candidate did more work; say so, not "slower".
    shorter = span is not None and span["baseline"] and span["change_pct"] <= -SHORTER_RUN_PCT
    total = Finding(
        severity="info" if change <= 0 or shorter else "warning",
        title=f"GPU kernel time {'+' if change > 0 else ''}{format_ns(change)} "
              f"({'+' if change > 0 else ''}{kernel['change_pct']}%)"
              if kernel["baseline"] else f"GPU kernel time {format_ns(kernel['candidate'])} "
              "(none in the baseline)",
        evidence={"baseline_ns": kernel["baseline"], "candidate_ns": kernel["candidate"],
                  "idle_change_ns": rows["GPU idle in span"]["change"]},
        suggestion="" if change <= 0 else (
            f"the run is shorter, though: the GPU's active span {span['change_pct']:g}% "
            f"({format_ns(span['change'])}), its idle time "
            f"{format_ns(rows['GPU idle in span']['change'])}; compare the kernels per call "
            "(the counts below) before reading the sum"
            if shorter else "the kernels below changed the most"),
        cost_ns=0 if shorter else max(change, 0))
    return [total, *_saving_lost(kernel, rows.get("GPU active span"),
                                 rows.get("GPU idle in span"))]


#: A GPU active span this much shorter (%) makes more kernel time no regression.
SHORTER_RUN_PCT = 20.0
#: Kernel time that falls by at least this share ...
KERNEL_SAVING_PCT = 20.0


def _saving_lost(kernel: dict, span: dict | None, idle: dict | None) -> list[Finding]:
    """Kernels much faster (``KERNEL_SAVING_PCT``) while the GPU's active span shrinks by less
    than half as much: the time saved became idle time, and something else (host work
    between launches, as a rule) now sets the pace."""
    if not span or not idle or not kernel["baseline"] or not span["baseline"]:
        return []
    if kernel["change_pct"] > -KERNEL_SAVING_PCT or span["change_pct"] * 2 <= kernel["change_pct"]:
        return []
    return [Finding(
        "warning", f"Kernel time {-kernel['change_pct']:g}% less "
        f"({kernel['baseline'] / kernel['candidate']:.2g}× faster), the GPU's span only "
        f"{-span['change_pct']:g}% shorter: the GPU idles {format_ns(idle['change'])} more",
        {"kernel_change_pct": kernel["change_pct"], "span_change_pct": span["change_pct"],
         "idle_change_ns": idle["change"]},
        "the time the kernels saved went to idle gaps: see what bounds the candidate now "
        "('tracekit analyze CANDIDATE'); host work between launches, which the slower kernels "
        "hid, as a rule (CUDA graphs, torch.compile)",
        cost_ns=max(int(idle["change"]), 0))]


def _host_findings(rows: dict[str, dict]) -> list[Finding]:
    """Two inputs without GPU kernels: the wall-clock change, and what of it the data loading
    and the collectives account for."""
    span = rows["traced span"]
    if not span["baseline"]:
        return []
    change = span["change"]
    evidence = {"baseline_ns": span["baseline"], "candidate_ns": span["candidate"]}
    for label, key in (("host time in data loading", "data_loading_change_ns"),
                       ("host time in collectives", "collectives_change_ns"),
                       ("host op time", "host_op_change_ns")):
        if label in rows:
            evidence[key] = rows[label]["change"]
    sign = "+" if change > 0 else ""
    fix = "" if change <= 0 else "the ops and ranges below changed the most"
    ops = evidence.get("host_op_change_ns")
    if change > 0 and ops is not None and abs(ops) * 2 < change:
        fix = (f"framework ops account for {format_ns(ops)} of it: the change is outside ops "
               "(the ranges below, data loading, Python or waiting; Python frames, recorded "
               "with with_stack=True, show where)")
    return [Finding(
        severity="info" if change <= 0 else "warning",
        title=f"Traced span {sign}{format_ns(change)} ({sign}{span['change_pct']}%)",
        evidence=evidence, suggestion=fix, cost_ns=max(change, 0))]


def _name_findings(per_name: pa.Table, what: str) -> list[Finding]:
    status = per_name["status"].to_numpy(zero_copy_only=False)
    new, gone = int((status == "new").sum()), int((status == "gone").sum())
    if not (new or gone):
        return []
    names = per_name["name"].to_numpy(zero_copy_only=False)
    return [Finding(
        severity="info", title=f"{what}: {new} names new, {gone} gone",
        evidence={"new": new, "gone": gone, "matched": int(len(status) - new - gone),
                  "largest_new": short_name(str(names[status == "new"][0])) if new else "-",
                  "largest_gone": short_name(str(names[status == "gone"][0])) if gone else "-"},
        suggestion="")]
