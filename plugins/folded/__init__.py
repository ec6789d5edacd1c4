"""The folded-stack writer (``.folded``): one line per distinct call stack, ``frame;frame;leaf
count``, root first — what FlameGraph's flamegraph.pl, inferno and speedscope open.

Like stackcollapse-perf, the process (thread) name is the root frame (the name the sample was
taken under: a thread renamed by exec folds under each name in turn), ``;`` inside a frame
name becomes ``:``, and only one sampled event is folded (the one the CPU reports rank time
by, cpu-clock, task-clock or cycles, else the most frequent; or ``-O event=NAME``): adding
cycles to instructions would mean nothing. The count is the number of samples, or their
summed value (perf's period) with ``-O weight=value``; untimed aggregates (VTune rows) count
their CPU time in µs, or, without one, their value (the event count of a hardware-event
report), and stacks that weigh nothing (tree nodes with no self time) are left out. Lines are
sorted, so the output is deterministic.

A line holds a sample's call stack (its leaf frame is the sample's name), its thread (the root
frame) and its weight. What else the folded samples carry (their timestamps, their args, a
name that is not the leaf frame, any other column) is counted as not written, by column
(``toolkit.fields``); so are the rows that are not folded at all.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import EmptyOutputError, OptionError, Trace
from tracekit.plugins.folded.groups import COUNTED, NATIVE, NULL_ID, SampleGroups
from tracekit.toolkit import (
    StackTree,
    aggregate_sources,
    fields,
    sampled_events,
    time_event,
)

_BATCH_ROWS = 131_072  # rows grouped at a time: the temporaries of grouping follow it


class FoldedWriter(tracekit.Writer):
    """Folded stacks for flame graphs (FlameGraph, inferno, speedscope)."""

    name = "folded"
    description = "folded stacks (frame;frame;leaf count) for flame graph tools"
    extensions = (".folded", ".folded.gz")
    # The stack, its root (the thread: pid, tid and source name it) and the weight (value, or
    # dur_ns for untimed aggregates); a name only where it is the leaf frame, dur_ns only as
    # an aggregate's weight. The options can leave some out (-O process=false, weight).
    native_columns = NATIVE
    event_counts = ("samples", "report rows")
    takes_batches = True  # samples grouped as they come, folded at the end
    writes_at_close = True  # so a pipe in and a pipe out stream too

    @dataclass(frozen=True)
    class Options:
        process: bool = field(default=True, metadata={
            "help": "put the process (thread) name at the root, as stackcollapse-perf does"})
        weight: str = field(default="samples", metadata={
            "help": "samples (a count per stack) or value (summed period)"})
        event: str = field(default="", metadata={
            "help": "the sampled event to fold (default: the most frequent one)"})

    def write(self, trace: Trace, stream: IO[bytes]) -> tracekit.WriteResult:
        self._check_options()
        groups = SampleGroups()
        for batch in trace.events.to_batches(max_chunksize=_BATCH_ROWS):
            groups.add(pa.Table.from_batches([batch]))
        return self.fold(groups, trace, stream)

    def batch_sink(self, stream: IO[bytes]) -> tracekit.BatchSink:
        self._check_options()
        return _FoldingSink(self, stream)

    def _check_options(self) -> None:
        if self.options.weight not in ("samples", "value"):
            raise OptionError(f"writer 'folded': weight must be samples or value, "
                              f"not {self.options.weight!r}")

    def fold(self, groups: SampleGroups, trace: Trace, stream: IO[bytes]
             ) -> tracekit.WriteResult:
        """Write the lines of the samples in ``groups`` (of ``trace``: its metadata, threads
        and stacks) and count what they leave out."""
        result = tracekit.WriteResult()
        table = groups.table()
        n = table["n"].to_numpy(zero_copy_only=False)
        all_samples = int(n.sum())
        chosen = _of_event(table, trace, self.options.event or None)
        if all_samples > int(n[chosen].sum()):
            folded = self.options.event or time_event(sampled_events(trace))
            result.skipped[f"samples of another event than '{folded}', the one folded "
                           "(-O event=NAME picks one)"] += all_samples - int(n[chosen].sum())
        other = groups.rows - all_samples
        if other:
            result.skipped["events that are not CPU samples"] += other
        of_event = int(n[chosen].sum())
        has_stack = table["has_stack"].to_numpy(zero_copy_only=False)
        stackless = int(n[chosen & ~has_stack].sum())
        if stackless:
            result.skipped["samples without a call stack"] += stackless
        keep = chosen & has_stack
        aggregate = table["aggregate"].to_numpy(zero_copy_only=False)
        unit = "ns" if keep.any() and aggregate[keep].all() else ""
        # Report rows without CPU time (VTune's hardware-event reports, declared aggregates
        # by their reader) are totals of their value, the event count: a row per function is
        # no sample count. Untimed perf samples (no -F time) stay samples.
        declared = aggregate_sources(trace)
        totals = keep.any() and bool(declared) and \
            table["untimed"].to_numpy(zero_copy_only=False)[keep].all() and \
            set(table["source"].filter(pa.array(keep)).to_pylist()) <= declared
        by_value = self.options.weight == "value" or (unit != "ns" and totals)
        if unit == "ns":
            weights = table["dur_us"].to_numpy(zero_copy_only=False).astype(np.float64)
        elif not by_value:
            weights = n.astype(np.float64)
        else:
            weights = table["value"].to_numpy(zero_copy_only=False)
            finite = table["finite"].to_numpy(zero_copy_only=False)
            bad = int(n[keep & ~finite].sum())
            if bad:
                result.skipped["samples whose weight is NaN or infinite"] += bad
            keep &= finite
        rows = np.flatnonzero(keep)
        kept = table.take(pa.array(rows))
        if not by_value and unit != "ns" and _periods_vary(kept):
            result.skipped[fields.field_skip("value", VARYING_PERIODS)] += int(n[rows].sum())
        tree = StackTree(trace)
        presence = groups.presence()
        folded = _of_event(presence, trace, self.options.event or None) & \
            presence["has_stack"].to_numpy(zero_copy_only=False)
        if unit != "ns" and by_value:
            folded &= presence["finite"].to_numpy(zero_copy_only=False)
        _count_fields(kept, presence.filter(pa.array(folded)), unit, tree, result.skipped)
        labels = _roots(trace, kept)
        lines: dict[str, float] = defaultdict(float)
        paths: dict[int, str] = {}
        for label, sid, w in zip(labels, kept["stack_id"].to_pylist(), weights[rows].tolist(),
                                 strict=True):
            path = paths.get(sid)
            if path is None:
                path = paths[sid] = ";".join(_clean(name) for name in tree.names_of(sid))
            text = path
            if self.options.process and label is not None:
                text = f"{_clean(label)};{path}" if path else _clean(label)
            lines[text] += w
        out = [f"{text} {_count(lines[text])}\n" for text in sorted(lines) if lines[text]]
        samples = int(n[rows].sum())
        if not out:
            raise EmptyOutputError(_no_stacks(all_samples, of_event, stackless, samples))
        for lo in range(0, len(out), 10_000):
            stream.write("".join(out[lo:lo + 10_000]).encode())
        result.written["stacks"] = len(out)
        # A report's rows (VTune) are totals, not samples.
        result.written["report rows" if unit == "ns" or totals else "samples"] = samples
        return result


class _FoldingSink(tracekit.BatchSink):
    """Samples grouped as their batches come (``SampleGroups``), folded at ``close``."""

    def __init__(self, writer: FoldedWriter, stream: IO[bytes]) -> None:
        self._writer = writer
        self._stream = stream
        self._groups = SampleGroups()

    def add_events(self, batch: pa.RecordBatch) -> None:
        self._groups.add(pa.Table.from_batches([batch]))

    def close(self, trace: Trace) -> tracekit.WriteResult:
        return self._writer.fold(self._groups, trace, self._stream)


#: Why a sample count loses the periods (perf record -F samples at a frequency, so each
#: sample stands for a different number of events).
VARYING_PERIODS = ("folded lines count samples and these samples' periods vary (perf record "
                   "-F): -O weight=value sums the periods, as -a hotspots weighs them")


def _periods_vary(kept: pa.Table) -> bool:
    """Whether the folded groups' mean sample values (perf's periods) differ by more than 1%:
    then a count of samples is not proportional to the events sampled."""
    n = kept["n"].to_numpy(zero_copy_only=False)
    finite = kept["finite"].to_numpy(zero_copy_only=False) & (n > 0)
    if finite.sum() < 2:
        return False
    mean = kept["value"].to_numpy(zero_copy_only=False)[finite] / n[finite]
    return bool(mean.max() - mean.min() > 0.01 * abs(mean.max()))


def _of_event(groups: pa.Table, trace: Trace, event: str | None) -> np.ndarray:
    """Per group: whether its samples are of the sampled event folded: ``event``, or, where
    the readers declared several, the one the CPU reports rank time by
    (``toolkit.time_event``: cpu-clock, task-clock, cycles, else the most frequent)."""
    seen = sampled_events(trace)
    if len(seen) <= 1 and event is None:
        return np.ones(groups.num_rows, dtype=bool)
    keep = event if event is not None else time_event(seen)
    return pc.fill_null(pc.equal(groups["event"], keep), False).to_numpy(zero_copy_only=False)


def _count_fields(kept: pa.Table, presence: pa.Table, unit: str, tree: StackTree,
                  skipped: Counter[str]) -> None:
    """Count the values of the folded samples (the ``kept`` groups; ``presence``, their
    counts of values by column) that no line holds: by column, as ``toolkit.fields`` words
    it."""
    n = kept["n"].to_numpy(zero_copy_only=False)
    for column in COUNTED:
        if column == "dur_ns" and unit == "ns":
            continue  # the aggregates' weight
        if column == "name":  # counted where it is not the leaf frame
            leaf = np.array([bool(p) and p[-1] == name for p, name in zip(
                map(tree.names_of, kept["stack_id"].to_pylist()), kept["name"].to_pylist(),
                strict=True)], dtype=bool)
            count = int(n[~leaf].sum()) if len(n) else 0
        else:
            count = int(pc.sum(presence[f"has_{column}"]).as_py() or 0)
        if count:
            skipped[fields.field_skip(column, _WHY.get(column, "folded stacks have no field for "
                                                        "it"))] += count


_BY_FORMAT = fields.BY_FORMAT + "folded stacks keep the stacks and their weights only"
_WHY = {"ts_ns": _BY_FORMAT, "dur_ns": _BY_FORMAT, "args": _BY_FORMAT,
        "name": "a folded line names the leaf frame, not the sample"}


def _count(w: float) -> str:
    """A line's count: a whole number as digits, anything else (1.5, 1e+300) as Python writes
    a float."""
    return str(int(w)) if float(w).is_integer() and abs(w) < 2**63 else repr(float(w))


def _no_stacks(all_samples: int, of_event: int, stackless: int, kept: int) -> str:
    """Why there is no line to write, for EmptyOutputError."""
    if not all_samples:
        return "no call stacks: the input has no CPU samples with stacks"
    if not of_event:
        return (f"no call stacks: none of the {all_samples} CPU samples is of the event "
                "chosen (-O event=NAME)")
    if stackless == of_event:
        return f"no call stacks: none of the {all_samples} CPU samples has a call stack"
    return f"no call stacks: the {kept} samples with a stack all weigh nothing"


def _roots(trace: Trace, kept: pa.Table) -> list[str | None]:
    """Per group, its root frame: the name its samples were taken under (``args.comm``),
    else its thread's name, else its thread id, else None (aggregates have no thread:
    their stacks start at their own root)."""
    names = {(r["source"], r["pid"], r["tid"]): r["name"]
             for r in trace.threads.to_pylist() if r["name"]}
    labels: list[str | None] = []
    for source, pid, tid, comm in zip(*(kept[c].to_pylist() for c in
                                        ("source", "pid", "tid", "comm")), strict=True):
        if comm is not None:
            labels.append(comm)
            continue
        key = (source, None if pid == NULL_ID else pid, None if tid == NULL_ID else tid)
        labels.append(names.get(key) or (f"tid {tid}" if tid != NULL_ID else None))
    return labels


def _clean(name: str) -> str:
    """A frame name that cannot break the line format (';' separates frames)."""
    return name.replace(";", ":").replace("\n", " ")


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(FoldedWriter)
