"""The Perfetto writer's batch sink: CPU samples written as their batches come, the rest of
the trace at the end (``PerfettoWriter.batch_sink``; docs/formats/perfetto.md, "Streamed CPU
samples")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import EmptyOutputError, Trace
from tracekit.plugins.perfetto.annotations import annotated_args
from tracekit.plugins.perfetto.samples import SampleStream
from tracekit.plugins.perfetto.writer import native_rows, nothing_to_draw, row_kinds
from tracekit.toolkit import any_true, equals, factorize, first_rows

if TYPE_CHECKING:
    from tracekit.plugins.perfetto.writer import PerfettoWriter

_NULL_ID = -(2**62)  # a null id in a key of ids
# What a stand-in keeps of its sample: what decides its thread's track (kind, category and
# name are not nullable; write_events counts nothing of a stand-in's).
_PLACES = frozenset({"ts_ns", "pid", "tid", "device", "stream", "stack_id", "source"})


@dataclass
class Streamed:
    """What a sink wrote before ``write_events``: ``samples`` CPU samples, and the last
    ``stand_ins`` rows of the events are stand-ins for the threads they were on."""

    samples: int
    stand_ins: int


class SampleStreamingSink(tracekit.BatchSink):
    """CPU samples written as their batches come (PerfSample packets on their own sequence,
    call stacks interned as the reader adds them, see ``SampleStream``); every other row is
    kept and written at ``close`` with the whole-trace logic, as are samples whose call stack
    had not been added yet. One row per thread of the streamed samples stands in for them at
    ``close``, so that their threads get the tracks and names they would get otherwise. The
    counts are those of ``write``: per batch, each check and each value left out is counted
    on the samples as ``write`` counts it on the whole trace."""

    def __init__(self, writer: PerfettoWriter, stream: IO[bytes]) -> None:
        self._writer = writer
        self._stream = stream
        self._samples = SampleStream()
        self._kept: list[pa.Table] = []
        self._threads: dict[tuple[int, ...], pa.Table] = {}
        self._result = tracekit.WriteResult()
        self._rows = 0
        self._kinds: dict[str, None] = {}
        self._streamed = 0

    def add_table(self, name: str, rows: pa.Table) -> None:
        self._samples.add_table(name, rows)

    def add_events(self, batch: pa.RecordBatch) -> None:
        events = pa.Table.from_batches([batch])
        self._rows += events.num_rows
        self._kinds.update(dict.fromkeys(row_kinds(events)))
        is_sample = equals(events["kind"], "sample")
        if not any_true(is_sample):
            self._kept.append(events)
            return
        if any_true(pc.invert(is_sample)):
            self._kept.append(events.filter(pc.invert(is_sample)))
            events = events.filter(is_sample)
        samples = self._writer.writable_events(events, self._result)
        known = self._samples.knows(samples["stack_id"].to_numpy())
        if not known.all():
            self._kept.append(samples.filter(pa.array(~known)))
            samples = samples.filter(pa.array(known))
        if not samples.num_rows:
            return
        skipped = self._result.skipped
        annotated_args(samples, native_rows(samples, _SamplesPlan(samples)),
                       self._writer.options.args, skipped)
        self._stand_ins(samples)
        for chunk in self._samples.packets(samples.select(["ts_ns", "pid", "tid",
                                                            "stack_id"])):
            self._stream.write(chunk)
        self._streamed += samples.num_rows

    def _stand_ins(self, samples: pa.Table) -> None:
        """Keep the first sample of each thread (and device, stream) not seen before."""
        key = [samples[c].cast(pa.int64()).fill_null(_NULL_ID).to_numpy()
               for c in ("pid", "tid", "device", "stream")]
        code, distinct = factorize(*key)
        first = first_rows(code, len(distinct[0]))
        for row, k in sorted(zip(first.tolist(), zip(*(d.tolist() for d in distinct),
                                                     strict=True), strict=True)):
            if k not in self._threads:
                one = samples.slice(row, 1)
                # Only what places the track; the rest null, so that nothing is counted.
                self._threads[k] = pa.table(
                    {f.name: one[f.name] if f.name in _PLACES or not f.nullable
                     else pa.nulls(1, f.type) for f in one.schema}, schema=one.schema)

    def close(self, trace: Trace) -> tracekit.WriteResult:
        result = self._result
        stand_ins = list(self._threads.values())
        parts = [*self._kept, *stand_ins]
        events = (pa.concat_tables(parts).unify_dictionaries() if parts
                  else trace.events.schema.empty_table())
        whole = dataclasses.replace(trace, events=events)
        events = self._writer.writable_events(events, result)
        # Samples kept because their call stack came later: written after the rest.
        late = equals(events["kind"], "sample").to_numpy(zero_copy_only=False)
        late[events.num_rows - len(stand_ins):] = False
        if not events.num_rows:
            raise EmptyOutputError(nothing_to_draw(self._rows, list(self._kinds), result))
        streamed = Streamed(samples=self._streamed + int(late.sum()), stand_ins=len(stand_ins))
        self._writer.write_events(whole, events, self._stream, result, streamed)
        if late.any():  # every stack is known now
            self._samples.add_table("frames", trace.frames)
            self._samples.add_table("stacks", trace.stacks)
            for chunk in self._samples.packets(events.filter(pa.array(late)).select(
                    ["ts_ns", "pid", "tid", "stack_id"])):
                self._stream.write(chunk)
        return result


class _SamplesPlan:
    """Where the track of each of a batch of samples tells its pid, tid, device and stream,
    as ``plan_tracks`` finds it for samples (a thread track, or a stream track for a sample
    with a device; ``native_rows`` adds that a PerfSample tells its pid and tid)."""

    def __init__(self, samples: pa.Table) -> None:
        n = samples.num_rows
        on_device = samples["device"].is_valid().to_numpy(zero_copy_only=False)
        self.native = {"pid": np.zeros(n, dtype=bool), "tid": np.zeros(n, dtype=bool),
                       "device": on_device, "stream": on_device}
