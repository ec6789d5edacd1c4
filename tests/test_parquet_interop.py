"""A tracekit Parquet dataset read the way users read Parquet: pandas, polars, pyarrow and DuckDB
given the path of the output get exactly the events (never the side tables as extra rows), with
nullable integers kept as integers, and so does a dataset of one such file per rank: a run of
several inputs, which DuckDB, polars, pyarrow and Dask read as one table with a rank column."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import dask.dataframe as dd
import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import tracekit
from helpers import FIXTURES, shared_path
from tracekit.model import TABLE_NAMES, Trace

# Strings are pandas' default string dtype: object before pandas 3, str from pandas 3 on.
PANDAS = {pa.int64(): {"Int64"}, pa.int32(): {"Int32"}, pa.float64(): {"float64"},
          pa.string(): {"object", "str"}}
POLARS = {pa.int64(): pl.Int64, pa.int32(): pl.Int32, pa.float64(): pl.Float64,
          pa.string(): pl.String}


@pytest.fixture(scope="module")
def converted(tmp_path_factory, registry) -> tuple[Trace, Path]:
    """A real GPU trace (integer columns with nulls: host rows have no device) converted."""
    trace = tracekit.read(shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz"),
                          registry=registry)
    out = tmp_path_factory.mktemp("interop") / "nccl.parquet"
    tracekit.write(trace, out, registry=registry)
    return trace, out


def _nulls(trace: Trace) -> dict[str, int]:
    return {c: trace.events[c].null_count for c in trace.events.column_names}


def test_the_output_holds_only_event_rows(converted):
    trace, out = converted
    assert [p.name for p in out.iterdir()] == ["events.parquet"]
    assert pq.ParquetFile(out / "events.parquet").metadata.num_rows == trace.events.num_rows
    # The test means something only if some integer column mixes nulls and values.
    assert 0 < trace.events["device"].null_count < trace.events.num_rows


@pytest.mark.parametrize("target", ["dir", "file"])
def test_pandas_reads_the_events_with_nullable_integers(converted, target):
    trace, out = converted
    events = trace.events
    df = pd.read_parquet(out if target == "dir" else out / "events.parquet")
    assert len(df) == events.num_rows
    assert list(df.columns) == events.column_names
    for f in events.schema:
        want = {"category"} if pa.types.is_dictionary(f.type) else PANDAS[f.type]
        assert str(df[f.name].dtype) in want, f.name
    assert df.isna().sum().to_dict() == _nulls(trace)
    assert df["dur_ns"].sum() == pc.sum(events["dur_ns"]).as_py()
    kernels = df[df["category"] == "gpu.kernel"]
    assert len(kernels) == pc.sum(pc.equal(events["category"], "gpu.kernel")).as_py()
    assert kernels["device"].notna().all() and kernels["device"].dtype == "Int32"


@pytest.mark.parametrize("pattern", ["{out}", "{out}/", "{out}/**/*.parquet",
                                     "{out}/events.parquet"])
def test_polars_reads_the_events(converted, pattern):
    trace, out = converted
    df = pl.read_parquet(pattern.format(out=out))
    assert df.height == trace.events.num_rows
    for f in trace.events.schema:
        want = pl.Categorical if pa.types.is_dictionary(f.type) else POLARS[f.type]
        assert df.schema[f.name] == want, f.name
    assert {c: df[c].null_count() for c in df.columns} == _nulls(trace)


def test_pyarrow_reads_the_events(converted):
    trace, out = converted
    for target in (out, out / "events.parquet"):
        table = pq.read_table(target)
        assert table.column_names == trace.events.column_names
        assert table.equals(trace.events)
        # The side tables stay in the footer: the schema pyarrow hands on does not carry them.
        assert not [k for k in table.schema.metadata if k.startswith(b"tracekit.") and
                    k != b"tracekit.schema_version"]


@pytest.mark.parametrize("source", ["'{out}'", "read_parquet('{out}/**/*.parquet')",
                                    "read_parquet('{out}/*.parquet')", "'{out}/events.parquet'"])
def test_duckdb_reads_the_events(converted, source):
    trace, out = converted
    rows, devices, kernel_ns = duckdb.sql(
        f"SELECT count(*), count(device), sum(dur_ns) FILTER (category = 'gpu.kernel') "
        f"FROM {source.format(out=out)}").fetchall()[0]
    events = trace.events
    assert rows == events.num_rows
    assert devices == events.num_rows - events["device"].null_count
    kernels = pc.equal(events["category"], "gpu.kernel")
    assert kernel_ns == pc.sum(pc.filter(events["dur_ns"], kernels)).as_py()


def test_the_events_file_alone_is_the_whole_trace(converted, tmp_path, registry):
    trace, out = converted
    alone = tmp_path / "moved.parquet"
    shutil.copyfile(out / "events.parquet", alone)
    for path in (out / "events.parquet", alone):
        again = tracekit.read(path, registry=registry)
        for name in TABLE_NAMES:
            assert again.table(name).equals(trace.table(name), check_metadata=True), name
        assert again.metadata == trace.metadata and again.log.outcomes == trace.log.outcomes


def test_one_file_per_rank_reads_as_one_table(converted, tmp_path, registry):
    """The layout of a converted run, hive-style: every tool sees the ranks as one table with
    a rank column, and each rank's file is still a whole trace to tracekit."""
    trace, out = converted
    run = tmp_path / "run.parquet"
    for rank in (0, 1):
        (run / f"rank={rank}").mkdir(parents=True)
        shutil.copyfile(out / "events.parquet", run / f"rank={rank}" / "events.parquet")
    n = trace.events.num_rows
    df = pd.read_parquet(run)
    assert len(df) == 2 * n and df["rank"].astype(int).value_counts().to_dict() == {0: n, 1: n}
    assert str(df["ts_ns"].dtype) == "Int64"
    assert pl.read_parquet(run).group_by("rank").len().sort("rank").rows() == [(0, n), (1, n)]
    assert pq.read_table(run).num_rows == 2 * n
    assert duckdb.sql(f"SELECT rank, count(*) FROM '{run}' GROUP BY rank ORDER BY rank"
                      ).fetchall() == [(0, n), (1, n)]
    again = tracekit.read(run / "rank=1" / "events.parquet", registry=registry)
    assert again.events.equals(trace.events, check_metadata=True)



