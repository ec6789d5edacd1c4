"""The diagnosis: what a workload is bound by (``bottleneck``), the analyzers whose numbers
it rests on (``breakdown``, ``gaps``, ``sync``, ``launch``, ``overlap``), and ``diff``."""

from __future__ import annotations

from typing import Any

import tracekit
from tracekit.plugins.diagnosis.bottleneck import BottleneckAnalyzer
from tracekit.plugins.diagnosis.breakdown import BreakdownAnalyzer
from tracekit.plugins.diagnosis.diff import DiffAnalyzer
from tracekit.plugins.diagnosis.gaps import GapsAnalyzer
from tracekit.plugins.diagnosis.kernels import KernelsAnalyzer
from tracekit.plugins.diagnosis.launch import LaunchAnalyzer
from tracekit.plugins.diagnosis.overlap import OverlapAnalyzer
from tracekit.plugins.diagnosis.ranks import RanksAnalyzer
from tracekit.plugins.diagnosis.sync import SyncAnalyzer

ANALYZERS = (BottleneckAnalyzer, BreakdownAnalyzer, GapsAnalyzer, SyncAnalyzer, LaunchAnalyzer,
             OverlapAnalyzer, DiffAnalyzer, KernelsAnalyzer, RanksAnalyzer)


@tracekit.hookimpl
def register_analyzers(register: Any) -> None:
    for analyzer in ANALYZERS:
        register(analyzer)
