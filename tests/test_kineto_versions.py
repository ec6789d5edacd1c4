"""Kineto JSON as other PyTorch versions and builds write it, made from real traces.

Each test rewrites a real fixture (in tmp_path) the way a given libkineto wrote the same
information (pytorch/kineto libkineto/src/output_json.cpp and ActivityType.cpp history), and
checks that tracekit reads the same model from it as from the fixture itself, by both the
typed decode and the forgiving path where the variant reaches both.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
import tracekit
from helpers import shared_path

STEP = ("torch-trace", "hta", "step_based_trace_gpu_user_annotation.json.gz")
ALEXNET = ("torch-trace", "hta", "alexnet_a100_trace.json.gz")
MI250 = ("torch-trace", "hta", "amd_mi250_rocm6.2_kineto.json.gz")
DEVICE_WORK = ("gpu.kernel", "gpu.memcpy", "gpu.memset", "gpu.sync", "gpu.annotation")
COLUMNS = ("category", "name", "ts_ns", "dur_ns", "device", "stream", "pid", "correlation",
           "bytes", "grid_x", "block_x", "registers", "shared_mem_bytes")


def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "variant.json") -> Path:
    out = tmp_path / name
    out.write_text(json.dumps(doc))
    return out


def _forgiving(monkeypatch, path: Path, registry):
    """Read ``path`` through the forgiving path only."""
    import tracekit.plugins.kineto.reader as reader

    with monkeypatch.context() as m:
        m.setattr(reader, "decode", lambda blocks: None)
        return tracekit.read(path, registry=registry)


def _device_rows(trace) -> list[tuple]:
    """Device work rows (category, name, times, ids, typed columns), in time order."""
    ev = trace.events
    rows = ev.filter(pc.is_in(ev["category"].cast("string"), value_set=pc.cast(
        list(DEVICE_WORK), "string")))
    cols = [rows[c].cast("string").to_pylist() if c in ("category", "name")
            else rows[c].to_pylist() for c in COLUMNS]
    return sorted(zip(*cols, strict=True), key=lambda r: tuple(map(str, r)))


def _counts(trace) -> Counter:
    ev = trace.events
    return Counter(zip(ev["kind"].cast("string").to_pylist(),
                       ev["category"].cast("string").to_pylist(), strict=True))


def _kernel_ns(trace) -> int:
    ev = trace.events
    return pc.sum(ev.filter(pc.equal(ev["category"].cast("string"), "gpu.kernel"))[
        "dur_ns"]).as_py()


def _same_model(variant, original) -> None:
    assert _counts(variant) == _counts(original)
    assert _kernel_ns(variant) == _kernel_ns(original)
    assert _device_rows(variant) == _device_rows(original)


# torch 1.8 (libkineto until 2021-05): Kernel/Runtime/Memcpy/Memset/Operator, GPU user
# annotations as "User" on "stream N user", tids written as strings ("stream 7", "1234"),
# launch flows "async"/"launch" with bp "e" on the end, lower-case "external id" on GPU work.
_OLD_CATS = {"kernel": "Kernel", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy",
             "gpu_memset": "Memset", "cpu_op": "Operator", "gpu_user_annotation": "User"}


def _torch_1_8(doc: dict[str, Any], string_tids: bool = True) -> dict[str, Any]:
    events = doc["traceEvents"]
    gpu_pids = {e["pid"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy")}
    for e in events:
        cat = e.get("cat")
        annotation = cat == "gpu_user_annotation"
        if cat in _OLD_CATS:
            e["cat"] = _OLD_CATS[cat]
        if e.get("ph") in ("s", "f") and cat == "ac2g":
            e["cat"], e["name"] = "async", "launch"
            if e["ph"] == "f":
                e["bp"] = "e"
        if string_tids and isinstance(e.get("tid"), int) and e.get("ph") in ("X", "f", "M"):
            if e.get("pid") in gpu_pids:
                e["tid"] = f"stream {e['tid']}" + (" user" if annotation else "")
            elif e["ph"] == "X":
                e["tid"] = str(e["tid"])
        args = e.get("args")
        if args and "External id" in args and e["cat"] in ("Kernel", "Memcpy", "Runtime"):
            args["external id"] = args.pop("External id")
    return doc


def test_torch_1_8_layout_reads_like_the_current_one(tmp_path, registry):
    path = shared_path(*STEP)
    original = tracekit.read(path, registry=registry)
    variant = tracekit.read(_write(tmp_path, _torch_1_8(_load(path))), registry=registry)
    _same_model(variant, original)
    counts = _counts(variant)
    assert counts["slice", "gpu.annotation"] == 10  # "User" rows: GPU annotations, not other
    assert counts["slice", "gpu.kernel"] == 130 and counts["slice", "api.runtime"] == 180
    assert ("slice", "other") not in counts
    assert _kernel_ns(variant) == _kernel_ns(original) == 290_000
    assert variant.log.outcomes["variant.json", "X:User", "events"] == 10


def test_user_category_by_both_paths(tmp_path, monkeypatch, registry):
    """Integer tids: the typed decode takes the file; the forgiving path reads it the same."""
    path = shared_path(*STEP)
    variant = _write(tmp_path, _torch_1_8(_load(path), string_tids=False))
    fast = tracekit.read(variant, registry=registry)
    slow = _forgiving(monkeypatch, variant, registry)
    for column in fast.events.column_names:
        if column != "args":
            assert fast.events[column].to_pylist() == slow.events[column].to_pylist(), column
    assert _counts(fast)["slice", "gpu.annotation"] == 10
    _same_model(fast, tracekit.read(path, registry=registry))


def test_lower_case_user_category_stays_other(tmp_path, registry):
    doc = {"traceEvents": [{"ph": "X", "cat": "user", "name": "a", "pid": 1, "tid": 1,
                            "ts": 10, "dur": 5}]}
    trace = tracekit.read(_write(tmp_path, doc), registry=registry)
    assert trace.events["category"].cast("string").to_pylist() == ["other"]


def test_rocm_without_correlation_args_takes_it_from_the_flows(tmp_path, monkeypatch,
                                                                registry):
    """ROCm traces of 2024 carried only "External id" in args; the ac2g flows still hold the
    correlation id, which links each kernel and copy to its HIP call."""
    path = shared_path(*MI250)
    original = tracekit.read(path, registry=registry)
    doc = _load(path)
    for e in doc["traceEvents"]:
        (e.get("args") or {}).pop("correlation", None)
    variant_path = _write(tmp_path, doc)
    for variant in (tracekit.read(variant_path, registry=registry),
                    _forgiving(monkeypatch, variant_path, registry)):
        _same_model(variant, original)
        ev = variant.events
        launched = ev.filter(pc.and_(pc.equal(ev["category"].cast("string"), "gpu.kernel"),
                                     pc.is_valid(ev["pid"])))
        assert launched.num_rows == pc.sum(pc.and_(
            pc.equal(original.events["category"].cast("string"), "gpu.kernel"),
            pc.is_valid(original.events["pid"]))).as_py() > 0


def test_2026_stream_sync_row(tmp_path, registry):
    """Kineto since 2026-04 puts "Stream Sync" on its own row (tid = stream + 1000000, named
    "stream N (sync)"), flows included; the stream stays the one in args."""
    path = shared_path(*ALEXNET)
    original = tracekit.read(path, registry=registry)
    doc = _load(path)
    events = doc["traceEvents"]
    moved = set()
    for e in events:
        if e.get("cat") == "cuda_sync" and e.get("name") == "Stream Sync":
            moved.add((e["pid"], e["tid"], e["ts"]))
            e["tid"] += 1_000_000
    for e in events:
        if e.get("ph") in ("s", "f") and (e.get("pid"), e.get("tid"), e.get("ts")) in moved:
            e["tid"] += 1_000_000
    for pid, tid in sorted({(p, t) for p, t, _ in moved}):
        events.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid,
                       "tid": tid + 1_000_000, "args": {"name": f"stream {tid} (sync)"}})
    assert len(moved) == 16
    variant = tracekit.read(_write(tmp_path, doc), registry=registry)
    _same_model(variant, original)
    assert not any("matches no slice" in str(k) for k in variant.log.outcomes)


@pytest.mark.parametrize("cats", [
    {"kernel": "mtia_ccp_events", "cuda_runtime": "mtia_runtime"},
    {"cuda_runtime": "glow_runtime"},
    {"cuda_runtime": "privateuse1_runtime", "cuda_driver": "privateuse1_driver"},
    {"cuda_runtime": "xpu_runtime", "cuda_sync": "xpu_sync"},
])
def test_other_backends_categories(tmp_path, registry, cats):
    path = shared_path(*ALEXNET)
    doc = _load(path)
    for e in doc["traceEvents"]:
        if e.get("cat") in cats:
            e["cat"] = cats[e["cat"]]
    variant = tracekit.read(_write(tmp_path, doc), registry=registry)
    original = tracekit.read(path, registry=registry)
    _same_model(variant, original)
    assert _counts(variant)["slice", "gpu.kernel"] == 79
    assert _counts(variant)["slice", "api.runtime"] == 361


def test_values_written_as_text_read_the_same(tmp_path, registry):
    """ts/dur, flow ids and the args ids as JSON strings (other writers of the format)."""
    path = shared_path(*ALEXNET)
    original = tracekit.read(path, registry=registry)
    doc = _load(path)
    for e in doc["traceEvents"]:
        for key in ("ts", "dur"):
            if key in e:
                e[key] = str(e[key])
        if e.get("ph") in ("s", "f") and "id" in e:
            e["id"] = str(e["id"])
        args = e.get("args") or {}
        for key in ("device", "stream", "correlation", "External id", "bytes"):
            if key in args:
                args[key] = str(args[key])
    variant = tracekit.read(_write(tmp_path, doc), registry=registry)
    _same_model(variant, original)


def test_hardware_counters_of_2026(tmp_path, registry):
    """CUPTI counters: one C event per value, pid "GPU 0 Counters", the value under ""."""
    path = shared_path(*ALEXNET)
    doc = _load(path)
    t0 = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
    for i in range(4):
        doc["traceEvents"].append({"ph": "C", "cat": "hardware_counters",
                                   "name": "sm__throughput", "pid": "GPU 0 Counters",
                                   "tid": 0, "ts": t0 + i, "args": {"": i * 1.5}})
    variant = tracekit.read(_write(tmp_path, doc), registry=registry)
    original = tracekit.read(path, registry=registry)
    assert _counts(variant) - _counts(original) == Counter({("counter", "counter.hardware"): 4})
    assert _device_rows(variant) == _device_rows(original)
    ev = variant.events
    counters = ev.filter(pc.equal(ev["kind"].cast("string"), "counter"))
    assert counters["name"].cast("string").to_pylist() == ["sm__throughput"] * 4
    assert counters["category"].cast("string").to_pylist() == ["counter.hardware"] * 4
    assert counters["value"].to_pylist() == [0.0, 1.5, 3.0, 4.5]
    assert counters["ts_ns"].to_pylist() == [(t0 + i) * 1000 for i in range(4)]