# -- a run: several inputs (ranks) converted into one dataset partitioned by rank ----------

SAMPLED = [("torch-trace", "hta", f"sampled_rank-{i}.json.gz") for i in (0, 1)]
SAMPLED_ROWS = {0: 4811, 1: 4676}  # events per rank, as tracekit reads each input alone


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with dictionary columns as plain strings: a rank's file keeps only the
    dictionary values its rows use, so codes differ but values do not."""
    return pa.table({f.name: table[f.name].cast(f.type.value_type)
                     if pa.types.is_dictionary(f.type) else table[f.name]
                     for f in table.schema})


def _same_model(a: Trace, b: Trace) -> None:
    for name in TABLE_NAMES:
        assert _decoded(a.table(name)).equals(_decoded(b.table(name))), name
    assert a.events.schema.equals(b.events.schema, check_metadata=True)
    assert a.metadata == b.metadata and a.log.outcomes == b.log.outcomes


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def run(tmp_path_factory, registry) -> tuple[Trace, Path, tracekit.WriteResult]:
    out = tmp_path_factory.mktemp("run") / "run.parquet"
    trace, result = tracekit.convert([shared_path(*p) for p in SAMPLED], out,
                                     registry=registry)
    return trace, out, result


@pytest.mark.slow  # reads two 5k-event traces
def test_a_run_is_one_events_file_per_rank(run, registry):
    trace, out, result = run
    assert _files(out) == ["rank=0/events.parquet", "rank=1/events.parquet"]
    assert result.written["rank folders"] == 2
    assert result.written["events rows"] == trace.events.num_rows == sum(SAMPLED_ROWS.values())
    for rank, path in enumerate(SAMPLED):
        alone = tracekit.read(shared_path(*path), registry=registry)
        assert alone.events.num_rows == SAMPLED_ROWS[rank]
        part = tracekit.read(out / f"rank={rank}" / "events.parquet", registry=registry)
        _same_model(part, alone)
        # The rank's file names none of the other rank's values.
        assert part.events["source"].combine_chunks().dictionary.to_pylist() == [path[-1]]


@pytest.mark.slow
def test_tracekit_reads_a_run_back_as_the_trace_it_wrote(run, registry):
    trace, out, _ = run
    again = tracekit.read(out, registry=registry)
    _same_model(again, trace)
    assert again.sources == [p[-1] for p in SAMPLED]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The inplace keyword")  # inside dask, on pandas 3
def test_duckdb_polars_pyarrow_and_dask_read_a_run_as_one_table(run):
    trace, out, _ = run
    want = sorted(SAMPLED_ROWS.items())
    for source in (f"read_parquet('{out}/**/*.parquet', hive_partitioning=true)", f"'{out}'"):
        assert duckdb.sql(f"SELECT rank, count(*) FROM {source} GROUP BY rank ORDER BY rank"
                          ).fetchall() == want
    kernel_ns = duckdb.sql(
        f"SELECT rank, sum(dur_ns) FROM '{out}' WHERE category = 'gpu.kernel' GROUP BY rank "
        "ORDER BY rank").fetchall()
    events = trace.events
    assert kernel_ns == [(rank, pc.sum(events.filter(pc.and_(
        pc.equal(events["source"], SAMPLED[rank][-1]),
        pc.equal(events["category"], "gpu.kernel")))["dur_ns"]).as_py()) for rank in (0, 1)]
    assert pl.read_parquet(out).group_by("rank").len().sort("rank").rows() == want
    lazy = pl.scan_parquet(f"{out}/**/*.parquet", hive_partitioning=True)
    assert lazy.group_by("rank").len().sort("rank").collect().rows() == want
    dataset = ds.dataset(out, partitioning="hive")
    assert dataset.schema.field("rank").type == pa.int32()
    counts = dataset.to_table(columns=["rank"]).group_by("rank").aggregate([([], "count_all")])
    assert sorted(map(tuple, (r.values() for r in counts.to_pylist()))) == want
    frame = dd.read_parquet(out, columns=["rank", "dur_ns"])
    assert sorted(frame.groupby("rank", observed=True).size().compute().items()) == want


def _cpu_run(tmp_path, registry, *names: str) -> tuple[Trace, Path]:
    paths = [FIXTURES / "perf-recorded" / n for n in names]
    out = tmp_path / "cpu.parquet"
    trace, _ = tracekit.convert(paths, out, registry=registry)
    return trace, out


def test_each_rank_keeps_the_stacks_its_samples_use(tmp_path, registry):
    trace, out = _cpu_run(tmp_path, registry, "forks.perf", "forks_stacks_only.perf")
    assert _files(out) == ["rank=0/events.parquet", "rank=1/events.parquet"]
    assert trace.stacks.num_rows and trace.frames.num_rows
    again = tracekit.read(out, registry=registry)
    _same_model(again, trace)
    parts = [tracekit.read(out / f"rank={r}", registry=registry) for r in (0, 1)]
    assert [p.sources for p in parts] == [["forks.perf"], ["forks_stacks_only.perf"]]
    # Stack ids are the run's: the ranks' trees are apart and together they are the run's.
    assert sum(p.stacks.num_rows for p in parts) == trace.stacks.num_rows
    assert sum(p.frames.num_rows for p in parts) == trace.frames.num_rows
    ids = [set(p.stacks["stack_id"].to_pylist()) for p in parts]
    assert ids[0] and ids[1] and not ids[0] & ids[1]


def test_a_run_is_replaced_only_when_it_is_one(tmp_path, registry):
    trace, out = _cpu_run(tmp_path, registry, "forks.perf", "forks_no_comm.perf")
    tracekit.write(trace, out, registry=registry, force=True)
    assert _files(out) == ["rank=0/events.parquet", "rank=1/events.parquet"]
    (out / "rank=1" / "notes.txt").write_text("mine")
    with pytest.raises(tracekit.TraceWriteError, match="not a tracekit output"):
        tracekit.write(trace, out, registry=registry, force=True)


@pytest.mark.parametrize("stray, message", [
    ("notes.txt", "'notes.txt' is not a rank=N folder: a run holds only those"),
    ("rank=1/part-0.parquet", "rank=1/part-0.parquet is not part of a tracekit run"),
    ("rank=01/", "rank 1 has two folders"),
])
def test_a_run_with_foreign_files_is_refused_by_name(tmp_path, registry, stray, message):
    _, out = _cpu_run(tmp_path, registry, "forks.perf", "forks_no_comm.perf")
    if stray.endswith("/"):
        shutil.copytree(out / "rank=1", out / stray)
    else:
        (out / stray).write_text("x")
    (out / "_SUCCESS").write_text("")  # what other tools write beside data is no data
    with pytest.raises(tracekit.TraceReadError, match=re.escape(message)):
        tracekit.read(out, registry=registry)
