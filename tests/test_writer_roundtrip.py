"""Model -> writer -> reader -> model, field by field: Chrome JSON read back by the kineto
reader, Parquet by its own reader; on real inputs and on a trace with every column filled."""

from __future__ import annotations

import pytest
import tracekit
from helpers import event_rows, shared_path
from tracekit.fields import TYPED_COLUMNS
from tracekit.testing import full_trace

# Args keys the chrome-json writer adds: typed columns by the rule, and Kineto's own names.
_ADDED = {*TYPED_COLUMNS, "grid", "block", "registers per thread", "shared memory", "Bytes"}
# Kineto's names for other tools' sync labels (docs/formats/chrome-json.md).
_SYNC = {"Event sync": "Event Sync", "Stream wait sync": "Stream Wait Event",
         "Stream sync": "Stream Sync", "Context sync": "Context Sync"}
_COMPARED = [c for c in TYPED_COLUMNS if c != "source"]


def _rows(trace: tracekit.Trace) -> list[dict]:
    return sorted(event_rows(trace), key=_order)


def _order(r: dict) -> tuple:
    return tuple((r[c] is None, r[c] if r[c] is not None else 0) for c in
                 ("ts_ns", "kind", "category", "dur_ns", "device", "stream", "pid", "tid",
                  "correlation", "value"))


def _kineto_name(r: dict) -> str:
    """The name the writer gives a copy, memset or sync (Kineto's)."""
    if r["category"] == "gpu.sync":
        return _SYNC.get(r["name"], r["name"])
    if r["category"] == "gpu.memset":
        return r["name"] if r["name"].startswith("Memset") else \
            f"Memset ({r['dst_kind']})" if r["dst_kind"] else "Memset"
    if r["category"] == "gpu.memcpy" and not r["name"].startswith("Memcpy"):
        where = f" ({r['src_kind']} -> {r['dst_kind']})" if r["src_kind"] and r["dst_kind"] \
            else ""
        return f"Memcpy {r['copy_kind']}{where}"
    return r["name"]


def _chrome_round_trip(original: tracekit.Trace, tmp_path, registry,
                       ) -> tuple[list[dict], list[dict], tracekit.WriteResult]:
    out = tmp_path / "round.json.gz"
    result = tracekit.write(original, out, registry=registry)
    again = tracekit.read(out, registry=registry)
    assert not again.log.notices()
    want = [dict(r, name=_kineto_name(r)) for r in _rows(original)
            if r["ts_ns"] is not None and r["kind"] != "sample"]
    for r in want:
        if r["stack_id"] is not None:  # counted: Chrome JSON has no call stacks
            r["stack_id"] = None
    return sorted(want, key=_order), _rows(again), result


def _assert_same(want: list[dict], got: list[dict]) -> None:
    assert len(got) == len(want)
    for w, g in zip(want, got, strict=True):
        assert {c: g[c] for c in _COMPARED} == {c: w[c] for c in _COMPARED}
        # The args come back with the keys the writer added, nothing else changed.
        assert {k: v for k, v in g["args"].items() if k in w["args"] or k not in _ADDED} \
            == w["args"]


def test_full_trace_through_chrome_json_and_back(tmp_path, registry):
    original = full_trace()
    want, got, result = _chrome_round_trip(original, tmp_path, registry)
    # What the writer counted: the device counter is drawn on the GPU's pid, its own pid
    # and device are not written.
    assert {k: v for k, v in result.skipped.items() if k.startswith("field ")} == {
        "field stack_id: Chrome JSON has no call stacks": 1,
        "field pid: a counter's args are its series in Chrome JSON": 1,
        "field device: a counter's args are its series in Chrome JSON": 1}
    for r in want:
        if r["name"] == "GPU 0 utilization":
            r["pid"], r["device"] = 0, None
    _assert_same(want, got)
    names = {r["name"] for r in got}
    assert {"Memcpy HtoD (Pageable -> Device)", "Memset (Device)", "Stream Sync"} <= names
    read = next(r for r in got if r["name"] == "read")
    assert (read["grid_x"], read["registers"], read["copy_kind"], read["count"]) == \
        (3, 16, "DtoH", 2)


@pytest.mark.parametrize("rel", [
    "torch-trace/tracelens/h100_bert-small.json.gz",
    pytest.param("torch-trace/tracelens/mi300_bert-small.json.gz", marks=pytest.mark.slow),
    pytest.param("torch-trace/tracelens/mi210_gpu_only_trace.json.gz",
                 marks=pytest.mark.slow),
    pytest.param("torch-trace/hta/nccl_data_rank0_a100.json.gz", marks=pytest.mark.slow),
])
def test_torch_trace_through_chrome_json_is_the_same_model(rel, tmp_path, registry):
    original = tracekit.read(shared_path(*rel.split("/")), registry=registry)
    want, got, result = _chrome_round_trip(original, tmp_path, registry)
    # A kernel launched by hipExtModuleLaunchKernel has its grid in blocks in the model and
    # in work-items in its args, which are written as the tool wrote them (and read back to
    # the same blocks): its grid field is counted as not written into args, nothing else.
    derived = sum(n for (kind, outcome), n in
                  {(k[1], k[2]): v for k, v in original.log.outcomes.items()}.items()
                  if kind == "derived from X:kernel" and outcome.startswith("grid given"))
    assert dict(result.skipped) == ({"field grid: args already has this key with another "
                                     "value (args kept)": derived} if derived else {})
    _assert_same(want, got)
    again_tables = tracekit.read(tmp_path / "round.json.gz", registry=registry)
    for name in ("processes", "threads", "devices"):
        keep = [c for c in original.table(name).column_names if c != "source"]
        assert again_tables.table(name).select(keep).to_pylist() == \
            original.table(name).select(keep).to_pylist(), name


@pytest.mark.parametrize("rel", [
    "nsys-sqlite/mordred_nsys2021_quadro-rtx6000_report1.sqlite",
    pytest.param("nsys-sqlite/testcuda_nsys2026.1.1_rtx4060ti_report1.sqlite",
                 marks=pytest.mark.slow),
    pytest.param("rocprof-v3/jimw_llamacpp_rocm7/prefill_kernel_trace.csv",
                 marks=pytest.mark.slow),
])
def test_other_tools_through_chrome_json_keep_every_column(rel, tmp_path, registry):
    original = tracekit.read(shared_path(*rel.split("/")), registry=registry)
    want, got, result = _chrome_round_trip(original, tmp_path, registry)
    stacks = sum(r["stack_id"] is not None for r in _rows(original) if r["kind"] != "sample")
    fields = {k: v for k, v in result.skipped.items() if k.startswith("field ")}
    assert fields == ({"field stack_id: Chrome JSON has no call stacks": stacks}
                      if stacks else {})
    _assert_same(want, got)


@pytest.mark.parametrize("trace", [
    pytest.param(full_trace, id="full_trace"),
    pytest.param(lambda: tracekit.read(shared_path(
        "nsys-sqlite", "mordred_nsys2021_quadro-rtx6000_report1.sqlite")), id="nsys-mordred",
        marks=pytest.mark.slow),
])
def test_parquet_round_trip_is_the_same_trace(trace, tmp_path, registry):
    original = trace()
    out = tmp_path / "t.parquet"
    result = tracekit.write(original, out, registry=registry)
    assert not result.skipped
    again = tracekit.read(out, registry=registry)
    for name in ("events", "processes", "threads", "devices", "stacks", "frames"):
        assert again.table(name).equals(original.table(name), check_metadata=True), name
    assert _rows(again) == _rows(original)
    assert again.metadata == original.metadata
