"""The ``bottleneck`` analyzer: what the workload is bound by, with evidence and the fix.

Every nanosecond of each device's active span (first to last GPU activity) goes to exactly
one cause, and the causes add up to the span:

- ``compute``: compute kernels ran (``breakdown``'s compute part);
- ``communication``: communication kernels ran with no compute beside them (exposed);
- ``transfer``: copies or memsets ran with neither compute nor communication beside them;
- ``sync``, ``launch``, ``cpu``: the device was idle, and ``gaps`` attributed the gap to a
  synchronizing call, to back-to-back launches, or to host work between launches;
- ``idle-other``: idle with work already queued (stream dependencies, launch latency) or with
  no launch record to tell.

The verdict is the cause with the largest share when it holds at least half of the time or
1.5 times the runner-up; otherwise the workload is *mixed*. Findings for every cause worth at
least ``min_share_pct`` follow, ordered by the time they cost, each with its evidence and the
fixes the field's guides give for that pattern.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import tracekit
from tracekit import intervals as iv
from tracekit.model import Trace
from tracekit.plugins.diagnosis.activity import MEMORY, Activity, host_reads
from tracekit.plugins.diagnosis.breakdown import devices_table
from tracekit.plugins.diagnosis.gaps import CAUSES as GAP_CAUSES
from tracekit.plugins.diagnosis.gaps import Gaps, all_gaps, host_context
from tracekit.plugins.diagnosis.launch import launch_stats
from tracekit.plugins.diagnosis.sync import pageable_copies
from tracekit.report import Finding, Report, format_ns, percent, report_table, short_name
from tracekit.stats import grouped_stats

CAUSES = ("compute", "communication", "transfer", "sync", "launch", "cpu", "idle-other")
VERDICTS = {
    "compute": "GPU-compute-bound",
    "communication": "communication-bound",
    "transfer": "transfer-bound (host-device copies)",
    "sync": "sync-bound (the host waits for the GPU, then the GPU for the host)",
    "launch": "CPU/launch-bound (kernel launch overhead)",
    "cpu": "CPU-bound (host work between launches starves the GPU)",
    "idle-other": "idle with work queued (stream dependencies or launch latency)",
}
FIXES = {
    "compute": "the GPU is busy computing, so make the math cheaper: bf16/fp16 autocast, "
               "TF32 for fp32 matmuls (torch.backends.cuda.matmul.allow_tf32), FP8 where "
               "supported; check that the top kernels use tensor cores; fuse elementwise "
               "ops (torch.compile)",
    "communication": "overlap communication with compute: DDP gradient bucketing "
                     "(bucket_cap_mb), FSDP forward/backward prefetch, async collectives on "
                     "a side stream; fewer, larger collectives",
    "transfer": "keep data on the device between steps; pin host memory "
                "(DataLoader(pin_memory=True)) and copy with .to(device, non_blocking=True) "
                "on a side stream so copies overlap compute; avoid per-step .cpu()",
    "sync": "remove per-step synchronization: no .item(), .cpu(), .tolist() or printing of "
            "device tensors in the loop (keep metrics on the device, read every N steps); "
            "no explicit torch.cuda.synchronize(); use non_blocking copies",
    "launch": "launch fewer, larger kernels: CUDA graphs (torch.compile "
              "mode='reduce-overhead' or torch.cuda.graphs), torch.compile to fuse ops, "
              "larger batches",
    "cpu": "take host work off the launching thread: DataLoader(num_workers>0, "
           "pin_memory=True, prefetch_factor), preprocessing on the GPU, less Python per "
           "step; profile the host side to see which work",
    "idle-other": "look at the largest gaps ('tracekit analyze -a gaps'): cross-stream "
                  "waits (cudaStreamWaitEvent) or a launch queue that drains",
}
MIXED_FIX = "several causes share the time; the findings below are ordered by what they cost"


class BottleneckAnalyzer(tracekit.Analyzer):
    """The verdict: compute-, CPU/launch-, transfer-, sync- or communication-bound, or mixed."""

    name = "bottleneck"
    description = "what the workload is bound by, with evidence and fixes (the default)"

    @dataclass(frozen=True)
    class Options:
        launch_gap_us: float = field(default=50.0, metadata={
            "help": "host time between launches up to which a gap counts as launch overhead"})
        min_share_pct: float = field(default=5.0, metadata={
            "help": "report causes that take at least this % of the GPU span"})
        tiny_us: float = field(default=10.0, metadata={"help": "a kernel under this is tiny"})

    def analyze(self, trace: Trace) -> Report:
        activity = Activity.of(trace)
        per_device = all_gaps(trace, self.options.launch_gap_us)
        if not per_device:
            report = Report(analyzer=self.name, title="Bottleneck: no GPU activity")
            report.findings.append(Finding(
                severity="info", title="no GPU activity in this trace: nothing to diagnose",
                evidence={"verdict": "none", "events": trace.events.num_rows},
                suggestion="record with GPU activities (torch.profiler "
                           "ProfilerActivity.CUDA, nsys --trace=cuda); for host-only traces "
                           "use 'tracekit analyze -a summary'"))
            return report
        costs = cause_costs(per_device)
        span = sum(g.timeline.span for g in per_device)
        verdict, ranked = decide(costs, span)
        title = f"Bottleneck: {VERDICTS.get(verdict, 'mixed')}" if verdict != "mixed" else \
            "Bottleneck: mixed (" + ", ".join(f"{c} {percent(n, span)}%" for c, n in ranked[:3]) \
            + ")"
        report = Report(analyzer=self.name, title=title)
        report.tables["causes"] = report_table([
                   ("cause", "str", None, [c for c, _ in ranked]),
                   ("time", "int", "ns", [n for _, n in ranked]),
                   ("span_pct", "float", "%", [percent(n, span) for _, n in ranked])])
        report.table_titles["causes"] = "Where the GPU time went (all devices)"
        report.tables["devices"] = devices_table([g.timeline for g in per_device], compact=True)
        report.table_titles["devices"] = "Per device (see -a breakdown, -a gaps)"
        evidence = Evidence(trace, activity, per_device, self.options.tiny_us)
        top_share = percent(ranked[0][1], span)
        report.findings.append(Finding(
            severity="info" if verdict == "compute" else
            ("critical" if top_share >= 50 else "warning"),
            title=f"verdict: {verdict}" + ("" if verdict == "mixed" else
                                           f", {top_share}% of GPU time"),
            evidence={"verdict": verdict, "devices": len(per_device), "span_ns": span,
                      "gpu_busy_pct": percent(sum(iv.total(g.timeline.busy) for g in per_device),
                                          span),
                      **{f"{c}_pct": percent(n, span) for c, n in ranked if n}},
            suggestion=FIXES.get(verdict, MIXED_FIX)))
        for cause, ns in ranked:
            if percent(ns, span) < self.options.min_share_pct or ns == 0:
                continue
            report.findings.append(Finding(
                severity="info" if cause == "compute" else
                ("critical" if percent(ns, span) >= 50 else "warning"),
                title=f"{cause}: {format_ns(ns)} ({percent(ns, span)}% of GPU time)",
                evidence=evidence.of(cause),
                suggestion="" if cause == verdict else FIXES[cause], cost_ns=ns))
        return report


def cause_costs(per_device: list[Gaps]) -> dict[str, int]:
    """ns per cause over all devices; they sum to the devices' spans."""
    costs = dict.fromkeys(CAUSES, 0)
    for g in per_device:
        parts = g.timeline.shares()
        costs["compute"] += parts["compute"]
        costs["communication"] += parts["communication"]
        costs["transfer"] += parts["memory"]
        idle = g.by_cause()
        for cause in ("sync", "launch", "cpu"):
            costs[cause] += idle[cause]
        costs["idle-other"] += idle["queued"] + idle["unknown"]
    return costs


