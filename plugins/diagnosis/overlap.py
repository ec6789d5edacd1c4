"""The ``overlap`` analyzer: how much communication and copying hides behind compute.

Per device: the union time of compute, communication (NCCL/RCCL kernels by name) and memory
operations; overlap % = time communicating while computing / time communicating (HTA's
get_comm_comp_overlap, peers.md section 1), the same for copies; and the *exposed* time of
each, which is what it adds to the step time.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import tracekit
from tracekit import Finding, Report, Trace
from tracekit.plugins.diagnosis.activity import NO_GPU, READS_COLUMNS
from tracekit.plugins.diagnosis.timeline import DeviceTimeline, device_timelines
from tracekit.toolkit import format_ns, percent, report_table
from tracekit.toolkit import intervals as iv


class OverlapAnalyzer(tracekit.Analyzer):
    """Compute vs copy vs communication: overlap % and exposed time per device."""

    name = "overlap"
    event_columns = READS_COLUMNS
    description = "per device: compute vs copy vs communication overlap and exposed time"

    def analyze(self, trace: Trace) -> Report:
        report = Report(analyzer=self.name, title="Compute, copy and communication overlap")
        timelines = device_timelines(trace)
        if not timelines:
            report.notes.append(NO_GPU)
        report.tables["overlap"] = overlap_table(timelines)
        report.table_titles["overlap"] = "Per device (overlap % = share hidden behind compute)"
        report.findings.extend(overlap_findings(timelines))
        return report


def overlap_table(timelines: list[DeviceTimeline]) -> pa.Table:
    """Per device and kind (compute, communication, memory): union time, the share of it
    that overlaps compute, and the exposed rest."""
    cols: dict[str, list[Any]] = {k: [] for k in ("device", "kind", "time", "hidden", "exposed")}
    for tl in timelines:
        compute = iv.total(tl.compute)
        for kind, busy, exposed in (("compute", tl.compute, tl.compute),
                                    ("communication", tl.communication,
                                     tl.exposed_communication),
                                    ("memory", tl.memory, tl.exposed_memory)):
            time = iv.total(busy)
            cols["device"].append(tl.work.label)
            cols["kind"].append(kind)
            cols["time"].append(time)
            cols["hidden"].append(None if kind == "compute" else
                                  percent(iv.total(iv.intersect(busy, tl.compute)), time))
            cols["exposed"].append(compute if kind == "compute" else iv.total(exposed))
    return report_table([
               ("device", "str", None, cols["device"]), ("kind", "str", None, cols["kind"]),
               ("time", "int", "ns", cols["time"]),
               ("hidden_by_compute_pct", "float", "%", cols["hidden"]),
               ("exposed", "int", "ns", cols["exposed"])])


def overlap_findings(timelines: list[DeviceTimeline], min_exposed_pct: float = 10.0,
                     ) -> list[Finding]:
    """A finding per device whose exposed communication is a large share of its span."""
    findings = []
    for tl in timelines:
        comm, exposed = iv.total(tl.communication), iv.total(tl.exposed_communication)
        if not tl.span or percent(exposed, tl.span) < min_exposed_pct:
            continue
        findings.append(Finding(
            severity="warning",
            title=f"{tl.work.label}: communication is exposed for {percent(exposed, tl.span)}% "
                  "of the span",
            evidence={"communication_ns": comm, "exposed_ns": exposed,
                      "overlap_pct": percent(comm - exposed, comm), "span_ns": tl.span},
            suggestion=f"{format_ns(exposed)} of communication runs with no compute beside "
                       "it: overlap it (DDP gradient bucketing, FSDP prefetch, async "
                       "collectives on a side stream)",
            cost_ns=exposed))
    return findings
