"""Reader for PyTorch profiler (Kineto) Chrome-trace JSON, CUDA and ROCm, 2021 to now."""

from __future__ import annotations

from typing import Any

import tracekit
from tracekit.plugins.kineto.reader import KinetoReader

__all__ = ["KinetoReader"]


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(KinetoReader)
