"""Chrome JSON and Parquet outputs: decoded independently, and round trips back to the model."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import tracekit
from helpers import FIXTURES, shared_path, torch_traces
from independent import load
from tracekit.errors import TraceReadError

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


@pytest.mark.parametrize("rel", torch_traces())
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
    "torch-trace/hta/nccl_data_rank0_a100.json.gz",
    "torch-trace/kineto-tb_plugin/resnet50_v100_2021.pt.trace.json.gz",
    "nsys-sqlite/pipit_cloverleaf_nsys2024.5.1_a100.sqlite",
    "nsys-sqlite/nsysai_h100_2gpu_1s_nsys2026.2.1_derived.sqlite",
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


def test_parquet_output_replaces_a_previous_one_and_failures_leave_nothing(tmp_path, registry):
    trace = tracekit.read(CPU_TRACE, registry=registry)
    out = tmp_path / "t.parquet"
    tracekit.write(trace, out, registry=registry)
    tracekit.write(trace, out, registry=registry)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]
    with pytest.raises(tracekit.OptionError):
        tracekit.write(trace, tmp_path / "u.parquet", options=["bogus=1"], registry=registry)
    with pytest.raises(tracekit.TraceWriteError):
        tracekit.write(trace, tmp_path / "v.parquet", options=["compression=nope"],
                       registry=registry)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_damaged_parquet_dataset_gives_one_line(tmp_path, registry):
    out = tmp_path / "t.parquet"
    tracekit.write(tracekit.read(CPU_TRACE, registry=registry), out, registry=registry)
    (out / "threads.parquet").unlink()
    with pytest.raises(TraceReadError, match=r"threads\.parquet is missing"):
        tracekit.read(out, registry=registry)
    (out / "tracekit.json").write_text("{")
    with pytest.raises(tracekit.FormatDetectionError, match="no reader recognises this directory"):
        tracekit.read(out, registry=registry)


def test_gzip_outputs_for_any_writer(tmp_path, registry):
    trace = tracekit.read(CPU_TRACE, registry=registry)
    out = tmp_path / "t.pftrace.gz"
    tracekit.write(trace, out, format="perfetto", registry=registry)
    assert gzip.decompress(out.read_bytes())[:1] == b"\x0a"
