"""The ``launch`` analyzer: how long kernels wait after their launch, and whether the host can
launch them as fast as the GPU runs them.

Implements HTA's get_cuda_kernel_launch_stats definitions (peers.md section 1): launch delay
= kernel start on the device minus the end of its launch call; a kernel is *short* when it
runs for less time than its launch call took; outliers beyond ``delay_cutoff_us`` (HTA's
launch_delay_cutoff, 100 µs). Tiny kernels are those under ``tiny_us`` (10 µs, TraceLens'
short-kernel threshold). The launch rate (launches per second of the launching window) is
set against the execution rate (kernels the device could run per second at their mean
duration): when the first is lower, the GPU waits for the host.

A launch is a host call linked to device *work*: a kernel, copy, memset or graph row. Calls
linked only to device-side waits (``cudaStreamWaitEvent`` -> "Stream Wait Event",
synchronize calls -> ``gpu.sync`` rows) are not launches (``launches_work``). A graph launch
(``cudaGraphLaunch``/``hipGraphLaunch``/``cuGraphLaunch``, a call linked to a ``gpu.graph``
row, or one call linked to several kernels) is one launch: its nodes are reported as a graph
(nodes, span on the device, idle gaps inside, delay of the first node) and left out of the
per-kernel delay, short-kernel, tiny-kernel and rate figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.diagnosis.activity import (
    NO_GPU,
    READS_COLUMNS,
    Activity,
    DeviceWork,
    launches_work,  # noqa: F401 - part of this module's documented API
    queued_before,
)
from tracekit.plugins.diagnosis.advice import Facts, fixes_for
from tracekit.plugins.diagnosis.gaps import CAUSES, all_gaps, launch_gaps_to_copies
from tracekit.plugins.diagnosis.program import Program, classify
from tracekit.toolkit import grouped_stats, percent, report_table
from tracekit.toolkit import intervals as iv

GRAPH_LAUNCH = r"^(cuda|hip|cu)GraphLaunch"


def graph_nodes(activity: Activity, work: DeviceWork) -> np.ndarray:
    """Per row of ``work``: launched by a graph launch (by name, because the call also
    launched a ``gpu.graph`` row, or because it launched several kernels on the device)."""
    api = work.api
    node = np.zeros(len(api), dtype=bool)
    has = api >= 0
    if not has.any():
        return node
    node[has] = _graph_api(activity)[api[has]]
    category = _categories(activity, work)
    node |= has & np.isin(api, api[has & (category == "gpu.graph")])
    calls, counts = np.unique(api[has & (category == "gpu.kernel")], return_counts=True)
    node |= has & np.isin(api, calls[counts > 1])
    return node


def _graph_api(activity: Activity) -> np.ndarray:
    """Per host call: named like a graph launch."""
    if "graph_api" not in activity.cache:
        names = activity.events["name"].take(pa.array(activity.calls.row)).cast(pa.string())
        activity.cache["graph_api"] = pc.match_substring_regex(names, GRAPH_LAUNCH).fill_null(
            False).to_numpy(zero_copy_only=False)
    return activity.cache["graph_api"]


def _categories(activity: Activity, work: DeviceWork) -> np.ndarray:
    category = activity.events["category"].take(pa.array(work.row)).cast(pa.string())
    return np.asarray(category.to_numpy(zero_copy_only=False), dtype=object)


@dataclass
class LaunchStats:
    """Launch figures of one device's individually launched kernels (graph nodes apart)."""

    work: DeviceWork
    kernels: int
    linked: int
    delay: np.ndarray  # per linked kernel, ns
    short: int
    tiny: int
    tiny_time: int
    kernel_time: int
    launch_rate: float  # launches per second while launching
    exec_rate: float  # kernels per second at their mean duration
    graph_nodes: int = 0  # kernels launched by graph launches, left out of the above
    before_recording: int = 0  # kernels queued before the recording, left out of the above


