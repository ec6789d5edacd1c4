"""Chrome JSON and Parquet outputs: decoded independently, and round trips back to the model."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import math
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, shared_path, sweep, torch_traces
from independent import load
from tracekit.builder import TraceBuilder
from tracekit.errors import EmptyOutputError, TraceReadError
from tracekit.plugins.chrome_json import ChromeJsonWriter
from tracekit.plugins.folded import FoldedWriter
from tracekit.plugins.parquet import ParquetWriter

CPU_TRACE = FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz"
_COMPARED = ["kind", "category", "name", "ts_ns", "dur_ns", "pid", "tid", "device", "stream",
             "correlation", "bytes", "value"]


def _rows(trace: tracekit.Trace) -> list[tuple]:
    table = trace.events.select(_COMPARED)
    cols = [table[c].cast(pa.string()) if pa.types.is_dictionary(table[c].type) else table[c]
            for c in _COMPARED]
    return sorted(zip(*(c.to_pylist() for c in cols), strict=True),
                  key=lambda r: tuple((x is None, x if x is not None else 0) for x in r))


def _flow_pairs(trace: tracekit.Trace) -> set[frozenset]:
    ev = trace.events
    groups: dict[int, set] = {}
    for name, ts, fid in zip(ev["name"].cast(pa.string()).to_pylist(), ev["ts_ns"].to_pylist(),
                             ev["flow_id"].to_pylist(), strict=True):
        if fid is not None:
            groups.setdefault(fid, set()).add((name, ts))
    return {frozenset(g) for g in groups.values()}


def test_chrome_json_of_alexnet_loads_with_json(tmp_path, registry):
    path = shared_path("torch-trace", "hta", "alexnet_a100_trace.json.gz")
    _, events = load(path)
    out = tmp_path / "alexnet.json"
    result = tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    written = json.loads(out.read_text())
    xs = [e for e in written["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == sum(e.get("ph") == "X" for e in events) == result.written["X events"]
    assert Counter(e["cat"] for e in xs) == Counter(
        e["cat"] for e in events if e.get("ph") == "X")
    # Launch flows: each s has its f, ids are correlation ids.
    s = {e["id"] for e in written["traceEvents"] if e["ph"] == "s" and e["cat"] == "ac2g"}
    f = {e["id"] for e in written["traceEvents"] if e["ph"] == "f" and e["cat"] == "ac2g"}
    assert s == f and len(s) > 0
    gpu = [e for e in xs if e["cat"] == "kernel"]
    assert all(e["pid"] == e["args"]["device"] for e in gpu)


@pytest.mark.parametrize("rel", sweep(torch_traces(),
                                      "torch-trace/tracelens/h100_bert-small.json.gz"))
def test_torch_to_chrome_json_and_back_keeps_every_event(rel, tmp_path, registry):
    path = shared_path(*rel.split("/"))
    original = tracekit.read(path, registry=registry)
    out = tmp_path / "round.json.gz"
    tracekit.write(original, out, registry=registry)
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    again = tracekit.read(out, registry=registry)
    assert _rows(again) == _rows(original)
    assert _flow_pairs(again) == _flow_pairs(original)
    assert not again.log.skipped()


def test_recorded_trace_to_chrome_json_and_back(tmp_path, registry):
    original = tracekit.read(CPU_TRACE, registry=registry)
    out = tmp_path / "cpu.json"
    tracekit.write(original, out, registry=registry)
    again = tracekit.read(out, registry=registry)
    assert _rows(again) == _rows(original)
    names = {r["pid"]: r["name"] for r in again.processes.to_pylist()}
    assert names == {r["pid"]: r["name"] for r in original.processes.to_pylist()}


@pytest.mark.parametrize("path", [
    FIXTURES / "torch-cpu" / "mlp_cpu.pt.trace.json.gz",
    pytest.param("torch-trace/hta/nccl_data_rank0_a100.json.gz", marks=pytest.mark.slow),
    pytest.param("torch-trace/kineto-tb_plugin/resnet50_v100_2021.pt.trace.json.gz",
                 marks=pytest.mark.slow),
    "nsys-sqlite/pipit_cloverleaf_nsys2024.5.1_a100.sqlite",
    pytest.param("nsys-sqlite/nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite",
                 marks=pytest.mark.slow),
    FIXTURES / "perf-recorded" / "burn_pid_ns.perf",
    "perf-script/speedscope/system-wide.linux-perf.txt",
    "vtune-csv/inferno/vtune-topdown.csv",
])
def test_parquet_round_trip_is_identical(path, tmp_path, registry):
    path = path if not isinstance(path, str) else shared_path(*path.split("/"))
    original = tracekit.read(path, registry=registry)
    out = tmp_path / "t.parquet"
    tracekit.write(original, out, registry=registry)
    again = tracekit.read(out, registry=registry)
    for name in ("events", "processes", "threads", "devices", "stacks", "frames"):
        assert again.table(name).equals(original.table(name), check_metadata=True), name
    assert again.metadata == original.metadata
    assert again.log.outcomes == original.log.outcomes
    a = tracekit.analyze(again, "summary", registry=registry)[0]
    b = tracekit.analyze(original, "summary", registry=registry)[0]
    assert a.to_json() == b.to_json()


@pytest.mark.slow  # reads nccl_data_rank0; test_parquet_interop queries DuckDB in the fast run
def test_duckdb_kernel_total_equals_summary(tmp_path, registry):
    duckdb = pytest.importorskip("duckdb")
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    trace = tracekit.read(path, registry=registry)
    out = tmp_path / "nccl.parquet"
    tracekit.write(trace, out, registry=registry)
    total = duckdb.sql(f"SELECT sum(dur_ns) FROM '{out}/events.parquet' "
                       "WHERE category = 'gpu.kernel'").fetchall()[0][0]
    [report] = tracekit.analyze(trace, "summary", registry=registry)
    assert total == pc.sum(report.tables["kernels"]["total"]).as_py()
    top = duckdb.sql(f"SELECT name, sum(dur_ns) AS t FROM '{out}/events.parquet' "
                     "WHERE category = 'gpu.kernel' GROUP BY name ORDER BY t DESC LIMIT 1"
                     ).fetchall()[0]
    assert top == (report.tables["kernels"]["name"][0].as_py(),
                   report.tables["kernels"]["total"][0].as_py())


def test_parquet_output_replaces_a_previous_one_and_failures_leave_nothing(tmp_path, registry,
                                                                         monkeypatch):
    trace = tracekit.read(CPU_TRACE, registry=registry)
    out = tmp_path / "t.parquet"
    tracekit.write(trace, out, registry=registry)
    with pytest.raises(tracekit.OutputExistsError):
        tracekit.write(trace, out, registry=registry)
    tracekit.write(trace, out, registry=registry, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]
    with pytest.raises(tracekit.OptionError):
        tracekit.write(trace, tmp_path / "u.parquet", options=["bogus=1"], registry=registry)
    with pytest.raises(tracekit.OptionError):  # refused before anything is written
        tracekit.write(trace, tmp_path / "v.parquet", options=["compression=nope"],
                       registry=registry)

    def broken(*args, **kwargs):
        raise pa.ArrowIOError("the disk went away")

    # A failure inside the writer: nothing of the new output is left.
    import pyarrow.parquet as pq

    monkeypatch.setattr(pq, "ParquetWriter", broken)
    with pytest.raises(tracekit.TraceWriteError):
        tracekit.write(trace, tmp_path / "w.parquet", registry=registry)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_damaged_parquet_dataset_gives_one_line(tmp_path, registry):
    out = tmp_path / "t.parquet"
    tracekit.write(tracekit.read(CPU_TRACE, registry=registry), out, registry=registry)
    events = out / "events.parquet"
    events.write_bytes(events.read_bytes()[:-100])
    # A damaged events file is still recognised, and named.
    with pytest.raises(TraceReadError, match=r"events\.parquet is not a readable Parquet file"):
        tracekit.read(out, registry=registry)
    events.unlink()
    with pytest.raises(tracekit.FormatDetectionError, match="the directory holds no files"):
        tracekit.read(out, registry=registry)


def test_gzip_outputs_for_any_writer(tmp_path, registry):
    trace = tracekit.read(CPU_TRACE, registry=registry)
    out = tmp_path / "t.pftrace.gz"
    tracekit.write(trace, out, format="perfetto", registry=registry)
    assert gzip.decompress(out.read_bytes())[:1] == b"\x0a"
    # The name says the format too: .pftrace.gz is Perfetto, gzip-compressed.
    from tracekit.pipeline import writer_for_path

    assert writer_for_path("t.pftrace.gz", registry).name == "perfetto"
    assert writer_for_path("t.json.gz", registry).name == "chrome-json"
    with pytest.raises(tracekit.UsageError, match="cannot tell the output format"):
        writer_for_path("t.parquet.gz", registry)  # a directory: not compressed


def _perfetto_json_arrows(events: list[dict]) -> list[tuple[dict, dict]]:
    """Flow arrows as Perfetto's JSON importer draws them (json_trace_parser.cc and
    flow_tracker.cc): a flow is keyed by (cat, name, id); ``s`` begins it on the slice it sits
    in, ``t`` draws an arrow and moves it on, ``f`` draws an arrow from where it is without
    closing it (close_flow = false), so several ``f`` of one ``s`` fan out. Flow events bind
    to the X event of their thread that starts at their time, where tracekit writes them."""
    starts = {}
    for e in events:
        if e["ph"] == "X":
            starts.setdefault((e["pid"], e["tid"], e["ts"]), e)
    active: dict[tuple, dict] = {}
    arrows = []
    for e in sorted((e for e in events if e["ph"] in ("s", "t", "f")), key=lambda e: e["ts"]):
        key, bound = (e["cat"], e["name"], e["id"]), starts[(e["pid"], e["tid"], e["ts"])]
        if e["ph"] == "s":
            active.setdefault(key, bound)
        elif key in active:
            arrows.append((active[key], bound))
            if e["ph"] == "t":
                active[key] = bound
    return arrows


def test_chrome_json_names_each_gpu_stream_and_a_gpu_without_a_model(tmp_path, registry):
    import sqlite3

    path = shared_path("nsys-sqlite", "testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
        streams = sorted({r[0] for t in tables
                          # 0xFFFFFFFF: a wait on no stream
                          for r in db.execute(f"SELECT DISTINCT streamId FROM {t} "
                                              "WHERE streamId < 4294967295")})
    out = tmp_path / "t.json"
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    meta = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "M"]
    [gpu] = [e for e in meta if e["name"] == "process_name"
             and e["args"]["name"].startswith("GPU")]
    assert gpu["args"]["name"] == "GPU 0: NVIDIA GeForce RTX 4060 Ti"
    assert {e["tid"]: e["args"]["name"] for e in meta
            if e["name"] == "thread_name" and e["pid"] == gpu["pid"]} == {
                s: f"stream {s}" for s in streams}
    llama = shared_path("rocprof-v3", "jimw_llamacpp_rocm7", "prefill_kernel_trace.csv")
    out = tmp_path / "llama.json"
    tracekit.write(tracekit.read(llama, registry=registry), out, registry=registry)
    gpus = [e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name"
            and e["args"]["name"].startswith("GPU")]
    assert gpus and all(":" not in g for g in gpus)  # no model known: "GPU n", not "GPU n: ?"


def test_chrome_json_of_another_tool_reads_back_as_that_tools_program(tmp_path, registry):
    """An nsys export of a TensorRT engine written as Chrome JSON is in Kineto's layout, but
    not a PyTorch profiler trace: read back, the tool and the program are the export's."""
    path = shared_path("nsys-sqlite", "memfusion_nsys2023.1.2_rtx3090_tensorrt.sqlite")
    out = tmp_path / "trt.json"
    original = tracekit.read(path, registry=registry)
    tracekit.write(original, out, registry=registry)
    assert json.loads(out.read_text())["tracekit"]["tools"] == {path.name: "Nsight Systems"}
    back = tracekit.read(out, registry=registry)
    [meta] = back.metadata["sources"].values()
    assert meta["tool"] == "Nsight Systems (through tracekit's Chrome JSON)"
    for trace in (original, back):
        [report] = tracekit.analyze(trace, "bottleneck", registry=registry)
        [program] = [f for f in report.findings if f.title.startswith("program: ")]
        assert program.title == "program: TensorRT inference"


