"""Reader for AMD rocprof CSV output: rocprof v1 (``results.csv`` and its stats files) and
rocprofv3 traces (kernel, HIP/HSA API, marker, memory copy) and stats, one file, the files
sharing its prefix, or a whole output directory, read as one trace."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Source, TraceBuilder, TraceReadError, UsageError
from tracekit.plugins.rocprof import agents, runs, v1json
from tracekit.plugins.rocprof.columns import OutOfRange, add_finished
from tracekit.plugins.rocprof.convert import CONVERTERS, file_pid, stats_category
from tracekit.plugins.rocprof.database import RocprofDatabaseReader
from tracekit.plugins.rocprof.files import (
    CsvFile,
    header_of,
    kind_of,
    missing_columns,
    read_csv,
    spelling,
)
from tracekit.plugins.rocprof.json_reader import RocprofJsonReader, load_json
from tracekit.plugins.rocprof.lookup import lookup
from tracekit.plugins.rocprof.side import CLOCK, add_side_tables

# <prefix>_<trace>.csv names rocprofv3 writes; results.<x>.csv for v1.
TRACE_SUFFIX = re.compile(r"^(?P<prefix>.+?)_(?:kernel_trace|hip_api_trace|"
                          r"hip_runtime_trace|hsa_api_trace|marker_api_trace|memory_copy_trace|"
                          r"memory_allocation_trace|scratch_memory_trace|rccl_api_trace|"
                          r"rocdecode_api_trace|rocjpeg_api_trace|counter_collection|"
                          r"agent_info|[a-z_]*stats)(?:_[\w-]+)?\.csv$", re.IGNORECASE)


# Kinds whose rows are untimed without both of these columns (counter-only runs).
OPTIONAL_TIMES = {"v1_kernels": ("beginns", "endns"),
                  "v3_counters": ("start_timestamp", "end_timestamp")}


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
    # Standard input only for a v1 results.json (one document); CSV files are read by path,
    # with the other files of their run.
    reads_streams = True

    @dataclass(frozen=True)
    class Options:
        run: str = field(default="", metadata={
            "help": "the run to read from files of several runs: a file name or a process "
                    "id (default: the run of the file named, else the one with the most GPU "
                    "records); 'all' reads every file as one"})

    @classmethod
    def sniff(cls, source: Source) -> float:
        if source.is_dir:
            found = [p for p in source.path.rglob("*.csv")][:50]
            return 0.9 if any(_kind_of_file(p) for p in found) else 0.0
        if not source.head or b"\0" in source.head.split(b"\n", 1)[0]:
            return 0.0  # binary; a NUL further on is damage the reader reports
        if v1json.is_v1_json(source.head.removeprefix(b"\xef\xbb\xbf")):
            return 0.95  # above the generic Chrome-trace reading
        # A CSV on a stream is recognised too, so that the read can say to save it to a file
        # (a CSV is read with the other files of its run).
        return 0.9 if kind_of(header_of(source.head.decode("utf-8", "replace"))) else 0.0

    def read(self, source: Source, out: TraceBuilder) -> None:
        if not source.is_dir and v1json.is_v1_json(source.head.removeprefix(b"\xef\xbb\xbf")):
            self._read_v1_json(source, out)
            return
        if source.is_stream:
            # What a reader that reads no stream gets (exit 2): only v1's results.json is.
            raise UsageError(f"{source.path}: rocprof CSV is read from its file or folder "
                             "(with the other files of its run), not from standard input; "
                             "save it to a file first (rocprof's v1 results.json can be piped)")
        timeline = _v1_timeline_in(source) if source.is_dir else None
        if timeline is not None:
            # A v1 output folder whose CSVs are only totals: its results.json is the run's
            # timeline, and the totals would add nothing to it.
            self._read_v1_json(Source(timeline), out)
            for path in input_files(source):
                rows = _rows(path)
                out.note(path.name, "skipped: aggregate totals of the run results.json "
                         "records" if _kind_of_file(path) == "stats" else "skipped: untimed "
                         "rows (a counter run; read the file on its own for its counters)",
                         rows)
            for other in sorted(p for p in source.path.rglob("*") if p.is_file()
                                and p.suffix.lower() != ".csv" and p != timeline):
                out.note(other.name, "skipped: another view of the run results.json "
                         "records" if other.name == "results.db" else
                         "skipped: not read (the folder's results.json was)", 1)
            return
        if source.compression == "gzip":
            raise TraceReadError("gzip-compressed: a rocprof CSV is read in place, with the "
                                 "other files of its run, so uncompress it first (gunzip)",
                                 path=source.path)
        paths = input_files(source)
        files: list[CsvFile] = []
        for path in paths:
            f = read_csv(path)
            if f is None:
                unread = _unread_output(path)
                if path == source.path:
                    if unread:
                        raise TraceReadError(f"rocprofv3 {unread}: not read by tracekit yet",
                                             path=path)
                    lacking = missing_columns(_header_of_file(path))
                    raise TraceReadError("not a rocprof CSV header" + (
                        f" (no {lacking} column)" if lacking else ""), path=path,
                        location="line 1")
                if unread:
                    out.note(path.name, f"skipped: {unread}, which tracekit does not read",
                             _rows(path))
                else:
                    out.note(f"{path.name}", "skipped: not a rocprof CSV", 1)
                continue
            files.append(f)
            if not f.table.num_rows:
                out.note(path.name, "warning: no rows (the header alone)")
            if f.replaced:
                out.note(path.name, "warning: cells with invalid UTF-8, replaced with U+FFFD "
                         f"(the first on line {f.replaced_line})", f.replaced)
        if source.is_dir:
            _note_other_files(source.path, out)
        if not files:
            raise TraceReadError("no rocprof CSV files here", path=source.path)
        converted = []
        for f in files:
            if f.kind in ("v3_agents", "stats"):
                continue
            if f.kind not in CONVERTERS:
                out.note(f.path.name, f"skipped: {f.kind}, which tracekit does not read",
                         f.table.num_rows)
                continue
            converted.append((f, _convert(f)))
        files, converted = self._one_run(source, files, converted, out)
        traced = [f for f in files if f.kind not in ("stats", "v3_agents")]
        for f in files:
            if f.kind != "stats":
                continue
            if traced or stats_category(f) is None:
                why = ("aggregate totals of the run the trace files here record (not added "
                       "on top of their events)" if traced else
                       "per-domain totals (the other stats files break them down)")
                out.note(f.path.name, f"skipped: {why}", f.table.num_rows)
                continue
            converted.append((f, _convert(f)))
        order = {id(f): i for i, f in enumerate(files)}
        converted.sort(key=lambda fc: order[id(fc[0])])
        for f, _ in converted:
            pair = OPTIONAL_TIMES.get(f.kind)
            if pair and (pair[0] in f.table.column_names) != (pair[1] in f.table.column_names):
                first, second = (f.labels.get(n) or spelling(n) for n in pair)
                out.note(f.path.name, f"warning: {first} and {second} come as a pair and "
                         "only one is here: the rows are untimed", f.table.num_rows)
        if not traced and converted:
            _note_aggregates_only([f for f, _ in converted], out)
        _fill_launching_pids(converted)
        _attach_counters(converted, out)
        _merge_v2_ops(converted, out)
        for f, columns in converted:
            for private in [k for k in columns if k.startswith("_")]:
                del columns[private]
            add_finished(out, columns, path=f.path, row_label="row ", kind=f.path.name)
            events = len(columns["category"])
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
        for f in files:
            if f.kind == "v3_agents":
                _add_agents(f, out)
        if any(f.kind in ("v1_kernels", "stats") for f in files):
            gpus, found_in = agents.beside([f.path for f in files] + (
                sorted(source.path.rglob("*.sysinfo.txt")) if source.is_dir else []))
            agents.add(out, gpus, found_in or "", agents.used_devices([c for _, c in converted]))
        out.metadata.update({"format": "rocprof CSV", "tool": "rocprof", "clock": CLOCK,
                             "files": {f.path.name: f.kind for f in files}})
        if not traced:
            out.metadata["aggregates_only"] = True

    def _one_run(self, source: Source, files: list[CsvFile],
                 converted: list[tuple[CsvFile, dict[str, Any]]], out: TraceBuilder
                 ) -> tuple[list[CsvFile], list[tuple[CsvFile, dict[str, Any]]]]:
        """The files of the one run to read (see ``runs``), the others counted as skipped
        with why; records repeated across files of the run are read once."""
        columns = {id(f): c for f, c in converted}
        members = [runs.member(i, f.path, f.kind, columns.get(id(f)), file_pid(f))
                   for i, f in enumerate(files)]
        keep, found = runs.select(members, self.options.run.strip(),
                                  None if source.is_dir else source.path, source.path, out)
        for m in members:
            if m.index not in keep:
                out.note(m.path.name, runs.skip_reason(m, found, keep),
                         files[m.index].table.num_rows)
        if len(found) > 1:
            out.metadata["runs"] = [{
                "files": [m.path.name for m in r.members], "pids": sorted(r.pids),
                "start_ns": r.start, "end_ns": r.end, "gpu_records": r.gpu_rows,
                "read": r.members[0].index in keep} for r in found]
        read = {id(f) for i, f in enumerate(files) if i in keep}
        converted = [(f, c) for f, c in converted if id(f) in read]
        runs.drop_repeats(converted, out)
        return [f for f in files if id(f) in read], converted

    @staticmethod
    def _read_v1_json(source: Source, out: TraceBuilder) -> None:
        doc, replaced = load_json(source)
        out.note(source.path.name, "warning: invalid UTF-8, replaced with U+FFFD", replaced)
        if not isinstance(doc, dict):
            raise TraceReadError("not a rocprof results.json (no traceEvents object)",
                                 path=source.path)
        try:
            columns, counts = v1json.convert(doc)
        except v1json.BadEvent as exc:
            where = f"traceEvents[{exc.index}]" if exc.index >= 0 else "traceEvents"
            raise TraceReadError(str(exc), path=source.path, location=where) from None
        add_finished(out, columns, path=source.path, row_label="trace event ",
                     kind="trace events (X)")
        out.note("trace events (X)", "events", len(columns.get("kind", [])))
        out.note("metadata records", "section names", counts["metadata records"])
        out.note("flow endpoints (s/t)", "correlation of their call and work",
                 counts["flow endpoints"])
        # rocprof v1 writes an empty object first in every results.json: nothing is lost.
        out.note("empty records", "nothing in them", counts["empty records"])
        out.note("unknown records", "skipped: neither an event, a flow endpoint nor metadata",
                 counts["unknown records"])
        out.note("trace events (X)", "warning: args that are not an object (left out)",
                 counts["args that are not an object"])
        out.note("trace events (X)", "warning: an id (pid, tid, dev-id, stream) that is no "
                 "integer (left out)", counts["ids that are not integers"])
        add_side_tables([columns] if columns else [], out)
        other = doc.get("otherData")
        gpus = agents.from_other_data(other)
        found_in = f"{source.path.name} otherData"
        if not gpus:
            gpus, found_in = agents.beside([source.path])
        agents.add(out, gpus, found_in or "", agents.used_devices([columns]))
        out.metadata.update({"format": "rocprof v1 results.json", "tool": "rocprof",
                             "clock": CLOCK, "other_data_keys": len(other)
                             if isinstance(other, dict) else 0})


def _convert(f: CsvFile) -> dict[str, Any]:
    """A file's event columns; a value out of range is an error naming its line."""
    try:
        return CONVERTERS[f.kind](f)
    except OutOfRange as exc:
        exc.column = f.labels.get(exc.column) or spelling(exc.column)
        raise TraceReadError(exc.message(), path=f.path,
                             location=f"line {f.line_of(exc.row)}") from None


