"""The ``launch`` analyzer: how long kernels wait after their launch, and whether the host can
launch them as fast as the GPU runs them.

Implements HTA's get_cuda_kernel_launch_stats definitions (peers.md section 1): launch delay
= kernel start on the device minus the end of its launch call; a kernel is *short* when it
runs for less time than its launch call took; outliers beyond ``delay_cutoff_us`` (HTA's
launch_delay_cutoff, 100 µs). Tiny kernels are those under ``tiny_us`` (10 µs, TraceLens'
short-kernel threshold). The launch rate (launches per second of the launching window) is
set against the execution rate (kernels the device could run per second at their mean
duration): when the first is lower, the GPU waits for the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import tracekit
from tracekit.model import Trace
from tracekit.plugins.diagnosis.activity import NO_GPU, Activity, DeviceWork
from tracekit.report import Finding, Report, percent, report_table
from tracekit.stats import grouped_stats


@dataclass
class LaunchStats:
    """Launch figures of one device's kernels."""

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


def launch_stats(activity: Activity, work: DeviceWork, tiny_ns: int) -> LaunchStats:
    """Launch delay, short and tiny kernels, and rates for one device."""
    calls = activity.calls
    kernel = _kernel_mask(activity, work)
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
                       int(dur.sum()), launch_rate, 1e9 / mean if mean else 0.0)


def _kernel_mask(activity: Activity, work: DeviceWork) -> np.ndarray:
    category = activity.events["category"].take(pa.array(work.row)).cast(pa.string())
    return np.asarray(category.to_numpy(zero_copy_only=False) == "gpu.kernel", dtype=bool)


class LaunchAnalyzer(tracekit.Analyzer):
    """Launch delay, kernels shorter than their launch, tiny kernels, launch vs run rate."""

    name = "launch"
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
        report.table_titles["kernels"] = ("Most launched kernels (medians: run time, launch "
                                          "call, delay)")
        report.findings.extend(launch_findings(stats, self.options.tiny_us))
        return report

    def _kernels_table(self, activity: Activity) -> pa.Table:
        rows, delays, api_durs, durs = [], [], [], []
        calls = activity.calls
        for w in activity.devices:
            k = _kernel_mask(activity, w) & (w.api >= 0)
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
        "device", "kernels", "linked", "median", "p90", "max", "outliers")}
    for s in stats:
        d = s.delay
        cols["device"].append(s.work.label)
        cols["kernels"].append(s.kernels)
        cols["linked"].append(s.linked)
        cols["median"].append(float(np.median(d)) if len(d) else 0.0)
        cols["p90"].append(float(np.percentile(d, 90)) if len(d) else 0.0)
        cols["max"].append(int(d.max()) if len(d) else 0)
        cols["outliers"].append(int((d > cutoff_ns).sum()))
    return report_table([
               ("device", "str", None, cols["device"]), ("kernels", "int", None, cols["kernels"]),
               ("linked", "int", None, cols["linked"]), ("median", "float", "ns", cols["median"]),
               ("p90", "float", "ns", cols["p90"]), ("max", "int", "ns", cols["max"]),
               ("outliers", "int", None, cols["outliers"])])


def _size_table(stats: list[LaunchStats]) -> pa.Table:
    return report_table([
               ("device", "str", None, [s.work.label for s in stats]),
               ("short_pct", "float", "%", [percent(s.short, s.linked) for s in stats]),
               ("tiny_pct", "float", "%", [percent(s.tiny, s.kernels) for s in stats]),
               ("tiny_time_pct", "float", "%",
                [percent(s.tiny_time, s.kernel_time) for s in stats]),
               ("launches_per_s", "float", None, [round(s.launch_rate, 1) for s in stats]),
               ("runs_per_s", "float", None, [round(s.exec_rate, 1) for s in stats])])


def launch_findings(stats: list[LaunchStats], tiny_us: float) -> list[Finding]:
    """A finding per device whose kernels are mostly tiny and launched slower than they run."""
    findings = []
    for s in stats:
        if not s.kernels or percent(s.tiny, s.kernels) < 50 or s.launch_rate >= s.exec_rate:
            continue
        findings.append(Finding(
            severity="warning",
            title=f"{s.work.label}: {percent(s.tiny, s.kernels)}% of kernels run under "
                  f"{tiny_us:g}µs, launched slower than the GPU runs them",
            evidence={"kernels": s.kernels, "tiny": s.tiny,
                      "short_than_launch_pct": percent(s.short, s.linked),
                      "launches_per_s": round(s.launch_rate), "runs_per_s": round(s.exec_rate)},
            suggestion="fuse the small kernels: torch.compile, CUDA graphs "
                       "(torch.cuda.graphs / mode='reduce-overhead'), or larger batches",
            cost_ns=None))
    return findings
