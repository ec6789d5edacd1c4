"""The folded-stack writer (``.folded``): one line per distinct call stack, ``frame;frame;leaf
count``, root first — what FlameGraph's flamegraph.pl, inferno and speedscope open.

Like stackcollapse-perf, the process (thread) name is the root frame (the name the sample was
taken under: a thread renamed by exec folds under each name in turn), ``;`` inside a frame
name becomes ``:``, and only one sampled
event is folded (the most frequent unless ``-O event=NAME``): adding cycles to instructions
would mean nothing. The count is the number of samples, or their summed value (perf's period)
with ``-O weight=value``; untimed aggregates (VTune rows) count their CPU time in µs, and
stacks that weigh nothing (tree nodes with no self time) are left out. Lines are sorted, so
the output is deterministic.

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
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import EmptyOutputError, OptionError, Trace
from tracekit.toolkit import (
    SAMPLE_COLUMNS,
    SAMPLE_EVENT_ARG,
    StackTree,
    arg_strings,
    equals,
    factorize,
    fields,
    sample_weights,
    sampled_events,
)

_NULL = -(2**62)


class FoldedWriter(tracekit.Writer):
    """Folded stacks for flame graphs (FlameGraph, inferno, speedscope)."""

    name = "folded"
    description = "folded stacks (frame;frame;leaf count) for flame graph tools"
    extensions = (".folded", ".folded.gz")
    # The stack, its root (the thread: pid, tid and source name it) and the weight (value, or
    # dur_ns for untimed aggregates); a name only where it is the leaf frame, dur_ns only as
    # an aggregate's weight. The options can leave some out (-O process=false, weight).
    native_columns = frozenset({"kind", "category", "name", "stack_id", "pid", "tid",
                                "source", "value", "dur_ns"})
    event_counts = ("samples",)

    @dataclass(frozen=True)
    class Options:
        process: bool = field(default=True, metadata={
            "help": "put the process (thread) name at the root, as stackcollapse-perf does"})
        weight: str = field(default="samples", metadata={
            "help": "samples (a count per stack) or value (summed period)"})
        event: str = field(default="", metadata={
            "help": "the sampled event to fold (default: the most frequent one)"})

    def write(self, trace: Trace, stream: IO[bytes]) -> tracekit.WriteResult:
        if self.options.weight not in ("samples", "value"):
            raise OptionError(f"writer 'folded': weight must be samples or value, "
                              f"not {self.options.weight!r}")
        result = tracekit.WriteResult()
        events = trace.events
        samples = _samples_of(trace, self.options.event or None)
        all_samples = int(pc.sum(equals(events["category"], "cpu.sample")).as_py() or 0)
        if all_samples > len(samples):
            result.skipped["samples of another event (-O event=NAME picks one)"] += \
                all_samples - len(samples)
        other = events.num_rows - all_samples
        if other:
            result.skipped["events that are not CPU samples"] += other
        has_stack = events["stack_id"].is_valid().to_numpy(zero_copy_only=False)[samples]
        if (~has_stack).any():
            result.skipped["samples without a call stack"] += int((~has_stack).sum())
        chosen = samples[has_stack]
        rows = _take(events.select(list(SAMPLE_COLUMNS)), chosen)
        weights_arr, unit = sample_weights(rows, self.options.weight)
        weights = weights_arr.to_numpy(zero_copy_only=False)
        finite = np.isfinite(weights)
        if not finite.all():
            result.skipped["samples whose weight is NaN or infinite"] += int((~finite).sum())
            rows, weights, chosen = rows.filter(pa.array(finite)), weights[finite], \
                chosen[finite]
        if unit == "ns":  # untimed aggregates (VTune): CPU time, folded in whole µs
            weights = np.round(weights / 1000)
        tree = StackTree(trace)
        _count_fields(events, rows, chosen, unit, tree, result.skipped)
        roots, root_names = _roots(trace, rows)
        stack = rows["stack_id"].to_numpy()
        inverse, (root_of, stack_of) = factorize(roots, stack)
        sums = np.bincount(inverse, weights=weights, minlength=len(root_of))
        lines: dict[str, float] = defaultdict(float)
        for root, sid, w in zip(root_of.tolist(), stack_of.tolist(), sums.tolist(),
                                strict=True):
            names = [_clean(n) for n in tree.names_of(sid)]
            if self.options.process and root_names[root] is not None:
                names.insert(0, _clean(root_names[root]))
            lines[";".join(names)] += w
        out = [f"{text} {_count(lines[text])}\n" for text in sorted(lines) if lines[text]]
        if not out:
            raise EmptyOutputError(_no_stacks(all_samples, has_stack, rows.num_rows))
        for lo in range(0, len(out), 10_000):
            stream.write("".join(out[lo:lo + 10_000]).encode())
        result.written["stacks"] = len(out)
        result.written["samples"] = rows.num_rows
        return result


def _samples_of(trace: Trace, event: str | None) -> np.ndarray:
    """Rows of the CPU samples of one sampled event (``args.event``): ``event``, or the most
    frequent where the readers declared several (as ``toolkit.sample_events`` picks them)."""
    events = trace.events
    rows = np.flatnonzero(pc.fill_null(equals(events["category"], "cpu.sample"), False)
                          .to_numpy(zero_copy_only=False))
    seen = sampled_events(trace)
    if len(seen) <= 1 and event is None:
        return rows
    keep = event if event is not None else seen[0]
    names = arg_strings(events["args"].take(pa.array(rows)), SAMPLE_EVENT_ARG)
    return rows[pc.fill_null(pc.equal(names, keep), False).to_numpy(zero_copy_only=False)]


def _take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table[rows]``, without a copy when that is every row in order."""
    return table if len(rows) == table.num_rows else table.take(pa.array(rows))


