"""The Kineto conversion's column-wise paths: flows bound by one sort, counter series read per
group of args objects, first-appearance order on dictionary codes, and args text that reaches
the builder without a copy."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import tracekit
from tracekit import Source, TraceBuilder
from tracekit.plugins.kineto.context import rows_of, tally
from tracekit.plugins.kineto.convert import convert
from tracekit.plugins.kineto.decode import decode, memory_blocks
from tracekit.plugins.kineto.devices import _one_device_per_pid
from tracekit.plugins.kineto.fields import first_seen


@pytest.fixture(params=["typed", "forgiving"])
def read(request, monkeypatch, registry):
    """Read a document through the typed decode, or through the forgiving path only."""
    if request.param == "forgiving":
        import tracekit.plugins.kineto.reader as reader

        monkeypatch.setattr(reader, "decode", lambda blocks: None)

    def read_doc(tmp_path, doc):
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc))
        return tracekit.read(path, registry=registry)
    return read_doc


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _flow(ph, cat, id_, ts, pid=1, tid=1):
    return {"ph": ph, "cat": cat, "name": cat, "id": id_, "pid": pid, "tid": tid, "ts": ts}


def test_flows_bind_by_correlation_else_innermost_first_row(tmp_path, read):
    doc = {"traceEvents": [
        _x("cuda_runtime", "launch", 10, 10, correlation=7),
        _x("cpu_op", "inner", 10, 4), _x("cpu_op", "inner2", 10, 4),
        _x("cpu_op", "solo", 20, 1, tid=2), _x("kernel", "k", 30, 2, pid=0, tid=5),
        _flow("s", "ac2g", 7, 10), _flow("f", "ac2g", 7, 30, pid=0, tid=5),
        _flow("s", "fwdbwd", 3, 10), _flow("s", "fwdbwd", 2, 10),
        _flow("f", "fwdbwd", 2, 20, tid=2), _flow("s", "ac2g", 8, 10),
        _flow("t", "ac2g", 9, 99)]}
    trace = read(tmp_path, doc)
    ev = trace.events
    assert ev["name"].cast(pa.string()).to_pylist() == ["launch", "inner", "inner2", "solo",
                                                       "k"]
    # ac2g 7 binds to the launch (its correlation) over the shorter slices at ts 10; ac2g 8
    # to the first of the two innermost; fwdbwd 2 and 3 to that one too: the smaller id stays.
    assert ev["correlation"].to_pylist() == [7, 8, None, None, 7]
    assert ev["flow_id"].to_pylist() == [None, 2, None, 2, None]
    assert ev["pid"].to_pylist() == [1, 1, 1, 1, 1]  # the kernel's: its launcher's
    assert ev["stream"].to_pylist() == [None, None, None, None, 5]
    flows = {(k, o): n for (_, k, o), n in trace.log.outcomes.items()
             if k.split(":")[0] in ("s", "f", "t")}
    assert flows == {
        ("s:ac2g", "links (the slices' correlation)"): 1,
        ("s:ac2g", "correlation of the slice it binds to"): 1,
        ("s:fwdbwd", "links (flow_id of the slice it binds to)"): 1,
        ("s:fwdbwd", "skipped: the slice already has another flow"): 1,
        ("f:ac2g", "correlation of the slice it binds to"): 1,
        ("f:fwdbwd", "links (flow_id of the slice it binds to)"): 1,
        ("t:ac2g", "skipped: flow endpoint matches no slice"): 1}


def test_counter_series_in_event_then_key_order(tmp_path, read):
    def counter(name, ts, args):
        return {"ph": "C", "cat": "hardware_counters", "name": name, "pid": 1, "tid": 0,
                "ts": ts, "args": args}
    doc = {"traceEvents": [counter("q", 1, {"b": 2, "a": 1.5}),
                           counter("q", 2, {"v": "x", "w": 3}),
                           counter("m", 3, {"a": True}), counter("m", 4, {}),
                           counter("m", 5, {"a": 5, "n": None}),
                           counter("q", 6, {"b": 4, "a": 0})]}
    trace = read(tmp_path, doc)
    ev = trace.events
    assert ev["name"].cast(pa.string()).to_pylist() == ["q b", "q a", "q", "m", "q b", "q a"]
    assert ev["value"].to_pylist() == [2.0, 1.5, 3.0, 5.0, 4.0, 0.0]
    assert ev["ts_ns"].to_pylist() == [1000, 1000, 2000, 5000, 6000, 6000]
    assert set(ev["category"].cast(pa.string()).to_pylist()) == {"counter.hardware"}
    counted = {o: n for (_, k, o), n in trace.log.outcomes.items() if k.startswith("C:")}
    assert counted == {"counter rows (one per series)": 4,
                       "skipped: no finite numeric series in args": 2}


def test_first_seen_and_tally_keep_the_order_of_first_appearance():
    seen, counts = first_seen(np.array([3, 1, 3, 0, 1]), 5)
    assert seen.tolist() == [3, 1, 0] and counts.tolist() == [2, 2, 1]
    keys = pa.array(["b", None, "a", "b", None])
    assert list(tally(keys).items()) == [("b", 2), (None, 2), ("a", 1)]
    assert list(tally(keys.dictionary_encode(), np.array([0, 0, 1, 1, 1], dtype=bool))
                .items()) == [("a", 1), ("b", 1), (None, 1)]


def test_one_device_per_pid():
    pids, devices = _one_device_per_pid(np.array([7, 5, 5, 6, 6]), np.array([3, 0, 0, 1, 2]))
    assert pids.tolist() == [5, 7] and devices.tolist() == [0, 3]
    pids, devices = _one_device_per_pid(np.zeros(0, dtype=np.int64),
                                        np.zeros(0, dtype=np.int64))
    assert len(pids) == len(devices) == 0


def _decoded(events):
    top, columns, _ = decode(memory_blocks(json.dumps({"traceEvents": events}).encode()))
    return top, columns


def test_keys_of_some_rows_read_as_a_filter_of_all_rows():
    events = [_x("kernel", "k", 1, 1, grid=[4, 2, 1], registers=9),
              _x("cpu_op", "op", 2, 1), _x("kernel", "k", 3, 1, grid=[8]),
              _x("kernel", "k", 4, 1)]
    _, columns = _decoded(events)
    args = columns.take(np.arange(4)).args()
    mask = np.array([True, False, False, True])
    axes, odd = rows_of(args, mask).dims("grid")
    assert odd == 0
    assert [a.to_pylist() for a in axes] == [[4, None], [2, None], [1, None]]
    assert [a.to_pylist() for a in axes] == [a.filter(pa.array(mask)).to_pylist()
                                            for a in args.dims("grid")[0]]
    assert rows_of(args, ~mask).get("grid[0]").to_pylist() == [None, 8]


def test_args_text_reaches_the_builder_without_a_copy(tmp_path):
    events = [_x("cpu_op", f"op{i}", i, 1, note="x" * 50) for i in range(200)]
    events += [{"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 5, "s": "t",
                "args": {"a": 1}}]
    top, columns = _decoded(events)
    path = tmp_path / "t.json"
    path.write_text("{}")
    text = columns.text
    decoded = {c.buffers()[2].address for c in
               (text.chunks if isinstance(text, pa.ChunkedArray) else [text])}
    out = TraceBuilder("t.json", "kineto")
    convert(top, columns, out, Source(path), True)
    args = out.build().events["args"]
    assert args.to_pylist()[:2] == ['{"note": "' + "x" * 50 + '"}'] * 2
    assert {c.buffers()[2].address for c in args.chunks} <= decoded
