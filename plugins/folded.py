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
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit.errors import OptionError
from tracekit.model import Trace
from tracekit.stacks import StackTree, sample_events, sample_weights


class FoldedWriter(tracekit.Writer):
    """Folded stacks for flame graphs (FlameGraph, inferno, speedscope)."""

    name = "folded"
    description = "folded stacks (frame;frame;leaf count) for flame graph tools"
    extensions = (".folded", ".folded.gz")

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
        rows, _ = sample_events(trace.events, self.options.event or None)
        all_samples = int(pc.sum(pc.equal(trace.events["category"].cast(pa.string()),
                                          "cpu.sample")).as_py() or 0)
        if all_samples > rows.num_rows:
            result.skipped["samples of another event (-O event=NAME picks one)"] += \
                all_samples - rows.num_rows
        other = trace.events.num_rows - all_samples
        if other:
            result.skipped["events that are not CPU samples"] += other
        has_stack = rows["stack_id"].is_valid().to_numpy(zero_copy_only=False)
        if (~has_stack).any():
            result.skipped["samples without a call stack"] += int((~has_stack).sum())
        rows = rows.filter(pa.array(has_stack))
        weights_arr, unit = sample_weights(rows, self.options.weight)
        weights = weights_arr.to_numpy(zero_copy_only=False)
        if unit == "ns":  # untimed aggregates (VTune): CPU time, folded in whole µs
            weights = np.round(weights / 1000)
        roots, root_names = _roots(trace, rows)
        stack = rows["stack_id"].to_numpy()
        keys = np.stack([roots, stack]) if len(stack) else np.empty((2, 0), np.int64)
        uniq, inverse = np.unique(keys, axis=1, return_inverse=True)
        sums = np.bincount(inverse.reshape(-1), weights=weights, minlength=uniq.shape[1])
        tree = StackTree(trace)
        lines: dict[str, float] = defaultdict(float)
        for (root, sid), w in zip(uniq.T.tolist(), sums.tolist(), strict=True):
            names = [_clean(n) for n in tree.names_of(sid)]
            if self.options.process and root_names[root] is not None:
                names.insert(0, _clean(root_names[root]))
            lines[";".join(names)] += w
        for text in sorted(lines):
            w = lines[text]
            if not w:
                continue
            count = int(w) if float(w).is_integer() else w
            stream.write(f"{text} {count}\n".encode())
        result.written["stacks"] = sum(1 for w in lines.values() if w)
        result.written["samples"] = rows.num_rows
        return result

def _roots(trace: Trace, rows: pa.Table) -> tuple[np.ndarray, list[str | None]]:
    """Per row, an index into the returned names: the thread's name, else its id, else
    None (aggregates have no thread: their stacks start at their own root)."""
    names = {(r["source"], r["pid"], r["tid"]): r["name"]
             for r in trace.threads.to_pylist() if r["name"]}
    keys = list(zip(rows["source"].cast(pa.string()).to_pylist(), rows["pid"].to_pylist(),
                    rows["tid"].to_pylist(), strict=True))
    renamed = pc.struct_field(pc.extract_regex(pc.fill_null(rows["args"], ""),
                                               r'"comm":"(?P<c>(?:[^"\\]|\\.)*)"'), "c")
    own = [orjson.loads(f'"{c}"') if c is not None else None for c in renamed.to_pylist()]
    labels = [c or names.get(k) or (f"tid {k[2]}" if k[2] is not None else None)
              for c, k in zip(own, keys, strict=True)]
    index: dict[str | None, int] = {}
    codes = np.array([index.setdefault(label, len(index)) for label in labels],
                     dtype=np.int64)
    return codes, list(index)


def _clean(name: str) -> str:
    """A frame name that cannot break the line format (';' separates frames)."""
    return name.replace(";", ":").replace("\n", " ")


@tracekit.hookimpl
def register_writers(register: Any) -> None:
    register(FoldedWriter)
