"""The typed decode's columns (plugins/kineto/decode.py) against an independent reading.

The decode puts each block's columns in phase order with Arrow takes and reads the args keys
from the args text as it lies; here every column is rebuilt from the parsed JSON with plain
Python, for real traces and odd inputs, whole and in small blocks.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from helpers import FIXTURES, shared_path, sweep, torch_traces
from tracekit.plugins.kineto.categories import DEVICE_CATEGORIES, map_category
from tracekit.plugins.kineto.decode import decode, memory_blocks
from tracekit.plugins.kineto.timestamps import SAFE_FLOAT_US, us_to_ns

_DEVICE_KEYS = ("device", "stream", "bytes", "registers per thread", "shared memory")
_INSTANT_KEYS = ("Bytes", "Device Type", "Device Id")
_INSTANT_NUMBERS = ("Total Allocated", "Total Reserved")
_LOCAL = sorted(str(p.relative_to(FIXTURES)) for d in ("scenarios", "torch-cpu")
                for p in (FIXTURES / d).glob("*.json*"))


def _expected_keys(events: list[dict[str, Any]]) -> dict[str, tuple[list[int], list[Any]]]:
    """Each extracted args key: the rows that have it and its values, read from the events
    (in the decode's row order) as the conversion reads them."""
    keys: dict[str, tuple[list[int], list[Any]]] = {}

    def put(key: str, row: int, value: Any) -> None:
        if value is not None:
            rows, values = keys.setdefault(key, ([], []))
            rows.append(row)
            values.append(value)

    for row, e in enumerate(events):
        args, cat = e.get("args"), e.get("cat")
        if type(args) is not dict:
            continue
        if e.get("ph") == "X":
            put("correlation", row, args.get("correlation"))
            sequence = args.get("Sequence number")  # which ops autograd recorded
            put("Sequence number", row, sequence if type(sequence) is int else None)
            if cat is not None and map_category(cat) in DEVICE_CATEGORIES:
                for key in _DEVICE_KEYS:
                    put(key, row, args.get(key))
                for key in ("grid", "block"):
                    dims = args.get(key) or []
                    for pos in range(3):
                        put(f"{key}[{pos}]", row, dims[pos] if len(dims) > pos else None)
        if e.get("ph") in ("i", "I") and (map_category(cat) == "host.memory" or
                                          e.get("name") == "[memory]"):
            for key in _INSTANT_KEYS:
                put(key, row, args.get(key))
            for key in _INSTANT_NUMBERS:
                put(key, row, None if args.get(key) is None else float(args[key]))
    return keys


def _grouped(doc: Any, phases: list[Any]) -> list[dict[str, Any]]:
    """The events of a parsed document grouped by phase, as the decode orders them."""
    events = doc if type(doc) is list else doc["traceEvents"]
    return [e for p in phases for e in events if e.get("ph") == p]


def _check(data: bytes, size: int | None = None) -> int:
    """Decode ``data`` in blocks of ``size`` and compare every column with the events as
    parsed by json; the number of events."""
    doc = orjson.loads(data.removeprefix(b"\xef\xbb\xbf"))
    events = doc if type(doc) is list else doc["traceEvents"]
    decoded = decode(memory_blocks(data, size))
    assert decoded is not None
    _, ev, _ = decoded
    phases = list(dict.fromkeys(e.get("ph") for e in events))
    events = _grouped(doc, phases)
    assert ev.n == len(events)
    for key in ("ph", "cat", "name", "id"):
        assert ev.field(key).to_pylist() == [e.get(key) for e in events], key
    for key in ("pid", "tid"):
        values = [e.get(key) for e in events]
        if any(type(v) is str for v in values):
            values = [None if v is None else str(v) for v in values]
        assert ev.field(key).to_pylist() == values, key
    exact = _grouped(json.loads(data.removeprefix(b"\xef\xbb\xbf"), parse_float=Decimal),
                     phases) if _needs_decimals(data) else events
    for key in ("ts", "dur"):
        ns, valid = us_to_ns([e.get(key) for e in exact])
        assert ev.times(key).ns.tolist() == ns.tolist(), key
        assert ev.times(key).valid.tolist() == valid.tolist(), key
    texts = ev.text.to_pylist()
    assert [None if t is None else orjson.loads(t) for t in texts] == [
        e.get("args") or None for e in events]
    keys = _expected_keys(events)
    assert sorted(k for k, s in ev.keys.items() if len(s.rows)) == sorted(keys)
    for key, (rows, values) in keys.items():
        assert ev.keys[key].rows.tolist() == rows, key
        assert ev.keys[key].values.to_pylist() == values, key
    return ev.n


def _text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _needs_decimals(data: bytes) -> bool:
    doc = orjson.loads(data.removeprefix(b"\xef\xbb\xbf"))
    events = doc if type(doc) is list else doc["traceEvents"]
    return any(type(e.get(k)) is float and abs(e[k]) >= SAFE_FLOAT_US
               for e in events for k in ("ts", "dur"))


@pytest.mark.parametrize(
    "rel", sweep(torch_traces(), "torch-trace/tracelens/mi300x_rocm7_torch_compile_triton.json.gz"))
def test_real_traces_decode_as_parsed(rel):
    data = _text(shared_path(*rel.split("/")))
    n = _check(data)  # every real trace: the typed decode, times exact (epoch µs too)
    assert _check(data, max(4096, len(data) // 7)) == n  # several blocks


@pytest.mark.parametrize("rel", sweep(_LOCAL, "scenarios/item_sync.pt.trace.json.gz"))
def test_local_fixtures_decode_as_parsed(rel):
    data = _text(FIXTURES / rel)
    n = _check(data)
    assert n == len(orjson.loads(data)["traceEvents"])
    assert _check(data, 4096) == n


def _x(cat: str, name: str, ts: Any, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 2, "ts": ts, "dur": 1,
            "args": args}


def _odd_events() -> list[dict[str, Any]]:
    """Events with every shape the decode accepts: phases interleaved (and a missing one),
    pid/tid ints and names, int and float times, args absent, null, empty or nested,
    escapes and non-ASCII text, keys of other types on rows they are not read from."""
    events: list[dict[str, Any]] = []
    for i in range(60):
        events.append(_x("kernel", f"k{i % 7}", i * 10 + 0.125, correlation=i, stream=7,
                         device=0, grid=[i, 2], block=[128, 1, 1],
                         **{"registers per thread": 32, "shared memory": 0}))
        events.append(_x("cpu_op", 'quote " back \\ tab \t é 😀', i * 10,
                         correlation=i + 1000, stream="not read on host rows",
                         nested={"a": [{"b": None}, [1, 2.5, "x"]], "s": "},\n  {"}))
        events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]",
                       "pid": "Spans" if i % 9 == 0 else 1, "tid": i % 3, "ts": i,
                       "args": {"Bytes": i, "Device Type": 1, "Device Id": 0,
                                "Total Allocated": i * 2, "Total Reserved": 1.5}})
        events.append({"ph": "f", "cat": "ac2g", "name": "flow", "id": i, "pid": 1,
                       "tid": 2, "ts": i, "bp": "e",
                       "args": {"correlation": "text where it is not read"}})
    events[5]["args"] = None
    events[9].pop("args")
    events[13]["args"] = {}
    events[17].pop("ph")
    events[21]["cat"] = None
    events[25]["args"] = {"correlation": None, "device": None, "grid": None}
    events.insert(0, {"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
                      "args": {"name": "python"}})
    return events