def _v1_timeline_in(source: Source) -> Path | None:
    """A folder's v1 ``results.json`` when the folder's CSV files hold no timeline (only
    totals, or none), else None."""
    found = sorted(source.path.rglob("results.json"))
    if len(found) != 1:
        return None
    with open(found[0], "rb") as fh:
        if not v1json.is_v1_json(fh.read(4096).removeprefix(b"\xef\xbb\xbf")):
            return None
    return None if any(_is_timeline(p) for p in input_files(source)) else found[0]


def _is_timeline(path: Path) -> bool:
    """Whether a CSV file has timed rows (not totals, agents, or a counter-only run)."""
    header = _header_of_file(path)
    kind = kind_of(header)
    if kind in (None, "stats", "v3_agents"):
        return False
    names = {re.sub(r"[^a-z]", "", h.lower()) for h in header}
    pair = OPTIONAL_TIMES.get(kind)
    return pair is None or all(re.sub(r"[^a-z]", "", p) in names for p in pair)


def _header_of_file(path: Path) -> list[str]:
    with open(path, "rb") as fh:
        return header_of(fh.read(8192).decode("utf-8", "replace"))


# rocprofv3 outputs tracekit knows but does not read, by the columns of their header.
_UNREAD_OUTPUTS = (("PC samples", {"sample_timestamp", "instruction"}),
                   ("PC samples", {"sample_timestamp", "exec_mask"}))


