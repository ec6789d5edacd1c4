"""Reader for Nsight Systems SQLite exports (``nsys export --type sqlite``), schemas 2.9+."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit import Source, TraceBuilder, TraceReadError
from tracekit.plugins.nsys import extra as E
from tracekit.plugins.nsys import mpi as M
from tracekit.plugins.nsys import samples as samples_mod
from tracekit.plugins.nsys import tables as T
from tracekit.plugins.nsys.db import (
    ExportDatabase,
    MissingColumn,
    col,
    decode_pid,
    decode_tid,
    fill_names,
)
from tracekit.toolkit import (
    SQLITE_MAGIC,
    gzipped_sqlite,
    int_or_none,
    table_names,
    text_or_none,
)

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
KNOWN_SCHEMA_MAJOR = 3
# Event tables tracekit reads; every other table with rows is counted as not read.
_SIDE_TABLES = ("StringIds", "ThreadNames", "PROCESSES", "ProcessStreams")
# Prefixes of the descriptive tables every export has: with StringIds, what makes a file one.
_EXPORT_PREFIXES = ("ENUM_", "TARGET_INFO_", "META_DATA", "EXPORT_META", "ANALYSIS_")
_EXPORT_HELP = "make one with: nsys export --type sqlite REPORT.nsys-rep"
# The tables read in batches of rows, whose sizes make the progress total.
_PROGRESS_TABLES = frozenset({
    "StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API", "CUDA_GPU_MEMORY_USAGE_EVENTS",
    "COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "OSRT_CALLCHAINS", "PROFILER_OVERHEAD",
    "CUPTI_ACTIVITY_KIND_OVERHEAD", "DIAGNOSTIC_EVENT", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "GPU_METRICS", "SCHED_EVENTS", "ThreadNames", "CUBLAS_EVENTS", "CUDNN_EVENTS",
    *M.EVENT_TABLES})


class NsysReader(tracekit.Reader):
    """Nsight Systems SQLite exports: CUDA kernels, copies, memsets, syncs, API calls,
    NVTX ranges, OS runtime calls and MPI calls (with each process's MPI rank)."""

    name = "nsys"
    description = "Nsight Systems SQLite export (nsys export --type sqlite)"
    extensions = (".sqlite", ".nsys-rep", ".qdrep")
    streams_events = True  # each table's rows leave a fetched batch at a time

    @dataclass(frozen=True)
    class Options:
        short_names: bool = field(default=False, metadata={
            "help": "kernel base names (shortName) instead of demangled names"})

    @classmethod
    def sniff(cls, source: Source) -> float:
        if source.is_dir:
            return 0.0
        if source.path.suffix.lower() in REPORT_SUFFIXES:
            return 0.9  # a report is binary; read() exports it or says how
        if not source.head.startswith(SQLITE_MAGIC):
            return 0.0
        # Any other SQLite: low, so that read() can say clearly what it is not.
        return 1.0 if "StringIds" in (table_names(source.path) or set()) else 0.1

    def read(self, source: Source, out: TraceBuilder) -> None:
        if source.is_dir:
            raise TraceReadError("is a directory, not an Nsight Systems SQLite export "
                                 f"({_EXPORT_HELP})", path=source.path)
        if source.path.suffix.lower() in REPORT_SUFFIXES:
            with tempfile.TemporaryDirectory() as tmp:
                exported = _export_report(source.path, Path(tmp))
                self._read_export(exported, out)
                out.metadata["exported_from"] = source.name
            return
        self._read_export(source.path, out)

    def _read_export(self, path: Path, out: TraceBuilder) -> None:
        with path.open("rb") as f:
            magic = f.read(len(SQLITE_MAGIC))
            if magic != SQLITE_MAGIC and gzipped_sqlite(path):
                raise TraceReadError("gzip-compressed: an Nsight Systems export is read in "
                                     "place, so uncompress it first (gunzip)", path=path)
            if magic != SQLITE_MAGIC:
                raise TraceReadError("not an SQLite file, so not an Nsight Systems export "
                                     f"({_EXPORT_HELP})", path=path)
        with ExportDatabase(path) as db:
            if "StringIds" not in db.tables:
                kind = "an nvprof export (StringTable)" if "StringTable" in db.tables else \
                    "an SQLite database without StringIds"
                raise TraceReadError(f"not an Nsight Systems export: {kind}", path=path)
            known = {T.KERNEL, T.MEMCPY, T.MEMSET, T.SYNC, T.RUNTIME, T.NVTX, T.OSRT,
                     T.MEMORY_USAGE, samples_mod.SAMPLES, E.OVERHEAD, E.CUPTI_OVERHEAD,
                     E.DIAGNOSTICS, E.GRAPH_TRACE, E.GPU_METRICS, E.SCHED, *T.LIBRARY_TABLES,
                     *M.EVENT_TABLES, M.RANKS, *_SIDE_TABLES}
            if not (db.tables & known) - {"StringIds"} and \
                    not any(t.startswith(_EXPORT_PREFIXES) for t in db.tables):
                raise TraceReadError("not an Nsight Systems export: it has StringIds but "
                                     "none of the other tables nsys writes", path=path)
            try:
                self._metadata(db, out)
                read_tables, pids = self._events(db, out)
                self._side_tables(db, out, pids)
                if M.RANKS in db.tables:
                    self._mpi_ranks(db, out, pids)
                    read_tables.add(M.RANKS)
                for table in sorted(db.tables - read_tables - set(_SIDE_TABLES)):
                    if table.startswith((*_EXPORT_PREFIXES, "sqlite_")) or \
                            table == "UnwindMethodType":
                        continue
                    rows = db.count(table)
                    if rows:
                        out.note(table, "skipped: tracekit does not read this table", rows)
            finally:
                for (table, outcome), n in sorted(db.notes.items()):
                    out.note(table, outcome, n)
                for table, n in sorted(db.replaced.items()):
                    out.note(table, "warning: invalid UTF-8 in text, replaced with U+FFFD", n)

    def _events(self, db: ExportDatabase, out: TraceBuilder) -> tuple[set[str], set[int]]:
        """Read the event tables; return the tables read and the pids that have events."""
        done: set[str] = set()
        pids: set[int] = set()

        def add(table: str, columns: dict[str, Any], rows: int,
                outcome: str = "events") -> None:
            if columns.get("name") is not None:
                columns["name"], missing = fill_names(columns["name"])
                out.note(table, "warning: no name (NULL, not in StringIds or an unknown "
                         "code), named [unknown]", missing)
            out.add_events(columns)
            if columns.get("pid") is not None:
                pids.update(pc.unique(columns["pid"]).drop_null().to_pylist())
            out.note(table, outcome, rows)
            done.add(table)

        def optional(table: str, read: Callable[[], None], serving: str = "") -> None:
            """Read an optional table; one that lacks a column it cannot do without is
            skipped, its rows (and those of the table ``serving`` it) counted with the reason,
            and the rest of the export read."""
            try:
                read()
            except MissingColumn as missing:
                if missing.table != table:
                    raise
                why = f"column {missing.column} is missing"
                out.note(table, f"skipped: {why}", db.count(table))
                done.add(table)
                if serving in db.tables and serving not in done:
                    out.note(serving, f"skipped: {table} skipped ({why})", db.count(serving))
                    done.add(serving)

        def extra(table: str, convert: Callable[[ExportDatabase], dict[str, Any]]) -> None:
            columns = convert(db)
            add(table, columns, len(columns["ts_ns"]))

        # One phase for the whole export: a percentage (and so a time left) by the rows
        # read of the tables read, their sizes known up front.
        progress = out.progress
        progress.phase(f"reading {db.path.name}",
                       sum(db.size(t) for t in db.tables & _PROGRESS_TABLES))
        db.on_rows = progress.update
        simple = ((T.KERNEL, lambda: T.kernels(db, self.options.short_names)),
                  (T.MEMCPY, lambda: T.memcpys(db)), (T.MEMSET, lambda: T.memsets(db)),
                  (T.SYNC, lambda: T.syncs(db)))
        for table, convert in simple:
            if table in db.tables:
                rows = 0
                for columns in convert():
                    rows += len(columns["ts_ns"])
                    add(table, columns, 0)
                out.note(table, "events", rows)
        extras = ((E.OVERHEAD, E.profiler_overhead),
                  (E.CUPTI_OVERHEAD, lambda db: E.profiler_overhead(db, E.CUPTI_OVERHEAD)),
                  (E.DIAGNOSTICS, E.diagnostics),
                  (E.GRAPH_TRACE, E.graph_trace), (E.GPU_METRICS, E.gpu_metrics))
        for table, convert in extras:
            if table in db.tables and db.count(table):
                optional(table, lambda table=table, convert=convert: extra(table, convert))
        if E.SCHED in db.tables and db.count(E.SCHED):
            optional(E.SCHED, lambda: self._sched(db, add, out))
        if T.RUNTIME in db.tables:
            rows = carriers = 0
            for columns, left_out in T.runtime(db):
                rows += len(columns["ts_ns"])
                carriers += left_out
                add(T.RUNTIME, columns, 0)
            out.note(T.RUNTIME, "events", rows)
            out.note(T.RUNTIME, "not needed: backtrace row repeating an API call", carriers)
        for table in T.LIBRARY_TABLES:
            if table in db.tables:
                optional(table, lambda table=table: self._calls(
                    table, ((c, 0) for c in T.library_calls(db, table)), add, out))
        if T.MEMORY_USAGE in db.tables and db.count(T.MEMORY_USAGE):
            optional(T.MEMORY_USAGE, lambda: self._memory_usage(db, add, out))
        stack_base = frame_base = 0
        if samples_mod.SAMPLES in db.tables:
            read: list[Any] = []
            optional(samples_mod.SAMPLES, lambda: read.append(samples_mod.samples(db)))
            if read:
                columns, tree = read[0]
                # The call stacks first: a writer taking batches interns them before the
                # samples that name them (see Reader.streams_events).
                out.add_table("frames", tree.frames)
                out.add_table("stacks", tree.stacks)
                add(samples_mod.SAMPLES, columns, len(columns["ts_ns"]))
                stack_base, frame_base = tree.stacks.num_rows, tree.frames.num_rows
                if samples_mod.CALLCHAINS in db.tables:
                    out.note(samples_mod.CALLCHAINS, "call stacks of the samples",
                             db.count(samples_mod.CALLCHAINS) - tree.skipped)
                    done.add(samples_mod.CALLCHAINS)
        if T.OSRT in db.tables:
            optional(T.OSRT, lambda: self._osrt(db, add, out, done, stack_base, frame_base),
                     serving=samples_mod.OSRT_CALLCHAINS)
        if T.NVTX in db.tables:
            optional(T.NVTX, lambda: self._nvtx(db, add, out))
        for table in M.EVENT_TABLES:
            if table in db.tables:
                optional(table, lambda table=table: self._calls(
                    table, M.calls(db, table), add, out))
        return done, pids

    @staticmethod
    def _calls(table: str, batches: Iterable[tuple[dict[str, Any], int]],
               add: Callable[..., None], out: TraceBuilder) -> None:
        """A table of host calls (a library's, MPI's), batch by batch: each batch's columns
        and how many of its rows were left out for having no end."""
        rows = open_ = 0
        for columns, left_out in batches:
            rows += len(columns["ts_ns"])
            open_ += left_out
            add(table, columns, 0)
        out.note(table, "events", rows)
        out.note(table, "skipped: call without an end", open_)

    @staticmethod
    def _mpi_ranks(db: ExportDatabase, out: TraceBuilder, pids: set[int]) -> None:
        """MPI_RANKS: each process's MPI rank, which ``analyze -a ranks`` and the writers
        that lay a run out by rank number the input by (as Kineto's distributedInfo)."""
        missing = [c for c in ("globalTid", "rank") if c not in db.columns(M.RANKS)]
        if missing:
            out.note(M.RANKS, f"skipped: column {missing[0]} is missing", db.count(M.RANKS))
            return
        ranks, left_out = M.process_ranks(db)
        for pid, rank in sorted(ranks.items()):
            if pid in pids:
                out.add_process(pid, rank=rank)
        out.note(M.RANKS, "ranks of the processes (threads' rows)",
                 db.count(M.RANKS) - left_out)
        out.note(M.RANKS, "warning: row left out: globalTid or rank not an integer >= 0, "
                 "or the process given two ranks", left_out)

    @staticmethod
    def _sched(db: ExportDatabase, add: Callable[..., None], out: TraceBuilder) -> None:
        columns, unpaired = E.scheduling(db)
        add(E.SCHED, columns, 2 * len(columns["ts_ns"]),
            "events (a sched-in and its sched-out per slice)")
        out.note(E.SCHED, "skipped: a sched-in or sched-out without its pair", unpaired)

    @staticmethod
    def _memory_usage(db: ExportDatabase, add: Callable[..., None], out: TraceBuilder) -> None:
        instants, counters = T.memory_usage(db)
        add(T.MEMORY_USAGE, instants, len(instants["ts_ns"]))
        out.add_events(counters)
        out.note("derived from " + T.MEMORY_USAGE, "counter rows (memory allocated)",
                 len(counters["ts_ns"]))

    @staticmethod
    def _osrt(db: ExportDatabase, add: Callable[..., None], out: TraceBuilder, done: set[str],
              stack_base: int, frame_base: int) -> None:
        db.require(T.OSRT, *T.OSRT_NEEDS)  # before its call stacks are added
        osrt_tree = None
        if samples_mod.OSRT_CALLCHAINS in db.tables:
            osrt_tree = samples_mod.chain_tree(db, samples_mod.OSRT_CALLCHAINS,
                                               stack_base, frame_base)
            out.add_table("stacks", osrt_tree.stacks)
            out.add_table("frames", osrt_tree.frames)
            out.note(samples_mod.OSRT_CALLCHAINS, "call stacks of the OS runtime calls",
                     db.count(samples_mod.OSRT_CALLCHAINS) - osrt_tree.skipped)
            done.add(samples_mod.OSRT_CALLCHAINS)
        rows = 0
        for columns in T.osrt(db, osrt_tree):
            rows += len(columns["ts_ns"])
            add(T.OSRT, columns, 0)
        out.note(T.OSRT, "events", rows)

    @staticmethod
    def _nvtx(db: ExportDatabase, add: Callable[..., None], out: TraceBuilder) -> None:
        counts: Counter[str] = Counter()
        other: Counter[int] = Counter()
        for columns, part in T.nvtx(db):
            add(T.NVTX, columns, 0)
            other.update(part.pop("other"))
            counts.update(part)
        out.note(T.NVTX, "events", counts["ranges"] + counts["marks"])
        out.note(T.NVTX, "skipped: range without an end", counts["unterminated"])
        labels = {33: "categories", 75: "domain names", 39: "thread names"}
        for event_type, n in other.items():
            what = labels.get(event_type)
            out.note(T.NVTX, f"{what} (kept in args ids)" if what else
                     f"skipped: eventType {event_type}, which tracekit does not read", n)

    def _side_tables(self, db: ExportDatabase, out: TraceBuilder, pids: set[int]) -> None:
        # Descriptive rows with a value of the wrong type are ignored with a warning: the
        # events do not depend on them.
        def ignored(table: str, row: bool = False) -> None:
            out.note(table, "warning: row left out: its key is not an integer" if row else
                     "warning: value ignored: not of its column's type")

        # The export names every process on the machine; keep those that have events.
        if {"pid", "name"} <= set(db.columns("PROCESSES")):
            for pid, name in db.scalar_rows("SELECT pid, name FROM PROCESSES"):
                if (pid := int_or_none(pid)) is None:
                    ignored("PROCESSES", row=True)
                elif pid in pids:
                    out.add_process(pid, name=text_or_none(name))
        if {"globalTid", "nameId"} <= set(db.columns("ThreadNames")):
            rows = db.arrow("SELECT globalTid, nameId FROM ThreadNames")
            g = col(rows, "globalTid")
            names = db.names(col(rows, "nameId")).cast(pa.string())
            for pid, tid, name in zip(decode_pid(g).to_pylist(), decode_tid(g).to_pylist(),
                                      names.to_pylist(), strict=True):
                if pid in pids:
                    out.add_thread(pid, tid, name=name)
        if "id" in db.columns("TARGET_INFO_GPU"):
            cols = set(db.columns("TARGET_INFO_GPU"))
            wanted = ["id", "name", "smCount", "totalMemory", "memoryBandwidth",
                      "computeMajor", "computeMinor", "busLocation", "asyncEngines"]
            engines: dict[str, int] = {}
            present = [c if c in cols else f"NULL AS {c}" for c in wanted]
            for r in db.scalar_rows(f"SELECT {', '.join(present)} FROM TARGET_INFO_GPU"):
                d = dict(zip(wanted, r, strict=True))
                device = int_or_none(d["id"], 32)
                ints = {k: int_or_none(d[k], 32 if k == "smCount" else 64)
                        for k in ("smCount", "totalMemory", "computeMajor", "computeMinor")}
                bandwidth = d["memoryBandwidth"]
                bandwidth = float(bandwidth) if isinstance(bandwidth, (int, float)) and \
                    not isinstance(bandwidth, bool) and bandwidth else None
                if device is None or any(ints[k] is None and d[k] is not None for k in ints) \
                        or (bandwidth is None and d["memoryBandwidth"] not in (None, 0)):
                    ignored("TARGET_INFO_GPU", row=device is None)
                    if device is None:
                        continue
                cc = f"{ints['computeMajor']}.{ints['computeMinor']}" \
                    if ints["computeMajor"] is not None else None
                out.add_device(device, name=text_or_none(d["name"]), vendor="nvidia",
                               kind="gpu", sm_count=ints["smCount"],
                               memory_bytes=ints["totalMemory"], memory_bandwidth_bps=bandwidth,
                               compute_capability=cc)
                copy_engines = int_or_none(d["asyncEngines"], 32)
                if copy_engines is not None and copy_engines > 0:
                    engines[str(device)] = copy_engines
            if engines:
                # Copies that can run at once: with one engine, HtoD and DtoH take turns.
                out.metadata["copy_engines"] = engines
        # Kernels' deviceId is already the export's GPU id (TARGET_INFO_GPU.id, the join
        # NVIDIA's own reports make); TARGET_INFO_CUDA_DEVICE only says which CUDA ordinal
        # each process saw it as (after CUDA_VISIBLE_DEVICES), kept for the user.
        if {"pid", "cudaId", "gpuId"} <= set(db.columns("TARGET_INFO_CUDA_DEVICE")):
            ordinals: dict[str, dict[str, int]] = {}
            for row in db.scalar_rows("SELECT pid, cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE "
                                      "ORDER BY pid, cudaId"):
                pid, cuda_id, gpu_id = (int_or_none(v) for v in row)
                if pid is None or cuda_id is None or (gpu_id is None and row[2] is not None):
                    ignored("TARGET_INFO_CUDA_DEVICE", row=True)
                elif gpu_id is not None:
                    ordinals.setdefault(str(pid), {})[str(cuda_id)] = gpu_id
            if ordinals:
                out.metadata["cuda_ordinals"] = ordinals

    def _metadata(self, db: ExportDatabase, out: TraceBuilder) -> None:
        meta: dict[str, Any] = {"format": "nsys-sqlite", "tool": "Nsight Systems"}
        values: dict[str | None, str | None] = {}
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if {"name", "value"} <= set(db.columns(table)):
                values = {text_or_none(k): text_or_none(v)
                          for k, v in db.scalar_rows(f"SELECT name, value FROM {table}")}
                meta["tool_version"] = values.get("EXPORT_PRODUCT_VERSION")
                meta["schema_version"] = values.get("EXPORT_SCHEMA_VERSION")
                break
        window = _export_window(values)
        if window:
            meta["export_window"] = window
            out.note("export", f"cut to a time window ({window}): GPU work that was launched "
                     "before it has no launching call in the trace", 1)
        version = meta.get("schema_version")
        major = re.fullmatch(r"(\d{1,6})(\.\d{1,6})*", version.strip()) if version else None
        if version and major is None:
            out.note("export schema", "warning: version not understood; reading the tables "
                     "and columns this reader recognises", 1)
        elif major and int(major.group(1)) > KNOWN_SCHEMA_MAJOR:
            out.note("export schema", f"warning: version {version} is newer than this reader "
                     f"knows ({KNOWN_SCHEMA_MAJOR}.x); reading the tables and columns it "
                     "recognises", 1)
        epoch = None
        if "utcEpochNs" in db.columns("TARGET_INFO_SESSION_START_TIME"):
            rows = db.scalar_rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
            value = rows[0][0] if rows else None
            epoch = int_or_none(value)
            if value is not None and (epoch is None or epoch < 0):
                epoch = None
                out.note("TARGET_INFO_SESSION_START_TIME", "warning: utcEpochNs is not a time "
                         "in ns since 1970 (an integer >= 0); session start left out", 1)
        meta.update(_clock(values, epoch, out))
        if {"name", "value"} <= set(db.columns("TARGET_INFO_SYSTEM_ENV")):
            rows = db.scalar_rows("SELECT value FROM TARGET_INFO_SYSTEM_ENV "
                                  "WHERE name = 'Hostname'")
            hostname = text_or_none(rows[0][0]) if rows else None
            if hostname:
                meta["hostname"] = hostname
        out.metadata.update({k: v for k, v in meta.items() if v is not None})


def _clock(values: dict[str | None, str | None], epoch: int | None,
           out: TraceBuilder) -> dict[str, Any]:
    """The clock of the timestamps, from the export's own record of ``nsys export
    --ts-normalize`` (to UTC ns since the Unix epoch) and ``--ts-shift N`` (N ns added), both
    applied to every timestamp; ``epoch`` is the session start's UTC (utcEpochNs)."""
    normalize_text = values.get("EXPORT_PARAM_TIME_NORMALIZE")
    normalize = (normalize_text or "false").strip().lower()
    if normalize not in ("true", "false"):
        out.note("export flags", f"warning: EXPORT_PARAM_TIME_NORMALIZE {normalize_text!r} not "
                 "understood (true or false); timestamps taken as on the session clock", 1)
    shift = _shift(values, "EXPORT_PARAM_TIME_SHIFT", out)
    if _shift(values, "EXPORT_CONFIG_TIME_SHIFT", out) not in (0, shift):
        out.note("export flags", "warning: EXPORT_CONFIG_TIME_SHIFT differs from "
                 "EXPORT_PARAM_TIME_SHIFT and is not read (what it shifts is not documented)", 1)
    if normalize == "true":
        flags = "--ts-normalize" + (f" --ts-shift {shift}" if shift else "")
        meta: dict[str, Any] = {
            "clock": "UTC ns since the Unix epoch" + (f", shifted by {shift} ns" if shift else "")
                     + f" (nsys export {flags})", "export_ts_normalize": True}
        if epoch is not None:
            meta["session_start_ns"] = epoch + shift
    elif shift:
        meta = {"clock": f"nsys session ns shifted by {shift} ns (session start at {shift}; "
                         f"nsys export --ts-shift {shift})", "session_start_ns": shift,
                "session_start_utc_epoch_ns": epoch}
    else:
        meta = {"clock": "nsys session ns (0 at session start)",
                "session_start_utc_epoch_ns": epoch}
    if shift:
        meta["export_ts_shift_ns"] = shift
    return meta


def _shift(values: dict[str | None, str | None], name: str, out: TraceBuilder) -> int:
    """The ns of a time-shift row (0 when absent); a warning and 0 when not an integer."""
    text = (values.get(name) or "").strip()
    try:
        shift = int(text) if text else 0
    except ValueError:
        shift = None
    if shift is None or abs(shift) >= 2**62:
        out.note("export flags", f"warning: {name} {text!r} is not an integer (ns); taken "
                 "as 0", 1)
        return 0
    return shift


def _export_report(report: Path, directory: Path) -> Path:
    """Run ``nsys export`` on a report into ``directory``; a clear error if nsys is absent."""
    target = directory / (report.stem + ".sqlite")
    command = ["nsys", "export", "--type", "sqlite", "--output", str(target), str(report)]
    if shutil.which("nsys") is None:
        # File names only: the path is already in front, and a long one would be cut short.
        raise TraceReadError("is an Nsight Systems report; nsys is not on the PATH to export "
                             "it. Run (in its folder): nsys export --type sqlite --output "
                             f"{report.with_suffix('.sqlite').name} {report.name}", path=report)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not target.exists():
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TraceReadError(f"nsys export failed: {last[0]}", path=report)
    return target


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(NsysReader)





def _export_window(values: dict[str | None, str | None]) -> str:
    """The time window the export holds, where it was cut to one: by ``nsys export --times``
    (``EXPORT_PARAM_TIMES_TO_EXPORT``), or by a script that derived it from a whole export and
    said so (``DERIVED_WINDOW_NS``, ``DERIVED_BY``); '' for a whole session."""
    times = (values.get("EXPORT_PARAM_TIMES_TO_EXPORT") or "").strip()
    if times:
        return f"nsys export --times {times}"
    derived = (values.get("DERIVED_WINDOW_NS") or "").strip()
    if derived:
        by = (values.get("DERIVED_BY") or "").strip()
        return f"{derived} ns, derived{f' by {by}' if by else ''}"
    return ""
