"""Streaming conversion: one input whose reader ``streams_events`` (perf script, Nsight
Systems), to a writer that ``takes_batches`` (Parquet), is written batch by batch as it is
read (``tracekit convert``; ``pipeline.convert(stream=True)``), and reads back as the
whole-trace conversion does."""

from __future__ import annotations

import contextlib
import gzip
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tracekit
from helpers import FIXTURES, SHARED, shared_path, sweep
from tracekit import TraceReadError, TraceWriteError
from tracekit.pipeline import convert
from tracekit.plugins import parquet
from tracekit.plugins.perfetto import samples as samples_mod
from tracekit.plugins.perfetto.writer import PerfettoWriter
from tracekit.testing import check_writer, full_trace
from tracekit.toolkit import fields
from typer.testing import CliRunner

PERF = "perf-script/haandfeng_aarch64/out.perf"
NSYS = "nsys-sqlite/pipit_cloverleaf_nsys2024.5.1_a100.sqlite"


def streamed_inputs() -> list[str]:
    """Every real perf script file, Nsight Systems export and rocprof database under
    ../shared/fixtures."""
    files = [p for kind in ("perf-script", "nsys-sqlite") if (SHARED / kind).exists()
             for p in (SHARED / kind).rglob("*") if p.is_file()]
    files += [p for p in SHARED.rglob("*.db") if p.is_file()] if SHARED.exists() else []
    return sorted(str(p.relative_to(SHARED)) for p in files) or ["<missing>"]


