"""The diagnosis: what a workload is bound by (``bottleneck``), the analyzers whose numbers
it rests on (``breakdown``, ``gaps``, ``sync``, ``launch``, ``overlap``), and ``diff``."""

from __future__ import annotations

from typing import Any

import tracekit
from tracekit.plugins.diagnosis.activity import Activity
from tracekit.plugins.diagnosis.bottleneck import BottleneckAnalyzer
from tracekit.plugins.diagnosis.breakdown import BreakdownAnalyzer
from tracekit.plugins.diagnosis.diff import DiffAnalyzer
from tracekit.plugins.diagnosis.gaps import GapsAnalyzer
from tracekit.plugins.diagnosis.kernels import KernelsAnalyzer
from tracekit.plugins.diagnosis.launch import LaunchAnalyzer, launch_stats
from tracekit.plugins.diagnosis.overlap import OverlapAnalyzer
from tracekit.plugins.diagnosis.program import autograd_finding, classify, dropout_finding
from tracekit.plugins.diagnosis.ranks import RanksAnalyzer
from tracekit.plugins.diagnosis.steps import slow_step_finding
from tracekit.plugins.diagnosis.sync import SyncAnalyzer
from tracekit.plugins.diagnosis.timeline import DeviceTimeline, device_timelines

# What components built on the diagnosis (the HTML report, the CPU report) may use, besides
# the analyzers: the GPU activity with its launch links, per-device busy timelines and launch
# statistics (the window option is the toolkit's restrict); the program's class and the
# findings the CPU report shares (dropout left on in inference, a step far slower than the
# others).
__all__ = [
    "ANALYZERS",
    "Activity",
    "DeviceTimeline",
    "autograd_finding",
    "classify",
    "device_timelines",
    "dropout_finding",
    "launch_stats",
    "register_analyzers",
    "slow_step_finding",
]

ANALYZERS = (BottleneckAnalyzer, BreakdownAnalyzer, GapsAnalyzer, SyncAnalyzer, LaunchAnalyzer,
             OverlapAnalyzer, DiffAnalyzer, KernelsAnalyzer, RanksAnalyzer)


@tracekit.hookimpl
def register_analyzers(register: Any) -> None:
    for analyzer in ANALYZERS:
        register(analyzer)
