"""The chrome-json writer: Kineto's names, categories and fields, every other typed column by
the rule of tracekit.fields or counted; decoded with the json module."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter

import pytest
import tracekit
from helpers import shared_path
from tracekit import fields, json_objects
from tracekit.builder import TraceBuilder
from tracekit.plugins.chrome_json import ChromeJsonRanksWriter, ChromeJsonWriter
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
      "Context sync": "Context Sync"}),
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
    # The run's own top-level fields pass through, the trace's name among them.
    doc = json.loads(gzip.decompress(out.read_bytes()))
    source = json.loads(gzip.decompress(path.read_bytes()))
    assert doc["traceName"] == source["traceName"]


# -- a run: one file per rank (chrome-json-ranks), and ranks aligned on their collectives --

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def _rank(source: str, device: int, skew: int) -> tracekit.Trace:
    """One rank of a synthetic run, without distributedInfo: a host op launching a gemm and
    an all-reduce on GPU ``device`` (named "A100 #device"), on a clock ``skew`` ns ahead."""
    b = tracekit.TraceBuilder(source, "test")
    b.add_process(50, name="python")
    b.add_device(device, name=f"A100 #{device}", memory_bytes=2**30)
    b.add_events({
        "kind": ["slice"] * 4, "category": ["host.op", "api.runtime", "gpu.kernel",
                                            "gpu.kernel"],
        "name": ["aten::mm", "cudaLaunchKernel", "gemm", NCCL],
        "ts_ns": [s + skew for s in (1_000, 1_100, 2_000, 10_000)],
        "dur_ns": [1_000, 200, 3_000, 4_000], "pid": [50] * 4, "tid": [50, 50, None, None],
        "device": [None, None, device, device], "stream": [None, None, 7, 7],
        "correlation": [None, 9, 9, None]})
    return b.build()


def _run() -> tracekit.Trace:
    from tracekit.model import concat_traces

    return concat_traces([_rank("host-a/rank3.json", 0, 0), _rank("host-b/rank5.json", 1,
                                                                     700_000)])


def test_a_run_is_written_one_file_per_rank(tmp_path, registry):
    out = tmp_path / "ranks"
    result = tracekit.write(_run(), out, format="chrome-json-ranks", registry=registry)
    assert sorted(p.name for p in out.iterdir()) == ["rank-3.json", "rank-5.json"]
    assert (result.written["rank files"], result.written["X events"]) == (2, 8)
    for rank, device, skew in ((3, 0, 0), (5, 1, 700_000)):
        doc, ev = _events((out / f"rank-{rank}.json").read_bytes())
        # No distributedInfo in the input: the rank its file name gives, as HTA reads it.
        assert doc["distributedInfo"] == {"rank": rank}
        assert doc["deviceProperties"] == [{"id": device, "name": f"A100 #{device}",
                                            "totalGlobalMem": 2**30}]
        assert sorted(ev) == ["aten::mm", "cudaLaunchKernel", "gemm", NCCL]
        assert (ev["gemm"]["pid"], ev["gemm"]["args"]["device"]) == (device, device)
        assert doc["baseTimeNanoseconds"] + round(ev["aten::mm"]["ts"] * 1000) == 1_000 + skew
        assert "alignment_offsets_ns" not in doc["tracekit"]
    # Each file reads back as its rank alone.
    again = tracekit.read(out / "rank-5.json", registry=registry)
    assert set(again.processes["rank"].to_pylist()) == {5}
    assert again.devices["name"].to_pylist() == ["A100 #1"]


def test_the_ranks_writer_accounts_for_every_row():
    data, result = check_writer(ChromeJsonRanksWriter)
    assert result.written["X events"] == 11 and result.written["rank files"] == 1
    assert json.loads(data)["distributedInfo"] == {"rank": 0}


def test_align_collectives_moves_each_rank_and_says_by_how_much(tmp_path, registry):
    out = tmp_path / "ranks"
    tracekit.write(_run(), out, format="chrome-json-ranks", registry=registry,
                   options=["align=collectives", "gzip=true"])
    assert sorted(p.name for p in out.iterdir()) == ["rank-3.json.gz", "rank-5.json.gz"]
    for rank, offset in ((3, 0), (5, -700_000)):
        doc, ev = _events(gzip.decompress((out / f"rank-{rank}.json.gz").read_bytes()))
        assert doc["tracekit"]["alignment_offsets_ns"] == {
            f"host-{'a' if rank == 3 else 'b'}/rank{rank}.json": offset}
        assert doc["baseTimeNanoseconds"] + round(ev[NCCL]["ts"] * 1000) == 10_000
    merged = tmp_path / "merged.json"
    tracekit.write(_run(), merged, registry=registry, options=["align=collectives"])
    doc = json.loads(merged.read_bytes())
    assert doc["tracekit"]["alignment_offsets_ns"] == {"host-a/rank3.json": 0,
                                                       "host-b/rank5.json": -700_000}
    assert "distributedInfo" not in doc  # a merged run is no one rank
    ends = [doc["baseTimeNanoseconds"] + round((e["ts"] + e["dur"]) * 1000)
            for e in doc["traceEvents"] if e.get("name") == NCCL]
    assert ends == [14_000, 14_000]


def test_align_must_be_collectives(registry, tmp_path):
    with pytest.raises(tracekit.OptionError, match="option 'align': 'clocks' is not known"):
        tracekit.write(_run(), tmp_path / "x.json", registry=registry, options=["align=clocks"])


def test_only_a_folder_of_tracekit_rank_files_is_replaced(tmp_path, registry):
    out = tmp_path / "ranks"
    tracekit.write(_run(), out, format="chrome-json-ranks", registry=registry)
    tracekit.write(_run(), out, format="chrome-json-ranks", registry=registry, force=True)
    (out / "rank-3.json").write_text('{"traceEvents": []}')  # the user's own
    with pytest.raises(tracekit.TraceWriteError, match="not a tracekit output"):
        tracekit.write(_run(), out, format="chrome-json-ranks", registry=registry, force=True)


def test_kineto_args_are_compacted_and_given_their_keys_column_wise(monkeypatch):
    # Kineto's indented args, a kernel's device that differs from its args, an escape (the
    # one text fields.merge reads per row) and a text that is no JSON.
    pretty = '{\n      "External id": 7, "device": %d, "grid": [4, 2, 1]\n    }'
    b = TraceBuilder("t.json", "sample")
    b.add_events({
        "kind": ["slice"] * 4, "category": ["gpu.kernel", "gpu.kernel", "host.op", "host.op"],
        "name": ["k0", "k1", "op", "bad"], "ts_ns": [1_000, 2_000, 3_000, 4_000],
        "dur_ns": [10] * 4, "pid": [None, None, 1, 1], "tid": [None, None, 1, 1],
        "device": [0, 0, None, None], "stream": [7, 7, None, None],
        "grid_x": [4, 4, None, None], "grid_y": [2, 2, None, None], "grid_z": [1, 1, None, None],
        "correlation": [None, None, 5, 6],
        "args": [pretty % 0, pretty % 3, '{"s": "a\\"b"}', '{"a": 1'],
    })
    handed = []
    per_row = fields.merge

    def spy(args, keys, **kw):
        handed.extend(args.to_pylist())
        return per_row(args, keys, **kw)

    monkeypatch.setattr(json_objects.fields, "merge", spy)
    out = io.BytesIO()
    result = ChromeJsonWriter().write(b.build(), out)
    _, ev = _events(out.getvalue())
    assert ev["k0"]["args"] == {"External id": 7, "device": 0, "grid": [4, 2, 1], "stream": 7}
    assert ev["k1"]["args"] == {"External id": 7, "device": 3, "grid": [4, 2, 1], "stream": 7}
    assert ev["op"]["args"] == {"s": 'a"b', "correlation": 5}
    assert ev["bad"]["args"] == {"args": '{"a": 1', "correlation": 6}
    assert b'"args":{"External id": 7, "device": 0, "grid": [4, 2, 1],"stream":7}' \
        in out.getvalue()
    assert result.skipped["field device: args already has this key with another value "
                          "(args kept)"] == 1
    assert handed == ['{"s": "a\\"b"}', '{"a": 1']