def test_chrome_json_graph_launch_fans_out(tmp_path, registry):
    path = shared_path("rocprof-v3", "jimw_llamacpp_rocm7", "prefill_kernel_trace.csv")
    kernels: dict[int, list[int]] = defaultdict(list)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            kernels[int(r["Correlation_Id"])].append(int(r["Start_Timestamp"]))
    out = tmp_path / "llama.json"
    tracekit.write(tracekit.read(path, registry=registry), out, registry=registry)
    written = json.loads(out.read_text())
    events, base = written["traceEvents"], written["baseTimeNanoseconds"]
    [launch] = [e for e in events if e["ph"] == "X" and e["name"] == "hipGraphLaunch"
                and e["args"]["correlation"] == 57328]
    # Kineto's convention: one "s" at the call, an "f" (bp "e") at each kernel, id = correlation.
    [start] = [e for e in events if e["ph"] == "s" and e["id"] == 57328]
    assert (start["pid"], start["tid"], start["ts"]) == (launch["pid"], launch["tid"],
                                                         launch["ts"])
    ends = [e for e in events if e["ph"] == "f" and e["id"] == 57328]
    assert len(ends) == len(kernels[57328]) == 1123 and all(e["bp"] == "e" for e in ends)
    arrows = _perfetto_json_arrows(events)
    targets = [b for a, b in arrows if a is launch]
    assert all(b["cat"] == "kernel" for b in targets)
    assert sorted(round(b["ts"] * 1000) + base for b in targets) == sorted(kernels[57328])
    # Read back, every flow lands on its correlation: nothing is skipped.
    again = tracekit.read(out, registry=registry)
    assert not again.log.skipped()
    assert pc.sum(pc.equal(again.events["correlation"], 57328)).as_py() == 1124