def decide(costs: dict[str, int], span: int) -> tuple[str, list[tuple[str, int]]]:
    """The verdict and the causes ranked by cost."""
    ranked = sorted(costs.items(), key=lambda kv: (-kv[1], CAUSES.index(kv[0])))
    (top, top_ns), (_, second_ns) = ranked[0], ranked[1]
    if top_ns * 2 >= span or top_ns >= 1.5 * second_ns:
        return top, ranked
    return "mixed", ranked


class Evidence:
    """The numbers behind each cause, computed on demand."""

    def __init__(self, trace: Trace, activity: Activity, per_device: list[Gaps],
                 tiny_us: float) -> None:
        self.trace, self.activity, self.per_device = trace, activity, per_device
        self.tiny_ns = int(tiny_us * 1000)

    def of(self, cause: str) -> dict[str, Any]:
        """Evidence numbers for ``cause``."""
        method = getattr(self, "_" + cause.replace("-", "_"))
        return method()

    def _work(self, cls: int | None = None) -> tuple[pa.ChunkedArray, np.ndarray]:
        rows = [w.row if cls is None else w.row[w.cls == cls] for w in self.activity.devices]
        r = np.concatenate(rows) if rows else np.empty(0, np.int64)
        return self.activity.events["name"].take(pa.array(r)), r

    def _compute(self) -> dict[str, Any]:
        names, rows = self._work(0)
        dur = self.activity.events["dur_ns"].take(pa.array(rows))
        s = grouped_stats(names, dur)
        total = int(np.sum(s["total"])) if len(s["total"]) else 0
        out: dict[str, Any] = {"kernels": int(np.sum(s["count"])) if len(s["count"]) else 0}
        for i in range(min(3, len(s["key"]))):
            out[f"top{i + 1}"] = f"{short_name(s['key'][i])} ({percent(s['total'][i], total)}%)"
        return out

    def _communication(self) -> dict[str, Any]:
        comm = sum(iv.total(g.timeline.communication) for g in self.per_device)
        exposed = sum(iv.total(g.timeline.exposed_communication) for g in self.per_device)
        return {"communication_ns": comm, "exposed_ns": exposed,
                "overlap_pct": percent(comm - exposed, comm)}

    def _transfer(self) -> dict[str, Any]:
        ev = self.activity.events
        _, rows = self._work(MEMORY)
        kinds = ev["copy_kind"].take(pa.array(rows)).cast(pa.string()).fill_null("memset")
        size = ev["bytes"].take(pa.array(rows)).fill_null(0).to_numpy()
        dur = ev["dur_ns"].take(pa.array(rows)).fill_null(0).to_numpy()
        out: dict[str, Any] = {"copies": len(rows), "bytes": int(size.sum()),
                               "copy_time_ns": int(dur.sum())}
        if dur.sum():
            out["bandwidth_GBps"] = round(float(size.sum()) / float(dur.sum()), 2)
        k = kinds.to_numpy(zero_copy_only=False)
        for kind in sorted(set(k.tolist()), key=lambda x: -int(size[k == x].sum()))[:2]:
            out[f"{kind}_bytes"] = int(size[k == kind].sum())
        pageable = pageable_copies(self.activity)
        out["pageable_copies"] = sum(pageable.count)
        return out

    def _sync(self) -> dict[str, Any]:
        calls = self.activity.calls
        api = calls.is_sync & ~calls.is_op
        sync_idx = [g.cause == GAP_CAUSES.index("sync") for g in self.per_device]
        return {"sync_calls": int(api.sum()),
                "sync_call_ns": int((calls.end - calls.start)[api].sum()),
                "host_reads": host_reads(self.activity),
                "gaps_after_sync": int(sum(s.sum() for s in sync_idx))}

    def _gap_evidence(self, cause: str) -> dict[str, Any]:
        code = GAP_CAUSES.index(cause)
        count, largest, where = 0, 0, (None, -1)
        for g in self.per_device:
            sel = np.flatnonzero(g.cause == code)
            count += len(sel)
            if len(sel):
                i = sel[np.argmax(g.dur[sel])]
                if g.dur[i] > largest:
                    largest, where = int(g.dur[i]), (g, int(i))
        out: dict[str, Any] = {"gaps": count, "largest_gap_ns": largest}
        if where[0] is not None:
            out["host_during_largest"] = host_context(self.trace, where[0], where[1])
        return out

    def _launch(self) -> dict[str, Any]:
        out = self._gap_evidence("launch")
        stats = [launch_stats(self.activity, w, self.tiny_ns) for w in self.activity.devices]
        kernels = sum(s.kernels for s in stats)
        out["tiny_kernel_pct"] = percent(sum(s.tiny for s in stats), kernels)
        out["shorter_than_launch_pct"] = percent(sum(s.short for s in stats),
                                             sum(s.linked for s in stats))
        best = max(stats, key=lambda s: s.kernels)
        out["launches_per_s"] = round(best.launch_rate)
        out["runs_per_s"] = round(best.exec_rate)
        return out

    def _cpu(self) -> dict[str, Any]:
        return self._gap_evidence("cpu")

    def _idle_other(self) -> dict[str, Any]:
        queued = sum(int(g.dur[g.cause == GAP_CAUSES.index("queued")].sum())
                     for g in self.per_device)
        unknown = sum(int(g.dur[g.cause == GAP_CAUSES.index("unknown")].sum())
                      for g in self.per_device)
        return {"queued_ns": queued, "unattributed_ns": unknown}