def _unread_output(path: Path) -> str | None:
    """What a rocprofv3 CSV tracekit does not read holds, by its header (None: not one)."""
    header = {h.lower() for h in _header_of_file(path)}
    return next((what for what, columns in _UNREAD_OUTPUTS if columns <= header), None)


def _rows(path: Path) -> int:
    """The records of a CSV file (its lines after the header)."""
    with path.open("rb") as fh:
        return max(0, sum(1 for _ in fh) - 1)


def _kind_of_file(path: Path) -> str | None:
    return kind_of(_header_of_file(path))


def _note_other_files(directory: Path, out: TraceBuilder) -> None:
    """Count the files of a directory that are not CSV, by suffix: rocprof's JSON and
    database outputs are read on their own (with ``rocprof``, ``rocprof-db`` or
    ``rocprofv3-json``), and no file is left out unsaid."""
    suffixes = Counter("".join(p.suffixes[-2:]).lower() or p.name for p in directory.rglob("*")
                       if p.is_file() and p.suffix.lower() != ".csv"
                       and not p.name.endswith(".sysinfo.txt"))
    for suffix, n in sorted(suffixes.items()):
        out.note(f"*{suffix} files", "skipped: not CSV (read each on its own)", n)


def _note_aggregates_only(stats_files: list[CsvFile], out: TraceBuilder) -> None:
    """Say that an input of stats files alone has totals, not a timeline, and where the
    run's trace may be."""
    for f in stats_files:
        beside = [p.name for p in sorted(f.path.parent.glob(f.path.name.split(".")[0] + ".*"))
                  if p.suffix in (".json", ".db") or (p.name.endswith(".csv")
                  and read_csv_kind(p) not in (None, "stats", "v3_agents"))]
        hint = f": read {beside[0]} for the trace" if beside else ""
        out.note(f.path.name, "warning: aggregate totals only (a stats file): no timeline "
                 f"and no per-call times{hint}", 1)


