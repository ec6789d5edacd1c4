"""Reader for ``nsys stats`` CSV range traces (NVTX push/pop ranges)."""

from __future__ import annotations

from typing import Any

import tracekit
from tracekit.plugins.nsys_stats.reader import NsysStatsReader

__all__ = ["NsysStatsReader"]


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(NsysStatsReader)
