"""CPU samples folded into groups as their batches come: one row per set of samples the
folded writer cannot tell apart, with how many there are, their summed weights and, per
column it counts as not written, how many of them hold a value. What the writer needs of
the whole trace (the event to fold, the unit, thread names, call stacks) is decided from
the groups at the end, so a trace of any length folds in memory that follows its distinct
stacks and threads."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from tracekit.toolkit import SAMPLE_EVENT_ARG, arg_strings, equals, fields

#: The columns a folded line holds (the stack, its root, the weight) or that are counted
#: otherwise (``dur_ns`` as an aggregate's weight, ``name`` where it is the leaf frame).
NATIVE = frozenset({"kind", "category", "name", "stack_id", "pid", "tid", "source", "value",
                    "dur_ns"})
#: Columns whose values a folded line leaves out, counted per column (``args``: non-empty).
COUNTED = tuple(c for c in (*fields.TYPED_COLUMNS, "args")
                if c not in NATIVE or c in ("dur_ns", "name"))
_KEYS = ("event", "has_stack", "stack_id", "source", "pid", "tid", "comm", "aggregate",
         "untimed", "finite", "name")
#: What the per-column counts depend on besides the rows: the event folded, whether a sample
#: has a stack, an aggregate (the unit) and a finite weight.
PRESENCE_KEYS = ("event", "has_stack", "aggregate", "untimed", "finite")
NULL_ID = -(2**62)  # a null id in a group key
_REGROUP_ROWS = 1 << 20  # groups kept apart before they are merged again
_KEY_TYPES = {"event": pa.string(), "has_stack": pa.bool_(), "stack_id": pa.int64(),
              "source": pa.string(), "pid": pa.int64(), "tid": pa.int64(),
              "comm": pa.string(), "aggregate": pa.bool_(), "untimed": pa.bool_(),
              "finite": pa.bool_(), "name": pa.string()}


class SampleGroups:
    """The CPU samples of a trace, grouped batch by batch (see the module docstring):
    ``table()`` per group of samples a line tells apart, their number ``n`` and summed
    ``value`` and ``dur_us``; ``presence()`` per ``PRESENCE_KEYS``, how many samples hold a
    value in each of the ``COUNTED`` columns but ``name`` (``has_<column>``)."""

    def __init__(self) -> None:
        self.rows = 0  # event rows seen, samples or not
        self._parts: list[pa.Table] = []
        self._presence: list[pa.Table] = []
        self._held = 0

    def add(self, events: pa.Table) -> None:
        """Group the CPU samples of ``events`` (a batch, or a whole trace)."""
        self.rows += events.num_rows
        is_sample = pc.fill_null(equals(events["category"], "cpu.sample"), False)
        samples = events.filter(is_sample)
        if not samples.num_rows:
            return
        keys, sums, present = _group_columns(samples)
        self._parts.append(_grouped(pa.table({**keys, **sums}), _KEYS))
        self._presence.append(_grouped(pa.table(
            {**{k: keys[k] for k in PRESENCE_KEYS}, **present}), PRESENCE_KEYS))
        self._held += self._parts[-1].num_rows
        if self._held > _REGROUP_ROWS and len(self._parts) > 1:
            self._parts = [_grouped(pa.concat_tables(self._parts), _KEYS)]
            self._presence = [_grouped(_concat(self._presence), PRESENCE_KEYS)]
            self._held = self._parts[0].num_rows

    def table(self) -> pa.Table:
        """Every group, merged."""
        if not self._parts:
            return pa.table({**{k: pa.array([], t) for k, t in _KEY_TYPES.items()},
                             "n": pa.array([], pa.int64()),
                             "value": pa.array([], pa.float64()),
                             "dur_us": pa.array([], pa.int64())})
        if len(self._parts) > 1:
            self._parts = [_grouped(pa.concat_tables(self._parts), _KEYS)]
        return self._parts[0]

    def presence(self) -> pa.Table:
        """Per ``PRESENCE_KEYS``, the samples that hold a value, by column (every counted
        column but ``name``; 0 where none does)."""
        merged = _grouped(_concat(self._presence), PRESENCE_KEYS) if self._presence else \
            pa.table({k: pa.array([], _KEY_TYPES[k]) for k in PRESENCE_KEYS})
        self._presence = [merged] if self._presence else []
        n = merged.num_rows
        return pa.table({**{k: merged[k] for k in PRESENCE_KEYS},
                         **{f"has_{c}": merged[f"has_{c}"].fill_null(0)
                            if f"has_{c}" in merged.column_names
                            else pa.array(np.zeros(n, dtype=np.int64))
                            for c in COUNTED if c != "name"}})


def _group_columns(samples: pa.Table) -> tuple[dict[str, Any], dict[str, Any],
                                                dict[str, Any]]:
    """Per sample: its group's keys, what is summed, and per counted column whether it holds
    a value."""
    n = samples.num_rows
    # Samples' args repeat ('{"event":"cycles"}'): each distinct text is read once.
    coded = pc.dictionary_encode(samples["args"].combine_chunks())
    texts, index = coded.dictionary, coded.indices
    value = pc.fill_null(samples["value"], 1.0).cast(pa.float64())
    dur = pc.cast(samples["dur_ns"], pa.float64(), safe=False)
    keys = {
        "event": arg_strings(texts, SAMPLE_EVENT_ARG).take(index),
        "has_stack": samples["stack_id"].is_valid(),
        "stack_id": samples["stack_id"].fill_null(NULL_ID),
        "source": samples["source"].cast(pa.string()),
        "pid": samples["pid"].fill_null(NULL_ID),
        "tid": samples["tid"].fill_null(NULL_ID),
        "comm": _comms(texts).take(index),
        "aggregate": pc.and_(pc.is_null(samples["ts_ns"]), pc.is_valid(samples["dur_ns"])),
        # A report row without a time: one function's total, not one sample.
        "untimed": pc.is_null(samples["ts_ns"]),
        "finite": pc.is_finite(value),
        "name": samples["name"].cast(pa.string()),
    }
    sums = {
        "n": pa.array(np.ones(n, dtype=np.int64)),
        "value": value,
        # VTune's aggregates fold in whole µs, each rounded before they are added.
        "dur_us": pc.fill_null(pc.round(pc.divide(dur, 1000.0)), 0.0).cast(pa.int64()),
    }
    present = {}  # only the columns that hold a value here (most hold none)
    for column in COUNTED:
        if column == "name":  # told by the groups (where it is not the leaf frame)
            continue
        if column == "args":
            has = pc.fill_null(pc.greater(pc.utf8_length(texts), 0), False).cast(
                pa.int64()).take(index).fill_null(0)
        elif samples[column].null_count == n:
            continue
        else:
            has = samples[column].is_valid().cast(pa.int64())
        present[f"has_{column}"] = has
    return keys, sums, present


def _concat(tables: list[pa.Table]) -> pa.Table:
    """Presence tables of several batches, a column absent from one null there."""
    return pa.concat_tables(tables, promote_options="permissive")


def _grouped(rows: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """``rows`` (per sample, or groups already) summed per distinct ``keys``."""
    summed = [c for c in rows.column_names if c not in keys]
    out = rows.group_by(list(keys), use_threads=False).aggregate([(c, "sum") for c in summed])
    return out.rename_columns([c.removesuffix("_sum") for c in out.column_names])


def _comms(args: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Per row: ``args.comm``, the name a sample was taken under, where it has one that is
    text (None otherwise)."""
    has = pc.fill_null(pc.match_substring(args, '"comm":'), False)
    rows = np.flatnonzero(has.to_numpy(zero_copy_only=False))
    out: list[str | None] = [None] * len(args)
    if len(rows):
        for row, text in zip(rows.tolist(), args.take(pa.array(rows)).to_pylist(),
                             strict=True):
            out[row] = _comm(text)
    return pa.array(out, pa.string())


def _comm(text: str) -> str | None:
    """``args.comm`` of a sample (None if absent or odd)."""
    try:
        args = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    comm = args.get("comm") if isinstance(args, dict) else None
    return comm if isinstance(comm, str) else None