@pytest.mark.parametrize(("rel", "message"), [
    ("vtune-csv/inferno/vtune-topdown.csv",
     "nothing to write: no event has a timestamp (63 events without one)"),
    ("rocprof-v3/rocprofiler-sdk-docs/counter_collection.csv",
     "nothing to write: no event has a timestamp (7 events without one)"),
    ("perf-recorded/burn.perf",
     "nothing to write: 346 CPU samples (call stacks are not written yet); "
     "write .pftrace or .folded for CPU samples"),
])
def test_chrome_json_with_nothing_timed_is_an_error(rel, message, tmp_path, registry):
    path = FIXTURES / rel if rel.startswith("perf-recorded") else shared_path(*rel.split("/"))
    trace = tracekit.read(path, registry=registry)
    stream = io.BytesIO()
    with pytest.raises(EmptyOutputError) as info:
        ChromeJsonWriter().write(trace, stream)
    assert str(info.value) == message
    assert stream.getvalue() == b""
    out = tmp_path / "x.json.gz"
    with pytest.raises(EmptyOutputError):
        tracekit.write(trace, out, registry=registry)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rel", [
    "nsys-sqlite/nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite",
    "torch-trace/hta/alexnet_a100_trace.json.gz",
])
def test_folded_without_stacks_is_an_error(rel, tmp_path, registry):
    trace = tracekit.read(shared_path(*rel.split("/")), registry=registry)
    assert pc.sum(pc.equal(trace.events["kind"].cast(pa.string()), "sample")).as_py() == 0
    stream = io.BytesIO()
    with pytest.raises(EmptyOutputError) as info:
        FoldedWriter().write(trace, stream)
    assert str(info.value) == "no call stacks: the input has no CPU samples with stacks"
    assert stream.getvalue() == b""
    with pytest.raises(EmptyOutputError):
        tracekit.write(trace, tmp_path / "x.folded", registry=registry)
    assert list(tmp_path.iterdir()) == []