def logical(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns decoded: batches streamed keep dictionaries of
    their own, where the whole-trace path unifies them."""
    return pa.table({c: table[c].cast(pa.string()) if pa.types.is_dictionary(table[c].type)
                     else table[c] for c in table.column_names})


def assert_same_trace(a: tracekit.Trace, b: tracekit.Trace) -> None:
    assert logical(a.events).equals(logical(b.events))
    for name in ("processes", "threads", "devices", "stacks", "frames"):
        assert a.table(name).equals(b.table(name)), name
    assert a.metadata == b.metadata
    assert a.log.outcomes == b.log.outcomes


def row_groups(dataset: Path) -> list[int]:
    meta = pq.ParquetFile(dataset / parquet.EVENTS).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


@pytest.mark.parametrize("rel", sweep(streamed_inputs(), PERF, NSYS))
def test_streamed_dataset_reads_back_as_the_whole_trace_one(rel, tmp_path, registry):
    path = shared_path(*rel.split("/"))
    perf = rel.startswith("perf-script")
    options = ["row_group_size=700", *(["batch_rows=300"] if perf else [])]
    fmt = "perf" if perf else None
    try:
        whole_trace, whole = convert(path, tmp_path / "w.parquet", from_=fmt, options=options,
                                     registry=registry)
    except tracekit.TracekitError as exc:  # the same error, and nothing written
        with pytest.raises(type(exc)) as streamed_error:
            convert(path, tmp_path / "s.parquet", from_=fmt, options=options,
                    registry=registry, stream=True)
        assert str(streamed_error.value) == str(exc)
        assert sorted(os.listdir(tmp_path)) == []
        return
    trace, streamed = convert(path, tmp_path / "s.parquet", from_=fmt, options=options,
                              registry=registry, stream=True)
    assert trace.events.num_rows == 0  # the events went to the file as they were read
    assert streamed.written == whole.written
    assert streamed.written["events rows"] == whole_trace.events.num_rows
    back = tracekit.read(tmp_path / "s.parquet", registry=registry)
    assert_same_trace(back, tracekit.read(tmp_path / "w.parquet", registry=registry))
    assert_same_trace(back, whole_trace)
    rows = whole_trace.events.num_rows
    assert row_groups(tmp_path / "s.parquet") == \
        [700] * (rows // 700) + ([rows % 700] if rows % 700 else [])


def test_events_leave_in_batches_of_the_readers_size(tmp_path, registry):
    """The perf reader hands batches of ``batch_rows`` to the sink as it reads: the sink
    never holds more than a row group, and the file has one per 1,000 rows."""
    held: list[int] = []
    real_add = parquet._EventsFileSink.add_events

    def add(sink, batch):
        held.append(batch.num_rows)
        real_add(sink, batch)
        assert sink._held_rows < 1000

    path = shared_path(*PERF.split("/"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet._EventsFileSink, "add_events", add)
        _, result = convert(path, tmp_path / "s.parquet", registry=registry, stream=True,
                                options=["batch_rows=250", "row_group_size=1000"])
    rows = tracekit.read(path, registry=registry).events.num_rows
    assert rows == 3570 and result.written["events rows"] == rows
    assert max(held) == 250 and sum(held) == rows
    assert row_groups(tmp_path / "s.parquet") == [1000, 1000, 1000, 570]


def test_readers_that_do_not_stream_and_annotations_take_the_whole_trace(tmp_path,
                                                                            registry):
    torch = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    trace, result = convert(torch, tmp_path / "k.parquet", registry=registry, stream=True)
    assert trace.events.num_rows == result.written["events rows"] > 0
    nsys = shared_path(*NSYS.split("/"))
    trace, result = convert(nsys, tmp_path / "n.parquet", registry=registry, stream=True,
                            annotations=True)
    assert trace.events.num_rows == result.written["events rows"] > 0


def test_a_writer_failing_mid_stream_leaves_nothing(tmp_path, registry):
    calls = []
    real_add = parquet._EventsFileSink.add_events

    def add(sink, batch):
        calls.append(batch.num_rows)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real_add(sink, batch)

    out = tmp_path / "out.parquet"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet._EventsFileSink, "add_events", add)
        with pytest.raises(TraceWriteError, match=rf"^{out}: No space left on device$"):
            convert(shared_path(*PERF.split("/")), out, registry=registry, stream=True,
                    options=["batch_rows=500"])
    assert len(calls) == 3
    assert os.listdir(tmp_path) == []


def test_a_reader_failing_mid_stream_leaves_nothing(tmp_path, registry):
    """A gzip stream cut short: batches were written before the reader found it, and the
    error names the input, not the writer."""
    text = shared_path(*PERF.split("/")).read_bytes()
    data = gzip.compress(text * 8)  # 10.8 MB of text: more than one block of the reader
    damaged = tmp_path / "cut.perf.gz"
    damaged.write_bytes(data[:int(len(data) * 0.9)])
    written = []
    real_add = parquet._EventsFileSink.add_events

    def add(sink, batch):
        written.append(batch.num_rows)
        real_add(sink, batch)

    out = tmp_path / "out.parquet"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet._EventsFileSink, "add_events", add)
        with pytest.raises(TraceReadError, match="gzip data is truncated") as err:
            convert(damaged, out, registry=registry, stream=True)
    assert str(damaged) in str(err.value)
    assert sum(written) > 0
    assert sorted(os.listdir(tmp_path)) == ["cut.perf.gz"]


def test_an_input_without_events_writes_nothing(tmp_path, registry):
    empty = tmp_path / "empty.perf"
    empty.write_text("# ========\n# captured on: x\n# ========\n")
    with pytest.raises(TraceReadError, match="no perf script samples found"):
        convert(empty, tmp_path / "out.parquet", from_="perf", registry=registry,
                stream=True)
    assert sorted(os.listdir(tmp_path)) == ["empty.perf"]


def test_the_command_streams_standard_input(tmp_path, registry):
    """``perf script | tracekit convert - --from perf -o x.parquet``: one pass over a pipe."""
    from tracekit.cli import app

    path = shared_path(*PERF.split("/"))
    out = tmp_path / "x.parquet"
    result = CliRunner().invoke(app, ["convert", "-", "--from", "perf", "-o", str(out),
                                      "-O", "row_group_size=1000"],
                                input=path.read_bytes())
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "3,570 events rows" in result.output
    assert row_groups(out) == [1000, 1000, 1000, 570]
    back = tracekit.read(out, registry=registry)
    whole = tracekit.read(path, registry=registry)
    assert logical(back.events.drop_columns(["source"])).equals(
        logical(whole.events.drop_columns(["source"])))
    assert back.sources == ["stdin"]


def test_check_writer_compares_the_batch_sink_with_write():
    """A writer that takes batches must count what its whole-trace write counts."""
    check_writer(parquet.ParquetWriter)

    class Miscounting(parquet.ParquetWriter):
        name = "miscounting"

        def batch_sink(self, stream):
            sink = super().batch_sink(stream)
            close = sink.close

            def short(trace):
                result = close(trace)
                result.written["events rows"] -= 1
                return result

            sink.close = short
            return sink

    with pytest.raises(AssertionError, match="batch_sink wrote"):
        check_writer(Miscounting, full_trace())


def test_a_sink_given_no_rows_says_there_is_nothing_to_write(tmp_path):
    sink = parquet.ParquetWriter().batch_sink(tmp_path)
    with pytest.raises(tracekit.EmptyOutputError, match="the input has no events"):
        sink.close(tracekit.Trace(events=tracekit.EVENTS_SCHEMA.empty_table()))


def test_standard_input_of_a_reader_that_does_not_stream_is_read_whole(tmp_path, registry):
    """Standard input is opened once: a PyTorch trace piped to Parquet is read whole from the
    same stream (it once failed with 'read of closed file')."""
    from tracekit.cli import app

    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    out = tmp_path / "k.parquet"
    result = CliRunner().invoke(app, ["convert", "-", "-o", str(out)],
                                input=gzip.decompress(path.read_bytes()))
    assert result.exit_code == 0, result.output
    whole = tracekit.read(path, registry=registry)
    assert f"{whole.events.num_rows:,} events rows" in result.output
    back = tracekit.read(out, registry=registry)
    assert logical(back.events.drop_columns(["source"])).equals(
        logical(whole.events.drop_columns(["source"])))


@pytest.mark.parametrize("size", ["0", "-5"])
def test_a_row_group_size_below_one_is_refused_before_reading(size, tmp_path, registry):
    """Streamed, 0 once wrote a row group per row (17 MB for 80 KB); read whole first, it
    failed after the read. Both now refuse it up front, as a usage error."""
    for stream in (True, False):
        with pytest.raises(tracekit.OptionError,
                           match=f"option 'row_group_size={size}': expected a number of at "
                                 "least 1$"):
            convert(shared_path(*PERF.split("/")), tmp_path / "x.parquet",
                    options=[f"row_group_size={size}"], registry=registry, stream=stream)
    assert os.listdir(tmp_path) == []


# --- Perfetto: CPU samples streamed, the rest written at the end ---------------------------

def perfetto_rows(path: Path, registry) -> tuple[pa.Table, list[tuple[str, ...]], list]:
    """A .pftrace read back: its events in a fixed order (dictionaries decoded, source left
    out: the packets' order differs), each row's call stack as frame names, and its
    threads."""
    from tracekit.toolkit import StackTree

    trace = tracekit.read(path, registry=registry)
    events = logical(trace.events.drop_columns(["source"]))
    events = events.sort_by([(c, "ascending") for c in ("ts_ns", "pid", "tid", "kind", "name",
                                                          "stack_id")])
    tree = StackTree(trace)
    stacks = [tuple(tree.names_of(s)) if s is not None else () for s in
              events["stack_id"].to_pylist()]
    threads = sorted(trace.threads.drop_columns(["source"]).to_pylist(),
                     key=lambda r: (r["pid"], r["tid"]))
    return events.drop_columns(["stack_id"]), stacks, threads


def assert_same_pftrace(streamed: Path, whole: Path, registry) -> None:
    a, b = perfetto_rows(streamed, registry), perfetto_rows(whole, registry)
    assert a[0].equals(b[0])
    assert a[1] == b[1]
    assert a[2] == b[2]


@pytest.mark.parametrize("rel", sweep(streamed_inputs(), PERF, NSYS))
def test_streamed_pftrace_reads_back_as_the_whole_trace_one(rel, tmp_path, registry):
    """Samples leave in batches of 100 rows, each interning only what it adds."""
    path = shared_path(*rel.split("/"))
    perf = rel.startswith("perf-script")
    options = ["batch_rows=100"] if perf else []
    fmt = "perf" if perf else None
    try:
        _, whole = convert(path, tmp_path / "w.pftrace", from_=fmt, options=options,
                           registry=registry)
    except tracekit.TracekitError as exc:
        with pytest.raises(type(exc)) as streamed_error:
            convert(path, tmp_path / "s.pftrace", from_=fmt, options=options,
                    registry=registry, stream=True)
        assert str(streamed_error.value) == str(exc).replace("w.pftrace", "s.pftrace")
        assert sorted(os.listdir(tmp_path)) == []
        return
    trace, streamed = convert(path, tmp_path / "s.pftrace", from_=fmt, options=options,
                              registry=registry, stream=True)
    assert trace.events.num_rows == 0
    assert streamed.written == whole.written
    assert streamed.skipped == whole.skipped
    assert_same_pftrace(tmp_path / "s.pftrace", tmp_path / "w.pftrace", registry)


def test_samples_and_tracepoints_stream_together(tmp_path, registry):
    """Tracepoints (instants) are kept and written at the end, on their thread's track;
    the samples around them leave as they come."""
    text = (FIXTURES / "perf-recorded" / "burn.perf").read_bytes() + \
        (FIXTURES / "perf-recorded" / "sched_switch.perf").read_bytes()
    mixed = tmp_path / "mixed.perf"
    mixed.write_bytes(text)
    options = ["batch_rows=50"]
    _, whole = convert(mixed, tmp_path / "w.pftrace", options=options, registry=registry)
    packets = []
    real_packets = samples_mod.SampleStream.packets

    def counted(stream, samples):
        packets.append(samples.num_rows)
        yield from real_packets(stream, samples)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(samples_mod.SampleStream, "packets", counted)
        _, streamed = convert(mixed, tmp_path / "s.pftrace", options=options,
                              registry=registry, stream=True)
    read = tracekit.read(mixed, registry=registry)
    kinds = read.events["kind"].cast(pa.string()).to_pylist()
    assert kinds.count("instant") == 1 and streamed.written["instants"] == 1
    assert streamed.written["CPU samples"] == kinds.count("sample") > 50
    assert max(packets) == 50 and sum(packets) == kinds.count("sample")
    assert streamed.written == whole.written and streamed.skipped == whole.skipped
    assert_same_pftrace(tmp_path / "s.pftrace", tmp_path / "w.pftrace", registry)


def test_align_makes_the_perfetto_writer_take_the_whole_trace(tmp_path, registry):
    path = shared_path(*NSYS.split("/"))
    _, whole = convert(path, tmp_path / "w.pftrace", options=["align=collectives"],
                       registry=registry)
    _, streamed = convert(path, tmp_path / "s.pftrace", options=["align=collectives"],
                          registry=registry, stream=True)
    assert streamed.written == whole.written
    assert (tmp_path / "s.pftrace").read_bytes() == (tmp_path / "w.pftrace").read_bytes()


def test_streamed_samples_without_timestamps_say_why_nothing_is_drawn(tmp_path, registry):
    untimed = tmp_path / "untimed.perf"
    untimed.write_text("burn 123/123: cpu-clock:\n\tffff f (/bin/x)\n\n" * 3)
    with pytest.raises(tracekit.EmptyOutputError) as whole:
        convert(untimed, tmp_path / "w.pftrace", from_="perf", registry=registry)
    with pytest.raises(tracekit.EmptyOutputError) as streamed:
        convert(untimed, tmp_path / "s.pftrace", from_="perf", registry=registry, stream=True)
    assert "no event has a timestamp (3 samples without one)" in str(whole.value)
    assert str(streamed.value) == str(whole.value).replace("w.pftrace", "s.pftrace")
    assert sorted(os.listdir(tmp_path)) == ["untimed.perf"]


def test_formats_names_the_readers_and_writers_that_stream(registry):
    from tracekit.overview import components

    streaming = sorted((c.kind, c.name) for c in components(registry) if c.streams)
    assert streaming == [("reader", "nsys"), ("reader", "perf"), ("reader", "rocprof-db"),
                         ("writer", "folded"), ("writer", "parquet"), ("writer", "perfetto")]
    perf = next(c for c in components(registry) if c.name == "perf")
    assert perf.lines()[0].endswith("; streams its events (docs/cli.md, Streaming)")


def test_nsys_samples_leave_as_they_are_read(tmp_path, registry):
    """The nsys reader adds the samples' call stacks before the samples, so the Perfetto
    sink writes them at once rather than keeping them to the end."""
    from tracekit.plugins.perfetto import sample_sink

    counted = {}
    real_close = sample_sink.SampleStreamingSink.close

    def close(sink, trace):
        counted["streamed"] = sink._streamed
        counted["kept"] = sum(t.num_rows for t in sink._kept)
        return real_close(sink, trace)

    path = shared_path(*NSYS.split("/"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sample_sink.SampleStreamingSink, "close", close)
        _, result = convert(path, tmp_path / "s.pftrace", registry=registry, stream=True)
    whole = tracekit.read(path, registry=registry)
    samples = whole.events["kind"].cast(pa.string()).to_pylist().count("sample")
    assert samples == result.written["CPU samples"] == counted["streamed"] > 0
    assert counted["kept"] == whole.events.num_rows - samples


def test_a_stack_is_not_known_before_its_frames():
    stream = samples_mod.SampleStream()
    stream.add_table("stacks", pa.table({"stack_id": [0, 1], "parent_id": [None, 0],
                                         "frame_id": [0, 1]}))
    assert stream.knows(np.array([0, 1])).tolist() == [False, False]
    stream.add_table("frames", pa.table({"frame_id": [0, 1], "name": ["main", "f"],
                                         "module": [None, "libx.so"]}))
    assert stream.knows(np.array([0, 1, 2])).tolist() == [True, True, False]


def samples_with_typed_values() -> tracekit.Trace:
    """Six CPU samples of two threads that carry values a PerfSample cannot hold (count,
    correlation, args), on one call stack."""
    out = tracekit.TraceBuilder("typed.perf", "test")
    out.add_table("frames", pa.table({"frame_id": [0, 1], "name": ["main", "work"],
                                      "module": ["app", "app"]}))
    out.add_table("stacks", pa.table({"stack_id": [0, 1], "parent_id": [None, 0],
                                      "frame_id": [0, 1]}))
    out.add_events({"kind": ["sample"] * 6, "category": ["cpu.sample"] * 6,
                    "name": ["work"] * 6, "ts_ns": [10, 20, 30, 40, 50, 60],
                    "pid": [1] * 6, "tid": [1, 1, 1, 2, 2, 2], "stack_id": [1] * 6,
                    "value": [1.0] * 6, "count": [5] * 6, "correlation": [7] * 6,
                    "args": ['{"comm": "app"}'] * 6})
    out.add_thread(1, 1, name="app")
    out.add_thread(1, 2, name="worker")
    return out.build()


def test_stand_ins_count_nothing_of_their_own():
    """The rows that give the streamed samples' threads their tracks at the end once
    counted their count and correlation a second time (7 where write counts 6)."""
    _, result = check_writer(PerfettoWriter, samples_with_typed_values())
    assert result.written["CPU samples"] == 6
    for column in ("count", "correlation", "args", "name", "value"):
        assert result.skipped[fields.field_skip(
            column, "a CPU sample carries no annotations in Perfetto")] == 6, column


def convert_into_fifo(tmp_path: Path, registry, to: str) -> tuple[tracekit.Trace,
                                                                    tracekit.WriteResult, bytes]:
    """The perf fixture converted (stream=True) into a FIFO that a thread drains: the trace,
    what was written and the bytes that came through."""
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    drained = []
    drain = threading.Thread(target=lambda: drained.append(fifo.read_bytes()))
    drain.start()
    try:
        trace, result = convert(shared_path(*PERF.split("/")), fifo, to=to,
                                registry=registry, stream=True)
    finally:
        drain.join(10)
    return trace, result, drained[0]


def test_standard_output_and_fifos_get_the_whole_trace(tmp_path, registry):
    """What a streamed conversion wrote to a pipe before a read error could not be taken
    back: such outputs are written from the whole trace, after the read."""
    trace, result, data = convert_into_fifo(tmp_path, registry, "perfetto")
    assert trace.events.num_rows == result.written["CPU samples"] == 3570
    assert len(data) > 0


def test_a_folder_input_keeps_its_name(tmp_path, registry, monkeypatch):
    """'.' is named as read() names it, streamed or not (it was named '')."""
    folder = shared_path("rocprof-v1", "hgliu_mi300x_2025")
    monkeypatch.chdir(folder)
    streamed, _ = convert(".", tmp_path / "s.parquet", registry=registry, stream=True)
    whole, _ = convert(".", tmp_path / "w.parquet", registry=registry)
    assert streamed.sources == whole.sources == ["hgliu_mi300x_2025"]


def test_a_failed_read_closes_the_dataset_file(tmp_path, registry):
    text = shared_path(*PERF.split("/")).read_bytes()
    data = gzip.compress(text * 8)
    damaged = tmp_path / "cut.perf.gz"
    damaged.write_bytes(data[:int(len(data) * 0.9)])
    sinks = []
    real_abort = parquet._EventsFileSink.abort

    def abort(sink):
        sinks.append(sink)
        real_abort(sink)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet._EventsFileSink, "abort", abort)
        with pytest.raises(TraceReadError):
            convert(damaged, tmp_path / "out.parquet", registry=registry, stream=True)
    assert len(sinks) == 1 and not sinks[0]._file.is_open


def test_a_writer_error_a_reader_swallowed_still_fails(tmp_path, registry):
    """A reader that catches what the sink raised must not lead to a kept output."""
    from tracekit.plugins.perf import PerfScriptReader

    real_hand_over = PerfScriptReader._hand_over

    def add(sink, batch):
        raise OSError(28, "No space left on device")

    def swallowing(reader, parser, batches, out):
        with contextlib.suppress(Exception):  # a careless reader
            real_hand_over(reader, parser, batches, out)

    out = tmp_path / "out.parquet"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parquet._EventsFileSink, "add_events", add)
        mp.setattr(PerfScriptReader, "_hand_over", swallowing)
        with pytest.raises(TraceWriteError, match="No space left on device"):
            convert(shared_path(*PERF.split("/")), out, registry=registry, stream=True)
    assert os.listdir(tmp_path) == []


# --- folded: samples grouped as they come, folded at the end --------------------------------

FOLD_OPTIONS = [[], ["weight=value"], ["process=false"], ["event=instructions"]]


@pytest.mark.parametrize("rel", sweep([r for r in streamed_inputs()
                                       if not r.endswith(".db")], PERF, NSYS))
def test_streamed_folded_output_is_the_whole_trace_one(rel, tmp_path, registry):
    """Byte for byte, with the same counts, samples in batches of 50 (perf)."""
    path = shared_path(*rel.split("/"))
    perf = rel.startswith("perf-script")
    for i, options in enumerate(FOLD_OPTIONS):
        options = [*options, *(["batch_rows=50"] if perf else [])]
        fmt = "perf" if perf else None
        outs = tmp_path / f"w{i}.folded", tmp_path / f"s{i}.folded"
        results = []
        for out, stream in zip(outs, (False, True), strict=True):
            try:
                results.append(convert(path, out, from_=fmt, options=options,
                                       registry=registry, stream=stream)[1])
            except tracekit.TracekitError as exc:
                results.append(str(exc).replace(str(out), "OUT"))
        whole, streamed = results
        if isinstance(whole, str):
            assert streamed == whole
            continue
        assert (streamed.written, streamed.skipped) == (whole.written, whole.skipped)
        assert outs[1].read_bytes() == outs[0].read_bytes()


def test_folded_groups_merge_across_batches(tmp_path, registry):
    """A perf capture repeated: its batches of 100 rows fold into the stacks of one copy,
    each count doubled."""
    text = shared_path(*PERF.split("/")).read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    twice = tmp_path / "twice.perf"
    twice.write_text(body + "\n\n" + body + "\n")
    _, once = convert(shared_path(*PERF.split("/")), tmp_path / "once.folded",
                      registry=registry)
    _, doubled = convert(twice, tmp_path / "twice.folded", options=["batch_rows=100"],
                         registry=registry, stream=True)
    assert doubled.written["samples"] == 2 * once.written["samples"] == 7140
    lines = dict(line.rsplit(" ", 1) for line in
                 (tmp_path / "once.folded").read_text().splitlines())
    twice_lines = dict(line.rsplit(" ", 1) for line in
                       (tmp_path / "twice.folded").read_text().splitlines())
    assert twice_lines == {k: str(2 * int(v)) for k, v in lines.items()}


def test_folded_streams_into_a_fifo_since_it_writes_at_the_end(tmp_path, registry):
    """perf script | tracekit convert - -o - --to folded | flamegraph.pl: nothing is written
    before the read ends, so a pipe out streams too."""
    trace, result, data = convert_into_fifo(tmp_path, registry, "folded")
    assert trace.events.num_rows == 0 and result.written["samples"] == 3570
    convert(shared_path(*PERF.split("/")), tmp_path / "w.folded", registry=registry)
    assert data == (tmp_path / "w.folded").read_bytes()