@pytest.mark.parametrize("size", [None, 4096, pytest.param(97, marks=pytest.mark.slow)])
@pytest.mark.parametrize("indent", [None, 2])
def test_odd_inputs_decode_as_parsed(indent, size):
    doc = {"schemaVersion": 1, "traceEvents": _odd_events(), "baseTimeNanoseconds": 7}
    compact = indent is None
    data = json.dumps(doc, indent=indent, ensure_ascii=compact,
                      separators=(",", ":") if compact else None).encode()
    assert _check(data, size) == 241


def test_args_text_is_kept_as_written():
    data = (b'[{"ph":"X","name":"a","ts":1,"args":{"s":"\\u00e9\\"\\\\","correlation":3}},'
            b'{"ph":"i","name":"b","ts":2,"args":  { }  },\n'
            b' {"ph":"X","name":"c","ts":3,"args":null},{"ph":"X","name":"d","ts":4,'
            b'"args":{"correlation":4,\n  "x":[{"y":1},\n  {"z":2}]}}]')
    _, ev, _ = decode(memory_blocks(data))
    assert ev.field("name").to_pylist() == ["a", "c", "d", "b"]  # phase after phase
    assert ev.text.to_pylist() == ['{"s":"\\u00e9\\"\\\\","correlation":3}', None,
                                   '{"correlation":4,\n  "x":[{"y":1},\n  {"z":2}]}', None]
    assert ev.keys["correlation"].rows.tolist() == [0, 2]
    assert ev.keys["correlation"].values.to_pylist() == [3, 4]
    assert _check(data, 40) == 4


@pytest.mark.parametrize("change", [
    lambda e: e[1]["args"].update(correlation="1"),  # an X row reads correlation
    lambda e: e[0]["args"].update(stream=7.5),  # a kernel reads stream
    lambda e: e[0]["args"].update(grid=["1"]),
    lambda e: e[2]["args"].update({"Device Id": "0"}),  # a memory instant reads it
    lambda e: e[2]["args"].update({"Total Allocated": "1"}),
])
def test_a_key_of_another_type_where_it_is_read_leaves_the_typed_decode(change):
    events = _odd_events()[1:]
    change(events)
    data = json.dumps({"traceEvents": events}).encode()
    assert decode(memory_blocks(data)) is None
    assert decode(memory_blocks(data, 97)) is None


def test_blocks_of_one_phase_and_of_many_give_the_same_rows():
    events = _odd_events()
    data = json.dumps({"traceEvents": events}).encode()
    _, whole, _ = decode(memory_blocks(data))
    _, small, _ = decode(memory_blocks(data, 1000))  # about six events a block
    assert np.array_equal(whole.times("ts").ns, small.times("ts").ns)
    for key, sparse in whole.keys.items():
        assert np.array_equal(sparse.rows, small.keys[key].rows), key
        assert sparse.values.equals(small.keys[key].values), key
    for key in ("ph", "cat", "name", "pid", "tid", "id"):  # dictionaries: in block order
        assert whole.field(key).to_pylist() == small.field(key).to_pylist(), key