def test_folded_samples_without_stacks_is_an_error(registry):
    path = shared_path("vtune-csv", "utools", "grappolo-friendster-t192-dram-hotspots-pkg.csv")
    with open(path, newline="") as f:
        rows = sum(1 for _ in csv.DictReader(f))
    trace = tracekit.read(path, registry=registry)
    with pytest.raises(EmptyOutputError) as info:
        FoldedWriter().write(trace, io.BytesIO())
    assert str(info.value) == f"no call stacks: none of the {rows} CPU samples has a call stack"
    assert rows == 4


def test_parquet_of_nothing_is_an_error_and_of_untimed_rows_is_not(tmp_path, registry):
    with pytest.raises(EmptyOutputError) as info:
        tracekit.write(TraceBuilder("e.json", "test").build(), tmp_path / "e.parquet",
                       registry=registry)
    assert str(info.value) == f"{tmp_path / 'e.parquet'}: nothing to write: the input has no events"
    assert list(tmp_path.iterdir()) == []
    vtune = tracekit.read(shared_path("vtune-csv", "inferno", "vtune-topdown.csv"),
                          registry=registry)
    result = tracekit.write(vtune, tmp_path / "v.parquet", registry=registry)
    assert result.written["events rows"] == 63


def test_parquet_writer_owns_only_its_datasets(tmp_path, registry):
    out = tmp_path / "t.parquet"
    tracekit.write(tracekit.read(CPU_TRACE, registry=registry), out, registry=registry)
    assert ParquetWriter.owns(out)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ParquetWriter.owns(empty)
    (out / "notes.txt").write_text("mine")
    assert not ParquetWriter.owns(out)
    (out / "notes.txt").unlink()
    (out / "tracekit.json").write_text('{"format": "something-else"}')
    assert not ParquetWriter.owns(out)


