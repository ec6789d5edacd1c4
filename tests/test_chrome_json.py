"""The chrome-json writer: Kineto's names, categories and fields, every other typed column by
the rule of tracekit.fields or counted; decoded with the json module."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import tracekit
from helpers import shared_path
from tracekit import fields
from tracekit.plugins.chrome_json import ChromeJsonWriter
from tracekit.plugins.parquet import ParquetWriter
from tracekit.plugins.perfetto import PerfettoWriter
from tracekit.testing import check_writer, full_trace


def _events(data: bytes) -> tuple[dict, dict[str, dict]]:
    doc = json.loads(data)
    return doc, {e["name"]: e for e in doc["traceEvents"] if e["ph"] in ("X", "i", "C")}


def test_every_typed_column_is_written_by_kineto_name_or_rule_or_counted():
    data, result = check_writer(ChromeJsonWriter)
    assert dict(result.written) == {"X events": 11, "i events": 2, "C events": 2,
                                    "flow events": 8}
    assert dict(result.skipped) == {
        "untimed aggregate rows (no timestamp)": 1,
        "CPU samples (call stacks are not written yet)": 1,
        "field stack_id: Chrome JSON has no call stacks": 1,
        # A device counter is drawn on the GPU's pid: its own pid and device are counted.
        "field pid: a counter's args are its series in Chrome JSON": 1,
        "field device: a counter's args are its series in Chrome JSON": 1}
    doc, ev = _events(data)
    kernel = ev["gemm"]
    assert (kernel["cat"], kernel["pid"], kernel["tid"]) == ("kernel", 0, 7)
    assert kernel["args"] == {"External id": 7, "correlation": 42, "grid": [4, 2, 1],
                              "block": [128, 1, 1], "registers per thread": 32,
                              "shared memory": 1024, "device": 0, "stream": 7}
    copy = ev["Memcpy HtoD (Pageable -> Device)"]
    assert copy["cat"] == "gpu_memcpy"
    assert copy["args"] == {"correlation": 43, "bytes": 4096, "device": 0, "stream": 7}
    memset = ev["Memset (Device)"]
    assert memset["cat"] == "gpu_memset"
    assert memset["args"] == {"correlation": 44, "bytes": 512, "device": 0, "stream": 7}
    # No launch to find the sync's process by: its pid travels by the rule.
    assert ev["Stream Sync"]["cat"] == "cuda_sync"
    assert ev["Stream Sync"]["args"] == {"pid": 10, "device": 0, "stream": 7}
    annotation = ev["ProfilerStep#1"]
    assert (annotation["cat"], annotation["pid"], annotation["tid"]) == \
        ("gpu_user_annotation", 0, 7)
    assert "args" not in annotation  # HTA counts rows with a stream as GPU work
    assert ev["[memory]"]["args"] == {"Addr": 1, "Bytes": 4096}
    assert ev["step"]["args"] == {"correlation": 45, "flow_id": 2, "bytes": 8, "value": 1.5,
                                  "count": 3}
    assert ev["read"]["cat"] == "host.os"
    assert ev["read"]["args"] == {
        "fd": 3, "correlation": 46, "bytes": 100, "value": 0.25, "count": 2, "grid_x": 3,
        "grid_y": 1, "grid_z": 1, "block_x": 64, "block_y": 1, "block_z": 1, "registers": 16,
        "shared_mem_bytes": 0, "copy_kind": "DtoH", "src_kind": "Device", "dst_kind": "Pinned"}
    assert ev["GPU 0 memory allocated"]["args"] == {"GPU 0 memory allocated": 4096}
    assert (ev["GPU 0 utilization"]["pid"], ev["GPU 0 utilization"]["args"]) == \
        (0, {"GPU 0 utilization": 0.5})
    # Kineto's top level: device properties, the rank, the base of the µs timestamps.
    assert doc["deviceProperties"] == [{"id": 0, "name": "Sample GPU",
                                        "totalGlobalMem": 40 * 2**30, "computeMajor": 8,
                                        "computeMinor": 0, "numSms": 108}]
    assert doc["distributedInfo"] == {"rank": 0}
    assert (doc["baseTimeNanoseconds"], doc["host_name"]) == (1000, "node0")
    assert b'"name":"gemm","pid":0,"tid":7,"ts":1.000,"dur":2.500' in data
    flows = Counter((e["cat"], e["ph"]) for e in doc["traceEvents"] if e["ph"] in "sf")
    assert flows == {("ac2g", "s"): 3, ("ac2g", "f"): 3, ("fwdbwd", "s"): 1,
                     ("fwdbwd", "f"): 1}


@pytest.mark.parametrize("writer", [ChromeJsonWriter, PerfettoWriter, ParquetWriter])
def test_builtin_writers_write_or_count_every_typed_column(writer):
    trace = full_trace()
    filled = [c for c in fields.TYPED_COLUMNS
              if trace.events[c].null_count < trace.events.num_rows]
    assert filled == list(fields.TYPED_COLUMNS)
    _, result = check_writer(writer, trace)
    assert sum(result.written[k] for k in writer.event_counts) <= trace.events.num_rows


def test_check_writer_fails_when_a_column_is_neither_written_nor_counted(monkeypatch):
    real = fields.carry

    def forgetful(*args, **kwargs):
        carried = real(*args, **kwargs)
        carried.keys.pop("count", None)
        return carried

    monkeypatch.setattr(fields, "carry", forgetful)
    with pytest.raises(AssertionError, match="column 'count' is neither in native_columns"):
        check_writer(ChromeJsonWriter)


def test_check_writer_fails_when_rows_are_not_accounted_for():
    class Dropper(tracekit.Writer):
        name = "dropper"
        native_columns = frozenset(fields.TYPED_COLUMNS)
        event_counts = ("rows",)

        def write(self, trace, stream):
            result = tracekit.WriteResult()
            result.written["rows"] = trace.events.num_rows - 1
            return result

    with pytest.raises(AssertionError, match="16 rows written and 0 skipped, but the trace "
                                             "has 17 events"):
        check_writer(Dropper)


@pytest.mark.parametrize(("rel", "names"), [
    ("nsys-sqlite/mordred_nsys2021_quadro-rtx6000_report1.sqlite",
     {"[CUDA memcpy Host-to-Device]": "Memcpy HtoD (Pageable -> Device)",
      "[CUDA memcpy Device-to-Host]": "Memcpy DtoH (Device -> Pageable)",
      "[CUDA memset]": "Memset (Device)", "Event sync": "Event Sync",
      "Stream wait sync": "Stream Wait Event"}),
    ("rocprof-v1/kokkos_2021_gfx906/results.json",
     {"CopyHostToDevice": "Memcpy HtoD", "CopyDeviceToHost": "Memcpy DtoH",
      "FillBuffer": "Memset"}),
])
def test_copies_memsets_and_syncs_get_kinetos_names(rel, names, tmp_path, registry):
    trace = tracekit.read(shared_path(*rel.split("/")), registry=registry)
    out = tmp_path / "o.json"
    tracekit.write(trace, out, registry=registry)
    ev = trace.events
    want = Counter()
    for cat, name in zip(ev["category"].cast("string").to_pylist(),
                         ev["name"].cast("string").to_pylist(), strict=True):
        if cat in ("gpu.memcpy", "gpu.memset", "gpu.sync"):
            want[(_KINETO[cat], names.get(name, name))] += 1
    got = Counter((e["cat"], e["name"]) for e in json.loads(out.read_text())["traceEvents"]
                  if e.get("cat") in _KINETO.values())
    assert got == want
    assert {n for _, n in got} >= set(names.values())


_KINETO = {"gpu.memcpy": "gpu_memcpy", "gpu.memset": "gpu_memset", "gpu.sync": "cuda_sync"}


@pytest.mark.slow
def test_device_names_and_rank_survive_a_round_trip(tmp_path, registry):
    path = shared_path("torch-trace", "hta", "nccl_data_rank0_a100.json.gz")
    original = tracekit.read(path, registry=registry)
    out = tmp_path / "nccl.json.gz"
    tracekit.write(original, out, registry=registry)
    again = tracekit.read(out, registry=registry)
    keep = ["device", "name", "vendor", "kind", "sm_count", "memory_bytes",
            "compute_capability"]
    assert again.devices.select(keep).to_pylist() == original.devices.select(keep).to_pylist()
    assert {r["name"] for r in again.devices.to_pylist()} == {"NVIDIA A100-PG509-200"}
    src = next(iter(again.metadata["sources"].values()))
    assert src["distributed"] == next(iter(original.metadata["sources"].values()))[
        "distributed"]
    assert set(again.processes["rank"].to_pylist()) == {0}
