"""Reader for AMD rocprof CSV output: rocprof v1 (``results.csv`` and its stats files) and
rocprofv3 traces (kernel, HIP/HSA API, marker, memory copy) and stats, one file, the files
sharing its prefix, or a whole output directory, read as one trace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.inputs import Source
from tracekit.plugins.rocprof import v1json
from tracekit.plugins.rocprof.convert import CONVERTERS
from tracekit.plugins.rocprof.database import RocprofDatabaseReader
from tracekit.plugins.rocprof.files import CsvFile, header_of, kind_of, read_csv
from tracekit.plugins.rocprof.json_reader import RocprofJsonReader
from tracekit.plugins.rocprof.lookup import lookup
from tracekit.plugins.rocprof.side import CLOCK, add_side_tables

# <prefix>_<trace>.csv names rocprofv3 writes; results.<x>.csv for v1.
TRACE_SUFFIX = re.compile(r"^(?P<prefix>.+?)_(?:kernel_trace|hip_api_trace|"
                          r"hip_runtime_trace|hsa_api_trace|marker_api_trace|memory_copy_trace|"
                          r"memory_allocation_trace|scratch_memory_trace|rccl_api_trace|"
                          r"rocdecode_api_trace|rocjpeg_api_trace|counter_collection|"
                          r"agent_info|[a-z_]*stats)(?:_[\w-]+)?\.csv$", re.IGNORECASE)


def input_files(source: Source) -> list[Path]:
    """The CSV files of one input: a directory's (recursively), or a file and the rocprofv3
    files beside it that share its ``<prefix>_`` (v1's results.* files are alternative views
    of one run, so they are not merged)."""
    if source.is_dir:
        return sorted(p for p in source.path.rglob("*.csv") if p.is_file())
    m = TRACE_SUFFIX.match(source.path.name)
    if not m:
        return [source.path]
    prefix = m.group("prefix")
    siblings = [p for p in source.path.parent.glob("*.csv")
                if (s := TRACE_SUFFIX.match(p.name)) and s.group("prefix") == prefix]
    return sorted(set(siblings) | {source.path})


class RocprofCsvReader(tracekit.Reader):
    """rocprof v1 and rocprofv3 CSV (files, prefixes or output directories)."""

    name = "rocprof"
    description = "AMD rocprof v1 / rocprofv3 CSV traces and stats (file or directory)"
    extensions = (".csv",)

    @classmethod
    def sniff(cls, source: Source) -> float:
        if source.is_dir:
            found = [p for p in source.path.rglob("*.csv")][:50]
            return 0.9 if any(_kind_of_file(p) for p in found) else 0.0
        if not source.head or b"\0" in source.head:
            return 0.0
        if v1json.is_v1_json(source.head):
            return 0.95  # above the generic Chrome-trace reading
        return 0.9 if kind_of(header_of(source.head.decode("utf-8", "replace"))) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        if not source.is_dir and v1json.is_v1_json(source.head):
            self._read_v1_json(source, out)
            return
        files: list[CsvFile] = []
        for path in input_files(source):
            f = read_csv(path)
            if f is None:
                if path == source.path:
                    raise TraceReadError("line 1: not a rocprof CSV header", path=path)
                out.note(f"{path.name}", "skipped: not a rocprof CSV", 1)
                continue
            files.append(f)
        if not files:
            raise TraceReadError("no rocprof CSV files here", path=source.path)
        converted = []
        agents = [f for f in files if f.kind == "v3_agents"]
        for f in files:
            if f.kind == "v3_agents":
                continue
            if f.kind not in CONVERTERS:
                out.note(f.path.name, f"skipped: {f.kind} not read yet", f.table.num_rows)
                continue
            converted.append((f, CONVERTERS[f.kind](f)))
        _fill_launching_pids(converted)
        _merge_repeated_dispatches(converted, out)
        for f, columns in converted:
            events = len(columns["category"])
            out.add_events(columns)
            if f.kind == "v3_counters":
                out.note(f.path.name, "counter values of the dispatches (one row each)",
                         f.table.num_rows)
            elif f.kind == "v2_roctx":
                out.note(f.path.name, "events", events)
                closed = sum(k == "slice" for k in columns["kind"])
                out.note(f.path.name, "range ends (joined to their start)", closed)
                if f.table.num_rows - events - closed:
                    out.note(f.path.name, "skipped: range end without a start",
                             f.table.num_rows - events - closed)
            else:
                out.note(f.path.name, "events", events)
            if f.kind == "v2_ops" and events:
                out.note(f.path.name, "device not recorded by rocprofv2: placed on device 0",
                         events)
        add_side_tables([c for _, c in converted], out)
        for f in agents:
            _add_agents(f, out)
        out.metadata.update({"format": "rocprof CSV", "tool": "rocprof", "clock": CLOCK,
                             "files": {f.path.name: f.kind for f in files}})

    @staticmethod
    def _read_v1_json(source: Source, out: TraceBuilder) -> None:
        try:
            doc = orjson.loads(source.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise TraceReadError(f"invalid JSON: {exc}", path=source.path) from None
        if not isinstance(doc, dict):
            raise TraceReadError("not a rocprof results.json (no traceEvents object)",
                                 path=source.path)
        columns, counts = v1json.convert(doc)
        out.add_events(columns)
        out.note("trace events (X)", "events", len(columns.get("kind", [])))
        out.note("metadata records", "section names", counts["metadata records"])
        out.note("flow endpoints (s/t)", "correlation of their call and work",
                 counts["flow endpoints"])
        out.note("empty or unknown records", "skipped: no event in it",
                 counts["empty or unknown records"])
        out.metadata.update({"format": "rocprof v1 results.json", "tool": "rocprof",
                             "clock": CLOCK, "other_data_keys": len(doc.get("otherData")
                                                                    or {})})


def _kind_of_file(path: Path) -> str | None:
    with open(path, "rb") as fh:
        return kind_of(header_of(fh.read(8192).decode("utf-8", "replace")))


def _fill_launching_pids(converted: list[tuple[CsvFile, dict[str, Any]]]) -> None:
    """Device rows without a pid (the v3 kernel trace has no Process_Id column) take the pid
    of the API call with the same correlation id, where exactly one process has that id."""
    api = [c for f, c in converted if f.kind == "v3_api"]
    if not api:
        return
    pairs = pa.table({"corr": pa.concat_arrays([pa.array(c["correlation"]) for c in api]),
                      "pid": pa.concat_arrays([pa.array(c["pid"]) for c in api])}) \
        .drop_null().group_by(["corr", "pid"]).aggregate([])
    owners = pairs.group_by("corr").aggregate([("pid", "count"), ("pid", "min")])
    one = owners.filter(pc.equal(owners["pid_count"], 1))
    for f, c in converted:
        if f.kind in ("v3_kernel", "v3_memcpy") and c.get("correlation") is not None:
            c["pid"] = pc.coalesce(pa.array(c["pid"]), lookup(
                one["corr"].combine_chunks(), one["pid_min"].combine_chunks(),
                pa.array(c["correlation"])))


def _add_agents(f: CsvFile, out: TraceBuilder) -> None:
    """``agent_info.csv``: the GPU agents, numbered by Node_Id as Agent_Id numbers them."""
    gpu = pc.equal(pc.utf8_upper(pc.fill_null(f.text("agent_type"), "")), "GPU")
    rows = f.table.filter(gpu)
    ids = CsvFile(f.path, f.kind, rows)
    for node, product, arch, cus in zip(ids.ints("node_id").to_pylist(),
                                        ids.text("product_name").to_pylist(),
                                        (ids.text("name") or pa.nulls(rows.num_rows)).to_pylist(),
                                        (ids.ints("cu_count") or pa.nulls(rows.num_rows))
                                        .to_pylist(), strict=True):
        out.add_device(node, vendor="amd", kind="gpu", name=product or None,
                       compute_capability=arch or None, sm_count=cus)
    out.note(f.path.name, "agents (devices table)", f.table.num_rows)


def _merge_repeated_dispatches(converted: list[tuple[CsvFile, dict[str, Any]]],
                               out: TraceBuilder) -> None:
    """One dispatch can be in two files of a run: a v3 kernel trace and its counter
    collection (same Dispatch_Id), or a v2 kernel file and the ops trace (same
    Correlation_ID). The kernel-trace row stays; the counters move into its args, and the
    repeated rows are left out and counted."""
    for kernel_kind, other_kind in (("v3_kernel", "v3_counters"), ("v2_kernel", "v2_ops")):
        kernels = [(f, c) for f, c in converted if f.kind == kernel_kind]
        if not kernels:
            continue
        for f, c in converted:
            if f.kind != other_kind:
                continue
            if other_kind == "v3_counters":
                # args are '{"dispatch_id":N,"counters":{...}}', as v3_counters writes them
                parts = pc.extract_regex(c["args"], r'^\{"dispatch_id":(?P<id>-?\d+),'
                                                    r'"counters":(?P<counters>.*)\}$')
                ids = pc.struct_field(parts, "id").cast(pa.int64())
                counters = pc.struct_field(parts, "counters")
                seen = []
                for kf, k in kernels:
                    dispatch = kf.ints("dispatch_id")
                    if dispatch is None:
                        continue
                    found = counters.take(pc.index_in(dispatch, value_set=ids))
                    k["args"] = pc.if_else(pc.is_valid(found), pc.binary_join_element_wise(
                        pc.utf8_slice_codeunits(k["args"], 0, -1), ',"counters":', found, "}",
                        ""), k["args"])
                    seen.append(dispatch)
                if not seen:
                    continue
                repeated = pc.is_in(ids, value_set=pa.concat_arrays(seen))
                why = " (counters attached there)"
            else:
                seen_corr = pa.concat_arrays([pa.array(k["correlation"]) for _, k in kernels])
                repeated = pc.and_(pc.equal(pa.array(c["category"]), "gpu.kernel"),
                                   pc.is_in(pa.array(c["correlation"]), value_set=seen_corr))
                why = ""
            repeated = pc.fill_null(repeated, False)
            n = pc.sum(repeated).as_py() or 0
            if n:
                keep = pc.invert(repeated)
                for name, values in c.items():
                    if values is not None:
                        c[name] = pa.array(values).filter(keep)
                out.note(f.path.name, "skipped: the same dispatch as in "
                         f"{kernels[0][0].path.name}{why}", n)


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(RocprofCsvReader)
    register(RocprofDatabaseReader)
    register(RocprofJsonReader)