def read_csv_kind(path: Path) -> str | None:
    """The kind of the CSV at ``path`` by its header (None when unreadable)."""
    try:
        return _kind_of_file(path)
    except OSError:
        return None


def _fill_launching_pids(converted: list[tuple[CsvFile, dict[str, Any]]]) -> None:
    """Device rows without a pid (the v3 kernel trace has no Process_Id column) take the pid
    of the API call with the same correlation id, where exactly one process has that id;
    rocprofv3 writes one file per process, so the rest of a file takes the one pid its
    linked rows have."""
    api = [c for f, c in converted if f.kind == "v3_api"]
    one = None
    if api:
        pairs = pa.table({
            "corr": pa.concat_arrays([pa.array(c["correlation"], pa.int64()) for c in api]),
            "pid": pa.concat_arrays([pa.array(c["pid"], pa.int64()) for c in api])}) \
            .drop_null().group_by(["corr", "pid"], use_threads=False).aggregate([])
        owners = pairs.group_by("corr", use_threads=False).aggregate(
            [("pid", "count"), ("pid", "min")])
        one = owners.filter(pc.equal(owners["pid_count"], 1))
    for f, c in converted:
        if f.kind not in ("v3_kernel", "v3_memcpy"):
            continue
        pid = pa.array(c["pid"], pa.int64())
        if one is not None and c.get("correlation") is not None:
            pid = pc.coalesce(pid, lookup(one["corr"].combine_chunks(),
                                          one["pid_min"].combine_chunks(),
                                          pa.array(c["correlation"])))
        known = pc.unique(pid.drop_null())
        if pid.null_count and len(known) == 1:
            pid = pc.fill_null(pid, known[0])
        c["pid"] = pid


