"""The Perfetto writer's parts that work piece by piece to bound its memory: each gives what
the whole-column way gives."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
import tracekit
from helpers import shared_path
from tracekit.plugins.perfetto import PerfettoWriter, tracks
from tracekit.plugins.perfetto.annotations import ArgColumns
from tracekit.plugins.perfetto.lanes import nest_slices, nest_sorted, sort_slices


def test_arg_columns_take_rows_from_the_chunks_in_any_order():
    args = pa.chunked_array([pa.array(['{"a":1}', None, '{"b":2}']), pa.array([], pa.string()),
                             pa.array(['{"c":3}', ""]), pa.array(['{"d":4}'])])
    keys = {  # grid_x and registers have values on the same rows: one set of rows for both
        "grid_x": pa.array([None, 7, None, 8, None, 9], pa.int32()),
        "registers": pa.array([None, 32, None, 16, None, 64], pa.int32()),
        "copy_kind": pa.array(["HtoD", None, None, None, "DtoH", None]).dictionary_encode(),
    }
    columns = ArgColumns(args, keys)
    rows = np.array([5, 0, 3, 3, 1, 4, 2], dtype=np.int32)
    got = columns.take(rows)
    assert got.args.to_pylist() == ['{"d":4}', '{"a":1}', '{"c":3}', '{"c":3}', None, "",
                                    '{"b":2}']
    assert {k: (have.tolist(), values.to_pylist()) for k, (have, values) in got.keys.items()} \
        == {"grid_x": ([0, 2, 3, 4], [9, 8, 8, 7]),
            "registers": ([0, 2, 3, 4], [64, 16, 16, 32]),
            "copy_kind": ([1, 5], ["HtoD", "DtoH"])}
    assert len(columns._rows) == 2
    # Rows in chunk order take each chunk's rows as they are.
    assert columns.take(np.arange(6)).args.to_pylist() == args.to_pylist()
    assert columns.take(np.zeros(0, dtype=np.int32)).args.to_pylist() == []


def test_nest_sorted_gives_each_event_its_time():
    rng = np.random.default_rng(7)
    n = 400
    track = rng.integers(0, 4, n)
    start = rng.integers(0, 1000, n)
    end = start + rng.integers(0, 80, n)
    rows, begins, lanes, time = nest_sorted(*sort_slices(track, start, end))
    want = nest_slices(track, start, end)
    assert [rows.tolist(), begins.tolist(), lanes.tolist()] == [w.tolist() for w in want]
    assert lanes.max() > 0  # overlaps were replayed onto lanes
    assert time.tolist() == np.where(begins, start[rows], end[rows]).tolist()


@pytest.mark.slow
def test_tracks_planned_by_row_ranges_are_those_of_one_pass(monkeypatch, registry):
    # Two ranks (processes, threads, GPU streams, launchers), in ranges of 1,000 rows.
    trace = tracekit.read([shared_path("torch-trace", "hta", f"sampled_rank-{r}.json.gz")
                           for r in (0, 1)], registry=registry)
    events = trace.events
    whole = tracks.plan_tracks(trace, events)
    monkeypatch.setattr(tracks, "_ROWS", 1000)
    parts = tracks.plan_tracks(trace, events)
    assert events.num_rows == 9487 and len(whole.uuids) == 16 and len(whole.descriptors) == 22
    assert parts.row_track.tolist() == whole.row_track.tolist()
    assert parts.uuids == whole.uuids and parts.descriptors == whole.descriptors
    assert {k: v.tolist() for k, v in parts.native.items()} == \
        {k: v.tolist() for k, v in whole.native.items()}
    out = io.BytesIO()
    PerfettoWriter(PerfettoWriter.Options()).write(trace, out)
    monkeypatch.setattr(tracks, "_ROWS", 1 << 17)
    again = io.BytesIO()
    PerfettoWriter(PerfettoWriter.Options()).write(trace, again)
    assert out.getvalue() == again.getvalue()
