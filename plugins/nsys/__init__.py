"""Reader for Nsight Systems SQLite exports (``nsys export --type sqlite``), schemas 2.9+."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import tracekit
from tracekit.builder import TraceBuilder
from tracekit.errors import TraceReadError
from tracekit.inputs import Source
from tracekit.plugins.nsys import extra as E
from tracekit.plugins.nsys import samples as samples_mod
from tracekit.plugins.nsys import tables as T
from tracekit.plugins.nsys.db import ExportDatabase, decode_pid, decode_tid
from tracekit.sqlite import SQLITE_MAGIC, table_names

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
KNOWN_SCHEMA_MAJOR = 3
# Event tables tracekit reads; every other table with rows is counted as not read yet.
_SIDE_TABLES = ("StringIds", "ThreadNames", "PROCESSES", "ProcessStreams")


class NsysReader(tracekit.Reader):
    """Nsight Systems SQLite exports: CUDA kernels, copies, memsets, syncs, API calls,
    NVTX ranges and OS runtime calls."""

    name = "nsys"
    description = "Nsight Systems SQLite export (nsys export --type sqlite)"
    extensions = (".sqlite", ".nsys-rep", ".qdrep")

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
        if source.path.suffix.lower() in REPORT_SUFFIXES:
            with tempfile.TemporaryDirectory() as tmp:
                exported = _export_report(source.path, Path(tmp))
                self._read_export(exported, out)
                out.metadata["exported_from"] = source.name
            return
        self._read_export(source.path, out)

    def _read_export(self, path: Path, out: TraceBuilder) -> None:
        with ExportDatabase(path) as db:
            if "StringIds" not in db.tables:
                kind = "an nvprof export (StringTable)" if "StringTable" in db.tables else \
                    "an SQLite database without StringIds"
                raise TraceReadError(f"not an Nsight Systems export: {kind}", path=path)
            self._metadata(db, out)
            read_tables, pids = self._events(db, out)
            self._side_tables(db, out, pids)
            for table in sorted(db.tables - read_tables - set(_SIDE_TABLES)):
                if table.startswith(("ENUM_", "TARGET_INFO_", "META_DATA", "EXPORT_META",
                                     "ANALYSIS_", "sqlite_")) or table == "UnwindMethodType":
                    continue
                rows = db.count(table)
                if rows:
                    out.note(table, "skipped: table not read yet", rows)

    def _events(self, db: ExportDatabase, out: TraceBuilder) -> tuple[set[str], set[int]]:
        """Read the event tables; return the tables read and the pids that have events."""
        done: set[str] = set()
        pids: set[int] = set()

        def add(table: str, columns: dict[str, Any], rows: int,
                outcome: str = "events") -> None:
            out.add_events(columns)
            if columns.get("pid") is not None:
                pids.update(pc.unique(columns["pid"]).drop_null().to_pylist())
            out.note(table, outcome, rows)
            done.add(table)

        progress = getattr(out, "progress", None)
        simple = ((T.KERNEL, lambda: T.kernels(db, self.options.short_names)),
                  (T.MEMCPY, lambda: T.memcpys(db)), (T.MEMSET, lambda: T.memsets(db)),
                  (T.SYNC, lambda: T.syncs(db)))
        for table, convert in simple:
            if table in db.tables:
                if progress:
                    progress.phase(f"reading {table}")
                columns = convert()
                add(table, columns, len(columns["ts_ns"]))
        extras = ((E.OVERHEAD, E.profiler_overhead),
                  (E.CUPTI_OVERHEAD, lambda db: E.profiler_overhead(db, E.CUPTI_OVERHEAD)),
                  (E.DIAGNOSTICS, E.diagnostics),
                  (E.GRAPH_TRACE, E.graph_trace), (E.GPU_METRICS, E.gpu_metrics))
        for table, convert in extras:
            if table in db.tables and db.count(table):
                columns = convert(db)
                add(table, columns, len(columns["ts_ns"]))
        if E.SCHED in db.tables and db.count(E.SCHED):
            columns, unpaired = E.scheduling(db)
            add(E.SCHED, columns, 2 * len(columns["ts_ns"]),
                "events (a sched-in and its sched-out per slice)")
            out.note(E.SCHED, "skipped: a sched-in or sched-out without its pair", unpaired)
        if T.RUNTIME in db.tables:
            columns, carriers = T.runtime(db)
            add(T.RUNTIME, columns, len(columns["ts_ns"]))
            out.note(T.RUNTIME, "not needed: backtrace row repeating an API call", carriers)
        if T.MEMORY_USAGE in db.tables and db.count(T.MEMORY_USAGE):
            instants, counters = T.memory_usage(db)
            add(T.MEMORY_USAGE, instants, len(instants["ts_ns"]))
            out.add_events(counters)
            out.note("derived from " + T.MEMORY_USAGE, "counter rows (memory allocated)",
                     len(counters["ts_ns"]))
        if samples_mod.SAMPLES in db.tables:
            if progress:
                progress.phase("reading CPU samples")
            columns, tree = samples_mod.samples(db)
            add(samples_mod.SAMPLES, columns, len(columns["ts_ns"]))
            out.add_table("stacks", tree.stacks)
            out.add_table("frames", tree.frames)
            stack_base, frame_base = tree.stacks.num_rows, tree.frames.num_rows
            if samples_mod.CALLCHAINS in db.tables:
                out.note(samples_mod.CALLCHAINS, "call stacks of the samples",
                         db.count(samples_mod.CALLCHAINS))
                done.add(samples_mod.CALLCHAINS)
        else:
            stack_base = frame_base = 0
        if T.OSRT in db.tables:
            osrt_tree = None
            if samples_mod.OSRT_CALLCHAINS in db.tables:
                osrt_tree = samples_mod.chain_tree(db, samples_mod.OSRT_CALLCHAINS,
                                                   stack_base, frame_base)
                out.add_table("stacks", osrt_tree.stacks)
                out.add_table("frames", osrt_tree.frames)
                out.note(samples_mod.OSRT_CALLCHAINS, "call stacks of the OS runtime calls",
                         db.count(samples_mod.OSRT_CALLCHAINS))
                done.add(samples_mod.OSRT_CALLCHAINS)
            columns = T.osrt(db, osrt_tree)
            add(T.OSRT, columns, len(columns["ts_ns"]))
        if T.NVTX in db.tables:
            columns, counts = T.nvtx(db)
            add(T.NVTX, columns, counts["ranges"] + counts["marks"])
            out.note(T.NVTX, "skipped: range without an end", counts["unterminated"])
            labels = {33: "categories", 75: "domain names", 39: "thread names"}
            for event_type, n in counts["other"].items():
                what = labels.get(event_type)
                out.note(T.NVTX, f"{what} (kept in args ids)" if what else
                         f"skipped: eventType {event_type} not read yet", n)
        return done, pids

    def _side_tables(self, db: ExportDatabase, out: TraceBuilder, pids: set[int]) -> None:
        # The export names every process on the machine; keep those that have events.
        if "PROCESSES" in db.tables:
            for pid, name in db.scalar_rows("SELECT pid, name FROM PROCESSES"):
                if int(pid) in pids:
                    out.add_process(int(pid), name=name)
        if "ThreadNames" in db.tables:
            rows = db.arrow("SELECT t.globalTid AS g, s.value AS name FROM ThreadNames t "
                            "LEFT JOIN StringIds s ON s.id = t.nameId")
            g = rows["g"].combine_chunks().cast(pa.int64())
            for pid, tid, name in zip(decode_pid(g).to_pylist(), decode_tid(g).to_pylist(),
                                      rows["name"].to_pylist(), strict=True):
                if pid in pids:
                    out.add_thread(pid, tid, name=name)
        if "TARGET_INFO_GPU" in db.tables:
            cols = set(db.columns("TARGET_INFO_GPU"))
            wanted = ["id", "name", "smCount", "totalMemory", "memoryBandwidth",
                      "computeMajor", "computeMinor", "busLocation"]
            present = [c if c in cols else f"NULL AS {c}" for c in wanted]
            for r in db.scalar_rows(f"SELECT {', '.join(present)} FROM TARGET_INFO_GPU"):
                d = dict(zip(wanted, r, strict=True))
                cc = f"{d['computeMajor']}.{d['computeMinor']}" \
                    if d["computeMajor"] is not None else None
                out.add_device(int(d["id"]), name=d["name"], vendor="nvidia", kind="gpu",
                               sm_count=d["smCount"], memory_bytes=d["totalMemory"],
                               memory_bandwidth_bps=float(d["memoryBandwidth"])
                               if d["memoryBandwidth"] else None, compute_capability=cc)
        # Kernels' deviceId is already the export's GPU id (TARGET_INFO_GPU.id, the join
        # NVIDIA's own reports make); TARGET_INFO_CUDA_DEVICE only says which CUDA ordinal
        # each process saw it as (after CUDA_VISIBLE_DEVICES), kept for the user.
        if {"pid", "cudaId", "gpuId"} <= set(db.columns("TARGET_INFO_CUDA_DEVICE")):
            ordinals: dict[str, dict[str, int]] = {}
            for pid, cuda_id, gpu_id in db.scalar_rows(
                    "SELECT pid, cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE ORDER BY pid, cudaId"):
                if gpu_id is not None:
                    ordinals.setdefault(str(pid), {})[str(cuda_id)] = int(gpu_id)
            if ordinals:
                out.metadata["cuda_ordinals"] = ordinals

    def _metadata(self, db: ExportDatabase, out: TraceBuilder) -> None:
        meta: dict[str, Any] = {"format": "nsys-sqlite", "tool": "Nsight Systems"}
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if table in db.tables:
                values = dict(db.scalar_rows(f"SELECT name, value FROM {table}"))
                meta["tool_version"] = values.get("EXPORT_PRODUCT_VERSION")
                meta["schema_version"] = values.get("EXPORT_SCHEMA_VERSION")
                break
        version = meta.get("schema_version")
        if version and int(str(version).split(".")[0]) > KNOWN_SCHEMA_MAJOR:
            out.note("export schema", f"warning: version {version} is newer than this reader "
                     f"knows ({KNOWN_SCHEMA_MAJOR}.x); reading the tables and columns it "
                     "recognises", 1)
        epoch = None
        if "TARGET_INFO_SESSION_START_TIME" in db.tables:
            rows = db.scalar_rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
            epoch = int(rows[0][0]) if rows and rows[0][0] is not None else None
        meta["clock"] = "nsys session ns (0 at session start)"
        if epoch is not None:
            meta["session_start_utc_epoch_ns"] = epoch
        if "TARGET_INFO_SYSTEM_ENV" in db.tables and "name" in db.columns(
                "TARGET_INFO_SYSTEM_ENV"):
            env = dict(db.scalar_rows("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV"))
            if env.get("Hostname"):
                meta["hostname"] = env["Hostname"]
        out.metadata.update({k: v for k, v in meta.items() if v is not None})


def _export_report(report: Path, directory: Path) -> Path:
    """Run ``nsys export`` on a report into ``directory``; a clear error if nsys is absent."""
    target = directory / (report.stem + ".sqlite")
    command = ["nsys", "export", "--type", "sqlite", "--output", str(target), str(report)]
    if shutil.which("nsys") is None:
        raise TraceReadError("is an Nsight Systems report; nsys is not on the PATH to export "
                             f"it. Run: nsys export --type sqlite --output "
                             f"{report.with_suffix('.sqlite')} {report}", path=report)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not target.exists():
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TraceReadError(f"nsys export failed: {last[0]}", path=report)
    return target


@tracekit.hookimpl
def register_readers(register: Any) -> None:
    register(NsysReader)