def launch_stats(activity: Activity, work: DeviceWork, tiny_ns: int) -> LaunchStats:
    """Launch delay, short and tiny kernels, and rates for one device."""
    calls = activity.calls
    all_kernels = _kernel_mask(activity, work)
    in_graph = graph_nodes(activity, work)
    # Launched before the recording began: no launch to measure (cuda_graph's warm-up replay).
    early = all_kernels & work.before_recording
    kernel = all_kernels & ~in_graph & ~early
    dur = (work.end - work.start)[kernel]
    api = work.api[kernel]
    linked = api >= 0
    a = api[linked]
    delay = work.start[kernel][linked] - calls.end[a]
    short = int((dur[linked] < (calls.end[a] - calls.start[a])).sum())
    launches = np.sort(calls.start[a])
    window = int(launches[-1] - launches[0]) if len(launches) > 1 else 0
    launch_rate = (len(launches) - 1) * 1e9 / window if window else 0.0
    mean = float(dur.mean()) if len(dur) else 0.0
    return LaunchStats(work, int(kernel.sum()), int(linked.sum()), delay, short,
                       int((dur < tiny_ns).sum()), int(dur[dur < tiny_ns].sum()),
                       int(dur.sum()), launch_rate, 1e9 / mean if mean else 0.0,
                       int((all_kernels & in_graph & ~early).sum()), int(early.sum()))


def _kernel_mask(activity: Activity, work: DeviceWork) -> np.ndarray:
    return np.asarray(_categories(activity, work) == "gpu.kernel", dtype=bool)


@dataclass
class GraphLaunches:
    """The graph launches of one device: one entry per launching call."""

    work: DeviceWork
    call: np.ndarray  # index into Activity.calls
    nodes: np.ndarray  # device rows launched (kernels, copies, memsets; a gpu.graph row is 1)
    kernels: np.ndarray
    whole: np.ndarray  # traced as one gpu.graph row: its nodes are not in the trace
    start: np.ndarray  # first node start on the device
    end: np.ndarray  # last node end
    busy: np.ndarray  # ns covered by the nodes
    gaps: np.ndarray  # idle holes between the nodes
    delay: np.ndarray  # first node start - end of the launch call

    @property
    def span(self) -> np.ndarray:
        return self.end - self.start


def graph_launches(activity: Activity, work: DeviceWork) -> GraphLaunches:
    """Each graph launch of ``work`` with its nodes' span, busy time and inner gaps."""
    node = graph_nodes(activity, work)
    api = work.api[node]
    category = _categories(activity, work)[node]
    start, end = work.start[node], work.end[node]
    calls, inverse = np.unique(api, return_inverse=True)
    n = len(calls)
    cols: dict[str, Any] = {k: np.zeros(n, dtype=np.int64) for k in (
        "nodes", "kernels", "start", "end", "busy", "gaps")}
    whole = np.zeros(n, dtype=bool)
    for i in range(n):
        mine = inverse == i
        s, e = start[mine], end[mine]
        busy = iv.union(s, e)
        cols["nodes"][i] = int(mine.sum())
        cols["kernels"][i] = int((category[mine] == "gpu.kernel").sum())
        whole[i] = bool((category[mine] == "gpu.graph").any())
        cols["start"][i], cols["end"][i] = int(s.min()), int(e.max())
        cols["busy"][i] = iv.total(busy)
        cols["gaps"][i] = len(iv.gaps(busy)[0])
    delay = cols["start"] - activity.calls.end[calls] if n else np.zeros(0, dtype=np.int64)
    return GraphLaunches(work, calls, cols["nodes"], cols["kernels"], whole, cols["start"],
                         cols["end"], cols["busy"], cols["gaps"], delay)


#: What the gaps count as launch overhead (host time between launches, µs): the bottleneck's
#: default.
LAUNCH_GAP_US = 50.0
#: The GPU must idle waiting for launches this share of its span for the launch finding.
LAUNCH_IDLE_PCT = 5.0