def _add_agents(f: CsvFile, out: TraceBuilder) -> None:
    """``agent_info.csv``: the GPU agents, numbered by Node_Id as Agent_Id numbers them."""
    gpu = pc.equal(pc.utf8_upper(pc.fill_null(f.text("agent_type"), "")), "GPU")
    rows = CsvFile(f.path, f.kind, f.table.filter(gpu))
    try:
        nodes, cus = rows.ints("node_id", 32), rows.ints("cu_count", 32)
    except TraceReadError:
        out.note(f.path.name, "skipped: agents with a Node_Id or Cu_Count that is no "
                 "32-bit integer", f.table.num_rows)
        return
    n = rows.table.num_rows
    names = rows.text("product_name")
    arch = rows.text("name") if rows.text("name") is not None else pa.nulls(n, pa.string())
    cus = cus if cus is not None else pa.nulls(n, pa.int64())
    added = 0
    for node, product, gfx, count in zip(nodes.to_pylist(), names.to_pylist(),
                                         arch.to_pylist(), cus.to_pylist(), strict=True):
        if node is None:
            continue
        out.add_device(node, vendor="amd", kind="gpu", name=product or None,
                       compute_capability=gfx or None, sm_count=count)
        added += 1
    out.note(f.path.name, "agents (devices table)", f.table.num_rows)
    if n - added:
        out.note(f.path.name, "skipped: GPU agents without a Node_Id", n - added)


