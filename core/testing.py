"""Helpers for testing tracekit plugins (public API for plugin authors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracekit.builder import TraceBuilder
from tracekit.inputs import Source
from tracekit.interfaces import DirectoryWriter, Reader, Writer, WriteResult
from tracekit.model import EVENTS_SCHEMA, Trace


def check_reader(reader_cls: type[Reader], path: str | Path, options: Any = None) -> Trace:
    """Read ``path`` with ``reader_cls`` and check the reader contract; return the Trace.

    Checks that the reader recognises its own file (sniff weight above 0), that the events
    follow the event schema, and that nothing was skipped without being counted.
    """
    source = Source(path)
    weight = reader_cls.sniff(source)
    assert weight > 0, f"{reader_cls.name} does not recognise {path} (sniff gave {weight})"
    out = TraceBuilder(source.name, reader_cls.name)
    reader_cls(options).read(source, out)
    trace = out.build()
    assert trace.events.schema.equals(EVENTS_SCHEMA), "events do not follow EVENTS_SCHEMA"
    assert trace.log.outcomes, f"{reader_cls.name} accounted for no input record (use out.note)"
    return trace


def sample_trace() -> Trace:
    """A small trace with host slices, a GPU kernel and memcpy linked by correlation,
    an instant and a counter: a canonical input for writer and analyzer authors."""
    b = TraceBuilder("sample.json", "sample")
    b.add_events({
        "kind": ["slice", "slice", "slice", "slice", "instant", "counter"],
        "category": ["host.op", "api.runtime", "gpu.kernel", "gpu.memcpy", "host.instant",
                     "counter.memory"],
        "name": ["aten::mm", "cudaLaunchKernel", "gemm", "Memcpy HtoD (Pageable -> Device)",
                 "step", "GPU 0 memory allocated"],
        "ts_ns": [1_000, 1_100, 2_000, 5_000, 9_000, 9_000],
        "dur_ns": [1_000, 200, 2_500, 1_000, None, None],
        "pid": [10, 10, 10, 10, 10, 10], "tid": [11, 11, None, None, 11, None],
        "device": [None, None, 0, 0, None, None], "stream": [None, None, 7, 7, None, None],
        "correlation": [None, 42, 42, None, None, None],
        "bytes": [None, None, None, 4096, None, None],
        "value": [None, None, None, None, None, 4096.0],
        "copy_kind": [None, None, None, "HtoD", None, None],
        "args": [None, '{"cbid": 211}', '{"grid": [1, 1, 1]}', None, None, None],
    })
    b.add_process(10, name="python")
    b.add_thread(10, 11, name="main")
    b.add_device(0, name="Sample GPU", vendor="nvidia", kind="gpu")
    b.note("sample", "events", 6)
    return b.build()


def full_trace() -> Trace:
    """A trace in which every typed column of the event model holds values: host ops with a
    forward/backward flow, launches with their kernel, copy, memset and sync, a GPU
    annotation, instants, counters on a process and on a device, a CPU sample with its call
    stack, an untimed aggregate row, and a host row that carries every column no format has
    a field for. For checking that a writer writes or counts every column."""
    b = TraceBuilder("full.json", "sample")
    rows: list[dict[str, Any]] = [
        dict(kind="slice", category="host.op", name="aten::mm", ts_ns=1_000, dur_ns=3_000,
             pid=10, tid=11, flow_id=1, args='{"External id": 7}'),
        dict(kind="slice", category="api.runtime", name="cudaLaunchKernel", ts_ns=1_100,
             dur_ns=200, pid=10, tid=11, correlation=42, args='{"cbid": 211}'),
        dict(kind="slice", category="gpu.kernel", name="gemm", ts_ns=2_000, dur_ns=2_500,
             pid=10, device=0, stream=7, correlation=42, grid_x=4, grid_y=2, grid_z=1,
             block_x=128, block_y=1, block_z=1, registers=32, shared_mem_bytes=1024,
             args='{"External id": 7}'),
        dict(kind="slice", category="api.runtime", name="cudaMemcpyAsync", ts_ns=1_400,
             dur_ns=100, pid=10, tid=11, correlation=43),
        dict(kind="slice", category="gpu.memcpy", name="[CUDA memcpy Host-to-Device]",
             ts_ns=5_000, dur_ns=1_000, pid=10, device=0, stream=7, correlation=43,
             bytes=4096, copy_kind="HtoD", src_kind="Pageable", dst_kind="Device"),
        dict(kind="slice", category="api.runtime", name="cudaMemsetAsync", ts_ns=1_600,
             dur_ns=100, pid=10, tid=11, correlation=44),
        dict(kind="slice", category="gpu.memset", name="[CUDA memset]", ts_ns=6_500,
             dur_ns=100, pid=10, device=0, stream=7, correlation=44, bytes=512,
             dst_kind="Device"),
        dict(kind="slice", category="gpu.sync", name="Stream sync", ts_ns=7_000, dur_ns=50,
             pid=10, device=0, stream=7),
        dict(kind="slice", category="gpu.annotation", name="ProfilerStep#1", ts_ns=1_900,
             dur_ns=5_300, device=0, stream=7),
        dict(kind="slice", category="host.op", name="aten::mm_backward", ts_ns=8_000,
             dur_ns=500, pid=10, tid=11, flow_id=1),
        dict(kind="instant", category="host.instant", name="step", ts_ns=9_000, pid=10,
             tid=11, correlation=45, flow_id=2, bytes=8, value=1.5, count=3),
        dict(kind="instant", category="host.memory", name="[memory]", ts_ns=1_200, pid=10,
             tid=11, bytes=4096, args='{"Addr": 1}'),
        dict(kind="counter", category="counter.memory", name="GPU 0 memory allocated",
             ts_ns=9_000, pid=10, value=4096.0),
        dict(kind="counter", category="counter.utilization", name="GPU 0 utilization",
             ts_ns=9_000, pid=10, device=0, value=0.5),
        dict(kind="sample", category="cpu.sample", name="cycles", ts_ns=9_500, pid=10,
             tid=11, stack_id=1, value=1000.0),
        dict(kind="slice", category="host.os", name="read", ts_ns=9_600, dur_ns=100,
             pid=10, tid=11, correlation=46, bytes=100, value=0.25, count=2, stack_id=1,
             grid_x=3, grid_y=1, grid_z=1, block_x=64, block_y=1, block_z=1, registers=16,
             shared_mem_bytes=0, copy_kind="DtoH", src_kind="Device", dst_kind="Pinned",
             args='{"fd": 3}'),
        dict(kind="slice", category="gpu.kernel", name="gemm", ts_ns=None, dur_ns=12_000,
             device=0, count=5),
    ]
    b.add_events({name: [r.get(name) for r in rows] for name in EVENTS_SCHEMA.names
                  if name != "source"})
    b.add_process(10, name="python", host="node0", rank=0)
    b.add_thread(10, 11, name="main")
    b.add_device(0, name="Sample GPU", vendor="nvidia", kind="gpu", sm_count=108,
                 memory_bytes=40 * 2**30, compute_capability="8.0")
    b.add_frame(0, "main", module="app")
    b.add_frame(1, "leaf", module="app", file="app.c", line=12)
    b.add_stack(0, 0, None)
    b.add_stack(1, 1, 0)
    b.note("sample", "events", len(rows))
    return b.build()


def check_writer(writer_cls: type[Writer], trace: Trace | None = None,
                 options: Any = None) -> tuple[bytes, WriteResult]:
    """Write ``trace`` (default: :func:`full_trace`) and return the output's bytes (for a
    directory writer, its files' bytes one after the other) and the result.

    Checks the writer's accounting: the ``written`` counts named in ``event_counts`` plus the
    rows counted as skipped add up to the trace's events; and that every typed column that
    holds values is in ``native_columns``, appears in the output under its own name (the
    rule of ``tracekit.fields``), or is counted as ``field <column>: ...`` in ``skipped``.
    A writer that ``takes_batches`` also writes a trace of one source through its
    ``batch_sink``, the events in two batches, and must count what ``write`` counts.
    """
    import io
    import tempfile
    from pathlib import Path

    from tracekit.fields import FIELD_PREFIX, TYPED_COLUMNS, is_field_skip

    trace = trace or full_trace()
    writer = writer_cls(options)
    if isinstance(writer, DirectoryWriter):
        with tempfile.TemporaryDirectory() as tmp:
            result = writer.write(trace, Path(tmp))
            data = b"".join(p.read_bytes() for p in sorted(Path(tmp).rglob("*"))
                            if p.is_file())
    else:
        buffer = io.BytesIO()
        result = writer.write(trace, buffer)
        data = buffer.getvalue()
    name = writer_cls.name
    assert isinstance(result, WriteResult), "write() must return a WriteResult"
    assert writer_cls.event_counts, f"{name}: declare event_counts (the written keys of rows)"
    rows = sum(result.written.get(k, 0) for k in writer_cls.event_counts)
    skipped = sum(n for k, n in result.skipped.items() if not is_field_skip(k))
    assert rows + skipped == trace.events.num_rows, (
        f"{name}: {rows} rows written and {skipped} skipped, but the trace has "
        f"{trace.events.num_rows} events")
    unknown = set(writer_cls.native_columns) - set(TYPED_COLUMNS)
    assert not unknown, f"{name}: native_columns names no typed column: {sorted(unknown)}"
    for column in TYPED_COLUMNS:
        if trace.events[column].null_count == trace.events.num_rows:
            continue
        counted = any(k.startswith(f"{FIELD_PREFIX}{column}:") for k in result.skipped)
        assert column in writer_cls.native_columns or _named(data, column) or counted, (
            f"{name}: column {column!r} is neither in native_columns, nor written under its "
            f"own name, nor counted as skipped")
    if writer_cls.takes_batches and len(trace.sources) == 1:
        streamed = _through_batch_sink(writer_cls, trace, options)
        assert streamed.written == result.written, (
            f"{name}: batch_sink wrote {dict(streamed.written)}, write {dict(result.written)}")
        assert streamed.skipped == result.skipped, (
            f"{name}: batch_sink skipped {dict(streamed.skipped)}, "
            f"write {dict(result.skipped)}")
    return data, result


def _through_batch_sink(writer_cls: type[Writer], trace: Trace, options: Any) -> WriteResult:
    """What ``writer_cls`` writes of ``trace`` through its batch sink: the side tables first
    (``add_table``), then its events in two batches, and the rest of the trace at
    ``close``."""
    import dataclasses
    import io
    import tempfile
    from pathlib import Path

    writer = writer_cls(options)
    half = trace.events.num_rows // 2
    events = trace.events.combine_chunks()
    batches = [b for part in (events.slice(0, half), events.slice(half))
               for b in part.to_batches() if b.num_rows]
    rest = dataclasses.replace(trace, events=trace.events.schema.empty_table())
    with tempfile.TemporaryDirectory() as tmp:
        sink = writer.batch_sink(Path(tmp) if isinstance(writer, DirectoryWriter)
                                 else io.BytesIO())
        for table in ("frames", "stacks", "processes", "threads", "devices"):
            if trace.table(table).num_rows:
                sink.add_table(table, trace.table(table))
        for batch in batches:
            sink.add_events(batch)
        return sink.close(rest)


def _named(data: bytes, name: str) -> bool:
    """Whether ``data`` holds ``name`` as a key: quoted (JSON) or length-prefixed (protobuf,
    Thrift), not merely inside a longer word."""
    raw = name.encode()
    return b'"' + raw + b'"' in data or bytes([len(raw)]) + raw in data


__all__ = ["check_reader", "check_writer", "full_trace", "sample_trace"]