class LaunchAnalyzer(tracekit.Analyzer):
    """Launch delay, kernels shorter than their launch, tiny kernels, launch vs run rate."""

    name = "launch"
    event_columns = READS_COLUMNS
    description = "kernel launch delay, short and tiny kernels, launch rate vs execution rate"

    @dataclass(frozen=True)
    class Options:
        tiny_us: float = field(default=10.0, metadata={"help": "a kernel under this is tiny"})
        delay_cutoff_us: float = field(default=100.0, metadata={
            "help": "launch delays above this are outliers"})
        top: int = field(default=15, metadata={"help": "kernel names to list"})

    def analyze(self, trace: Trace) -> Report:
        activity = Activity.of(trace)
        report = Report(analyzer=self.name, title="Kernel launches")
        tiny_ns = int(self.options.tiny_us * 1000)
        stats = [launch_stats(activity, w, tiny_ns) for w in activity.devices]
        if not stats:
            report.notes.append(NO_GPU)
        cutoff = int(self.options.delay_cutoff_us * 1000)
        report.tables["delay"] = _delay_table(stats, cutoff)
        report.table_titles["delay"] = (f"Launch delay: device start - launch call end "
                                        f"(outliers > {self.options.delay_cutoff_us:g}µs)")
        report.tables["rates"] = _size_table(stats)
        report.table_titles["rates"] = (f"Short (< launch call), tiny (< "
                                        f"{self.options.tiny_us:g}µs) kernels; launch vs run rate")
        report.tables["kernels"] = self._kernels_table(activity)
        report.table_titles["kernels"] = ("Most launched kernels with a traced launch "
                                          "(medians: run time, call, delay)")
        early = sum(s.before_recording for s in stats)
        if early:
            report.notes.append(f"{early:,} kernel{'s' if early != 1 else ''} ran before the "
                                "first one whose launching call the trace holds ("
                                f"{queued_before(trace)}): left out of the tables")
        graphs = [graph_launches(activity, w) for w in activity.devices]
        if any(len(g.call) for g in graphs):
            report.tables["graphs"] = _graphs_table(graphs)
            report.table_titles["graphs"] = (
                "Graph launches (one launch each; their nodes are left out of the tables "
                "above): nodes, span on the device, idle gaps between nodes, delay of the "
                "first node")
            report.tables["graph_launches"] = self._graph_launches_table(activity, graphs)
            report.table_titles["graph_launches"] = "Longest graph launches"
        gaps = all_gaps(trace, LAUNCH_GAP_US)
        launch = CAUSES.index("launch")
        idle = {g.timeline.work.label: percent(int(g.dur[g.cause == launch].sum()),
                                               g.timeline.span) for g in gaps}
        to_copies = {g.timeline.work.label: launch_gaps_to_copies(activity, g) for g in gaps}
        report.findings.extend(launch_findings(stats, self.options.tiny_us, idle,
                                               classify(trace), to_copies))
        return report

    def _graph_launches_table(self, activity: Activity, graphs: list[GraphLaunches],
                              ) -> pa.Table:
        picked = sorted(((int(g.span[i]), d, i) for d, g in enumerate(graphs)
                         for i in range(len(g.call))), key=lambda x: (-x[0], x[1], x[2]))
        picked = picked[: self.options.top]
        cols: dict[str, list[Any]] = {k: [] for k in (
            "device", "call", "nodes", "kernels", "span", "busy", "idle", "gaps", "delay")}
        for _, d, i in picked:
            g = graphs[d]
            cols["device"].append(g.work.label)
            cols["call"].append(activity.name(int(activity.calls.row[g.call[i]])))
            cols["nodes"].append(int(g.nodes[i]))
            cols["kernels"].append(int(g.kernels[i]))
            cols["span"].append(int(g.span[i]))
            cols["busy"].append(int(g.busy[i]))
            cols["idle"].append(int(g.span[i] - g.busy[i]))
            cols["gaps"].append(int(g.gaps[i]))
            cols["delay"].append(int(g.delay[i]))
        return report_table([
            ("device", "str", None, cols["device"]), ("call", "str", None, cols["call"]),
            ("nodes", "int", None, cols["nodes"]), ("kernels", "int", None, cols["kernels"]),
            ("span", "int", "ns", cols["span"]), ("busy", "int", "ns", cols["busy"]),
            ("idle_inside", "int", "ns", cols["idle"]), ("gaps_inside", "int", None, cols["gaps"]),
            ("delay", "int", "ns", cols["delay"])])

    def _kernels_table(self, activity: Activity) -> pa.Table:
        rows, delays, api_durs, durs = [], [], [], []
        calls = activity.calls
        for w in activity.devices:
            k = _kernel_mask(activity, w) & (w.api >= 0) & ~graph_nodes(activity, w)
            rows.append(w.row[k])
            durs.append((w.end - w.start)[k])
            delays.append(w.start[k] - calls.end[w.api[k]])
            api_durs.append(calls.end[w.api[k]] - calls.start[w.api[k]])
        if not rows:
            return _kernel_rows({"key": []}, {}, {}, [])
        names = activity.events["name"].take(pa.array(np.concatenate(rows)))
        dur, delay, api_dur = (np.concatenate(x) for x in (durs, delays, api_durs))
        by_dur = grouped_stats(names, pa.array(dur))
        by_delay = dict(zip(*_medians(names, delay), strict=True))
        by_api = dict(zip(*_medians(names, api_dur), strict=True))
        short = dict(zip(*_medians(names, (dur < api_dur).astype(np.int64) * 1000, "mean"),
                         strict=True))
        order = np.argsort(-np.asarray(by_dur["count"]), kind="stable")[: self.options.top]
        return _kernel_rows(by_dur, by_delay, by_api, order, short)


