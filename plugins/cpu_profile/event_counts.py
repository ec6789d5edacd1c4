"""What a report of hardware event counts per function says about the CPU pipeline.

VTune's hw-events report (``-report hw-events -group-by function``) gives each function its
count of every sampled event, scaled to the whole run (``Hardware Event Count:EVENT`` in the
rows' ``values``). From the counts of the events that Intel's own metrics use:

- instructions per cycle: ``INST_RETIRED.ANY`` / ``CPU_CLK_UNHALTED.THREAD``;
- cycles the core stalled with a load outstanding, and with one that missed L3:
  ``CYCLE_ACTIVITY.STALLS_MEM_ANY`` and ``CYCLE_ACTIVITY.STALLS_L3_MISS`` over the cycles;
- where loads that missed L3 were served: ``MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM`` against
  ``LOCAL_DRAM``, the share of DRAM reads that crossed to another socket.

Shares are of the whole report and of its top function by cycles; they need only the
counts, not VTune's top-down formulas (which need events this report may not have).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
from tracekit import Finding
from tracekit.toolkit import StackTree, demangle, percent, short_name

PREFIX = "Hardware Event Count:"
# Each quantity from the first of its events the report has (the ``_P`` and core variants
# count the same on the processors that have them); a ``_PS`` suffix (precise) is dropped.
EVENTS = {
    "cycles": ("CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.THREAD_P",
               "CPU_CLK_UNHALTED.CORE", "CPU_CLK_UNHALTED.CORE_P"),
    "instructions": ("INST_RETIRED.ANY", "INST_RETIRED.ANY_P"),
    "memory_stalls": ("CYCLE_ACTIVITY.STALLS_MEM_ANY",),
    "l3_miss_stalls": ("CYCLE_ACTIVITY.STALLS_L3_MISS",),
    "local_dram": ("MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM",),
    "remote_dram": ("MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM",),
}
#: A hotspots report's instructions and cycles per instruction (VTune's advanced-hotspots).
INSTRUCTIONS, CPI = "Instructions Retired", "CPI Rate"
#: Stalled with a load outstanding on this share of cycles or more: the memory finding (the
#: bar of the memory-bound finding from VTune's own Memory Bound column).
MEMORY_STALL_PCT = 30.0
#: DRAM reads from another socket at this share or more: NUMA placement is part of the fix.
REMOTE_DRAM_PCT = 25.0
#: Functions with this share of the cycles or more get their own IPC (fewer counts are noise).
IPC_MIN_CYCLES = 0.02


@dataclass
class EventCounts:
    """Counts of the quantities in ``EVENTS``, in all and per leaf function."""

    events: dict[str, str]  # quantity -> the event the report had for it
    total: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    by_function: dict[tuple[str, str], dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float)))

    def ipc(self) -> tuple[float, dict[tuple[str, str], float]] | None:
        """Instructions per cycle overall and per function with 2% of the cycles or more."""
        if "cycles" not in self.events or "instructions" not in self.events:
            return None
        cycles = self.total["cycles"]
        if not cycles:
            return None
        per = {k: c["instructions"] / c["cycles"] for k, c in self.by_function.items()
               if c["cycles"] and c["cycles"] >= IPC_MIN_CYCLES * cycles}
        return self.total["instructions"] / cycles, per


#: Reports of more rows than this are not read column by column from their args.
MAX_ROWS = 200_000


def report_values(rows: pa.Table) -> list[dict[str, object]]:
    """Each report row's columns as VTune gave them (``args.values``), parsed once for
    every analysis of them; none for more than ``MAX_ROWS`` rows."""
    if not rows.num_rows or rows.num_rows > MAX_ROWS or "args" not in rows.column_names:
        return []
    return [(orjson.loads(args).get("values") or {}) if args else {}
            for args in rows["args"].to_pylist()]


def event_counts(rows: pa.Table, tree: StackTree,
                 values: list[dict[str, object]]) -> EventCounts | None:
    """The counts of a report's rows, with their ``report_values`` (None where they have
    no hardware event counts)."""
    if not values:
        return None
    have = {k.removeprefix(PREFIX).removesuffix("_PS"): k for k in values[0]
            if k.startswith(PREFIX)}
    chosen: dict[str, str] = {}
    for quantity, names in EVENTS.items():
        column = next((have[e] for e in names if e in have), None)
        if column:
            chosen[quantity] = column
    derived = "cycles" not in chosen and {INSTRUCTIONS, CPI} <= values[0].keys()
    if derived:
        # A hotspots report with Instructions Retired and its CPI Rate: its cycles are their
        # product, as VTune computed the rate (advanced-hotspots).
        chosen = {"instructions": INSTRUCTIONS, "cycles": f"{INSTRUCTIONS} × {CPI}"}
    if "cycles" not in chosen:
        return None
    counts = EventCounts(chosen)
    stacks = rows["stack_id"].to_pylist()
    names = rows["name"].cast(pa.string()).to_pylist()
    for sid, name, row in zip(stacks, names, values, strict=True):
        frames = tree.frames(sid) if sid is not None else []
        key = (demangle(tree.names[frames[-1]]), tree.modules[frames[-1]] or "") if frames \
            else (demangle(name or ""), "")
        if derived:
            instructions, cpi = row.get(INSTRUCTIONS), row.get(CPI)
            if not (isinstance(instructions, (int, float)) and isinstance(cpi, (int, float))):
                continue
            found = {"instructions": instructions, "cycles": instructions * cpi}
        else:
            found = {q: v for q, column in chosen.items()
                     if isinstance(v := row.get(column), (int, float))}
        for quantity, v in found.items():
            counts.total[quantity] += v
            counts.by_function[key][quantity] += v
    return counts


def memory_stall_finding(counts: EventCounts) -> Finding | None:
    """The core stalls on memory for ``MEMORY_STALL_PCT`` of its cycles or more."""
    cycles = counts.total["cycles"]
    if "memory_stalls" not in counts.events or not cycles:
        return None
    stall_pct = percent(counts.total["memory_stalls"], cycles)
    if stall_pct < MEMORY_STALL_PCT:
        return None
    top, by = max(counts.by_function.items(), key=lambda kv: (kv[1]["cycles"], kv[0]))
    evidence: dict[str, object] = {"memory_stall_pct": stall_pct}
    title = f"Memory stalls: the cores stalled with a load outstanding on {stall_pct}% of cycles"
    if "l3_miss_stalls" in counts.events:
        evidence["l3_miss_stall_pct"] = percent(counts.total["l3_miss_stalls"], cycles)
        title += f", {evidence['l3_miss_stall_pct']}% on loads that missed L3"
    ipc = counts.ipc()
    if ipc is not None:
        evidence["ipc"] = round(ipc[0], 2)
    evidence["top_function"] = top[0]
    evidence["top_function_cycles_pct"] = percent(by["cycles"], cycles)
    if by["cycles"]:
        evidence["top_function_memory_stall_pct"] = percent(by["memory_stalls"], by["cycles"])
        if ipc is not None:
            evidence["top_function_ipc"] = round(by["instructions"] / by["cycles"], 2)
    fix = (f"The hot code ({short_name(top[0], 50)}) waits on memory, not arithmetic: improve "
           "locality (contiguous arrays instead of maps and trees, blocking, fewer pointer "
           "chases), or prefetch.")
    dram = counts.total["local_dram"] + counts.total["remote_dram"]
    if "remote_dram" in counts.events and dram:
        remote = percent(counts.total["remote_dram"], dram)
        evidence["remote_dram_pct"] = remote
        if remote >= REMOTE_DRAM_PCT:
            fix += (f" {remote}% of the loads served from DRAM came from another socket: "
                    "keep data NUMA-local (first touch by the threads that use it, "
                    "numactl --localalloc; --interleave=all for tables every thread reads).")
    return Finding("warning", title + " (hardware event counts)", evidence, fix)
