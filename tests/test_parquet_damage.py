"""A damaged tracekit Parquet dataset gives one TraceReadError naming the file and the problem,
never a traceback; what the reader accepts, every writer and the CLI can use. Every check runs
on both layouts: the current one (events.parquet, the manifest and side tables in its footer)
and the previous one (a file per table and tracekit.json; a golden written by that code)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import tracekit
from helpers import FIXTURES
from tracekit.errors import ReaderCrashError, TraceReadError
from tracekit.model import TABLE_NAMES, Trace

PERF = FIXTURES / "perf-recorded" / "burn_pid_ns.perf"
# The same perf file written by the previous layout's writer (commit 7bf055a).
PREVIOUS = FIXTURES / "parquet-v1" / "burn_pid_ns.parquet"
# Sample header lines of the perf script file, each a sample with a call stack.
SAMPLES = sum(" cpu-clock:" in line for line in PERF.read_text().splitlines())
SIDE = [name for name in TABLE_NAMES if name != "events"]


class Current:
    """The parts of a dataset of the current layout: events.parquet and its footer."""

    name = "current"
    labels: ClassVar[dict[str, str]] = {
        "manifest": "events.parquet [manifest]", "events": "events.parquet",
        **{n: f"events.parquet [{n}]" for n in SIDE}}

    @staticmethod
    def unreadable(table: str) -> str:
        what = "Parquet file" if table == "events" else "Arrow table"
        return f"{Current.labels[table]} is not a readable {what} ("

    @staticmethod
    def _footer(path: Path) -> dict[bytes, bytes]:
        return pq.ParquetFile(path / "events.parquet").metadata.metadata

    @staticmethod
    def _rewrite(path: Path, events: pa.Table | None = None, **values: bytes | None) -> None:
        """events.parquet again, with ``events`` as rows and footer entries replaced
        (``None`` removes one); the rest as it was."""
        file = path / "events.parquet"
        footer = Current._footer(path)
        events = pq.read_table(file) if events is None else events
        entries = {k: v for k, v in footer.items()
                   if k.startswith(b"tracekit") and k not in (events.schema.metadata or {})}
        for key, value in values.items():
            entries.pop(key.encode(), None)
            if value is not None:
                entries[key.encode()] = value
        with pq.ParquetWriter(file, events.schema) as writer:
            writer.write_table(events)
            writer.add_key_value_metadata(entries)

    @staticmethod
    def manifest(path: Path) -> bytes:
        return Current._footer(path)[b"tracekit"]

    @staticmethod
    def set_manifest(path: Path, data: bytes) -> None:
        Current._rewrite(path, tracekit=data)

    @staticmethod
    def raw(path: Path, table: str) -> bytes:
        if table == "events":
            return (path / "events.parquet").read_bytes()
        return Current._footer(path)[f"tracekit.{table}".encode()]

    @staticmethod
    def set_raw(path: Path, table: str, data: bytes | None) -> None:
        if table != "events":
            Current._rewrite(path, **{f"tracekit.{table}": data})
        elif data is None:
            (path / "events.parquet").unlink()
        else:
            (path / "events.parquet").write_bytes(data)

    @staticmethod
    def table(path: Path, table: str) -> pa.Table:
        if table == "events":
            return pq.read_table(path / "events.parquet")
        with pa.ipc.open_stream(base64.b64decode(Current.raw(path, table))) as reader:
            return reader.read_all()

    @staticmethod
    def set_table(path: Path, table: str, content: pa.Table) -> None:
        if table == "events":
            Current._rewrite(path, content)
            return
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, content.schema) as writer:
            writer.write_table(content)
        Current.set_raw(path, table, base64.b64encode(sink.getvalue().to_pybytes()))


class Previous:
    """The parts of a dataset of the previous layout: a file per table and tracekit.json."""

    name = "previous"
    labels: ClassVar[dict[str, str]] = {"manifest": "tracekit.json",
                                        **{n: f"{n}.parquet" for n in TABLE_NAMES}}

    @staticmethod
    def unreadable(table: str) -> str:
        return f"{table}.parquet is not a readable Parquet file ("

    @staticmethod
    def manifest(path: Path) -> bytes:
        return (path / "tracekit.json").read_bytes()

    @staticmethod
    def set_manifest(path: Path, data: bytes) -> None:
        (path / "tracekit.json").write_bytes(data)

    @staticmethod
    def raw(path: Path, table: str) -> bytes:
        return (path / f"{table}.parquet").read_bytes()

    @staticmethod
    def set_raw(path: Path, table: str, data: bytes | None) -> None:
        if data is None:
            (path / f"{table}.parquet").unlink()
        else:
            (path / f"{table}.parquet").write_bytes(data)

    @staticmethod
    def table(path: Path, table: str) -> pa.Table:
        return pq.read_table(path / f"{table}.parquet")

    @staticmethod
    def set_table(path: Path, table: str, content: pa.Table) -> None:
        pq.write_table(content, path / f"{table}.parquet")


@pytest.fixture(scope="module", params=[Current, Previous], ids=lambda c: c.name)
def layout(request):
    return request.param


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, registry, layout) -> Path:
    if layout is Previous:
        return PREVIOUS
    out = tmp_path_factory.mktemp("ds") / "burn.parquet"
    tracekit.write(tracekit.read(PERF, registry=registry), out, registry=registry)
    return out


@pytest.fixture
def copy(dataset, tmp_path) -> Path:
    target = tmp_path / "d.parquet"
    shutil.copytree(dataset, target)
    return target


def _fails(path: Path, registry, *pieces: str) -> str:
    """Read ``path`` as a dataset; it must fail with a proper one-line TraceReadError."""
    with pytest.raises(TraceReadError) as info:
        tracekit.read(path, format="parquet", registry=registry)
    exc = info.value
    assert not isinstance(exc, ReaderCrashError), str(exc)
    message = str(exc)
    assert "\n" not in message and message.startswith(f"{path}: ")
    for piece in pieces:
        assert piece in message, message
    return message


def _edit(path: Path, layout, change) -> None:
    manifest = json.loads(layout.manifest(path))
    change(manifest)
    layout.set_manifest(path, json.dumps(manifest).encode())


def test_a_previous_dataset_reads_whole_and_converts_to_the_current_layout(tmp_path,
                                                                           registry):
    previous = tracekit.read(PREVIOUS, registry=registry)
    assert previous.events.num_rows == SAMPLES and previous.sources == ["burn_pid_ns.perf"]
    assert (previous.stacks.num_rows, previous.frames.num_rows) == (14, 13)
    for name in TABLE_NAMES:
        assert previous.table(name).equals(pq.read_table(PREVIOUS / f"{name}.parquet")), name
    out = tmp_path / "again.parquet"
    tracekit.write(previous, out, registry=registry)
    assert [p.name for p in out.iterdir()] == ["events.parquet"]
    again = tracekit.read(out, registry=registry)
    for name in TABLE_NAMES:
        assert again.table(name).equals(previous.table(name), check_metadata=True), name
    assert again.metadata == previous.metadata
    assert again.log.outcomes == previous.log.outcomes


@pytest.mark.parametrize(("content", "piece"), [
    (b"", "{manifest} is not valid JSON (Input is a zero-length, empty document at line 1 "
          "column 1)"),
    (b"{", "{manifest} is not valid JSON"),
    (b"\xff\xfe{}", "{manifest} is not valid JSON"),
    (b"[]", "{manifest} holds a list, not a JSON object"),
    (b"null", "{manifest} holds null, not a JSON object"),
    (b'"x"', "{manifest} holds a string, not a JSON object"),
    (b"{}", "{manifest} has no 'format'"),
])
def test_manifest_that_is_not_an_object(content, piece, copy, layout, registry):
    layout.set_manifest(copy, content)
    _fails(copy, registry, piece.format(**layout.labels))


def _set(key, value):
    return lambda m: m.__setitem__(key, value)


def _delete(key):
    return lambda m: m.pop(key)


def _sources(value):
    return lambda m: m["metadata"].__setitem__("sources", value)


def _source_entry(value):
    return lambda m: m["metadata"]["sources"].__setitem__("burn_pid_ns.perf", value)


def _log_entry(value):
    return lambda m: m["read_log"].__setitem__(0, value)


@pytest.mark.parametrize(("change", "piece"), [
    (_set("format", ["tracekit-parquet"]), "'format' is a list, not a string"),
    (_set("format", "other"), "format is not 'tracekit-parquet'"),
    (_set("schema_version", "2"), "written with event model v2, this tracekit reads v1"),
    (_set("schema_version", [1]), "'schema_version' is a list, not a string"),
    (_delete("schema_version"), "has no 'schema_version'"),
    (_set("tables", "events"), "'tables' is a string, not a list"),
    (_set("tables", ["events"]),
     "'tables' does not list stacks, frames, processes, threads, devices"),
    (_delete("metadata"), "has no 'metadata'"),
    (_set("metadata", []), "'metadata' is a list, not an object"),
    (_sources(None), "'metadata.sources' must be an object naming at least one input, not null"),
    (_sources(["burn_pid_ns.perf"]), "not a list"),
    (_sources({}), "not an empty one"),
    (_source_entry(3), "'metadata.sources' entry 'burn_pid_ns.perf' is a number, not an object"),
    (_source_entry({"events": "cpu-clock"}), "'events' must map event names to counts"),
    (_source_entry({"events": {"cpu-clock": "many"}}), "'events' must map event names"),
    (_delete("read_log"), "has no 'read_log'"),
    (_set("read_log", {}), "'read_log' is an object, not a list"),
    (_log_entry("x"), "'read_log' entry 0 is not an object of source, input, outcome"),
    (_log_entry({"source": "a", "input": "b", "outcome": "c", "count": "5"}), "entry 0"),
    (_log_entry({"source": "a", "input": "b", "outcome": "c", "count": -1}), "entry 0"),
    (_log_entry({"source": "a", "input": "b", "outcome": "c", "count": True}), "entry 0"),
    (_log_entry({"source": 1, "input": "b", "outcome": "c", "count": 1}), "entry 0"),
])
def test_manifest_of_the_wrong_shape(change, piece, copy, layout, registry):
    _edit(copy, layout, change)
    _fails(copy, registry, layout.labels["manifest"], piece)


def test_cli_info_on_a_damaged_manifest_is_one_line(copy, layout, registry):
    from tracekit.cli import app
    from typer.testing import CliRunner

    _edit(copy, layout, _sources({"burn_pid_ns.perf": []}))
    result = CliRunner().invoke(app, ["info", str(copy)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "'metadata.sources' entry 'burn_pid_ns.perf' is a list, not an object" in result.output


def test_trace_sources_of_odd_metadata_is_empty():
    events = tracekit.EVENTS_SCHEMA.empty_table()
    assert Trace(events=events, metadata={"sources": [1, 2]}).sources == []
    assert Trace(events=events, metadata={"sources": "ab"}).sources == []
    assert Trace(events=events, metadata="x").sources == []  # type: ignore[arg-type]
    assert Trace(events=events, metadata={"sources": {"a": {}}}).sources == ["a"]


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.99])
@pytest.mark.parametrize("table", ["events", "stacks", "frames"])
def test_truncated_table(table, fraction, copy, layout, registry):
    data = layout.raw(copy, table)
    layout.set_raw(copy, table, data[: int(len(data) * fraction)])
    _fails(copy, registry, layout.unreadable(table))


@pytest.mark.parametrize("table", ["events", "frames"])
def test_table_replaced_by_garbage_or_missing(table, copy, layout, registry):
    label = layout.labels[table]
    layout.set_raw(copy, table, b"garbage\x00" * 100)
    _fails(copy, registry, layout.unreadable(table))
    layout.set_raw(copy, table, None)
    _fails(copy, registry, f"{label} is missing")
    if table == "events" or layout is Previous:
        (copy / label).mkdir()
        _fails(copy, registry, f"{label} is not a file")


def test_events_file_without_a_manifest_is_not_a_dataset(copy, layout, registry):
    """Also an old dataset without its tracekit.json: the reader says what is missing."""
    pq.write_table(pq.read_table(copy / "events.parquet"), copy / "events.parquet")
    (copy / "tracekit.json").unlink(missing_ok=True)
    _fails(copy, registry, "events.parquet has no tracekit manifest in its metadata (key "
           "'tracekit'): not a tracekit dataset")


def test_side_table_with_invalid_buffers_is_refused(tmp_path, registry):
    """Arrow IPC trusts its buffers: offsets past the end must be caught before any use."""
    copy = tmp_path / "d.parquet"
    tracekit.write(tracekit.read(PERF, registry=registry), copy, registry=registry)
    frames = Current.table(copy, "frames").slice(0, 2)
    frames = frames.set_column(1, "name", pa.array(["hello", "world"]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, frames.schema) as writer:
        writer.write_table(frames)
    data = sink.getvalue().to_pybytes()
    offsets = np.array([0, 5, 10], np.int32).tobytes()
    assert data.count(offsets) == 1
    data = data.replace(offsets, np.array([0, 5, 10**6], np.int32).tobytes())
    Current.set_raw(copy, "frames", base64.b64encode(data))
    _fails(copy, registry, "events.parquet [frames] is not a readable Arrow table (")


def _rewrite(path: Path, layout, table: str, change) -> None:
    layout.set_table(path, table, change(layout.table(path, table)))


def _column(name: str, values):
    def change(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index(name)
        array = values(t) if callable(values) else values
        return t.set_column(i, pa.field(name, array.type), array)
    return change


@pytest.mark.parametrize(("table", "change", "piece"), [
    ("events", _column("ts_ns", lambda t: t["ts_ns"].cast(pa.string())),
     "{events} column 'ts_ns' is string, not int64"),
    ("events", _column("value", lambda t: pa.array(["x"] * t.num_rows)),
     "{events} column 'value' is string, not double"),
    ("events", _column("name", lambda t: pa.array(range(t.num_rows), pa.int64())),
     "column 'name' is int64, not dictionary<values=string, indices=int32"),
    ("events", _column("device", lambda t: pa.array([2**40] * t.num_rows, pa.int64())),
     "{events} column 'device' has values that do not fit int32"),
    ("events", lambda t: t.drop_columns(["name"]),
     "{events} lacks column 'name': it does not follow event model v1"),
    ("events", lambda t: t.append_column("extra", pa.array([1] * t.num_rows)),
     "{events} has unknown column 'extra'"),
    ("events", _column("name", lambda t: pa.nulls(t.num_rows, pa.string())),
     f"{{events}} column 'name' has {SAMPLES} nulls; it has none in the event model"),
    ("stacks", lambda t: pa.table({"frame_id": t["frame_id"]}),
     "{stacks} lacks column 'stack_id'"),
    ("events", _column("kind", lambda t: pa.array(["bogus"] * t.num_rows).dictionary_encode()),
     "{events} has events of unknown kind 'bogus' (known: slice, instant, counter, "
     "sample)"),
    ("events", _column("source", lambda t: pa.array(["x.perf"] * t.num_rows).dictionary_encode()),
     "{events} has events of input 'x.perf', which {manifest} does not name"),
    ("events", _column("stack_id", lambda t: pc.add(t["stack_id"], 10_000)),
     f"{{events}} has {SAMPLES} rows whose stack_id is not in {{stacks}}"),
    ("stacks", _column("frame_id", lambda t: pc.add(t["frame_id"], 10_000)),
     "rows whose frame_id is not in {frames}"),
    ("stacks", _column("parent_id", lambda t: pc.add(t["parent_id"], 10_000)),
     "rows whose parent_id is not in {stacks}"),
    ("stacks", _column("parent_id", lambda t: t["stack_id"]),
     "{stacks} has a cycle: a stack is its own ancestor"),
    ("stacks", lambda t: pa.concat_tables([t, t]), "{stacks} has a stack_id twice"),
    ("frames", lambda t: pa.concat_tables([t, t]), "{frames} has a frame_id twice"),
])
def test_table_of_the_wrong_content(table, change, piece, copy, layout, registry):
    _rewrite(copy, layout, table, change)
    _fails(copy, registry, piece.format(**layout.labels))


def test_a_longer_cycle_is_found(copy, layout, registry):
    stacks = layout.table(copy, "stacks")
    ids = stacks["stack_id"].to_pylist()
    parents = stacks["parent_id"].to_pylist()
    parent_of = dict(zip(ids, parents, strict=True))

    def path(node):
        chain = [node]
        while parent_of[chain[-1]] is not None:
            chain.append(parent_of[chain[-1]])
        return chain
    deepest = max(ids, key=lambda i: len(path(i)))
    root = path(deepest)[-1]
    assert len(path(deepest)) >= 3
    parents[ids.index(root)] = deepest  # the root now hangs below its deepest call site
    _rewrite(copy, layout, "stacks", _column("parent_id", pa.array(parents, pa.int64())))
    _fails(copy, registry, f"{layout.labels['stacks']} has a cycle")


def test_lossless_type_differences_are_accepted(copy, dataset, layout, registry):
    """Files rewritten by other tools (plain strings for categories, narrower ints) still
    read back into the model's exact types and values."""
    _rewrite(copy, layout, "events", lambda t: t.set_column(
        t.schema.get_field_index("name"), "name", t["name"].cast(pa.string())).set_column(
        t.schema.get_field_index("pid"), "pid", t["pid"].cast(pa.int32())))
    again = tracekit.read(copy, registry=registry)
    original = tracekit.read(dataset, registry=registry)
    assert again.events.schema.equals(original.events.schema, check_metadata=True)
    assert again.events["name"].to_pylist() == original.events["name"].to_pylist()
    assert again.events["pid"].to_pylist() == original.events["pid"].to_pylist()


def test_a_nullable_column_dropped_by_another_tool_reads_as_null(copy, dataset, layout,
                                                                 registry):
    _rewrite(copy, layout, "events", lambda t: t.drop_columns(["args"]))
    again = tracekit.read(copy, registry=registry)
    original = tracekit.read(dataset, registry=registry)
    assert again.events["args"].null_count == again.events.num_rows == SAMPLES
    assert again.events.drop_columns(["args"]).equals(original.events.drop_columns(["args"]))
    added = set(again.log.notices()) - set(original.log.notices())
    assert added == {("d.parquet", "events.parquet",
                      "warning: column 'args' is absent; read as empty (null)")}