def _medians(names: pa.ChunkedArray, values: np.ndarray, stat: str = "median",
             ) -> tuple[list[str], list[float]]:
    s = grouped_stats(names, pa.array(values))
    return s["key"], [float(m) for m in s[stat]]


def _kernel_rows(by_dur: dict[str, Any], by_delay: dict[str, float], by_api: dict[str, float],
                 order: Any, short: dict[str, float] | None = None) -> pa.Table:
    keys = [by_dur["key"][i] for i in order]
    short = short or {}
    return report_table([
               ("count", "int", None, [int(by_dur["count"][i]) for i in order]),
               ("median", "float", "ns", [float(by_dur["median"][i]) for i in order]),
               ("call", "float", "ns", [by_api.get(k, 0.0) for k in keys]),
               ("delay", "float", "ns", [by_delay.get(k, 0.0) for k in keys]),
               ("short_pct", "float", "%", [round(short.get(k, 0.0) / 10, 1) for k in keys]),
               ("name", "str", None, keys)])


def _delay_table(stats: list[LaunchStats], cutoff_ns: int) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in (
        "device", "kernels", "linked", "median", "p90", "max", "outliers", "graph_nodes")}
    for s in stats:
        d = s.delay
        cols["device"].append(s.work.label)
        cols["kernels"].append(s.kernels)
        cols["linked"].append(s.linked)
        cols["median"].append(float(np.median(d)) if len(d) else 0.0)
        cols["p90"].append(float(np.percentile(d, 90)) if len(d) else 0.0)
        cols["max"].append(int(d.max()) if len(d) else 0)
        cols["outliers"].append(int((d > cutoff_ns).sum()))
        cols["graph_nodes"].append(s.graph_nodes)
    return report_table([
               ("device", "str", None, cols["device"]), ("kernels", "int", None, cols["kernels"]),
               ("linked", "int", None, cols["linked"]), ("median", "float", "ns", cols["median"]),
               ("p90", "float", "ns", cols["p90"]), ("max", "int", "ns", cols["max"]),
               ("outliers", "int", None, cols["outliers"]),
               ("graph_nodes", "int", None, cols["graph_nodes"])])


def _graphs_table(graphs: list[GraphLaunches]) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in (
        "device", "launches", "whole", "nodes", "median_nodes", "span", "median_span", "idle",
        "gaps", "median_delay")}
    for g in graphs:
        if not len(g.call):
            continue
        cols["device"].append(g.work.label)
        cols["launches"].append(len(g.call))
        cols["whole"].append(int(g.whole.sum()))
        cols["nodes"].append(int(g.nodes.sum()))
        cols["median_nodes"].append(float(np.median(g.nodes)))
        cols["span"].append(int(g.span.sum()))
        cols["median_span"].append(float(np.median(g.span)))
        cols["idle"].append(int((g.span - g.busy).sum()))
        cols["gaps"].append(int(g.gaps.sum()))
        cols["median_delay"].append(float(np.median(g.delay)))
    return report_table([
        ("device", "str", None, cols["device"]), ("launches", "int", None, cols["launches"]),
        ("traced_whole", "int", None, cols["whole"]), ("nodes", "int", None, cols["nodes"]),
        ("median_nodes", "float", None, cols["median_nodes"]),
        ("span", "int", "ns", cols["span"]), ("median_span", "float", "ns", cols["median_span"]),
        ("idle_inside", "int", "ns", cols["idle"]), ("gaps_inside", "int", None, cols["gaps"]),
        ("median_delay", "float", "ns", cols["median_delay"])])


