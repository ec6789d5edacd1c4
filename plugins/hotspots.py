"""The ``hotspots`` analyzer: where sampled CPU time goes, per function, module and call path.

For every input with CPU samples and call stacks (perf script, Nsight Systems CPU sampling)
and for untimed per-function aggregates. *Self* weight is the weight of samples whose leaf
is the function; *total* weight counts each sample once for every distinct function on its
stack (recursion is not counted twice), as perf report's children mode and speedscope do.
The weight is the sample's value (perf's period, nsys' weight of 1) or, with
``-O weight=samples``, one per sample; its unit (ns of CPU time, cycles, samples, an event
count) goes with the tables. Idle samples (the kernel's idle loop, the ``swapper`` task) are
left out unless ``-O idle=include``; names are demangled (C++, legacy Rust).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import tracekit
from tracekit import Report, Trace
from tracekit.toolkit import (
    StackTree,
    aggregate_rows,
    demangle,
    few_samples_note,
    format_ns,
    idle_rows,
    percent,
    plural,
    report_table,
    sample_events,
    sample_weights,
    sampled_events,
    time_event,
    weight_unit,
)


class HotspotsAnalyzer(tracekit.Analyzer):
    """Self and total weight per function and module; the heaviest call paths."""

    name = "hotspots"
    description = "CPU samples: self/total weight per function and module, heaviest paths"
    # With the summary, beside the verdict for CPU samples where no CPU report is installed.
    default_for = (tracekit.DefaultFor((tracekit.TraceKind.CPU_SAMPLES,), slot=1, rank=0),)

    @dataclass(frozen=True)
    class Options:
        top: int = field(default=20, metadata={"help": "rows per table (0 = all)"})
        weight: str = field(default="value", metadata={
            "help": "value (period, CPU time) or samples (one per sample)"})
        event: str = field(default="", metadata={
            "help": "the sampled event to use (default: cpu-clock, task-clock or cycles, "
                    "else the most frequent one)"})
        idle: str = field(default="exclude", metadata={
            "help": "exclude (default) or include the idle loop's samples (swapper)"})

    def analyze(self, trace: Trace) -> Report:
        if self.options.weight not in ("value", "samples"):
            raise tracekit.OptionError(
                f"analyzer 'hotspots': weight must be value or samples, "
                f"not {self.options.weight!r}")
        if self.options.idle not in ("exclude", "include"):
            raise tracekit.OptionError(
                f"analyzer 'hotspots': idle must be exclude or include, not {self.options.idle!r}")
        report = Report(analyzer=self.name, title="CPU hotspots")
        events = sampled_events(trace)
        event = self.options.event or time_event(events)
        rows, _ = sample_events(trace, event if events else None)
        if len(events) > 1:
            report.notes.append(f"events sampled: {', '.join(events)}; this report uses "
                                f"'{event}' (-O event=NAME)")
        weights_arr, _ = sample_weights(rows, self.options.weight)
        weights = weights_arr.to_numpy(zero_copy_only=False)
        tree = StackTree(trace)
        all_weight = float(weights.sum())
        if self.options.idle == "exclude" and rows.num_rows:
            idle = idle_rows(trace, rows, tree)
            if idle.any():
                idle_w = float(weights[idle].sum())
                report.notes.append(
                    f"idle: {percent(idle_w, all_weight)}% of the weight ({int(idle.sum()):,} "
                    "samples in the idle loop or the swapper task) left out (-O idle=include)")
                rows = rows.filter(pa.array(~idle))
                weights = weights[~idle]
        self_w: dict[tuple[str, str], float] = defaultdict(float)
        total_w: dict[tuple[str, str], float] = defaultdict(float)
        mod_self: dict[str, float] = defaultdict(float)
        mod_total: dict[str, float] = defaultdict(float)
        paths: dict[int, float] = {}
        has_stack = rows["stack_id"].is_valid().to_numpy(zero_copy_only=False)
        # Aggregate per distinct stack first: there are far fewer stacks than samples.
        stack = rows["stack_id"].fill_null(-1).to_numpy()[has_stack]
        ids, inverse = np.unique(stack, return_inverse=True)
        per_stack = np.bincount(inverse.reshape(-1), weights=weights[has_stack],
                                minlength=len(ids))
        for sid, w in zip(ids.tolist(), per_stack.tolist(), strict=True):
            frames = tree.frames(sid)
            if not frames:
                continue
            keys = [(demangle(tree.names[f]), tree.modules[f] or "") for f in frames]
            self_w[keys[-1]] += w
            mod_self[keys[-1][1]] += w
            for key in set(keys):
                total_w[key] += w
            for module in {k[1] for k in keys}:
                mod_total[module] += w
            paths[sid] = w
        # Rows without a stack (aggregates, samples the tool could not unwind): self only.
        unstacked = np.flatnonzero(~has_stack)
        names = rows["name"].take(pa.array(unstacked)).cast(pa.string()).to_pylist()
        for name, w in zip(names, weights[unstacked].tolist(), strict=True):
            if not w:
                continue  # a report's Total row, or a row with nothing in it
            self_w[(demangle(name), "")] += w
            total_w[(demangle(name), "")] += w
            mod_self[""] += w
            mod_total[""] += w
        grand = float(weights.sum())
        unit = weight_unit(trace, rows, event, self.options.weight)
        integral = bool(np.all(np.mod(weights, 1) == 0))
        report.tables["functions"] = self._table(
            [(k[0], k[1], self_w.get(k, 0.0), t) for k, t in total_w.items()], grand, unit,
            integral)
        report.table_titles["functions"] = "Functions by self weight"
        report.tables["modules"] = self._table(
            [(m, "", mod_self.get(m, 0.0), t) for m, t in mod_total.items()], grand, unit,
            integral, module_table=True)
        report.table_titles["modules"] = "Modules by self weight"
        # Stacks of one frame each (a per-function report, samples without callers) are no
        # paths: they would repeat the functions table.
        if any(len(tree.frames(sid)) > 1 for sid in paths):
            report.tables["paths"] = self._paths(tree, paths, grand, unit, integral)
            report.table_titles["paths"] = "Heaviest call paths (root ... leaf)"
        aggregate = aggregate_rows(rows, trace)
        report.notes.append(f"{plural(rows.num_rows, 'report row' if aggregate else 'sample')}, "
                            "total weight "
                            + (format_ns(grand) if unit == "ns" else f"{grand:,.6g}"))
        top = max(self_w.items(), key=lambda kv: (kv[1], kv[0]), default=None)
        few = few_samples_note(rows.num_rows, top[0][0], top[1] / grand) \
            if top and grand and not aggregate else None
        if few:
            report.notes.append(few)
        return report

    def _table(self, rows: list[tuple[str, str, float, float]], grand: float, unit: str,
               integral: bool, module_table: bool = False) -> pa.Table:
        rows.sort(key=lambda r: (-r[2], -r[3], r[0], r[1]))
        if self.options.top:
            rows = rows[: self.options.top]
        wkind, cast = ("int", int) if integral else ("float", float)
        columns: list[tuple[str, str, str | None, Any]] = [
            ("self_pct", "float", "%", [percent(r[2], grand) for r in rows]),
            ("self", wkind, unit, [cast(r[2]) for r in rows]),
            ("total_pct", "float", "%", [percent(r[3], grand) for r in rows]),
            ("total", wkind, unit, [cast(r[3]) for r in rows]),
        ]
        if module_table:
            columns.append(("module", "str", None, [r[0] or "(none)" for r in rows]))
        else:
            columns.append(("module", "str", None, [r[1] or "-" for r in rows]))
            columns.append(("function", "str", None, [r[0] for r in rows]))
        return report_table(columns)

    def _paths(self, tree: StackTree, paths: dict[int, float], grand: float,
               unit: str, integral: bool) -> pa.Table:
        top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))
        if self.options.top:
            top = top[: self.options.top]
        text = [" > ".join(_leafward([demangle(n) for n in tree.names_of(sid)]))
                for sid, _ in top]
        wkind, cast = ("int", int) if integral else ("float", float)
        return report_table([("pct", "float", "%", [percent(w, grand) for _, w in top]),
                             ("weight", wkind, unit, [cast(w) for _, w in top]),
                             ("path", "str", None, text)])


def _leafward(names: list[str], keep: int = 6) -> list[str]:
    """The last ``keep`` frames of a path (the leaf end says most), with an ellipsis."""
    return names if len(names) <= keep else ["…", *names[-keep:]]


@tracekit.hookimpl
def register_analyzers(register: Any) -> None:
    register(HotspotsAnalyzer)