def _attach_counters(converted: list[tuple[CsvFile, dict[str, Any]]],
                     out: TraceBuilder) -> None:
    """rocprofv3 counter collection beside a kernel trace: a counter dispatch belongs to
    the kernel-trace row of the same process and ``Dispatch_Id`` (and, where both name the
    kernel, the same name); where the kernel trace does not know its process, the same
    ``Dispatch_Id`` and ``Correlation_Id``. Its counters move into that row's
    ``args.counters``. A counter dispatch that matches no row is a separate pass (another
    process, a replay run) and is not put on the traced timeline: it is counted. Without a
    kernel trace, the counter dispatches are the kernel rows."""
    kernels = [(f, c) for f, c in converted if f.kind == "v3_kernel"]
    if not kernels or not any(f.kind == "v3_counters" for f, _ in converted):
        return
    ktab = pa.concat_tables([pa.table({
        "part": np.full(len(c["category"]), i, np.int64),
        "krow": np.arange(len(c["category"]), dtype=np.int64),
        "kpid": pa.array(c["pid"], pa.int64()),
        "dispatch": c["_dispatch"] if c.get("_dispatch") is not None
        else pa.nulls(len(c["category"]), pa.int64()),
        "kcorr": pa.array(c["correlation"], pa.int64()),
        "kname": pa.array(c["name"], pa.string())}) for i, (_, c) in enumerate(kernels)])
    where = kernels[0][0].path.name if len(kernels) == 1 else "the kernel trace"
    for f, c in converted:
        if f.kind != "v3_counters":
            continue
        n = len(c["_dispatch"])
        ctab = pa.table({"crow": np.arange(n, dtype=np.int64),
                         "cpid": pa.array(c["pid"], pa.int64()), "dispatch": c["_dispatch"],
                         "ccorr": pa.array(c["correlation"], pa.int64()),
                         "cname": pa.array(c["name"], pa.string())})
        pairs = ktab.join(ctab, keys="dispatch", join_type="inner", use_threads=False)
        names_agree = pc.fill_null(pc.equal(pairs["kname"], pairs["cname"]), True)
        same = pc.or_(pc.equal(pairs["kpid"], pairs["cpid"]),
                      pc.and_(pc.is_null(pairs["kpid"]),
                              pc.equal(pairs["kcorr"], pairs["ccorr"])))
        pairs = pairs.filter(pc.and_(pc.fill_null(same, False), names_agree))
        # One kernel row per counter dispatch and the reverse: the first in file order.
        key = pc.add(pc.multiply(pairs["part"], 1 << 40), pairs["krow"])
        pairs = pairs.append_column("key", key)
        per_counter = pairs.group_by("crow", use_threads=False).aggregate([("key", "min")])
        per_kernel = per_counter.group_by("key_min", use_threads=False).aggregate([("crow", "min")])
        keys = per_kernel["key_min"].to_numpy()
        crows = per_kernel["crow_min"].to_numpy()
        for i, (_, k) in enumerate(kernels):
            mine = (keys >> 40) == i
            index = np.full(len(k["category"]), -1, np.int64)
            index[keys[mine] & ((1 << 40) - 1)] = crows[mine]
            found = c["_counters"].take(pa.array(index, mask=index < 0))
            args = pa.array(k["args"], pa.string()) if k.get("args") is not None else \
                pa.nulls(len(index), pa.string())
            head = pc.if_else(pc.is_valid(args), pc.binary_join_element_wise(
                pc.utf8_slice_codeunits(args, 0, -1), ",", ""), "{")
            k["args"] = pc.if_else(pc.is_valid(found), pc.binary_join_element_wise(
                head, '"counters":', found, "}", ""), args)
        attached = len(crows)
        out.note(f.path.name, f"skipped: the same dispatch as in {where} (counters "
                 "attached there)", attached)
        out.note(f.path.name, "skipped: counter collection of another process or pass (no "
                 f"dispatch in {where} with its process and Dispatch_Id)", n - attached)
        for name, values in c.items():  # none of them is a timeline row
            if values is not None and not name.startswith("_"):
                c[name] = pa.array(values).slice(0, 0)


def _merge_v2_ops(converted: list[tuple[CsvFile, dict[str, Any]]], out: TraceBuilder) -> None:
    """rocprofv2 writes a dispatch in its kernel file and again in the ops trace (same
    Correlation_ID): the kernel-file row stays, and the repeated rows are left out and
    counted."""
    kernels = [(f, c) for f, c in converted if f.kind == "v2_kernel"]
    if not kernels:
        return
    seen = pa.concat_arrays([pa.array(k["correlation"], pa.int64()) for _, k in kernels])
    for f, c in converted:
        if f.kind != "v2_ops":
            continue
        repeated = pc.fill_null(pc.and_(
            pc.equal(pa.array(c["category"]), "gpu.kernel"),
            pc.is_in(pa.array(c["correlation"], pa.int64()), value_set=seen)), False)
        if n := pc.sum(repeated).as_py() or 0:
            keep = pc.invert(repeated)
            for name, values in c.items():
                if values is not None:
                    c[name] = pa.array(values).filter(keep)
            out.note(f.path.name, f"skipped: the same dispatch as in {kernels[0][0].path.name}",
                     n)


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(RocprofCsvReader)
    register(RocprofDatabaseReader)
    register(RocprofJsonReader)
