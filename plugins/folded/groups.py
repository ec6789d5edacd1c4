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
from tracekit.toolkit import SAMPLE_EVENT_ARG, any_true, arg_strings, equals, fields

#: The columns a folded line holds (the stack, its root, the weight) or that are counted
#: otherwise (``dur_ns`` as an aggregate's weight, ``name`` where it is the leaf frame).
NATIVE = frozenset({"kind", "category", "name", "stack_id", "pid", "tid", "source", "value",
                    "dur_ns"})
#: Columns whose values a folded line leaves out, counted per column (``args``: non-empty).
COUNTED = tuple(c for c in (*fields.TYPED_COLUMNS, "args")
                if c not in NATIVE or c in ("dur_ns", "name"))
_KEYS = ("event", "has_stack", "stack_id", "source", "pid", "tid", "comm", "aggregate",
         "finite", "name")
NULL_ID = -(2**62)  # a null id in a group key
_REGROUP_ROWS = 1 << 20  # groups kept apart before they are merged again


class SampleGroups:
    """The CPU samples of a trace, grouped batch by batch (see the module docstring)."""

    def __init__(self) -> None:
        self.rows = 0  # event rows seen, samples or not
        self._parts: list[pa.Table] = []
        self._held = 0

    def add(self, events: pa.Table) -> None:
        """Group the CPU samples of ``events`` (a batch, or a whole trace)."""
        self.rows += events.num_rows
        is_sample = pc.fill_null(equals(events["category"], "cpu.sample"), False)
        samples = events.filter(is_sample)
        if not samples.num_rows:
            return
        self._parts.append(_grouped(_group_columns(samples)))
        self._held += self._parts[-1].num_rows
        if self._held > _REGROUP_ROWS and len(self._parts) > 1:
            self._parts = [_grouped(pa.concat_tables(self._parts))]
            self._held = self._parts[0].num_rows

    def table(self) -> pa.Table:
        """Every group, merged: the ``_KEYS`` columns, ``n`` and the sums."""
        if not self._parts:
            return pa.table({**{k: pa.array([], t) for k, t in _KEY_TYPES.items()},
                             **{c: pa.array([], pa.int64()) for c in _SUMMED_INTS},
                             "value": pa.array([], pa.float64()),
                             "dur": pa.array([], pa.float64())})
        if len(self._parts) > 1:
            self._parts = [_grouped(pa.concat_tables(self._parts))]
        return self._parts[0]


def _group_columns(samples: pa.Table) -> pa.Table:
    """Per sample: its group's keys and what is summed."""
    n = samples.num_rows
    args = samples["args"]
    value = pc.fill_null(samples["value"], 1.0).cast(pa.float64())
    dur = pc.cast(samples["dur_ns"], pa.float64(), safe=False)
    named = any_true(pc.match_substring(args, f'"{SAMPLE_EVENT_ARG}"'))  # several events
    columns: dict[str, Any] = {
        "event": arg_strings(args, SAMPLE_EVENT_ARG) if named else pa.nulls(n, pa.string()),
        "has_stack": samples["stack_id"].is_valid(),
        "stack_id": samples["stack_id"].fill_null(NULL_ID),
        "source": samples["source"].cast(pa.string()),
        "pid": samples["pid"].fill_null(NULL_ID),
        "tid": samples["tid"].fill_null(NULL_ID),
        "comm": _comms(args),
        "aggregate": pc.and_(pc.is_null(samples["ts_ns"]), pc.is_valid(samples["dur_ns"])),
        "finite": pc.is_finite(value),
        "name": samples["name"].cast(pa.string()),
        "n": pa.array(np.ones(n, dtype=np.int64)),
        "value": value,
        "dur": pc.fill_null(dur, 0.0),
        # VTune's aggregates fold in whole µs, each rounded before they are added.
        "dur_us": pc.fill_null(pc.round(pc.divide(dur, 1000.0)), 0.0).cast(pa.int64()),
    }
    for column in COUNTED:
        if column == "args":
            present = pc.fill_null(pc.greater(pc.utf8_length(args), 0), False)
        else:
            present = samples[column].is_valid()
        columns[f"has_{column}"] = present.cast(pa.int64())
    return pa.table(columns)


_KEY_TYPES = {"event": pa.string(), "has_stack": pa.bool_(), "stack_id": pa.int64(),
              "source": pa.string(), "pid": pa.int64(), "tid": pa.int64(),
              "comm": pa.string(), "aggregate": pa.bool_(), "finite": pa.bool_(),
              "name": pa.string()}
_SUMMED_INTS = ("n", "dur_us", *(f"has_{c}" for c in COUNTED))


def _grouped(rows: pa.Table) -> pa.Table:
    """``rows`` (per sample, or groups already) summed per distinct key."""
    summed = [c for c in rows.column_names if c not in _KEYS]
    out = rows.group_by(list(_KEYS), use_threads=False).aggregate(
        [(c, "sum") for c in summed])
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
