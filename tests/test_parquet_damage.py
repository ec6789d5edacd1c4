"""A damaged tracekit Parquet dataset gives one TraceReadError naming the file and the problem,
never a traceback; what the reader accepts, every writer and the CLI can use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import tracekit
from helpers import FIXTURES
from tracekit.errors import ReaderCrashError, TraceReadError
from tracekit.model import Trace

PERF = FIXTURES / "perf-recorded" / "burn_pid_ns.perf"
# Sample header lines of the perf script file, each a sample with a call stack.
SAMPLES = sum(" cpu-clock:" in line for line in PERF.read_text().splitlines())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, registry) -> Path:
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


def _manifest(path: Path) -> dict:
    return json.loads((path / "tracekit.json").read_text())


def _edit(path: Path, change) -> None:
    manifest = _manifest(path)
    change(manifest)
    (path / "tracekit.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(("content", "piece"), [
    (b"", "tracekit.json is not valid JSON (Input is a zero-length, empty document at line 1 "
          "column 1)"),
    (b"{", "tracekit.json is not valid JSON"),
    (b"\xff\xfe{}", "tracekit.json is not valid JSON"),
    (b"[]", "tracekit.json holds a list, not a JSON object"),
    (b"null", "tracekit.json holds null, not a JSON object"),
    (b'"x"', "tracekit.json holds a string, not a JSON object"),
    (b"{}", "tracekit.json has no 'format'"),
])
def test_manifest_that_is_not_an_object(content, piece, copy, registry):
    (copy / "tracekit.json").write_bytes(content)
    _fails(copy, registry, piece)


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
def test_manifest_of_the_wrong_shape(change, piece, copy, registry):
    _edit(copy, change)
    _fails(copy, registry, "tracekit.json", piece)


def test_cli_info_on_a_damaged_manifest_is_one_line(copy, registry):
    from tracekit.cli import app
    from typer.testing import CliRunner

    _edit(copy, _sources({"burn_pid_ns.perf": []}))
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
def test_truncated_table_file(table, fraction, copy, registry):
    path = copy / f"{table}.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    _fails(copy, registry, f"{table}.parquet is not a readable Parquet file (")


def test_table_file_replaced_by_garbage_or_missing(copy, registry):
    (copy / "frames.parquet").write_bytes(b"garbage\x00" * 100)
    _fails(copy, registry, "frames.parquet is not a readable Parquet file (")
    (copy / "frames.parquet").unlink()
    _fails(copy, registry, "frames.parquet is missing")
    (copy / "frames.parquet").mkdir()
    _fails(copy, registry, "frames.parquet is not a file")


def _rewrite(path: Path, table: str, change) -> None:
    file = path / f"{table}.parquet"
    pq.write_table(change(pq.read_table(file)), file)


def _column(name: str, values):
    def change(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index(name)
        array = values(t) if callable(values) else values
        return t.set_column(i, pa.field(name, array.type), array)
    return change


@pytest.mark.parametrize(("table", "change", "piece"), [
    ("events", _column("ts_ns", lambda t: t["ts_ns"].cast(pa.string())),
     "events.parquet column 'ts_ns' is string, not int64"),
    ("events", _column("value", lambda t: pa.array(["x"] * t.num_rows)),
     "events.parquet column 'value' is string, not double"),
    ("events", _column("name", lambda t: pa.array(range(t.num_rows), pa.int64())),
     "column 'name' is int64, not dictionary<values=string, indices=int32"),
    ("events", _column("device", lambda t: pa.array([2**40] * t.num_rows, pa.int64())),
     "events.parquet column 'device' has values that do not fit int32"),
    ("events", lambda t: t.drop_columns(["name"]),
     "events.parquet lacks column 'name': it does not follow event model v1"),
    ("events", lambda t: t.append_column("extra", pa.array([1] * t.num_rows)),
     "events.parquet has unknown column 'extra'"),
    ("events", _column("name", lambda t: pa.nulls(t.num_rows, pa.string())),
     f"events.parquet column 'name' has {SAMPLES} nulls; it has none in the event model"),
    ("stacks", lambda t: pa.table({"frame_id": t["frame_id"]}),
     "stacks.parquet lacks column 'stack_id'"),
    ("events", _column("kind", lambda t: pa.array(["bogus"] * t.num_rows).dictionary_encode()),
     "events.parquet has events of unknown kind 'bogus' (known: slice, instant, counter, "
     "sample)"),
    ("events", _column("source", lambda t: pa.array(["x.perf"] * t.num_rows).dictionary_encode()),
     "events.parquet has events of input 'x.perf', which tracekit.json does not name"),
    ("events", _column("stack_id", lambda t: pc.add(t["stack_id"], 10_000)),
     f"events.parquet has {SAMPLES} rows whose stack_id is not in stacks.parquet"),
    ("stacks", _column("frame_id", lambda t: pc.add(t["frame_id"], 10_000)),
     "rows whose frame_id is not in frames.parquet"),
    ("stacks", _column("parent_id", lambda t: pc.add(t["parent_id"], 10_000)),
     "rows whose parent_id is not in stacks.parquet"),
    ("stacks", _column("parent_id", lambda t: t["stack_id"]),
     "stacks.parquet has a cycle: a stack is its own ancestor"),
    ("stacks", lambda t: pa.concat_tables([t, t]), "stacks.parquet has a stack_id twice"),
    ("frames", lambda t: pa.concat_tables([t, t]), "frames.parquet has a frame_id twice"),
])
def test_table_of_the_wrong_content(table, change, piece, copy, registry):
    _rewrite(copy, table, change)
    _fails(copy, registry, piece)


def test_a_longer_cycle_is_found(copy, registry):
    stacks = pq.read_table(copy / "stacks.parquet")
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
    _rewrite(copy, "stacks", _column("parent_id", pa.array(parents, pa.int64())))
    _fails(copy, registry, "stacks.parquet has a cycle")


def test_lossless_type_differences_are_accepted(copy, dataset, registry):
    """Files rewritten by other tools (plain strings for categories, narrower ints) still
    read back into the model's exact types and values."""
    _rewrite(copy, "events", lambda t: t.set_column(
        t.schema.get_field_index("name"), "name", t["name"].cast(pa.string())).set_column(
        t.schema.get_field_index("pid"), "pid", t["pid"].cast(pa.int32())))
    again = tracekit.read(copy, registry=registry)
    original = tracekit.read(dataset, registry=registry)
    assert again.events.schema.equals(original.events.schema, check_metadata=True)
    assert again.events["name"].to_pylist() == original.events["name"].to_pylist()
    assert again.events["pid"].to_pylist() == original.events["pid"].to_pylist()


def test_a_nullable_column_dropped_by_another_tool_reads_as_null(copy, dataset, registry):
    _rewrite(copy, "events", lambda t: t.drop_columns(["args"]))
    again = tracekit.read(copy, registry=registry)
    original = tracekit.read(dataset, registry=registry)
    assert again.events["args"].null_count == again.events.num_rows == SAMPLES
    assert again.events.drop_columns(["args"]).equals(original.events.drop_columns(["args"]))
    added = set(again.log.notices()) - set(original.log.notices())
    assert added == {("d.parquet", "events.parquet",
                      "warning: column 'args' is absent; read as empty (null)")}
