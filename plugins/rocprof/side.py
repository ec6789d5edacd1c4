"""What every rocprof reader adds besides events: the processes, threads and devices its
events name, and the clock they are on."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from tracekit import TraceBuilder

CLOCK = "ROCm runtime host clock, ns (uptime-like, not the Unix epoch)"


def add_side_tables(parts: list[dict[str, Any]], out: TraceBuilder) -> None:
    """Processes, host threads and devices seen in the event columns of ``parts``."""
    seen = SeenIds()
    for c in parts:
        seen.update(c)
    seen.add_to(out)


class SeenIds:
    """The processes, host threads and devices that batches of event columns name, gathered
    batch by batch (the batches need not be kept), then added in order of their ids."""

    def __init__(self) -> None:
        self.pids: set[int] = set()
        self.threads: set[tuple[int, int]] = set()
        self.devices: set[int] = set()

    def update(self, c: dict[str, Any]) -> None:
        """Take the ids of one batch's event columns."""
        pid, tid = c.get("pid"), c.get("tid")
        if pid is not None:
            self.pids.update(v for v in pc.unique(pa.array(pid)).to_pylist() if v is not None)
        if pid is not None and tid is not None and len(c["category"]) and \
                str(c["category"][0]).startswith(("api", "host")):
            pairs = pa.table({"p": pa.array(pid), "t": pa.array(tid)}).group_by(
                ["p", "t"], use_threads=False).aggregate([])
            self.threads.update((p, t) for p, t in zip(pairs["p"].to_pylist(),
                                                       pairs["t"].to_pylist(), strict=True)
                                if p is not None and t is not None)
        if c.get("device") is not None:
            self.devices.update(v for v in pc.unique(pa.array(c["device"])).to_pylist()
                                if v is not None)

    def add_to(self, out: TraceBuilder) -> None:
        """Add the processes, threads and devices seen to ``out``."""
        for pid in sorted(self.pids):
            out.add_process(pid)
        for pid, tid in sorted(self.threads):
            out.add_thread(pid, tid)
        for device in sorted(self.devices):
            out.add_device(device, vendor="amd", kind="gpu")