def _odd_trace() -> tracekit.Trace:
    """Valid but odd model content: NUL and U+FFFD in names, int64 extremes, NaN and
    infinite values, args that are not JSON objects or not JSON at all."""
    big = 2**63 - 1
    values = [None, None, None, math.nan, -math.inf, 2.5, math.nan, 3.0, 1e300]
    b = TraceBuilder("odd.json", "test")
    b.add_events({
        "kind": ["slice", "slice", "instant", "counter", "counter", "counter", "sample",
                 "sample", "sample"],
        "category": ["host.op", "gpu.kernel", "host.op"] + ["counter.memory"] * 3
        + ["cpu.sample"] * 3,
        "name": ["a\x00b", "k\ufffd", "i", "m", "m", "m", "s", "s", "s"],
        "ts_ns": [big - 10, 5, big, 1, 2, 3, 10, 11, 12],
        "dur_ns": [big, 2**62, None, None, None, None, None, None, None],
        "pid": [big, big, -(2**63), 1, 1, 1, 4, 4, 4],
        "tid": [big, None, 1, None, None, None, 4, 4, 4],
        "device": [None, 0, None, None, None, None, None, None, None],
        "stream": [None, big, None, None, None, None, None, None, None],
        "correlation": [big, big, None, None, None, None, None, None, None],
        "value": values,
        "stack_id": [None] * 6 + [0, 1, 1],
        "args": ['{"x": 1e400}', "{", '"text"', None, None, None, '{"comm": 5}',
                 '{"comm": "w\\u0000k"}', "[1]"]})
    b.add_frame(0, "ma;in\n\x00", module="\ufffd.so")
    b.add_frame(1, "leaf", module=None)
    b.add_stack(0, 0, None)
    b.add_stack(1, 1, 0)
    b.add_thread(4, 4, name="t\x00")
    return _with_values(b.build(), values)


def _with_values(trace: tracekit.Trace, values: list[float | None]) -> tracekit.Trace:
    """``trace`` with these values, NaN kept: the builder reads NaN as pandas does (null), but
    a Parquet dataset or a plugin's own table can hold NaN."""
    ev = trace.events
    i = ev.schema.get_field_index("value")
    column = pa.array(values, pa.float64())  # not from_pandas: NaN stays NaN
    return dataclasses.replace(trace, events=ev.set_column(i, ev.schema.field(i), column))


def test_chrome_json_writes_odd_values_or_counts_them(tmp_path, registry):
    out = tmp_path / "odd.json"
    result = tracekit.write(_odd_trace(), out, registry=registry)
    assert dict(result.skipped) == {"CPU samples (call stacks are not written yet)": 3,
                                    "counter rows without a finite value": 2}
    written = json.loads(out.read_text())
    xs = {e["name"]: e for e in written["traceEvents"] if e["ph"] == "X"}
    assert xs["a\x00b"]["args"]["args"] == '{"x": 1e400}'
    assert xs["k\ufffd"]["args"]["args"] == "{"
    assert [e["args"] for e in written["traceEvents"] if e["ph"] == "C"] == [{"m": 2.5}]
    # Relative µs as a double: exact up to 2**53 ns of span, rounded beyond (as here).
    assert written["baseTimeNanoseconds"] == 0  # the first timestamp (3) down to the µs
    assert xs["a\x00b"]["ts"] == (2**63 - 1 - 10) / 1000


def test_folded_writes_odd_values_or_counts_them(tmp_path, registry):
    trace = _odd_trace()
    out = tmp_path / "odd.folded"
    result = tracekit.write(trace, out, options=["weight=value"], registry=registry)
    assert result.skipped["samples whose weight is NaN or infinite"] == 1
    # ';' and line breaks in a frame become ':' and ' '; the bad "comm" values are ignored.
    assert out.read_text() == ("t\x00;ma:in \x00;leaf 1e+300\nw\x00k;ma:in \x00;leaf 3\n")


def test_parquet_round_trips_odd_values(tmp_path, registry):
    trace = _odd_trace()
    out = tmp_path / "odd.parquet"
    tracekit.write(trace, out, registry=registry)
    again = tracekit.read(out, registry=registry)
    for name in ("processes", "threads", "devices", "stacks", "frames"):
        assert again.table(name).equals(trace.table(name), check_metadata=True), name
    a, b = again.events, trace.events
    for column in a.column_names:
        if column == "value":
            assert np.array_equal(a[column].to_numpy(zero_copy_only=False),
                                  b[column].to_numpy(zero_copy_only=False), equal_nan=True)
        else:
            assert a[column].to_pylist() == b[column].to_pylist(), column
