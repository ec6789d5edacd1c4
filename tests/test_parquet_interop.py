"""A tracekit Parquet dataset read the way users read Parquet: pandas, polars, pyarrow and DuckDB
given the path of the output get exactly the events (never the side tables as extra rows), with
nullable integers kept as integers, and so does a dataset of one such file per rank."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import tracekit
from helpers import shared_path
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