def _size_table(stats: list[LaunchStats]) -> pa.Table:
    return report_table([
               ("device", "str", None, [s.work.label for s in stats]),
               ("short_pct", "float", "%", [percent(s.short, s.linked) for s in stats]),
               ("tiny_pct", "float", "%", [percent(s.tiny, s.kernels) for s in stats]),
               ("tiny_time_pct", "float", "%",
                [percent(s.tiny_time, s.kernel_time) for s in stats]),
               ("launches_per_s", "float", None, [round(s.launch_rate, 1) for s in stats]),
               ("gpu_can_run_per_s", "float", None, [round(s.exec_rate, 1) for s in stats])])


def launch_findings(stats: list[LaunchStats], tiny_us: float,
                    launch_idle_pct: dict[str, float] | None = None,
                    program: Program | None = None,
                    to_copies: dict[str, tuple[int, int, int, int]] | None = None,
                    ) -> list[Finding]:
    """A finding per device whose kernels are mostly tiny and launched slower than they run,
    where the GPU idles waiting for launches (``launch_idle_pct``: per device label, the
    launch gaps' share of its span) for ``LAUNCH_IDLE_PCT`` or more: a busy GPU whose many
    small kernels queue up behind long ones is not held back by launching. Where host-device
    copies end half the launch gaps' time or more (``to_copies``: per device label,
    ``launch_gaps_to_copies``), the GPU waits for copies issued one after another, whatever
    its kernels' sizes, and the finding says so with the copy fix."""
    program = program or Program(gpu=True)
    copied = _copy_findings(stats, launch_idle_pct or {}, program, to_copies or {})
    findings = list(copied.values())
    graphs = "hipGraph" if program.api == "HIP" else "CUDA graph"
    fix = (f"fuse the small kernels: torch.compile, {graphs}s (torch.cuda.graphs / "
           "mode='reduce-overhead'), or larger batches" if program.pytorch else
           f"fuse the small kernels or give each more work, and replay repeated launch "
           f"sequences as a {graphs}")
    for s in stats:
        if s.work.label in copied or not s.kernels or percent(s.tiny, s.kernels) < 50 \
                or not s.launch_rate or s.launch_rate >= s.exec_rate:
            continue
        idle = (launch_idle_pct or {}).get(s.work.label)
        if launch_idle_pct is not None and (idle or 0.0) < LAUNCH_IDLE_PCT:
            continue
        evidence: dict[str, Any] = {"kernels": s.kernels, "tiny": s.tiny,
                                    "shorter_than_launch_pct": percent(s.short, s.linked),
                                    "launches_per_s": round(s.launch_rate),
                                    "gpu_can_run_per_s": round(s.exec_rate)}
        if idle is not None:
            evidence["launch_idle_pct"] = idle
        findings.append(Finding(
            severity="warning",
            title=f"{s.work.label}: {percent(s.tiny, s.kernels)}% of kernels run under "
                  f"{tiny_us:g}µs, launched slower than the GPU runs them",
            evidence=evidence, suggestion=fix, cost_ns=None))
    return findings


def _copy_findings(stats: list[LaunchStats], idle_pct: dict[str, float], program: Program,
                   to_copies: dict[str, tuple[int, int, int, int]]) -> dict[str, Finding]:
    """Per device whose launch gaps are mostly ended by host-device copies (and cost
    ``LAUNCH_IDLE_PCT`` of its span or more): the copy finding, with the diagnosis' fix."""
    findings = {}
    for s in stats:
        gaps, gaps_ns, copies, copies_ns = to_copies.get(s.work.label, (0, 0, 0, 0))
        idle = idle_pct.get(s.work.label, 0.0)
        if not (copies_ns * 2 >= gaps_ns > 0) or idle < LAUNCH_IDLE_PCT:
            continue
        facts = Facts(launch_gaps=(gaps, gaps_ns), launch_gaps_to_copies=(copies, copies_ns))
        fix = fixes_for("launch", program, facts)[0]
        findings[s.work.label] = Finding(
            severity="warning",
            title=f"{s.work.label}: the GPU waits for host-device copies issued one after "
                  "another",
            evidence={"launch_gaps": gaps, "ending_in_copy": copies,
                      "ending_in_copy_ns": copies_ns, "launch_idle_pct": idle},
            suggestion=f"{fix.text} ({fix.because})", cost_ns=copies_ns)
    return findings