def _count_fields(events: pa.Table, rows: pa.Table, chosen: np.ndarray, unit: str,
                  tree: StackTree, skipped: Counter[str]) -> None:
    """Count the values of the folded samples (``chosen`` rows of ``events``) that no line
    holds: by column, as ``toolkit.fields`` words it."""
    n = len(chosen)
    for column in (*fields.TYPED_COLUMNS, "args"):
        if column in FoldedWriter.native_columns and column not in ("dur_ns", "name"):
            continue
        values = events[column]
        if values.null_count == events.num_rows:
            continue
        present = values.is_valid().to_numpy(zero_copy_only=False)[chosen] if n \
            else np.zeros(0, dtype=bool)
        if column == "dur_ns" and unit == "ns":
            continue  # the aggregates' weight
        if column == "args":  # "" is no args
            present &= pc.fill_null(pc.greater(pc.utf8_length(rows["args"]), 0), False) \
                .to_numpy(zero_copy_only=False)
        if column == "name":
            present &= ~_leaf_named(rows, tree)
        count = int(present.sum())
        if count:
            skipped[fields.field_skip(column, _WHY.get(column, "folded stacks have no field for "
                                                        "it"))] += count


_WHY = {"ts_ns": "folded stacks have no time", "dur_ns": "folded stacks have no time",
        "name": "a folded line names the leaf frame, not the sample",
        "args": "folded stacks keep no args"}


def _leaf_named(rows: pa.Table, tree: StackTree) -> np.ndarray:
    """Per row: whether its name is the leaf frame of its stack."""
    names = rows["name"].combine_chunks()
    if not len(names):
        return np.zeros(0, dtype=bool)
    codes = names.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    inverse, (stack_of, code_of) = factorize(rows["stack_id"].to_numpy(), codes)
    dictionary = names.dictionary.to_pylist()
    same = np.array([bool(path) and path[-1] == dictionary[c] for path, c in
                     zip(map(tree.names_of, stack_of.tolist()), code_of.tolist(),
                         strict=True)], dtype=bool)
    return same[inverse]


def _count(w: float) -> str:
    """A line's count: a whole number as digits, anything else (1.5, 1e+300) as Python writes
    a float."""
    return str(int(w)) if float(w).is_integer() and abs(w) < 2**63 else repr(float(w))


def _no_stacks(all_samples: int, has_stack: np.ndarray, kept: int) -> str:
    """Why there is no line to write, for EmptyOutputError."""
    if not all_samples:
        return "no call stacks: the input has no CPU samples with stacks"
    if not len(has_stack):
        return (f"no call stacks: none of the {all_samples} CPU samples is of the event "
                "chosen (-O event=NAME)")
    if not has_stack.any():
        return f"no call stacks: none of the {all_samples} CPU samples has a call stack"
    return f"no call stacks: the {kept} samples with a stack all weigh nothing"


def _comm(text: str) -> str | None:
    """``args.comm`` of a sample, the name it was taken under (None if absent or odd)."""
    try:
        args = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    comm = args.get("comm") if isinstance(args, dict) else None
    return comm if isinstance(comm, str) else None


def _roots(trace: Trace, rows: pa.Table) -> tuple[np.ndarray, list[str | None]]:
    """Per row, an index into the returned names: the thread's name, else its id, else
    None (aggregates have no thread: their stacks start at their own root). A sample taken
    under another name than its thread's (``args.comm``) gets its own."""
    names = {(r["source"], r["pid"], r["tid"]): r["name"]
             for r in trace.threads.to_pylist() if r["name"]}
    sources = rows["source"].combine_chunks()
    codes, (src_of, pid_of, tid_of) = factorize(
        sources.indices.to_numpy(zero_copy_only=False).astype(np.int64),
        rows["pid"].fill_null(_NULL).to_numpy(), rows["tid"].fill_null(_NULL).to_numpy())
    source_names = sources.dictionary.to_pylist()
    labels: list[str | None] = []
    for s, pid, tid in zip(src_of.tolist(), pid_of.tolist(), tid_of.tolist(), strict=True):
        key = (source_names[s], None if pid == _NULL else pid, None if tid == _NULL else tid)
        labels.append(names.get(key) or (f"tid {tid}" if tid != _NULL else None))
    renamed = np.flatnonzero(pc.fill_null(pc.match_substring(rows["args"], '"comm":'), False)
                             .to_numpy(zero_copy_only=False))
    if len(renamed):
        args = rows["args"].take(pa.array(renamed)).to_pylist()
        index = {label: i for i, label in enumerate(labels)}
        for row, text in zip(renamed.tolist(), args, strict=True):
            comm = _comm(text)
            if comm is None:
                continue
            if comm not in index:
                index[comm] = len(labels)
                labels.append(comm)
            codes[row] = index[comm]
    return codes, labels


def _clean(name: str) -> str:
    """A frame name that cannot break the line format (';' separates frames)."""
    return name.replace(";", ":").replace("\n", " ")


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(FoldedWriter)
